#include "xtrain/base/did_you_mean.h"

#include <algorithm>
#include <cctype>

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

std::optional<std::string> closest_match(const std::string& name,
                                         const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  int best_distance = 1 << 30;
  for (const auto& c : candidates) {
    const int dist = edit_distance(name, c);
    if (dist < best_distance) {
      best_distance = dist;
      best = c;
    }
  }
  const int allowed = std::max<int>(1, static_cast<int>(name.size()) / 3);
  if (best && best_distance <= allowed) return best;
  return std::nullopt;
}

std::string did_you_mean_suffix(const std::string& name, const std::vector<std::string>& candidates) {
  auto match = closest_match(name, candidates);
  return match ? " (did you mean '" + *match + "'?)" : "";
}

}  // namespace xtrain
