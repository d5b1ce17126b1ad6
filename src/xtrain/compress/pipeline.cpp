// compress_model: the three stages in order, each measured; fine-tuning with LibTorch's AdamW.
#include "xtrain/compress/pipeline.h"

#include <ATen/core/grad_mode.h>
#include <torch/nn/module.h>
#include <torch/optim/adamw.h>

#include <tuple>

#include "xtrain/base/error.h"
#include "xtrain/compress/distill/distillation.h"
#include "xtrain/compress/graph/executor.h"
#include "xtrain/compress/prune/magnitude.h"

namespace xtrain::compress {

namespace {

void say(const CompressHooks& h, const std::string& line) {
  if (h.log) h.log(line);
}

double lr_or_default(double lr, const CompressHooks& h) { return lr > 0 ? lr : h.default_lr * 0.1; }

models::Model distill(const models::Model& teacher, const DistillationSection& d, const CompressHooks& h) {
  XTRAIN_USAGE_CHECK(h.build_student, "compress: distillation needs a student model");
  auto student = h.build_student();
  say(h, c10::str("distillation: student with ", models::count_parameters(*student.module), " parameters, ",
                  d.train.steps, " steps, T=", d.loss.temperature, ", alpha=", d.loss.alpha));
  teacher.module->eval();
  const double lr = d.train.lr > 0 ? d.train.lr : h.default_lr;  // the student trains from scratch
  fine_tune(student, d.train.steps, lr, h, [&](const data::Batch& b) {
    at::Tensor teacher_logits;
    {
      at::NoGradGuard no_grad;
      teacher_logits = teacher.forward(b.input);
    }
    return distillation_loss(student.forward(b.input), teacher_logits, b.target, d.loss, h.loss);
  });
  return student;
}

void prune(const models::Model& model, const Graph& graph, const PruningSection& p, const CompressHooks& h,
           CompressResult& r) {
  const auto targets = resolve_targets(graph, p.config_list);
  auto task_loss = [&](const data::Batch& b) { return h.loss(model.forward(b.input), b.target); };
  const double lr = lr_or_default(p.finetune.lr, h);
  if (p.method == "l1" || p.method == "l2") {
    r.channels = prune_channels(*model.module, graph, targets, p.method == "l1" ? 1 : 2);
    for (const auto& l : r.channels.pruned) {
      say(h, c10::str("pruning: ", l.name, " ", l.before, " -> ", l.after, " channels (and ", l.consumer, "'s inputs)"));
    }
    for (const auto& s : r.channels.skipped) say(h, "pruning: kept whole " + s);
    fine_tune(model, p.finetune.steps, lr, h, task_loss);
    return;
  }
  MaskSet masks(targets);
  if (!p.gradual) {
    masks.update();
    say(h, c10::str("pruning: ", targets.size(), " layers at sparsity ", masks.sparsity(), ", fine-tuning ",
                    p.finetune.steps, " steps"));
    fine_tune(model, p.finetune.steps, lr, h, task_loss, [&](int64_t) { masks.apply(); });
    return;
  }
  // Gradual: the ramp is a fraction of each target's final sparsity, recomputed every `frequency`
  // steps from the current magnitudes (AGP), the masks held in between.
  auto ramp = [&](int64_t step) {
    double final_max = 0.0;
    for (const auto& t : targets) final_max = std::max(final_max, t.sparsity);
    if (final_max <= 0) return;
    std::vector<double> s;
    for (const auto& t : targets) {
      s.push_back(agp_sparsity(step, p.initial_sparsity * t.sparsity / final_max, t.sparsity, p.start_step,
                               p.end_step, p.frequency));
    }
    masks.update_to(s);
  };
  ramp(0);
  fine_tune(model, p.finetune.steps, lr, h, task_loss, [&](int64_t step) {
    const int64_t next = step + 1;
    if (next >= p.start_step && next <= p.end_step && (next - p.start_step) % p.frequency == 0) {
      ramp(next);
    } else {
      masks.apply();
    }
  });
  if (p.end_step >= p.finetune.steps) ramp(p.end_step);
  say(h, c10::str("pruning (agp): final sparsity ", masks.sparsity()));
}

QuantizedModel quantise(const models::Model& model, const QuantizationSection& q, const CompressHooks& h) {
  auto qm = wrap(model, q.quant, h.hints);
  say(h, c10::str("quantization: ", q.quant.mode, ", ", qm.plan->num_enabled(), " layers"));
  if (q.quant.mode != "dynamic") {
    XTRAIN_USAGE_CHECK(q.calibration_batches > 0, "compress: static and qat quantisation need calibration batches, got ",
                       q.calibration_batches, " (quantization.calibration_batches / --calibration-batches)");
    calibrate(qm, h.calibration_input, q.calibration_batches);
  }
  if (q.quant.mode == "qat") {
    qat(qm);
    fine_tune(qm.model, q.qat.steps, lr_or_default(q.qat.lr, h), h,
              [&](const data::Batch& b) { return h.loss(qm.model.forward(b.input), b.target); });
    // BatchNorm statistics may have moved while fine-tuning; the plan folds the current ones.
  }
  qm.model.module->eval();
  convert(qm);
  return qm;
}

}  // namespace

double fine_tune(const models::Model& model, int64_t steps, double lr, const CompressHooks& hooks,
                 const std::function<at::Tensor(const data::Batch&)>& loss_of,
                 const std::function<void(int64_t step)>& after_step) {
  if (steps <= 0) return 0.0;
  XTRAIN_USAGE_CHECK(hooks.train_batch, "compress: fine-tuning needs training data");
  model.module->train();
  std::vector<at::Tensor> params;
  for (const auto& p : model.module->parameters()) {
    if (p.requires_grad()) params.push_back(p);
  }
  torch::optim::AdamW opt(params, torch::optim::AdamWOptions(lr).weight_decay(0.0));
  double last = 0.0;
  for (int64_t s = 0; s < steps; ++s) {
    opt.zero_grad();
    const auto loss = loss_of(hooks.train_batch(s));
    loss.backward();
    opt.step();
    if (after_step) after_step(s);
    last = loss.item<double>();
    if (hooks.log && (s + 1) % std::max<int64_t>(1, steps / 5) == 0) say(hooks, c10::str("  step ", s + 1, "/", steps, " loss ", last));
  }
  model.module->eval();
  return last;
}

ModelStats measure(const std::string& label, const models::Model& model, const Graph& graph, const QuantPlan* plan,
                   const CompressHooks& h, int64_t latency_repeats) {
  at::NoGradGuard no_grad;
  model.module->eval();
  ModelStats s;
  s.label = label;
  s.bytes = deploy_bytes(graph, plan);
  s.parameters = models::count_parameters(*model.module);
  s.sparsity = weight_sparsity(graph);
  if (h.evaluate) std::tie(s.loss, s.accuracy) = h.evaluate(model);
  if (h.latency_input.defined()) {
    s.latency_ms = median_latency_ms([&] { model.forward(h.latency_input); }, latency_repeats);
  }
  return s;
}

CompressResult compress_model(const models::Model& model, const CompressOptions& o, const CompressHooks& h) {
  CompressResult r;
  const int64_t repeats = o.evaluation.latency_repeats;
  const bool lm = model.task == "lm";
  {
    const auto g = trace(*model.module, h.hints);
    r.stats.push_back(measure("fp32", model, g, nullptr, h, repeats));
  }
  models::Model current = model;
  if (o.distillation.enabled) {
    current = distill(model, o.distillation, h);
    r.stats.push_back(measure("distilled", current, trace(*current.module, h.hints), nullptr, h, repeats));
  }
  r.graph = std::make_shared<Graph>(trace(*current.module, h.hints));
  if (o.pruning.enabled) {
    prune(current, *r.graph, o.pruning, h, r);
    r.stats.push_back(measure(o.pruning.method == "level" ? "pruned" : "channel-pruned", current, *r.graph, nullptr, h,
                              repeats));
  }
  r.model = current;
  if (o.quantization.enabled) {
    auto q = quantise(current, o.quantization, h);
    r.graph = q.graph;
    r.plan = q.plan;
    r.model = q.model;
    r.stats.push_back(measure("int8 " + o.quantization.quant.mode, r.model, *r.graph, r.plan.get(), h, repeats));
  }
  r.summary = format_summary(r.stats, lm);
  return r;
}

}  // namespace xtrain::compress
