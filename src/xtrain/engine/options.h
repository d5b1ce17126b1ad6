// DeepSpeed's top-level engine keys (batch triple §a.1, clipping §a.6, logging §a.12) and the
// `xtrain` training-loop keys (steps, evaluation, checkpoints, seed: what DeepSpeed leaves to the
// user's script).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace xtrain::engine {

struct EngineOptions {
  // The batch triple; unset (or "auto") values are derived (config/batch.h).
  std::optional<int64_t> train_batch_size;
  std::optional<int64_t> train_micro_batch_size_per_gpu;
  std::optional<int64_t> gradient_accumulation_steps;
  double gradient_clipping = 0.0;
  int64_t steps_per_print = 10;
  bool wall_clock_breakdown = false;
  bool memory_breakdown = false;
  bool dump_state = false;
  bool prescale_gradients = false;
  double gradient_predivide_factor = 1.0;
  std::string communication_data_type;  // "" (null) | fp16 | bf16 | fp32
  bool sparse_gradients = false;
  bool dataloader_drop_last = false;
  bool zero_allow_untested_optimizer = false;
  bool zero_force_ds_cpu_optimizer = true;
  std::string grad_accum_dtype;  // data_types.grad_accum_dtype: "" | fp32 | fp16 | bf16
  template <class V>
  void visit(V& v) {
    v.optional("train_batch_size", train_batch_size, "samples per optimizer step, all ranks together");
    v.optional("train_micro_batch_size_per_gpu", train_micro_batch_size_per_gpu, "samples per forward/backward per rank");
    v.optional("gradient_accumulation_steps", gradient_accumulation_steps, "micro-batches per optimizer step");
    v("gradient_clipping", gradient_clipping, "max global gradient L2 norm (0: off)");
    v("steps_per_print", steps_per_print, "progress line every N optimizer steps");
    v("wall_clock_breakdown", wall_clock_breakdown, "time each stage of the step");
    v("memory_breakdown", memory_breakdown, "report memory per area");
    v("dump_state", dump_state, "accepted for compatibility");
    v("prescale_gradients", prescale_gradients, "divide gradients by the data-parallel size before reducing");
    v("gradient_predivide_factor", gradient_predivide_factor, "divide gradients by this before reducing");
    v.choice("communication_data_type", communication_data_type, {"", "fp16", "bf16", "fp32"}, "dtype of gradient communication");
    v("sparse_gradients", sparse_gradients, "not supported");
    v("dataloader_drop_last", dataloader_drop_last, "accepted (xtrain always drops the last partial batch)");
    v("zero_allow_untested_optimizer", zero_allow_untested_optimizer, "allow Lamb/SGD with ZeRO");
    v("zero_force_ds_cpu_optimizer", zero_force_ds_cpu_optimizer, "accepted for compatibility");
    v.nested("data_types", [&](auto& s) {
      s.choice("grad_accum_dtype", grad_accum_dtype, {"", "fp32", "fp16", "bf16"}, "gradient accumulation dtype");
    });
  }
};

struct GenerateOptions {
  int64_t tokens = 200;
  std::string prompt = "The whale ";
  double temperature = 0.8;
  int64_t top_k = 40;
  template <class V>
  void visit(V& v) {
    v("tokens", tokens, "bytes generated for the end-of-training sample");
    v("prompt", prompt, "prompt for the sample");
    v("temperature", temperature, "sampling temperature");
    v("top_k", top_k, "sample among the k most likely (0: all)");
  }
};

struct TrainerOptions {
  int64_t steps = 1500;
  int64_t eval_interval = 250;
  int64_t eval_batches = 20;
  int64_t save_interval = 500;
  int64_t keep_checkpoints = 3;
  int64_t log_interval = 0;  // 0: steps_per_print
  std::string output = "runs";
  std::string name;  // "" -> <model>-<timestamp>
  int64_t threads = 0;  // 0: all cores (divided among local ranks)
  int64_t seed = 1234;
  GenerateOptions generate;
  template <class V>
  void visit(V& v) {
    v("steps", steps, "optimizer steps to train");
    v("eval_interval", eval_interval, "validate every N steps (0: only at the end)");
    v("eval_batches", eval_batches, "micro-batches per validation");
    v("save_interval", save_interval, "checkpoint every N steps (0: only at the end; -1: never)");
    v("keep_checkpoints", keep_checkpoints, "checkpoints kept (oldest deleted first; 0: all)");
    v("log_interval", log_interval, "metrics.jsonl every N steps (0: steps_per_print)");
    v("output", output, "folder holding run directories");
    v("name", name, "run directory name (default: <model>-<date>-<time>)");
    v("threads", threads, "intra-op threads per rank (0: the cores divided among local ranks)");
    v("seed", seed, "seed of every random stream (init, data order, dropout, sampling)");
    v("generate", generate, "text sample at the end (gpt)");
  }
};

}  // namespace xtrain::engine
