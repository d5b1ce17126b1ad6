// The compress.json reader: one small function per section over nlohmann::json, every read through
// a Reader that remembers which keys were used, so the leftovers can be checked for typos.
#include "xtrain/compress/options.h"

#include <nlohmann/json.hpp>

#include <exception>
#include <set>

#include "xtrain/base/did_you_mean.h"
#include "xtrain/base/error.h"

namespace xtrain::compress {

namespace {

using Json = nlohmann::json;

class Reader {
 public:
  Reader(const Json& j, std::string path, std::vector<std::string>* warnings)
      : j_(j), path_(std::move(path)), warnings_(warnings) {
    XTRAIN_USAGE_CHECK(j.is_object(), "compress: ", path_, " must be an object, got ", j.dump());
  }
  ~Reader() noexcept(false) {
    if (std::uncaught_exceptions() == 0) finish();  // never throw while another error unwinds
  }

  template <class T>
  void get(const std::string& key, T& out) {
    known_.insert(key);
    if (!j_.contains(key)) return;
    try {
      out = j_.at(key).get<T>();
    } catch (const Json::exception&) {
      XTRAIN_USAGE_ERROR("compress: ", where(key), " has the wrong type: ", j_.at(key).dump());
    }
  }
  const Json* section(const std::string& key) {
    known_.insert(key);
    return j_.contains(key) ? &j_.at(key) : nullptr;
  }
  std::string where(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  std::vector<std::string>* warnings() const { return warnings_; }

 private:
  void finish() {
    if (done_) return;
    done_ = true;
    const std::vector<std::string> known(known_.begin(), known_.end());
    for (const auto& item : j_.items()) {
      if (known_.count(item.key())) continue;
      const auto close = closest_match(item.key(), known);
      XTRAIN_USAGE_CHECK(!close, "compress: unknown key ", where(item.key()), " (did you mean '", close.value_or(""), "'?)");
      if (warnings_) warnings_->push_back("compress: ignoring unknown key " + where(item.key()));
    }
  }
  const Json& j_;
  std::string path_;
  std::vector<std::string>* warnings_;
  std::set<std::string> known_;
  bool done_ = false;
};

void read_finetune(Reader& parent, const std::string& key, FineTuneOptions& o) {
  const Json* j = parent.section(key);
  if (!j) return;
  Reader r(*j, parent.where(key), parent.warnings());
  r.get("steps", o.steps);
  r.get("lr", o.lr);
  XTRAIN_USAGE_CHECK(o.steps >= 0 && o.lr >= 0, "compress: ", parent.where(key), ".steps and .lr must be >= 0");
}

void read_quantization(const Json& j, QuantizationSection& q, std::vector<std::string>* w) {
  Reader r(j, "quantization", w);
  q.enabled = true;
  r.get("enabled", q.enabled);
  r.get("mode", q.quant.mode);
  r.get("observer", q.quant.observer);
  r.get("percentile", q.quant.percentile);
  r.get("op_types", q.quant.op_types);
  r.get("op_names", q.quant.op_names);
  r.get("exclude_op_names", q.quant.exclude_op_names);
  r.get("calibration_batches", q.calibration_batches);
  read_finetune(r, "qat", q.qat);
  XTRAIN_USAGE_CHECK(q.calibration_batches >= 0, "compress: quantization.calibration_batches must be >= 0, got ",
                     q.calibration_batches);
}

void read_pruning(const Json& j, PruningSection& p, std::vector<std::string>* w) {
  Reader r(j, "pruning", w);
  p.enabled = true;
  r.get("enabled", p.enabled);
  r.get("method", p.method);
  XTRAIN_USAGE_CHECK(p.method == "level" || p.method == "l1" || p.method == "l2",
                     "compress: pruning.method must be level, l1 or l2, got \"", p.method, "\"",
                     did_you_mean_suffix(p.method, {"level", "l1", "l2"}));
  if (const Json* list = r.section("config_list")) {
    XTRAIN_USAGE_CHECK(list->is_array(), "compress: pruning.config_list must be a list");
    for (size_t i = 0; i < list->size(); ++i) {
      Reader e((*list)[i], c10::str("pruning.config_list[", i, "]"), w);
      PruneRule rule;
      e.get("sparsity", rule.sparsity);
      e.get("sparsity_per_layer", rule.sparsity);  // NNI's newer name
      e.get("total_sparsity", rule.total_sparsity);
      e.get("op_types", rule.op_types);
      e.get("op_names", rule.op_names);
      e.get("exclude", rule.exclude);
      p.config_list.push_back(rule);
    }
  }
  if (const Json* s = r.section("schedule")) {
    Reader sr(*s, "pruning.schedule", w);
    std::string type = "agp";
    sr.get("type", type);
    XTRAIN_USAGE_CHECK(type == "agp" || type == "oneshot", "compress: pruning.schedule.type must be agp or oneshot, got \"",
                       type, "\"");
    p.gradual = type == "agp";
    sr.get("initial_sparsity", p.initial_sparsity);
    sr.get("start_step", p.start_step);
    sr.get("end_step", p.end_step);
    sr.get("frequency", p.frequency);
  }
  read_finetune(r, "finetune", p.finetune);
  if (p.gradual) {
    XTRAIN_USAGE_CHECK(p.method == "level", "compress: the agp schedule is for unstructured (level) pruning");
    if (p.end_step == 0) p.end_step = p.finetune.steps * 3 / 4;
    XTRAIN_USAGE_CHECK(p.end_step > p.start_step && p.end_step <= p.finetune.steps,
                       "compress: pruning.schedule needs start_step < end_step <= pruning.finetune.steps, got ",
                       p.start_step, ", ", p.end_step, ", ", p.finetune.steps);
  }
}

void read_distillation(const Json& j, DistillationSection& d, std::vector<std::string>* w) {
  Reader r(j, "distillation", w);
  d.enabled = true;
  r.get("enabled", d.enabled);
  if (const Json* s = r.section("student")) {
    XTRAIN_USAGE_CHECK(s->is_object(), "compress: distillation.student must be an object of xtrain.model keys");
    for (const auto& item : s->items()) d.student.push_back(item.key() + "=" + item.value().dump());
  }
  r.get("temperature", d.loss.temperature);
  r.get("alpha", d.loss.alpha);
  r.get("teacher_run", d.teacher_run);
  read_finetune(r, "train", d.train);
  XTRAIN_USAGE_CHECK(!d.enabled || d.train.steps > 0, "compress: distillation.train.steps must be > 0");
}

}  // namespace

CompressOptions parse_compress_options(const std::string& text, const std::string& origin,
                                       std::vector<std::string>* warnings) {
  Json root;
  try {
    root = Json::parse(text, nullptr, true, /*ignore_comments=*/true);
  } catch (const Json::parse_error& e) {
    XTRAIN_USAGE_ERROR("compress: ", origin, " is not valid JSON: ", e.what());
  }
  CompressOptions o;
  Reader r(root, "", warnings);
  if (const Json* q = r.section("quantization")) read_quantization(*q, o.quantization, warnings);
  if (const Json* p = r.section("pruning")) read_pruning(*p, o.pruning, warnings);
  if (const Json* d = r.section("distillation")) read_distillation(*d, o.distillation, warnings);
  if (const Json* e = r.section("evaluation")) {
    Reader er(*e, "evaluation", warnings);
    er.get("batches", o.evaluation.batches);
    er.get("latency_batch", o.evaluation.latency_batch);
    er.get("latency_repeats", o.evaluation.latency_repeats);
  }
  r.get("output", o.output);
  XTRAIN_USAGE_CHECK(o.quantization.enabled || o.pruning.enabled || o.distillation.enabled, "compress: ", origin,
                     " enables nothing: add a quantization, pruning or distillation section");
  return o;
}

}  // namespace xtrain::compress
