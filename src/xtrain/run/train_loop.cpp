#include "xtrain/run/train_loop.h"

#include <ATen/Parallel.h>
#include <torch/nn/module.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <csignal>
#include <cstdio>

#include "xtrain/base/env.h"
#include "xtrain/base/error.h"
#include "xtrain/base/log.h"
#include "xtrain/base/utf8.h"
#include "xtrain/kernels/gemm.h"
#include "xtrain/optim/registry.h"
#include "xtrain/run/class_metrics.h"
#include "xtrain/run/run_checkpoint.h"
#include "xtrain/sched/schedule.h"
#include "xtrain/zero/memory_estimate.h"

namespace xtrain {

std::string fmt(double v, int precision) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*g", precision, v);
  return buf;
}

namespace {

monitor::RunMonitorOptions monitor_options(const Setup& s) {
  const auto& c = s.config;
  monitor::RunMonitorOptions o;
  o.tensorboard = c.tensorboard;
  o.csv_monitor = c.csv_monitor;
  o.flops_profiler = c.flops_profiler;
  o.monitor = c.monitor;
  o.wall_clock_breakdown = c.engine.wall_clock_breakdown;
  o.unit = s.task->unit();
  // Language models: the closed form; other models: learnt from the flops profile, when enabled.
  o.train_flops_per_unit = s.task->train_flops_per_unit(c.model);
  o.bf16 = c.bf16.enabled;
  o.devices = s.rank.world_size;  // every rank of the grid
  if (o.device.is_cpu()) {  // the ceiling of the GEMM the layers use, not of plain at::matmul
    o.peak_gemm = [](const at::Tensor& out, const at::Tensor& a, const at::Tensor& b) { kernels::gemm_out(out, a, b); };
    o.peak_gemm_name = "xtrain gemm";
  }
  return o;
}

std::vector<std::pair<std::string, at::Tensor>> named_tensors(const torch::nn::Module& m, bool grads, double scale) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& p : m.named_parameters()) {
    const at::Tensor t = grads ? p.value().grad() : p.value();
    // Undefined, or empty: a ZeRO stage-3 parameter between uses.
    if (t.defined() && t.numel() > 0) out.emplace_back(p.key(), grads ? t.detach() / scale : t.detach());
  }
  return out;
}

// Pipeline parallelism: the step's micro-batches go through the schedule together.
void run_pipeline_step(Setup& s, monitor::RunMonitor& mon) {
  const int64_t step = s.engine->global_steps() + 1;
  mon.begin_step();
  std::vector<data::Batch> batches;
  {
    auto timed = mon.timer().scope("data");
    for (int64_t i = 0; i < s.engine->gradient_accumulation_steps(); ++i) {
      batches.push_back(s.train_loader->next());
      if (s.curriculum) batches.back() = data::truncate_to_seqlen(batches.back(), s.curriculum->update(step));
    }
  }
  s.engine->pipeline_step(batches);
}

}  // namespace

void log_start(const Setup& s, const std::string& run_dir) {
  const auto& c = s.config;
  log::info("run: ", run_dir);
  log::info("model: ", c.model.type, " with ", s.engine->num_parameters(), " parameters", s.task->describe_model(c.model));
  log::info("data: ", c.data.type, " (", s.data.train->size(), " train / ", s.data.val->size(), " val samples)");
  log::info("batch: ", *c.engine.train_batch_size, " = micro ", *c.engine.train_micro_batch_size_per_gpu, " x accum ",
            *c.engine.gradient_accumulation_steps, " x dp ", c.dp_world_size, " | optimizer ", c.optimizer.type,
            " lr ", c.optimizer.lr(), c.scheduler.type.empty() ? "" : " | schedule " + c.scheduler.type,
            " | threads ", at::get_num_threads());
  log::info("precision: ", s.engine->precision().describe());
  if (s.groups.model_parallel()) log::info("parallel: ", s.groups.grid.describe());
  // Model states per rank: measured, next to the ZeRO paper's formula for this stage and size.
  int64_t measured = 0;
  for (const auto& [area, bytes] : s.engine->memory_bytes()) measured += area == "nvme" ? 0 : bytes;
  const auto state_floats = static_cast<int64_t>(optim::find_optimizer(c.optimizer.type).state_names.size());
  const auto est = zero::estimate_memory(c.zero_optimization.stage, s.engine->num_parameters(), c.dp_world_size,
                                         c10::elementSize(s.engine->precision().param_dtype), state_floats);
  auto mb = [](int64_t bytes) { return c10::str(std::round(bytes / 1e5) / 10); };
  log::info("memory: model states ", mb(measured), " MB per rank (ZeRO stage ", c.zero_optimization.stage,
            " formula: ", mb(est.total()), " MB)");
}

