// The training sampler of a run: each rank's shard of every epoch's permutation, or the order of
// xtrain.data.ordering (difficulty scores computed once and cached in the run directory).
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Functions.h>
#include <torch/nn/module.h>
#include <torch/utils.h>

#include <filesystem>

#include "xtrain/base/error.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/data/difficulty_sampler.h"
#include "xtrain/run/setup.h"
#include "xtrain/run/train.h"

namespace xtrain {
namespace fs = std::filesystem;

namespace {

// xtrain.data.ordering.scorer=loss: each sample's mean per-token cross-entropy under the model of a
// reference run's latest checkpoint, in eval mode.
data::SampleScoreFn reference_loss(const std::string& reference_dir, std::shared_ptr<data::Dataset> dataset,
                                   int64_t seq_len) {
  XTRAIN_USAGE_CHECK(fs::exists(fs::path(reference_dir) / "config.json"),
                     "config: xtrain.data.ordering.reference_checkpoint \"", reference_dir,
                     "\" is not a run directory (no config.json): name a finished xtrain train --output folder");
  // Building the reference model draws its initial weights from the default generator: restore it,
  // so turning the scorer on leaves the trained model's dropout stream as it was.
  at::Generator gen = at::detail::getDefaultCPUGenerator();  // a handle on the process-wide generator
  const at::Tensor rng = gen.get_state();
  auto ref = std::make_shared<TrainedRun>(load_trained_run(reference_dir));
  gen.set_state(rng);
  XTRAIN_USAGE_CHECK(ref->model.task == "lm" && ref->config.model.seq_len >= seq_len,
                     "config: xtrain.data.ordering.reference_checkpoint \"", reference_dir, "\" holds a ",
                     ref->config.model.type, " with seq_len ", ref->config.model.seq_len,
                     "; scoring needs a gpt with seq_len >= ", seq_len);
  ref->model.module->eval();
  return [ref, dataset](const std::vector<int64_t>& indices) {
    at::NoGradGuard no_grad;
    const auto b = dataset->collate(indices);
    const at::Tensor logp = at::log_softmax(ref->model.forward(b.input).to(at::kFloat), -1);        // [B, T, V]
    const at::Tensor nll = (-logp.gather(-1, b.target.unsqueeze(-1)).squeeze(-1)).mean(1).contiguous();  // [B]
    return std::vector<float>(nll.data_ptr<float>(), nll.data_ptr<float>() + nll.numel());
  };
}

}  // namespace

std::unique_ptr<data::Sampler> make_train_sampler(const Setup& s, const std::string& run_dir) {
  const auto& cfg = s.config;
  const auto& o = cfg.data.ordering;
  const int64_t n = s.data.train->size();
  // Tensor-parallel peers read the same samples: the data is sharded over the data-parallel group.
  const int dp_rank = s.groups.dp->rank(), dp_size = s.groups.dp->size();
  if (!o.enabled) return s.data.train->make_sampler(cfg.trainer.seed, dp_rank, dp_size);
  data::validate_ordering(o);
  data::ScoringRequest r;
  r.scorer = o.scorer;
  r.samples = o.score_samples > 0 ? o.score_samples : cfg.trainer.steps * *cfg.engine.train_batch_size;
  r.seed = cfg.trainer.seed;
  r.cache_path = run_dir.empty() ? "" : (fs::path(run_dir) / "difficulty_scores.bin").string();
  r.write_cache = s.lead();
  if (o.scorer == "loss") {
    r.reference = fs::absolute(o.reference_checkpoint).string();
    r.loss = reference_loss(o.reference_checkpoint, s.data.train, cfg.model.seq_len);
  }
  return std::make_unique<data::DifficultySampler>(n, data::compute_scores(*s.data.train, r), o, cfg.trainer.seed,
                                                   dp_rank, dp_size);
}

}  // namespace xtrain
