#include "xtrain/engine/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Functions.h>
#include <ATen/Parallel.h>
#include <torch/nn/module.h>
#include <torch/utils.h>

#include <csignal>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>

#include "xtrain/base/error.h"
#include "xtrain/base/log.h"
#include "xtrain/base/env.h"
#include "xtrain/base/utf8.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/data/curriculum.h"
#include "xtrain/data/difficulty_sampler.h"
#include "xtrain/data/loader.h"
#include "xtrain/engine/engine.h"
#include "xtrain/engine/model_parallel.h"
#include "xtrain/engine/run_checks.h"
#include "xtrain/engine/run_dir.h"
#include "xtrain/kernels/gemm.h"
#include "xtrain/models/gpt_checkpointing.h"
#include "xtrain/models/gpt_pipeline.h"
#include "xtrain/models/gpt_tensor_parallel.h"
#include "xtrain/monitor/progress.h"
#include "xtrain/monitor/run_monitor.h"
#include "xtrain/nn/losses.h"
#include "xtrain/parallel/tensor/mappings.h"
#include "xtrain/precision/policy.h"
#include "xtrain/sched/lr_finder.h"
#include "xtrain/sched/schedule.h"
#include "xtrain/zero/memory_estimate.h"
#include "xtrain/zero/offload/disk_backed_allocations.h"

