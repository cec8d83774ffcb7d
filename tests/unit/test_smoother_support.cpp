// The smoothers' alias table (runtime/src/smoothers.h): the probability it gives each index,
// measured exactly by sweeping u over a fine grid, equals the normalised weight; zero-weight
// indices are never drawn.
#include "../../runtime/src/smoothers.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>
#include <vector>

TEST_CASE("alias table draws each index with probability proportional to its weight",
          "[runtime][smooth]") {
  const std::vector<std::vector<double>> cases = {
      {1},
      {1, 1, 1, 1},
      {0, 3, 0, 1, 1e-12, 5},
      {1e6, 1, 1, 1, 1, 1, 1},
      {0.1, 0.2, 0.3, 0.4, 0, 0, 0.5, 2.5, 0.01, 7},
  };
  for (const std::vector<double>& w : cases) {
    ssm::AliasTable table;
    const auto n = static_cast<int64_t>(w.size());
    table.build(w.data(), n);
    const double total = std::accumulate(w.begin(), w.end(), 0.0);
    // Each column [k/n, (k+1)/n) splits at one point between two indices, so a grid of G cells
    // per column measures an index's probability to within one cell per column it appears in.
    const int64_t G = 1 << 16, cells = G * n;
    std::vector<double> freq(n, 0.0);
    for (int64_t m = 0; m < cells; ++m)
      freq[table.draw((static_cast<double>(m) + 0.5) / static_cast<double>(cells))] += 1.0;
    for (int64_t i = 0; i < n; ++i) {
      INFO("n = " << n << ", index " << i);
      if (w[i] == 0)
        CHECK(freq[i] == 0);
      CHECK(std::abs(freq[i] / static_cast<double>(cells) - w[i] / total) <=
            static_cast<double>(n + 1) / static_cast<double>(cells));
    }
  }
}
