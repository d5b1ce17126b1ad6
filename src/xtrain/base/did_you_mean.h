// "Did you mean" suggestions for unknown names (config keys, CLI values, kernel names).
// Damerau-Levenshtein (optimal string alignment) distance, case-insensitive, as a typo measure.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace xtrain {

// Edit distance counting insertions, deletions, substitutions and adjacent transpositions.
int edit_distance(const std::string& a, const std::string& b);

// The candidate closest to `name` if it is plausibly a typo of it (distance <= max(1, len/3)),
// else nullopt. Ties go to the candidate sharing more of name's characters, then the longer common
// prefix, then the earlier candidate.
std::optional<std::string> closest_match(const std::string& name,
                                         const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" or "" — ready to append to an error message.
std::string did_you_mean_suffix(const std::string& name, const std::vector<std::string>& candidates);

}  // namespace xtrain
