#include "xtrain/run/setup.h"

#include <torch/nn/module.h>
#include <torch/utils.h>

#include "xtrain/base/error.h"
#include "xtrain/base/log.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/models/gpt_pipeline_model.h"
#include "xtrain/models/gpt_tensor_parallel_model.h"
#include "xtrain/models/registry.h"
#include "xtrain/nn/losses.h"
#include "xtrain/precision/policy.h"
#include "xtrain/run/init_from.h"
#include "xtrain/zero/offload/disk_backed_allocations.h"

namespace xtrain {

namespace {

using StagePtr = std::shared_ptr<const models::PipelineStageModel>;

// The model from the seed: whole, or split over the tensor-parallel group by its entry's hook
// (train_loss is then the loss on the split output; null for a whole model).
models::TensorParallelModel build_model(const config::Config& cfg, const parallel::ParallelGroups& groups) {
  torch::manual_seed(cfg.trainer.seed);
  // ZeRO stage 3 with parameters on NVMe: the model is built into file-backed memory (the page
  // cache), so constructing it whole on every rank before partitioning needs no RAM of its own.
  const auto& z = cfg.zero_optimization;
  std::optional<zero::DiskBackedAllocations> construct_on_disk;
  if (z.stage == 3 && z.offload_param.device == "nvme" && !z.offload_param.nvme_path.empty()) {
    construct_on_disk.emplace(z.offload_param.nvme_path);
  }
  if (cfg.tensor_parallel.size > 1) {
    const auto& entry = models::check_tensor_parallel_model(cfg.model.type);
    return entry.tensor_parallel(cfg.model, groups.tp);
  }
  return {models::build_model(cfg.model), nullptr};
}

// pipeline.stages > 1: this rank keeps its stage of the whole model (the rest is freed here).
StagePtr cut_pipeline_stage(Setup& s) {
  const auto& cfg = s.config;
  if (cfg.pipeline.stages <= 1) {
    if (cfg.pipeline.activation_checkpoint_interval != 0) {
      log::info("config: pipeline.activation_checkpoint_interval has no effect here: it checkpoints pipeline stages "
                "and pipeline.stages is 1 (activation_checkpointing.enabled checkpoints a GPT's blocks)");
    }
    return nullptr;
  }
  const std::string method = cfg.pipeline.partition == "best" ? "parameters" : cfg.pipeline.partition;
  const auto& entry = models::check_pipeline_model(cfg.model.type);
  models::PipelineCut cut;
  cut.stage = static_cast<int>(s.groups.coord().pp);
  cut.stages = static_cast<int>(cfg.pipeline.stages);
  cut.partition = method;
  cut.checkpoint_interval = cfg.pipeline.activation_checkpoint_interval;
  cut.pp = s.groups.pp;
  cut.tp = s.groups.tp;
  cut.checkpointing = &cfg.activation_checkpointing;
  return std::make_shared<const models::PipelineStageModel>(entry.pipeline_stage(s.model, cut));
}

void apply_activation_checkpointing(Setup& s, bool staged) {
  const auto& cfg = s.config;
  // UsageError for a model whose entry cannot checkpoint its activations.
  if (cfg.activation_checkpointing.enabled) {
    const auto& entry = models::check_activation_checkpointing_model(cfg.model.type);
    entry.checkpoint_activations(*s.model.module, cfg.activation_checkpointing);
  }
  if (cfg.activation_checkpointing.partition_activations && !cfg.activation_checkpointing.enabled &&
      (!staged || cfg.pipeline.activation_checkpoint_interval == 0)) {
    log::info("config: activation_checkpointing.partition_activations has no effect here: nothing is checkpointed "
              "(set activation_checkpointing.enabled, or pipeline.activation_checkpoint_interval with pipeline stages)");
  }
}

void start_curriculum(Setup& s) {
  const auto& cfg = s.config;
  if (!cfg.curriculum_learning.enabled) return;
  XTRAIN_USAGE_CHECK(s.task->sequences(), "config: curriculum_learning (seqlen) needs text data (xtrain.data.type=text)");
  XTRAIN_USAGE_CHECK(cfg.curriculum_learning.max_difficulty <= cfg.model.seq_len,
                     "config: curriculum_learning.max_difficulty (", cfg.curriculum_learning.max_difficulty,
                     ") must be <= xtrain.model.seq_len (", cfg.model.seq_len, ")");
  s.curriculum.emplace(cfg.curriculum_learning);
}

// Tensor and pipeline parallelism as the engine sees them: the norm weights of parameters held by
// several ranks of one replica, and the tied embedding summed over the embedding group.
ModelParallel model_parallel(const Setup& s, const StagePtr& stage) {
  ModelParallel mp;
  if (s.groups.model_parallel()) {
    mp.group = s.groups.mp;
    mp.norm_weights = models::replicated_norm_weights(*s.model.module, s.config.tensor_parallel.size);
  }
  if (stage) {
    mp.tied = stage->tied;
    mp.tied_group = s.groups.embedding;
    models::halve_tied_norm_weights(stage->tied, mp.norm_weights);
  }
  return mp;
}

// The loss the engine differentiates: xtrain.loss on the whole logits, or the vocabulary-parallel
// cross-entropy on the split ones under tensor parallelism.
void make_engine(Setup& s, const StagePtr& stage, const models::TensorParallelModel& built) {
  const bool tp = s.config.tensor_parallel.size > 1;
  s.loss = nn::make_loss(s.config.loss);
  auto forward = s.model.forward;
  auto loss = s.loss;
  Engine::LossFn loss_fn = [forward, loss](const data::Batch& b) { return loss(forward(b.input), b.target); };
  if (tp && !stage) {
    auto tp_loss = built.train_loss;
    loss_fn = [tp_loss](const data::Batch& b) { return tp_loss(b.input, b.target); };
  }
  s.engine = std::make_unique<Engine>(s.model.module, std::move(loss_fn), s.config, s.groups.dp, model_parallel(s, stage));
  if (!stage) return;
  PipelineStage ps;
  ps.forward = stage->forward;
  if (tp) {
    ps.loss = stage->tensor_parallel_loss;
  } else {
    ps.loss = loss;  // xtrain.loss (label smoothing, focal) on the whole logits
  }
  ps.group = s.groups.pp;
  ps.schedule = s.config.pipeline.schedule;
  s.engine->set_pipeline(std::move(ps));
}

}  // namespace

Setup build(const config::Config& cfg, const comm::RankInfo& rank, std::shared_ptr<comm::Communicator> group,
            const std::string& run_dir) {
  Setup s;
  s.config = cfg;
  s.rank = rank;
  s.comm = group ? std::move(group) : comm::Communicator::single();
  s.groups = parallel::make_parallel_groups(s.comm, cfg.tensor_parallel.size, cfg.pipeline.stages);
  s.data = data::open_datasets(cfg.data, cfg.model.seq_len, data::default_cache_dir());
  s.task = &find_task(models::find_model(cfg.model.type).task, cfg.model.type);
  s.task->fit_model(s.config.model, s.data.train->info());
  precision::check_cpu_supported(precision::make_policy(cfg.fp16, cfg.bf16, cfg.amp, /*cuda=*/false,
                                                        cfg.engine.grad_accum_dtype));
  const models::TensorParallelModel built = build_model(s.config, s.groups);
  s.model = built.model;
  if (!cfg.model.init_from.empty()) {  // the whole model, before any cut or sharding
    XTRAIN_USAGE_CHECK(cfg.tensor_parallel.size == 1, "xtrain.model.init_from needs tensor_parallel.size 1 (got ",
                       cfg.tensor_parallel.size, "): load into a one-rank run, then resume it split");
    init_model_from(*s.model.module, cfg.model.init_from, cfg.model.init_strict);
  }
  if (cfg.tensor_parallel.size > 1) s.shard_specs = parallel::tensor::shard_specs(*s.model.module);
  const StagePtr stage = cut_pipeline_stage(s);
  apply_activation_checkpointing(s, stage != nullptr);
  start_curriculum(s);
  make_engine(s, stage, built);
  const int64_t micro = *cfg.engine.train_micro_batch_size_per_gpu;
  s.train_loader = std::make_unique<data::Loader>(s.data.train, make_train_sampler(s, run_dir), micro, cfg.data.prefetch);
  return s;
}

}  // namespace xtrain
