#include "xtrain/models/gpt_pipeline_model.h"

#include <ATen/Functions.h>

#include "xtrain/base/error.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/models/gpt_pipeline.h"
#include "xtrain/parallel/tensor/mappings.h"

namespace xtrain::models {

namespace {
std::function<at::Tensor(const at::Tensor&)> pipeline_forward(std::shared_ptr<PipelineGPTImpl> stage,
                                                              std::shared_ptr<comm::Communicator> pp,
                                                              std::shared_ptr<comm::Communicator> tp) {
  return [stage, pp, tp](const at::Tensor& idx) {
    const int s = pp->rank(), last = pp->size() - 1;
    const auto& o = stage->options();
    const int64_t B = idx.size(0), T = idx.size(1);
    const auto dtype = stage->parameters().front().scalar_type();
    at::Tensor x = idx;
    if (s > 0) {
      at::Tensor h = at::empty({B, T, o.d_model}, at::kFloat);
      pp->recv(h, s - 1);
      x = h.to(dtype);
    }
    const at::Tensor out = stage->forward(x);
    if (s < last) pp->send(out.to(at::kFloat).contiguous(), s + 1);
    at::Tensor logits = s == last ? parallel::tensor::gather_from_tensor_parallel(out, tp).to(at::kFloat).contiguous()
                                  : at::empty({B, T, o.vocab}, at::kFloat);
    pp->broadcast(logits, last);
    return logits;
  };
}
}  // namespace

std::shared_ptr<PipelineGPTImpl> cut_pipeline_stage(Model& model, int stage, int stages, const std::string& partition,
                                                    std::shared_ptr<comm::Communicator> pp,
                                                    std::shared_ptr<comm::Communicator> tp) {
  auto cut = PipelineGPT(model.module, stage, stages, partition).ptr();
  model.module = cut;
  model.forward = pipeline_forward(cut, std::move(pp), std::move(tp));
  return cut;
}

void halve_tied_norm_weights(const std::vector<std::string>& tied, std::map<std::string, double>& weights) {
  for (const auto& name : tied) weights[name] = 0.5 * (weights.count(name) ? weights[name] : 1.0);
}

}  // namespace xtrain::models
