// Maximising log expected improvement over the valid points of a search space: score uniform
// random candidates and perturbations of the best observed points, refine the best few with
// L-BFGS on the continuous coordinates (one-hot blocks stay fixed), snap to valid values (ints
// rounded) and keep the best point that is not already observed or pending.
#pragma once
#include <cstdint>
#include <vector>

#include "xtrain/tune/gp.h"
#include "xtrain/tune/rng.h"
#include "xtrain/tune/space.h"

namespace xtrain::tune {

struct AcquisitionOptions {
  int64_t candidates = 2000;
  int64_t local_candidates = 500;
  int64_t local_starts = 5;
  int64_t refine_iterations = 50;
};

// log EI of the GP at x for minimisation with incumbent `best`; grad (dims entries) when non-null.
double gp_log_ei(const GaussianProcess& gp, const double* x, double best, double* grad = nullptr);

std::vector<double> maximize_log_ei(const GaussianProcess& gp, double best, const SearchSpace& space,
                                    const std::vector<std::vector<double>>& anchors,
                                    const std::vector<std::vector<double>>& avoid, const AcquisitionOptions& options,
                                    Rng& rng);

}  // namespace xtrain::tune
