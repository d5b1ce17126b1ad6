#include "xtrain/run/task.h"

#include <c10/util/StringUtil.h>

#include <cmath>

#include "xtrain/base/error.h"
#include "xtrain/models/factory.h"

namespace xtrain {

namespace {

// Next-token prediction over byte (or token) sequences: throughput in tokens, the closed-form GPT
// FLOPs, the validation loss as perplexity and bits per byte, a text sample at the end.
class LanguageModelling final : public Task {
 public:
  const char* name() const override { return "lm"; }
  void fit_model(models::ModelOptions& model, const data::DatasetInfo& data) const override { model.vocab = data.vocab; }
  const char* unit() const override { return "tokens"; }
  const char* short_unit() const override { return "tok"; }
  double units_per_sample(int64_t seq_len) const override { return static_cast<double>(seq_len); }
  double units_of(const data::Batch& batch) const override { return static_cast<double>(batch.input.numel()); }
  double train_flops_per_unit(const models::ModelOptions& model) const override {
    return models::gpt_flops_per_token(model);
  }
  std::string describe_model(const models::ModelOptions& m) const override {
    return c10::str(" (layers ", m.layers, ", d_model ", m.d_model, ", heads ", m.heads, ", seq_len ", m.seq_len, ")");
  }
  std::string describe_eval(const EvalResult& r) const override {
    return c10::str("val loss ", r.loss, " (ppl ", std::exp(r.loss), ", ", r.loss / std::log(2.0), " bits/byte)");
  }
  bool sequences() const override { return true; }
};

// One label per sample (an image, or a text's token ids): throughput in samples, FLOPs learnt from
// the profile, loss, accuracy and macro-F1.
class Classification final : public Task {
 public:
  const char* name() const override { return "classify"; }
  void fit_model(models::ModelOptions& model, const data::DatasetInfo& data) const override {
    if (model.num_classes == 0) model.num_classes = data.num_classes;
    if (data.kind == "text") model.vocab = data.vocab;  // token input: the dataset's tokenizer
    if (model.in_features == 0) {
      model.in_features = 1;
      for (int64_t d : data.sample_shape) model.in_features *= d;
    }
  }
  const char* unit() const override { return "samples"; }
  const char* short_unit() const override { return "samples"; }
  double units_per_sample(int64_t) const override { return 1.0; }
  double units_of(const data::Batch& batch) const override { return static_cast<double>(batch.size()); }
  double train_flops_per_unit(const models::ModelOptions&) const override { return 0.0; }
  std::string describe_model(const models::ModelOptions&) const override { return ""; }
  std::string describe_eval(const EvalResult& r) const override {
    std::string out = c10::str("val loss ", r.loss, " | val accuracy ", 100.0 * r.accuracy, "%");
    if (r.macro_f1 >= 0) out += c10::str(" | val macro-F1 ", r.macro_f1);
    return r.auc < 0 ? out : out + c10::str(" | val AUC ", r.auc);
  }
  bool sequences() const override { return false; }
};

}  // namespace

const Task& find_task(const std::string& name, const std::string& model_type) {
  static const LanguageModelling lm;
  static const Classification classify;
  if (name == lm.name()) return lm;
  XTRAIN_USAGE_CHECK(name == classify.name(), "config: xtrain.model.type \"", model_type, "\" trains for task \"", name,
                     "\", which the run loop does not know (lm, classify)");
  return classify;
}

}  // namespace xtrain