TrainLoop::TrainLoop(Setup& s, std::string run_dir, bool resumed)
    : s_(s),
      run_dir_(std::move(run_dir)),
      mon_(monitor_options(s), s.lead() ? run_dir_ : "", config::to_json(s.config), s.engine->global_steps()),
      progress_(s.task->short_unit(), s.config.trainer.steps, s.config.engine.steps_per_print, s.lead()),
      steps_(s.config.trainer.steps),
      log_every_(s.config.trainer.log_interval > 0 ? s.config.trainer.log_interval : s.config.engine.steps_per_print),
      last_saved_(resumed ? s.engine->global_steps() : -1) {
  s_.engine->set_stage_timer(&mon_.timer());
}

// XTRAIN_TRAIN_SECONDS=S (set by `xtrain tune --trial-seconds`; 0 or unset: none): the loop stops
// after the step that reaches S seconds of training time, then the run ends as usual (final
// evaluation at that step). One process only: ranks timing themselves could stop at different steps.
static double train_seconds_limit(const comm::RankInfo& rank) {
  const auto text = env::get("XTRAIN_TRAIN_SECONDS");
  if (!text || text->empty()) return 0.0;
  char* end = nullptr;
  const double s = std::strtod(text->c_str(), &end);
  XTRAIN_USAGE_CHECK(end != text->c_str() && *end == '\0' && std::isfinite(s) && s >= 0,
                     "XTRAIN_TRAIN_SECONDS must be a number of seconds >= 0, got '", *text, "'");
  XTRAIN_USAGE_CHECK(s == 0 || rank.world_size == 1, "XTRAIN_TRAIN_SECONDS (a training-time budget) needs a ",
                     "single-process run, got ", rank.world_size, " ranks");
  return s;
}

TrainResult TrainLoop::run() {
  s_.engine->train(true);
  const double limit = train_seconds_limit(s_.rank);
  const auto start = std::chrono::steady_clock::now();
  while (s_.engine->global_steps() < steps_) {
    step();
    after_step();
    const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (limit > 0 && spent >= limit && s_.engine->global_steps() < steps_) {
      log::info("XTRAIN_TRAIN_SECONDS: ", fmt(limit), " s of training reached after ", s_.engine->global_steps(),
                " steps; evaluating");
      break;
    }
  }
  return finish();
}

double TrainLoop::work_per_step() const {
  // A sequence-length curriculum shortens the samples.
  const int64_t T = s_.curriculum ? s_.curriculum->current() : s_.config.model.seq_len;
  return static_cast<double>(*s_.config.engine.train_batch_size) * s_.task->units_per_sample(T);
}

// One optimizer step's micro-batches: data loading timed as "data" (the engine times forward,
// backward and optimizer), the flops profile around the first forward of profile_step, gradient
// histograms at the accumulation boundary.
void TrainLoop::step() {
  if (s_.engine->pipelined()) return run_pipeline_step(s_, mon_);
  const int64_t step = s_.engine->global_steps() + 1;
  bool profile = mon_.profile_due(step);
  mon_.begin_step();
  do {
    data::Batch batch;
    {
      auto timed = mon_.timer().scope("data");
      batch = s_.train_loader->next();
    }
    // DeepSpeed: update_difficulty(global_steps + 1) before every training forward; the model sees
    // tokens[:, :seqlen] (every micro-batch of one optimizer step gets the same length).
    if (s_.curriculum) batch = data::truncate_to_seqlen(batch, s_.curriculum->update(step));
    if (profile) mon_.start_profile(*s_.model.module);
    const at::Tensor loss = s_.engine->forward(batch);
    if (profile) {
      log::info(mon_.finish_profile(step, s_.task->units_of(batch)));
      profile = false;
    }
    s_.engine->backward(loss);
    if (mon_.histograms_due(step) && s_.engine->is_gradient_accumulation_boundary()) {
      mon_.write_histograms(step, "grads/", named_tensors(*s_.model.module, true, s_.engine->loss_scaler().scale()));
    }
  } while (!s_.engine->step());
}

void TrainLoop::after_step() {
  const auto& c = s_.config;
  const StepStats& st = s_.engine->last_step();
  XTRAIN_USAGE_CHECK(std::isfinite(st.loss) || st.skipped, "training diverged: the loss is ", st.loss, " at step ", st.step,
                     "; try a lower optimizer.params.lr, gradient_clipping (e.g. 1.0), or a longer warm-up");
  losses_.push_back(st.loss);
  report(st);
  if (c.trainer.eval_interval > 0 && st.step % c.trainer.eval_interval == 0 && st.step != steps_) {
    const auto ev = evaluate(s_.model, *s_.data.val, c, c.trainer.eval_batches);
    progress_.message(c10::str("step ", st.step, ": ", s_.task->describe_eval(ev)));
    mon_.write_eval(st.step, ev.loss, ev.accuracy);
    write_class_scores(mon_.sinks(), st.step, ev.classes, ev.confusion, ev.macro_f1, s_.data.val->info().class_names,
                       ev.auc);
  }
  if (c.trainer.save_interval > 0 && st.step % c.trainer.save_interval == 0) {
    save(s_, run_dir_);
    last_saved_ = st.step;
  }
  if (fault_due("XTRAIN_FAULT_AT_STEP", st.step, s_.rank.rank)) std::raise(SIGKILL);
}

