// DeepSpeed's batch triple: train_batch_size = micro_batch × grad_accum × dp_world_size, with the
// missing values derived by integer division in DeepSpeed's order (reference/deepspeed.md §a.1).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace xtrain::config {

struct BatchTriple {
  int64_t train_batch_size = 0;
  int64_t micro_batch = 0;
  int64_t grad_accum = 0;
  std::string derived;  // which values were derived, for the log ("gradient_accumulation_steps=2 (derived)")
};

// UsageError that prints the equation with the numbers when the triple is inconsistent.
BatchTriple resolve_batch(std::optional<int64_t> train_batch_size, std::optional<int64_t> micro_batch,
                          std::optional<int64_t> grad_accum, int64_t dp_world_size);

}  // namespace xtrain::config
