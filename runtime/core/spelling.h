// "Did you mean": the candidate closest to a misspelt name by edit distance. Header-only, so that
// the compiler's diagnostics (frontend) and the executables' command lines (runtime/cli) share it
// without linking each other.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ssm {

// Optimal string alignment distance (Levenshtein plus transposition of adjacent characters), or
// any value above `limit` once the distance is known to exceed it. Time O(min(n, m) * limit)
// within the band |i - j| <= limit, so a name of hundreds of thousands of characters costs no
// more than its length.
inline int edit_distance(std::string_view a, std::string_view b, int limit) {
  const int n = static_cast<int>(a.size()), m = static_cast<int>(b.size());
  if (std::abs(n - m) > limit)
    return limit + 1;
  const int big = limit + 1;
  // Three rows: i - 2, i - 1 and i, each over j = 0..m.
  std::vector<int> before(m + 1, big), previous(m + 1, big), current(m + 1, big);
  for (int j = 0; j <= std::min(m, limit); ++j)
    previous[j] = j;
  for (int i = 1; i <= n; ++i) {
    // Rows i + 1 and i + 2 read this row within i - limit .. i + limit + 1: reset just that.
    std::fill(current.begin() + std::max(0, i - limit - 1),
              current.begin() + std::min(m, i + limit + 1) + 1, big);
    if (i <= limit)
      current[0] = i;
    int row_min = i <= limit ? i : big;
    for (int j = std::max(1, i - limit); j <= std::min(m, i + limit); ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      int d = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d = std::min(d, before[j - 2] + 1);
      current[j] = std::min(d, big);
      row_min = std::min(row_min, current[j]);
    }
    if (row_min > limit)
      return big;
    std::swap(before, previous);
    std::swap(previous, current);
  }
  return previous[m];
}

// The candidate closest to `name`, if it is close enough to be a likely typo: up to one edit per
// three characters and at most 8 (so that long names cost linear time), and fewer edits than the
// shorter name has characters.
inline std::optional<std::string> closest_name(std::string_view name,
                                               const std::vector<std::string>& candidates) {
  const int limit = std::clamp(static_cast<int>(name.size()) / 3, 1, 8);
  std::optional<std::string> best;
  int best_distance = limit + 1;
  for (const std::string& c : candidates) {
    const int d = edit_distance(name, c, std::min(limit, best_distance - 1));
    if (d < best_distance && d < static_cast<int>(std::min(name.size(), c.size()))) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

} // namespace ssm
