// Samplers propose the next trial's parameters as a point of the space's encoded unit cube.
// RandomSampler draws uniformly (log-uniformly where declared). GpSampler is GP-EI Bayesian
// optimisation: a few random points first, then a Matérn-5/2 GP on standardised values and the
// point maximising log expected improvement (random candidates + L-BFGS refinement). Points still
// being evaluated enter as "kriging believer" observations (the GP's own mean), so parallel
// trials get different proposals. Samplers hold no state between calls: a proposal depends only
// on (observations, pending points, rng), so the same seed gives the same proposals after resume.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "xtrain/tune/gp_fit.h"
#include "xtrain/tune/rng.h"
#include "xtrain/tune/space.h"

namespace xtrain::tune {

struct Observation {
  std::vector<double> x;  // encoded point
  double value = 0.0;     // to minimise; NaN when the trial failed (counted as the worst value)
};

class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual std::string name() const = 0;
  virtual std::vector<double> propose(const std::vector<Observation>& done,
                                      const std::vector<std::vector<double>>& pending, Rng& rng) = 0;
};

class RandomSampler : public Sampler {
 public:
  explicit RandomSampler(SearchSpace space) : space_(std::move(space)) {}
  std::string name() const override { return "random"; }
  std::vector<double> propose(const std::vector<Observation>& done, const std::vector<std::vector<double>>& pending,
                              Rng& rng) override;

 private:
  SearchSpace space_;
};

struct GpSamplerOptions {
  int64_t initial_random = 0;      // random proposals before the GP takes over (0: max(5, dims + 1))
  int64_t candidates = 2000;       // uniform random candidates for the acquisition
  int64_t local_candidates = 500;  // perturbations of the best observed points
  int64_t local_starts = 5;        // best candidates refined by L-BFGS
  GpFitOptions fit;
};

class GpSampler : public Sampler {
 public:
  GpSampler(SearchSpace space, GpSamplerOptions options = {});
  std::string name() const override { return "gp"; }
  std::vector<double> propose(const std::vector<Observation>& done, const std::vector<std::vector<double>>& pending,
                              Rng& rng) override;
  // θ of the last GP fitted (empty while proposals are random), for diagnostics.
  const std::vector<double>& last_theta() const { return last_theta_; }

 private:
  SearchSpace space_;
  GpSamplerOptions options_;
  std::vector<double> last_theta_;
};

// "gp" or "random"; UsageError naming the valid names otherwise.
// `initial_random`: GpSamplerOptions::initial_random (0: its default).
std::unique_ptr<Sampler> make_sampler(const std::string& name, const SearchSpace& space, int64_t initial_random = 0);

}  // namespace xtrain::tune
