// Config::visit: where each section sits in ds_config.json. Included by config.cpp only.
#pragma once
#include "xtrain/base/did_you_mean.h"
#include "xtrain/base/error.h"
#include "xtrain/config/config.h"
#include "xtrain/config/optimizer_types.h"
#include "xtrain/config/scheduler_types.h"

namespace xtrain::config {

// The `type` key's docs line: every registered name, "Adam | AdamW | Lamb | SGD".
template <class Entry>
std::string type_choices(Registry<Entry>& types) {
  std::string out;
  for (const auto& name : types.names()) out += (out.empty() ? "" : " | ") + name;
  return out;
}

template <class V>
void Config::visit(V& v) {
  engine.visit(v);
  v.alias("bfloat16", "bf16", "");
  if (v.has("optimizer")) has_optimizer = true;
  v.nested("optimizer", [&](auto& s) {
    s("type", optimizer.type, type_choices(optimizer_types()).c_str());
    if (!s.documenting()) optimizer.type = normalise_optimizer_type(optimizer.type);
    visit_section_params(s, optimizer, optimizer.type, optimizer_types(), [&](auto& ps) {
      ps.forbid("max_grad_norm", "use the top-level gradient_clipping");
      if (optimizer.type != "Adam" && optimizer.type != "AdamW") {  // 8-bit state: Adam's params only
        ps.forbid("state_dtype", "not supported yet with this optimizer.type (8-bit state exists for Adam and AdamW)");
      }
    });
  });
  v.nested("scheduler", [&](auto& s) {
    s("type", scheduler.type, type_choices(scheduler_types()).c_str());
    if (!s.documenting()) scheduler.type = normalise_scheduler_type(scheduler.type);
    visit_section_params(s, scheduler, scheduler.type, scheduler_types(), [](auto&) {});
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
    x("param_groups", optimizer.param_groups,
      "parameter groups (DeepSpeed's model_parameters): [{params: [globs], lr_scale, weight_decay}]; first match wins");
    trainer.visit(x);
    x("comm", comm, "collectives");
    x("monitor", monitor, "MFU peak, histograms, TensorBoard flushing");
    x("local_sgd", local_sgd, "local SGD / DiLoCo over the data-parallel group");
    x("python", python, "the Python layer (import xtrain)");
  });
}

}  // namespace xtrain::config
