// The Pareto front of a study with two objectives: the primary metric (val loss, minimised, or
// maximised with --mode max) and --objective2 (parameters or forward latency in ms, minimised).
// A trial is on the front when no other complete trial is at least as good in both and better in
// one (Deb's dominance; exact ties are all kept). The front is computed over every complete trial,
// whichever sampler proposed them; the sampler itself optimises the primary metric only.
// Writes pareto.json (the front, best primary first) and pareto.png (every trial as a cross, the
// front as a staircase).
#pragma once
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "xtrain/tune/space.h"
#include "xtrain/tune/trial.h"

namespace xtrain::tune {

// Indices of the non-dominated points, both coordinates minimised; ordered by the second
// coordinate, ascending (then the first). Points with a non-finite coordinate are never on it.
std::vector<size_t> pareto_front(const std::vector<std::pair<double, double>>& points);

// Indices into `trials` of the complete trials (finite value and objective2) on the front, by
// objective2 ascending. `sign`: +1 when the metric is minimised, -1 when maximised.
std::vector<size_t> pareto_trials(const std::vector<Trial>& trials, double sign);

// The front as a table: trial, metric, objective2, steps, time and the trial's parameters.
std::string pareto_table(const std::vector<Trial>& trials, const std::vector<size_t>& front, const SearchSpace& space,
                         const std::string& metric, const std::string& objective2);

// STUDY/pareto.json and STUDY/pareto.png; returns the paths written (the PNG is skipped with a
// warning when it cannot be drawn).
std::vector<std::string> write_pareto_outputs(const std::string& study_dir, const SearchSpace& space,
                                              const std::vector<Trial>& trials, double sign, const std::string& metric,
                                              const std::string& objective2);

}  // namespace xtrain::tune
