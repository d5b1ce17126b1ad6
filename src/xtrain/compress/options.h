// compress.json: what `xtrain compress` does to a trained run, in order distillation → pruning →
// quantisation (each optional). Pruning takes an NNI-style `config_list`; quantisation selects
// layers the same way. Unknown keys: a near miss is an error with a suggestion, anything else a
// warning (the config policy of docs/architecture.md). Plain structs (config/ may include it from
// below: no other header of the area); the reader is options.cpp.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace xtrain::compress {

// quantisation: which layers (NNI-style selection) and how (quant/quant_plan.h runs it).
struct QuantOptions {
  std::string mode = "static";  // static | dynamic (Linear only, ranges per input) | qat
  std::string observer = "minmax";  // minmax | percentile | entropy (static, qat's starting ranges)
  double percentile = 99.99;
  std::vector<std::string> op_types = {"Linear", "Conv2d", "Embedding"};  // NNI-style selection
  std::vector<std::string> op_names;          // empty: every layer of op_types
  std::vector<std::string> exclude_op_names;  // layers kept in float
};

// pruning: one entry of the NNI-style config_list (prune/prune_config.h resolves it to layers).
struct PruneRule {
  double sparsity = -1.0;        // per layer, in [0, 1)
  double total_sparsity = -1.0;  // global over the entry's layers
  std::vector<std::string> op_types;
  std::vector<std::string> op_names;
  bool exclude = false;
};

// distillation: the loss's mix (distill/distillation.h computes it).
struct DistillOptions {
  double temperature = 4.0;
  double alpha = 0.9;  // weight of the soft (teacher) term
};

struct FineTuneOptions {
  int64_t steps = 0;  // optimizer steps with the run's optimizer and batch size (0: none)
  double lr = 0.0;    // constant learning rate (0: a tenth of the run's)
};

struct QuantizationSection {
  bool enabled = false;
  QuantOptions quant;
  int64_t calibration_batches = 16;  // --calibration-batches overrides
  FineTuneOptions qat;               // mode "qat": fake-quantised fine-tuning before converting
};

struct PruningSection {
  bool enabled = false;
  std::string method = "level";  // level (unstructured magnitude) | l1 | l2 (structured channels)
  std::vector<PruneRule> config_list;
  // Gradual (Zhu & Gupta): sparsity ramps from initial_sparsity over [start_step, end_step) of the
  // fine-tuning, masks recomputed every `frequency` steps; off: prune at once, then fine-tune.
  bool gradual = false;
  double initial_sparsity = 0.0;
  int64_t start_step = 0, end_step = 0, frequency = 10;
  FineTuneOptions finetune;
};

struct DistillationSection {
  bool enabled = false;
  std::vector<std::string> student;  // overrides of the run's xtrain.model, "key=json" (e.g. hidden=[64])
  DistillOptions loss;
  FineTuneOptions train;             // the student's training: steps (required), lr (0: the run's)
  std::string teacher_run;           // "" : the --run directory
};

struct EvaluationSection {
  int64_t batches = 0;          // validation micro-batches (0: all)
  int64_t latency_batch = 0;    // samples per timed forward (0: the run's micro-batch)
  int64_t latency_repeats = 10; // median over this many
};

struct CompressOptions {
  QuantizationSection quantization;
  PruningSection pruning;
  DistillationSection distillation;
  EvaluationSection evaluation;
  std::string output;  // "" : <run>/compressed
};

// Parses compress.json text; `warnings` receives ignored keys. UsageError names the key path.
CompressOptions parse_compress_options(const std::string& text, const std::string& origin,
                                       std::vector<std::string>* warnings);

}  // namespace xtrain::compress