// The progress line, the loss scaler's and the schedule's messages, the metric sinks, histograms.
void TrainLoop::report(const StepStats& st) {
  std::vector<std::pair<std::string, std::string>> fields = {
      {"loss", fmt(st.loss)}, {"lr", fmt(st.lr, 3)}, {"gnorm", fmt(st.grad_norm, 3)}};
  const bool scaled = s_.engine->loss_scaler().enabled();
  if (scaled) {
    fields.emplace_back("scale", fmt(st.loss_scale, 3));
    fields.emplace_back("skipped", std::to_string(s_.engine->skipped_steps()));
  }
  const double step_mfu = mon_.mfu(progress_.rate());
  if (step_mfu > 0) fields.emplace_back("mfu", fmt(100 * step_mfu, 3) + "%");
  progress_.update(st.step, work_per_step(), fields);
  monitor::MetricSink& metrics = mon_.sinks();
  for (const auto& m : s_.engine->take_scaler_messages()) {
    progress_.message("fp16: " + m);
    metrics.write_text(st.step, "precision/loss_scaler", m);
  }
  monitor::StepReport r;
  r.step = st.step;
  r.loss = st.loss;
  r.lr = st.lr;
  r.grad_norm = st.grad_norm;
  r.loss_scale = scaled ? st.loss_scale : 0.0;
  r.skipped_steps = s_.engine->skipped_steps();
  r.samples = s_.engine->global_samples();
  r.units = work_per_step();
  const bool log_now = st.step % log_every_ == 0 || st.step == steps_;
  if (log_now) r.memory_bytes = s_.engine->memory_bytes();
  mon_.end_step(r, log_now);
  // Bytes this rank sent over the data-parallel group so far: plain data parallelism vs xtrain.local_sgd.
  if (log_now) metrics.write(st.step, {{"comm/bytes", static_cast<double>(s_.engine->comm_bytes())}});
  if (mon_.histograms_due(st.step)) mon_.write_histograms(st.step, "params/", named_tensors(*s_.model.module, false, 1));
  for (const auto& d : s_.engine->take_schedule_decisions()) {
    progress_.message(c10::str("schedule: step ", d.step, ": ", d.what, " -> lr ", fmt(d.lr, 3)));
    metrics.write_text(d.step, "sched/decision", c10::str(d.what, " lr=", d.lr, " smoothed_loss=", d.smoothed_loss));
  }
}

TrainResult TrainLoop::finish() {
  const auto& c = s_.config;
  progress_.finish();
  TrainResult result;
  result.run_dir = run_dir_;
  result.steps = s_.engine->global_steps();
  result.final_train_loss = losses_.empty() ? NAN : losses_.back();
  result.tokens_per_second = progress_.rate();
  result.final_eval = evaluate(s_.model, *s_.data.val, c, c.trainer.eval_batches);
  mon_.write_eval(result.steps, result.final_eval.loss, result.final_eval.accuracy);
  const auto& ev = result.final_eval;
  write_class_scores(mon_.sinks(), result.steps, ev.classes, ev.confusion, ev.macro_f1, s_.data.val->info().class_names,
                     ev.auc);
  if (c.trainer.save_interval >= 0 && last_saved_ != result.steps) save(s_, run_dir_);
  // Under ZeRO stage 3 each forward gathers parameters collectively: every rank runs the sampler.
  // So does a tensor-parallel forward.
  const bool collective_forward = c.zero_optimization.stage == 3 || s_.groups.model_parallel();
  if ((s_.lead() || collective_forward) && s_.task->sequences() && c.trainer.generate.tokens > 0) {
    auto sample = sample_text(s_.model, c);
    if (s_.lead()) result.sample = std::move(sample);
  }
  summarise(result);
  return result;
}

void TrainLoop::summarise(const TrainResult& result) {
  log::info("done: ", result.steps, " steps in ", monitor::format_duration(progress_.elapsed()), " | train loss ",
            fmt(result.final_train_loss), " | ", s_.task->describe_eval(result.final_eval), " | ",
            monitor::format_rate(result.tokens_per_second), " ", s_.task->short_unit(), "/s");
  if (!losses_.empty()) log::info("loss: ", monitor::sparkline(losses_, 60));
  const auto& ev = result.final_eval;
  if (ev.classes > 0) {
    log::info("val confusion matrix (", ev.samples, " samples):\n",
              confusion_table(ev.confusion, ev.classes, s_.data.val->info().class_names));
  }
  const std::string breakdown = mon_.summary();
  if (!breakdown.empty()) log::info(breakdown);
  // Escaped for the terminal: an early byte-level model samples bytes that are not UTF-8.
  if (!result.sample.empty()) log::info("sample:\n", printable_text(s_.config.trainer.generate.prompt + result.sample));
  log::info("run directory: ", run_dir_);
}

}  // namespace xtrain
