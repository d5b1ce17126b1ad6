// Unstructured magnitude pruning (Han et al. 2015; NNI's LevelPruner): the smallest |w| of each
// target layer are zeroed, per layer or with one threshold per global group, and a mask per
// layer keeps them zero while training: apply() after every optimizer step (the weights are the
// module's own tensors, so this also holds for an Engine's flat-buffer views). Plus the gradual
// schedule of Zhu & Gupta 2017 ("To prune, or not to prune"): a cubic sparsity ramp.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "xtrain/compress/prune/prune_config.h"

namespace xtrain::compress {

class MaskSet {
 public:
  explicit MaskSet(std::vector<PruneTarget> targets);
  // Recomputes every mask for `fraction` of each target's sparsity (1 = the final sparsity; the
  // gradual schedule passes s_t / s_f), from the current magnitudes, and applies them.
  void update(double fraction = 1.0);
  void update_to(const std::vector<double>& sparsities);  // explicit per-target sparsity
  void apply();  // weight *= mask (no autograd)
  const std::vector<PruneTarget>& targets() const { return targets_; }
  const std::vector<at::Tensor>& masks() const { return masks_; }
  double sparsity() const;  // zeros / elements over the target weights

 private:
  std::vector<PruneTarget> targets_;
  std::vector<at::Tensor> masks_;  // bool, the weights' shapes
};

// Zhu & Gupta: s_t = s_f + (s_i − s_f)(1 − (t − t0)/(t1 − t0))³, updated every `frequency` steps
// (t rounded down to t0 + k·frequency), s_i before t0 and s_f from t1 on.
double agp_sparsity(int64_t step, double initial, double final_sparsity, int64_t start_step, int64_t end_step,
                    int64_t frequency);

// Fraction of zeros in the Linear / Conv2d weights of a graph (0 when none).
double weight_sparsity(const Graph& graph);

}  // namespace xtrain::compress