namespace xtrain {
namespace fs = std::filesystem;

namespace {

// Everything one run needs, built from the config.
struct Setup {
  config::Config config;
  data::Splits data;
  models::Model model;
  std::function<at::Tensor(const at::Tensor&, const at::Tensor&)> loss;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<data::Loader> train_loader;
  std::optional<data::CurriculumScheduler> curriculum;  // curriculum_learning.enabled: seqlen per step
  bool text = true;
  comm::RankInfo rank;                       // who this process is (single process: rank 0 of 1)
  std::shared_ptr<comm::Communicator> comm;  // every rank (barriers)
  ParallelGroups groups;                     // the data-, tensor- and pipeline-parallel groups
  // How each parameter of the whole (tensor-parallel) model is split, for the checkpoint manifest.
  std::map<std::string, parallel::tensor::ShardSpec> shard_specs;
  bool lead() const { return rank.rank == 0; }
};

// Joins the data-parallel group when started as one of several ranks (launcher, srun, mpirun).
std::shared_ptr<comm::Communicator> join_group(const comm::RankInfo& rank, const config::Config& cfg) {
  if (rank.world_size <= 1) return comm::Communicator::single();
  log::info("distributed: ", rank.describe());
  return comm::Communicator::create(rank, cfg.comm);
}

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

// Difficulty-ordered (xtrain.data.ordering, scores cached in the run directory) or each rank's
// deterministic shard of every epoch's permutation.
std::unique_ptr<data::Sampler> make_train_sampler(const Setup& s, const std::string& run_dir) {
  const auto& cfg = s.config;
  const auto& o = cfg.data.ordering;
  const int64_t n = s.data.train->size();
  // Tensor-parallel peers read the same samples: the data is sharded over the data-parallel group.
  const int dp_rank = s.groups.dp->rank(), dp_size = s.groups.dp->size();
  if (!o.enabled) return std::make_unique<data::DistributedSampler>(n, cfg.trainer.seed, dp_rank, dp_size);
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

// tensor_parallel.size > 1: the GPT's layers split over the tensor-parallel group
// (models/gpt_tensor_parallel.h). Model::forward gathers the vocabulary-split logits (evaluation,
// sampling); training uses the split logits and the vocabulary-parallel loss.
models::Model build_tensor_parallel_gpt(const models::ModelOptions& mo, const config::Config& cfg,
                                        std::shared_ptr<comm::Communicator> tp) {
  // The model type, loss and ZeRO stage were checked by check_run_config (run_checks.cpp) at load.
  auto gpt = models::TensorParallelGPT(mo, tp);
  models::Model m;
  m.module = gpt.ptr();
  m.task = "lm";
  m.options = mo;
  m.forward = [gpt = gpt.ptr(), tp](const at::Tensor& idx) {
    return parallel::tensor::gather_from_tensor_parallel(gpt->forward(idx), tp);
  };
  return m;
}

// Evaluation and sampling under pipeline parallelism: every rank of the pipeline group calls this
// with the same ids; the hidden states go stage to stage (fp32 on the wire), and the last stage's
// logits (gathered over the tensor-parallel group) are broadcast to all stages.
std::function<at::Tensor(const at::Tensor&)> pipeline_forward(std::shared_ptr<models::PipelineGPTImpl> stage,
                                                              const ParallelGroups& groups) {
  auto pp = groups.pp, tp = groups.tp;
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

Setup build(const config::Config& cfg, const comm::RankInfo& rank = {},
            std::shared_ptr<comm::Communicator> group = nullptr, const std::string& run_dir = "") {
  Setup s;
  s.config = cfg;
  s.rank = rank;
  s.comm = group ? std::move(group) : comm::Communicator::single();
  s.groups = make_parallel_groups(s.comm, cfg);
  const int64_t tp = cfg.tensor_parallel.size, pp = cfg.pipeline.stages;
  s.data = data::open_datasets(cfg.data, cfg.model.seq_len, data::default_cache_dir());
  const auto info = s.data.train->info();
  s.text = info.kind == "text";
  models::ModelOptions mo = cfg.model;
  if (s.text) {
    XTRAIN_USAGE_CHECK(mo.type == "gpt", "config: xtrain.model.type \"", mo.type, "\" cannot train on text data;",
                       " use \"gpt\" (or an image dataset)");
    mo.vocab = info.vocab;
  } else {
    XTRAIN_USAGE_CHECK(mo.type != "gpt", "config: xtrain.model.type \"gpt\" needs text data (xtrain.data.type=text)");
    if (mo.num_classes == 0) mo.num_classes = info.num_classes;
    if (mo.in_features == 0) {
      mo.in_features = 1;
      for (int64_t d : info.sample_shape) mo.in_features *= d;
    }
  }
  s.config.model = mo;
  precision::check_cpu_supported(precision::make_policy(cfg.fp16, cfg.bf16, cfg.amp, /*cuda=*/false,
                                                        cfg.engine.grad_accum_dtype));
  torch::manual_seed(cfg.trainer.seed);
  {
    // ZeRO stage 3 with parameters on NVMe: the model is built into file-backed memory (the page
    // cache), so constructing it whole on every rank before partitioning needs no RAM of its own.
    const auto& z = cfg.zero_optimization;
    std::optional<zero::DiskBackedAllocations> construct_on_disk;
    if (z.stage == 3 && z.offload_param.device == "nvme" && !z.offload_param.nvme_path.empty()) {
      construct_on_disk.emplace(z.offload_param.nvme_path);
    }
    if (tp > 1) {
      s.model = build_tensor_parallel_gpt(mo, cfg, s.groups.tp);
    } else {
      s.model = models::build_model(mo);
    }
  }
  if (tp > 1) s.shard_specs = parallel::tensor::shard_specs(*s.model.module);
  // pipeline.stages > 1: this rank keeps its stage of the whole model (the rest is freed here).
  std::shared_ptr<models::PipelineGPTImpl> stage;
  if (pp > 1) {
    XTRAIN_USAGE_CHECK(mo.type == "gpt", "config: pipeline.stages > 1 needs xtrain.model.type \"gpt\", got \"", mo.type, "\"");
    const std::string method = cfg.pipeline.partition == "best" ? "parameters" : cfg.pipeline.partition;
    stage = models::PipelineGPT(s.model.module, static_cast<int>(s.groups.coord().pp), static_cast<int>(pp), method).ptr();
    s.model.module = stage;
    s.model.forward = pipeline_forward(stage, s.groups);
    models::apply_pipeline_checkpoint_interval(*stage, cfg.pipeline.activation_checkpoint_interval,
                                               cfg.activation_checkpointing);
  } else if (cfg.pipeline.activation_checkpoint_interval != 0) {
    log::info("config: pipeline.activation_checkpoint_interval has no effect here: it checkpoints pipeline stages "
              "and pipeline.stages is 1 (activation_checkpointing.enabled checkpoints a GPT's blocks)");
  }
  // No-op unless activation_checkpointing.enabled; UsageError for a model other than gpt.
  models::apply_activation_checkpointing(*s.model.module, cfg.activation_checkpointing);
  if (cfg.activation_checkpointing.partition_activations && !cfg.activation_checkpointing.enabled &&
      (!stage || cfg.pipeline.activation_checkpoint_interval == 0)) {
    log::info("config: activation_checkpointing.partition_activations has no effect here: nothing is checkpointed "
              "(set activation_checkpointing.enabled, or pipeline.activation_checkpoint_interval with pipeline stages)");
  }
  if (cfg.curriculum_learning.enabled) {
    XTRAIN_USAGE_CHECK(s.text, "config: curriculum_learning (seqlen) needs text data (xtrain.data.type=text)");
    XTRAIN_USAGE_CHECK(cfg.curriculum_learning.max_difficulty <= mo.seq_len,
                       "config: curriculum_learning.max_difficulty (", cfg.curriculum_learning.max_difficulty,
                       ") must be <= xtrain.model.seq_len (", mo.seq_len, ")");
    s.curriculum.emplace(cfg.curriculum_learning);
  }
  s.loss = nn::make_loss(cfg.loss);
  auto forward = s.model.forward;
  auto loss = s.loss;
  Engine::LossFn loss_fn = [forward, loss](const data::Batch& b) { return loss(forward(b.input), b.target); };
  ModelParallel mp;
  if (s.groups.model_parallel()) {
    mp.group = s.groups.mp;
    mp.norm_weights = replicated_norm_weights(*s.model.module, tp);
  }
  if (tp > 1 && !stage) {  // split logits and the vocabulary-parallel cross-entropy
    auto gpt = std::dynamic_pointer_cast<models::TensorParallelGPTImpl>(s.model.module);
    loss_fn = [gpt](const data::Batch& b) { return gpt->loss(gpt->forward(b.input), b.target); };
  }
  if (stage) {  // the tied embedding's two copies count once in the norm; their gradients are summed
    mp.tied = stage->tied_parameters();
    mp.tied_group = s.groups.embedding;
    for (const auto& name : mp.tied) mp.norm_weights[name] = 0.5 * (mp.norm_weights.count(name) ? mp.norm_weights[name] : 1.0);
  }
  s.engine = std::make_unique<Engine>(s.model.module, std::move(loss_fn), s.config, s.groups.dp, std::move(mp));
  if (stage) {
    PipelineStage ps;
    ps.forward = [stage](const at::Tensor& x) { return stage->forward(x); };
    if (tp > 1) {
      ps.loss = [stage](const at::Tensor& out, const at::Tensor& target) { return stage->loss(out, target); };
    } else {
      ps.loss = loss;  // xtrain.loss (label smoothing, focal) on the whole logits
    }
    ps.group = s.groups.pp;
    ps.schedule = cfg.pipeline.schedule;
    s.engine->set_pipeline(std::move(ps));
  }
  const int64_t micro = *cfg.engine.train_micro_batch_size_per_gpu;
  s.train_loader = std::make_unique<data::Loader>(s.data.train, make_train_sampler(s, run_dir), micro, cfg.data.prefetch);
  return s;
}

void log_start(const Setup& s, const std::string& run_dir) {
  const auto& c = s.config;
  log::info("run: ", run_dir);
  log::info("model: ", c.model.type, " with ", s.engine->num_parameters(), " parameters",
            c.model.type == "gpt" ? c10::str(" (layers ", c.model.layers, ", d_model ", c.model.d_model, ", heads ",
                                              c.model.heads, ", seq_len ", c.model.seq_len, ")")
                                  : std::string());
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
  const int64_t state_floats = c.optimizer.type == "SGD" ? 1 : 2;
  const auto est = zero::estimate_memory(c.zero_optimization.stage, s.engine->num_parameters(), c.dp_world_size,
                                         c10::elementSize(s.engine->precision().param_dtype), state_floats);
  auto mb = [](int64_t bytes) { return c10::str(std::round(bytes / 1e5) / 10); };
  log::info("memory: model states ", mb(measured), " MB per rank (ZeRO stage ", c.zero_optimization.stage,
            " formula: ", mb(est.total()), " MB)");
}

std::string trainer_state_file(int rank) { return rank == 0 ? "trainer.json" : c10::str("trainer_rank", rank, ".json"); }

// XTRAIN_FAULT_AT_STEP=<k>:<rank> / XTRAIN_FAULT_IN_SAVE=<k>:<rank>[:mid]: that rank kills itself
// with SIGKILL after step k / while saving step k's checkpoint: after writing its files and before
// the commit, or with `:mid` right after its model and optimizer shards, before its other files
// (tests of elastic recovery and of crash-safe checkpoints; the launcher passes them to the first
// attempt only).
bool fault_due(const char* variable, int64_t step, int rank, const char* phase = "") {
  const std::string v = env::get_or(variable, "");
  if (v.empty()) return false;
  const auto colon = v.find(':');
  const int64_t at = std::stoll(v.substr(0, colon));
  const auto second = colon == std::string::npos ? std::string::npos : v.find(':', colon + 1);
  const int who = colon == std::string::npos ? 0 : std::stoi(v.substr(colon + 1, second - colon - 1));
  const std::string when = second == std::string::npos ? "" : v.substr(second + 1);
  if (step != at || rank != who || when != phase) return false;
  log::error(variable, ": rank ", rank, " kills itself at step ", step);
  return true;
}

// Every rank writes its part; after a barrier rank 0 commits the manifest (with the world size)
// and prunes. Until the commit, `latest` still names the previous checkpoint.
void save(Setup& s, const std::string& run_dir) {
  const std::string root = (fs::path(run_dir) / "checkpoints").string();
  checkpoint::CheckpointWriter writer(root, "global_step" + std::to_string(s.engine->global_steps()), s.rank.rank);
  writer.set_scope(s.groups.checkpoint_scope());  // the engine's files of this tensor/pipeline rank
  s.engine->save_checkpoint(writer);
  writer.set_scope("");
  if (s.lead() && s.groups.model_parallel()) {
    write_model_parallel_manifest(writer, s.groups.grid, s.shard_specs);
  }
  if (fault_due("XTRAIN_FAULT_IN_SAVE", s.engine->global_steps(), s.rank.rank, "mid")) std::raise(SIGKILL);
  writer.write_text(trainer_state_file(s.rank.rank), trainer_state_json(s.train_loader->state()));
  if (s.lead()) writer.write_text("config.json", config::to_json(s.config));
  writer.finish_rank();
  if (fault_due("XTRAIN_FAULT_IN_SAVE", s.engine->global_steps(), s.rank.rank)) std::raise(SIGKILL);
  s.comm->barrier();
  if (s.lead()) {
    writer.commit("{}", s.rank.world_size);
    checkpoint::prune(root, s.config.trainer.keep_checkpoints);
  }
  s.comm->barrier();  // nobody starts the next step (or exits) before the checkpoint is committed
}

void resume(Setup& s, const std::string& run_dir) {
  const std::string root = (fs::path(run_dir) / "checkpoints").string();
  XTRAIN_USAGE_CHECK(!checkpoint::latest_tag(root).empty(), "--resume: ", run_dir,
                     " has no checkpoint (checkpoints/latest is missing)");
  checkpoint::CheckpointReader reader(root);
  check_model_parallel_manifest(reader, s.groups.grid);
  s.engine->load_checkpoint(reader.scoped(s.groups.checkpoint_scope()));
  const std::string mine = trainer_state_file(s.rank.rank);
  if (reader.has_file(mine)) {
    s.train_loader->set_state(restore_trainer_state(reader.read_text(mine)));
  } else {  // saved by fewer ranks: this rank starts its shard of the saved epoch afresh
    auto state = restore_trainer_state(reader.read_text("trainer.json"));
    log::warn("resume: ", mine, " is not in the checkpoint (saved by a different number of ranks); rank ",
              s.rank.rank, " restarts its data shard of epoch ", state.epoch);
    state.position = 0;
    s.train_loader->set_state(state);
  }
  log::info("resumed from ", reader.dir(), " at step ", s.engine->global_steps());
}

std::string describe_eval(const EvalResult& r, bool text) {
  if (!text) return c10::str("val loss ", r.loss, " | val accuracy ", 100.0 * r.accuracy, "%");
  return c10::str("val loss ", r.loss, " (ppl ", std::exp(r.loss), ", ", r.loss / std::log(2.0), " bits/byte)");
}

std::string fmt(double v, int precision = 4) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*g", precision, v);
  return buf;
}

}  // namespace

double find_lr(const TrainRequest& request) {
  auto loaded = load_run_config(request, "");
  for (const auto& w : loaded.warnings) log::warn(w);
  check_run_config(loaded.config);
  if (loaded.config.trainer.threads > 0) at::set_num_threads(static_cast<int>(loaded.config.trainer.threads));
  Setup s = build(loaded.config);
  const int64_t steps = std::min<int64_t>(200, loaded.config.trainer.steps);
  const double lo = 1e-6, hi = 1.0;
  std::vector<double> lrs, losses;
  monitor::Progress progress("steps", steps, 20, true);
  s.engine->train(true);
  double best = INFINITY;
  for (int64_t i = 0; i < steps; ++i) {
    const double lr = lo * std::pow(hi / lo, static_cast<double>(i) / static_cast<double>(steps - 1));
    s.engine->set_lr_override(lr);
    do {
      const auto batch = s.train_loader->next();
      s.engine->backward(s.engine->forward(batch));
    } while (!s.engine->step());
    const double loss = s.engine->last_step().loss;
    progress.update(i + 1, 1, {{"lr", fmt(lr, 3)}, {"loss", fmt(loss)}});
    if (!std::isfinite(loss) || loss > 4 * best) break;  // diverged: the rest of the sweep says nothing
    best = std::min(best, loss);
    lrs.push_back(lr);
    losses.push_back(loss);
  }
  progress.finish();
  const double suggestion = sched::suggest_lr(lrs, losses);
  log::info("lr range test: ", lrs.size(), " steps from ", fmt(lo, 2), " to ", fmt(lrs.empty() ? lo : lrs.back(), 2));
  log::info("loss vs log(lr): ", monitor::sparkline(losses, 60));
  for (size_t i = 0; i < lrs.size(); i += std::max<size_t>(1, lrs.size() / 12)) {
    log::info("  lr ", fmt(lrs[i], 3), "  loss ", fmt(losses[i]));
  }
  log::info("suggested lr: ", fmt(suggestion, 3), "  (use --set optimizer.params.lr=", fmt(suggestion, 3), ")");
  return suggestion;
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
  o.unit = s.text ? "tokens" : "samples";
  // GPT: the closed form; other models: learnt from the flops profile, when enabled.
  o.train_flops_per_unit = s.text ? models::gpt_flops_per_token(c.model) : 0.0;
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

// One optimizer step's micro-batches: data loading timed as "data" (the engine times forward,
// backward and optimizer), the flops profile around the first forward of profile_step, gradient
// histograms at the accumulation boundary.
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

void run_step(Setup& s, monitor::RunMonitor& mon) {
  if (s.engine->pipelined()) return run_pipeline_step(s, mon);
  const int64_t step = s.engine->global_steps() + 1;
  bool profile = mon.profile_due(step);
  mon.begin_step();
  do {
    data::Batch batch;
    {
      auto timed = mon.timer().scope("data");
      batch = s.train_loader->next();
    }
    // DeepSpeed: update_difficulty(global_steps + 1) before every training forward; the model sees
    // tokens[:, :seqlen] (every micro-batch of one optimizer step gets the same length).
    if (s.curriculum) batch = data::truncate_to_seqlen(batch, s.curriculum->update(step));
    if (profile) mon.start_profile(*s.model.module);
    const at::Tensor loss = s.engine->forward(batch);
    if (profile) {
      const double units = static_cast<double>(s.text ? batch.input.numel() : batch.size());
      log::info(mon.finish_profile(step, units));
      profile = false;
    }
    s.engine->backward(loss);
    if (mon.histograms_due(step) && s.engine->is_gradient_accumulation_boundary()) {
      mon.write_histograms(step, "grads/", named_tensors(*s.model.module, true, s.engine->loss_scaler().scale()));
    }
  } while (!s.engine->step());
}


}  // namespace

TrainResult train(const TrainRequest& request) {
  const comm::RankInfo rank = comm::rank_info_from_env();
  log::Settings ls = log::settings();
  ls.rank = rank.rank;
  log::configure(ls);
  std::string run_dir = request.output;
  if (request.resume && run_dir.empty()) {
    const auto probe = load_run_config(request, "");
    run_dir = latest_run_dir(probe.config.trainer.output);
    XTRAIN_USAGE_CHECK(!run_dir.empty(), "--resume: no run with checkpoints under ", probe.config.trainer.output,
                       "/; pass --output RUN_DIR");
  }
  auto loaded = load_run_config(request, run_dir);
  for (const auto& w : loaded.warnings) log::warn(w);
  for (const auto& n : loaded.notes) log::info("config: ", n);
  check_run_config(loaded.config);  // what `xtrain config` checks, before any work
  check_checkpoint_storage(loaded.config, rank);
  auto group = join_group(rank, loaded.config);
  if (run_dir.empty()) {  // rank 0 names the run (its clock); the others follow
    if (rank.rank == 0) {
      run_dir = new_run_dir_name(loaded.config.trainer.output, loaded.config.trainer.name, loaded.config.model.type);
    }
    if (group->distributed()) run_dir = comm::broadcast_string(*group, run_dir);
  }
  const std::string ckpt_root = (fs::path(run_dir) / "checkpoints").string();
  XTRAIN_USAGE_CHECK(request.resume || checkpoint::latest_tag(ckpt_root).empty(), "run directory ", run_dir,
                     " already has checkpoints: add --resume to continue it, or choose another --output");
  if (rank.rank == 0) fs::create_directories(run_dir);
  if (loaded.config.trainer.threads > 0) at::set_num_threads(static_cast<int>(loaded.config.trainer.threads));
  Setup s = build(loaded.config, rank, group, run_dir);
  if (s.lead()) write_file_atomic((fs::path(run_dir) / "config.json").string(), config::to_json(s.config) + "\n");
  s.comm->barrier();  // the run directory exists for every rank
  if (request.resume) resume(s, run_dir);
  log_start(s, run_dir);

  const auto& c = s.config;
  monitor::RunMonitor mon(monitor_options(s), s.lead() ? run_dir : "", config::to_json(s.config),
                          s.engine->global_steps());
  s.engine->set_stage_timer(&mon.timer());
  monitor::MetricSink& metrics = mon.sinks();
  const int64_t steps = c.trainer.steps;
  const int64_t log_every = c.trainer.log_interval > 0 ? c.trainer.log_interval : c.engine.steps_per_print;
  // Tokens (or samples) per optimizer step; a sequence-length curriculum shortens them.
  auto work_per_step = [&] {
    const int64_t T = s.curriculum ? s.curriculum->current() : c.model.seq_len;
    return static_cast<double>(*c.engine.train_batch_size) * (s.text ? T : 1);
  };
  monitor::Progress progress(s.text ? "tok" : "samples", steps, c.engine.steps_per_print, s.lead());
  std::vector<double> losses;
  s.engine->train(true);
  int64_t last_saved = request.resume ? s.engine->global_steps() : -1;
  while (s.engine->global_steps() < steps) {
    run_step(s, mon);
    const StepStats& st = s.engine->last_step();
    XTRAIN_USAGE_CHECK(std::isfinite(st.loss) || st.skipped, "training diverged: the loss is ", st.loss, " at step ", st.step,
                       "; try a lower optimizer.params.lr, gradient_clipping (e.g. 1.0), or a longer warm-up");
    losses.push_back(st.loss);
    std::vector<std::pair<std::string, std::string>> fields = {
        {"loss", fmt(st.loss)}, {"lr", fmt(st.lr, 3)}, {"gnorm", fmt(st.grad_norm, 3)}};
    if (s.engine->loss_scaler().enabled()) {
      fields.emplace_back("scale", fmt(st.loss_scale, 3));
      fields.emplace_back("skipped", std::to_string(s.engine->skipped_steps()));
    }
    const double step_mfu = mon.mfu(progress.rate());
    if (step_mfu > 0) fields.emplace_back("mfu", fmt(100 * step_mfu, 3) + "%");
    progress.update(st.step, work_per_step(), fields);
    for (const auto& m : s.engine->take_scaler_messages()) {
      progress.message("fp16: " + m);
      metrics.write_text(st.step, "precision/loss_scaler", m);
    }
    monitor::StepReport report;
    report.step = st.step;
    report.loss = st.loss;
    report.lr = st.lr;
    report.grad_norm = st.grad_norm;
    report.loss_scale = s.engine->loss_scaler().enabled() ? st.loss_scale : 0.0;
    report.skipped_steps = s.engine->skipped_steps();
    report.samples = s.engine->global_samples();
    report.units = work_per_step();
    const bool log_now = st.step % log_every == 0 || st.step == steps;
    if (log_now) report.memory_bytes = s.engine->memory_bytes();
    mon.end_step(report, log_now);
    if (mon.histograms_due(st.step)) mon.write_histograms(st.step, "params/", named_tensors(*s.model.module, false, 1));
    for (const auto& d : s.engine->take_schedule_decisions()) {
      progress.message(c10::str("schedule: step ", d.step, ": ", d.what, " -> lr ", fmt(d.lr, 3)));
      metrics.write_text(d.step, "sched/decision", c10::str(d.what, " lr=", d.lr, " smoothed_loss=", d.smoothed_loss));
    }
    if (c.trainer.eval_interval > 0 && st.step % c.trainer.eval_interval == 0 && st.step != steps) {
      const auto ev = evaluate(s.model, *s.data.val, c, c.trainer.eval_batches);
      progress.message(c10::str("step ", st.step, ": ", describe_eval(ev, s.text)));
      mon.write_eval(st.step, ev.loss, ev.accuracy);
    }
    if (c.trainer.save_interval > 0 && st.step % c.trainer.save_interval == 0) {
      save(s, run_dir);
      last_saved = st.step;
    }
    if (fault_due("XTRAIN_FAULT_AT_STEP", st.step, s.rank.rank)) std::raise(SIGKILL);
  }
  progress.finish();
  TrainResult result;
  result.run_dir = run_dir;
  result.steps = s.engine->global_steps();
  result.final_train_loss = losses.empty() ? NAN : losses.back();
  result.tokens_per_second = progress.rate();
  result.final_eval = evaluate(s.model, *s.data.val, c, c.trainer.eval_batches);
  mon.write_eval(result.steps, result.final_eval.loss, result.final_eval.accuracy);
  if (c.trainer.save_interval >= 0 && last_saved != result.steps) save(s, run_dir);
  // Under ZeRO stage 3 each forward gathers parameters collectively: every rank runs the sampler.
  // So does a tensor-parallel forward.
  const bool collective_forward = c.zero_optimization.stage == 3 || s.groups.model_parallel();
  if ((s.lead() || collective_forward) && s.text && c.trainer.generate.tokens > 0) {
    auto sample = sample_text(s.model, c);
    if (s.lead()) result.sample = std::move(sample);
  }
  log::info("done: ", result.steps, " steps in ", monitor::format_duration(progress.elapsed()), " | train loss ",
            fmt(result.final_train_loss), " | ", describe_eval(result.final_eval, s.text), " | ",
            monitor::format_rate(result.tokens_per_second), s.text ? " tok/s" : " samples/s");
  if (!losses.empty()) log::info("loss: ", monitor::sparkline(losses, 60));
  const std::string breakdown = mon.summary();
  if (!breakdown.empty()) log::info(breakdown);
  // Escaped for the terminal: an early byte-level model samples bytes that are not UTF-8.
  if (!result.sample.empty()) log::info("sample:\n", printable_text(c.trainer.generate.prompt + result.sample));
  log::info("run directory: ", run_dir);
  return result;
}

}  // namespace xtrain
