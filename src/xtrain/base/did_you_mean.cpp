#include "xtrain/base/did_you_mean.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <tuple>

namespace xtrain {

int edit_distance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  auto lower = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const int cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) && lower(a[i - 2]) == lower(b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

namespace {

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

// Characters the two names share, counted with multiplicity (case-insensitive).
int shared_characters(const std::string& a, const std::string& b) {
  std::array<int, 256> count{};
  for (char c : a) ++count[static_cast<unsigned char>(lower(c))];
  int shared = 0;
  for (char c : b) {
    if (count[static_cast<unsigned char>(lower(c))]-- > 0) ++shared;
  }
  return shared;
}

int common_prefix(const std::string& a, const std::string& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && lower(a[n]) == lower(b[n])) ++n;
  return static_cast<int>(n);
}

}  // namespace

std::optional<std::string> closest_match(const std::string& name,
                                         const std::vector<std::string>& candidates) {
  // Among the nearest candidates, the one that keeps more of the typed letters, then the one that
  // starts the same way: "bfp16" is an extra letter in "bf16", not in "fp16"; "fb16" swaps bf16's.
  std::optional<std::string> best;
  std::tuple<int, int, int> best_rank{1 << 30, 0, 0};
  for (const auto& c : candidates) {
    const std::tuple<int, int, int> rank{edit_distance(name, c), -shared_characters(name, c), -common_prefix(name, c)};
    if (rank < best_rank) {
      best_rank = rank;
      best = c;
    }
  }
  const int allowed = std::max<int>(1, static_cast<int>(name.size()) / 3);
  if (best && std::get<0>(best_rank) <= allowed) return best;
  return std::nullopt;
}

std::string did_you_mean_suffix(const std::string& name, const std::vector<std::string>& candidates) {
  auto match = closest_match(name, candidates);
  return match ? " (did you mean '" + *match + "'?)" : "";
}

}  // namespace xtrain
