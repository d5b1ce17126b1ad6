// Config::visit: where each section sits in ds_config.json. Included by config.cpp only.
#pragma once
#include "xtrain/base/did_you_mean.h"
#include "xtrain/base/error.h"
#include "xtrain/config/config.h"

namespace xtrain::config {

// DeepSpeed matches adam/adamw/lamb case-insensitively and torch.optim names exactly; xtrain
// accepts any case for the four it implements.
std::string normalise_optimizer_type(const std::string& type);
std::string normalise_scheduler_type(const std::string& type);

template <class V>
void Config::visit(V& v) {
  engine.visit(v);
  v.alias("bfloat16", "bf16", "");
  if (v.has("optimizer")) has_optimizer = true;
  v.nested("optimizer", [&](auto& s) {
    s("type", optimizer.type, "Adam | AdamW | Lamb | SGD");
    if (!s.documenting()) optimizer.type = normalise_optimizer_type(optimizer.type);
    const std::string& t = optimizer.type;
    auto params = [&](const char* key, auto& p) {
      s.nested(key, [&](auto& ps) {
        ps.forbid("max_grad_norm", "use the top-level gradient_clipping");
        p.visit(ps);
      });
    };
    if (s.documenting()) {
      params("params (Adam, AdamW)", optimizer.adam);
      params("params (Lamb)", optimizer.lamb);
      params("params (SGD)", optimizer.sgd);
    } else if (t == "Lamb") {
      params("params", optimizer.lamb);
    } else if (t == "SGD") {
      params("params", optimizer.sgd);
    } else {
      params("params", optimizer.adam);
      if (t == "AdamW") optimizer.adam.adam_w_mode = true;
    }
  });
  v.nested("scheduler", [&](auto& s) {
    s("type", scheduler.type, "WarmupLR | WarmupDecayLR | WarmupCosineLR | OneCycle | LRRangeTest | Adaptive");
    if (!s.documenting()) scheduler.type = normalise_scheduler_type(scheduler.type);
    const std::string& t = scheduler.type;
    auto params = [&](const char* key, auto& p) { s(key, p); };
    if (s.documenting()) {
      scheduler.warmup.with_decay = true;
      params("params (WarmupLR, WarmupDecayLR)", scheduler.warmup);
      params("params (WarmupCosineLR)", scheduler.cosine);
      params("params (OneCycle)", scheduler.one_cycle);
      params("params (LRRangeTest)", scheduler.range_test);
      params("params (Adaptive)", scheduler.adaptive);
    } else if (t == "WarmupLR" || t == "WarmupDecayLR") {
      scheduler.warmup.with_decay = t == "WarmupDecayLR";
      params("params", scheduler.warmup);
    } else if (t == "WarmupCosineLR") {
      params("params", scheduler.cosine);
    } else if (t == "OneCycle") {
      params("params", scheduler.one_cycle);
    } else if (t == "LRRangeTest") {
      params("params", scheduler.range_test);
    } else if (t == "Adaptive") {
      params("params", scheduler.adaptive);
    }
  });
  v("fp16", fp16, "fp16 mixed precision with loss scaling");
  v("bf16", bf16, "bf16 mixed precision");
  v("amp", amp, "autocast mixed precision");
  v("tf32", tf32, "xtrain: TF32 matmul on CUDA");
  v("zero_optimization", zero_optimization, "ZeRO partitioning and offload");
  v("aio", aio, "asynchronous I/O for NVMe offload");
  v("activation_checkpointing", activation_checkpointing, "recompute activations in backward");
  v("tensorboard", tensorboard, "TensorBoard event files");
  v("csv_monitor", csv_monitor, "one CSV file per metric");
  v("wandb", wandb, "Weights & Biases");
  v("comet", comet, "Comet");
  v("flops_profiler", flops_profiler, "per-module FLOPs profile");
  v("comms_logger", comms_logger, "collective logging");
  v("curriculum_learning", curriculum_learning, "sequence-length curriculum");
  v("pipeline", pipeline, "pipeline parallelism");
  v("tensor_parallel", tensor_parallel, "tensor parallelism");
  v("checkpoint", checkpoint, "checkpoint behaviour");
  v.nested("xtrain", [&](auto& x) {
    x("model", model, "model assembly");
    x("data", data, "dataset");
    x("loss", loss, "training loss");
    trainer.visit(x);
    x("comm", comm, "collectives");
    x("monitor", monitor, "MFU peak, histograms, TensorBoard flushing");
  });
}

}  // namespace xtrain::config
