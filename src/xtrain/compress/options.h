// compress.json: what `xtrain compress` does to a trained run, in order distillation → pruning →
// quantisation (each optional). Pruning takes an NNI-style `config_list`; quantisation selects
// layers the same way. Unknown keys: a near miss is an error with a suggestion, anything else a
// warning (the config policy of ARCHITECTURE.md). Plain structs; the reader is options.cpp.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "xtrain/compress/distill/distillation.h"
#include "xtrain/compress/prune/prune_config.h"
#include "xtrain/compress/quant/quant_plan.h"

namespace xtrain::compress {

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
