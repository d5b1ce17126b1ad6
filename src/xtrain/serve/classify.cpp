// classify(): one sample through the classifier's forward: token ids of the text (cut to the
// model's context) for a text classifier, else the given values in the sample's shape.
#include <ATen/ops/softmax.h>
#include <ATen/ops/tensor.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <numeric>

#include "xtrain/data/tokenizer/tokenizer.h"
#include "xtrain/serve/handlers.h"
#include "xtrain/serve/request.h"

namespace xtrain::serve {
namespace {

using json = nlohmann::json;

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

at::Tensor input_tensor(const ClassifyRequest& r, const ServedModel& m) {
  if (m.tokenizer) {
    if (!r.text) throw RequestError("text", "this classifier reads text: give {\"text\": \"...\"}");
    std::vector<int64_t> ids;
    for (int32_t t : m.tokenizer->encode(*r.text)) ids.push_back(t);
    if (ids.empty()) throw RequestError("text", "text is empty (no tokens)");
    if (m.max_tokens_in > 0 && static_cast<int64_t>(ids.size()) > m.max_tokens_in) ids.resize(m.max_tokens_in);
    return at::tensor(ids, at::kLong).view({1, -1});
  }
  if (r.text) throw RequestError("text", "this classifier reads tensors: give {\"input\": [...]} (a nested list)");
  const int64_t want = std::accumulate(m.sample_shape.begin(), m.sample_shape.end(), int64_t{1}, std::multiplies<>());
  if (static_cast<int64_t>(r.input.size()) != want) {
    throw RequestError("input", "input has " + std::to_string(r.input.size()) + " values (shape " + shape_text(r.shape) +
                                    "); the model takes one sample of shape " + shape_text(m.sample_shape) + " (" +
                                    std::to_string(want) + " values, nested or flat)");
  }
  std::vector<int64_t> shape = {1};
  shape.insert(shape.end(), m.sample_shape.begin(), m.sample_shape.end());
  return at::tensor(std::vector<float>(r.input.begin(), r.input.end()), at::kFloat).view(shape);
}

}  // namespace

Reply classify(const HandlerContext& ctx, const std::string& body) {
  Reply reply;
  if (ctx.model.task != "classify") {
    reply.status = 400;
    reply.body = error_json("this server runs a language model: POST /v1/completions", "", "invalid_request_error");
    return reply;
  }
  ClassifyRequest r;
  at::Tensor x;
  try {
    r = parse_classify(body);
    x = input_tensor(r, ctx.model);
  } catch (const RequestError& e) {
    reply.status = 400;
    reply.body = error_json(e.what(), e.field, "invalid_request_error");
    return reply;
  }
  for (const auto& w : r.warnings) ctx.warn("serve: /v1/classify: " + w);
  at::Tensor probs;
  {
    std::lock_guard<std::mutex> lock(ctx.classify_mu);
    probs = at::softmax(ctx.model.classify(x).to(at::kCPU, at::kFloat).reshape({-1}), 0).contiguous();
  }
  const int64_t label = probs.argmax().item<int64_t>();
  json out = {{"object", "classification"}, {"model", ctx.model.name}, {"label", label},
              {"probabilities", std::vector<float>(probs.data_ptr<float>(), probs.data_ptr<float>() + probs.numel())}};
  if (label < static_cast<int64_t>(ctx.model.class_names.size())) out["class_name"] = ctx.model.class_names[label];
  if (!r.warnings.empty()) out["warnings"] = r.warnings;
  reply.body = out.dump(-1, ' ', false, json::error_handler_t::replace);
  return reply;
}

}  // namespace xtrain::serve
