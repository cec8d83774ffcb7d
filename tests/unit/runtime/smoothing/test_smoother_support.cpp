// The smoothers' alias table (runtime/smoothing/smoothers.h): the probability it gives each index,
// measured exactly by sweeping u over a fine grid, equals the normalised weight; zero-weight
// indices are never drawn. exp_run (runtime/kernel/vectorised.h) against std::exp; the check of
// densities against their bound.
#include "core/error.h"
#include "kernel/vectorised.h"
#include "smoothing/smoothers.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>
#include <string>
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

TEST_CASE("exp_run is exp within a few ulp, with exp's special values", "[runtime][smooth]") {
  std::vector<double> x;
  for (int i = -7450; i <= 7090; ++i)
    x.push_back(i * 0.1 + 0.0123);
  x.insert(x.end(), {0.0, -0.0, -INFINITY, INFINITY, NAN, -1e-300, 1e-300});
  std::vector<double> out(x.size());
  ssm::exp_run(x.data(), out.data(), static_cast<int64_t>(x.size()));
  double worst_ulps = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double e = std::exp(x[i]);
    INFO("x = " << x[i] << ", exp_run " << out[i] << ", std::exp " << e);
    if (std::isnan(e)) {
      CHECK(std::isnan(out[i]));
    } else if (e == 0 || std::isinf(e)) {
      CHECK(out[i] == e);
    } else if (std::isnormal(e)) {
      const double ulp = std::nextafter(e, INFINITY) - e;
      worst_ulps = std::max(worst_ulps, std::abs(out[i] - e) / ulp);
    }
  }
  CHECK(worst_ulps <= 4); // glibc's vector exp: at most 4 ulp (its manual)
}

TEST_CASE("a density above the derived bound stops rejection sampling, naming the step",
          "[runtime][smooth]") {
  CHECK_NOTHROW(ssm::check_within_bound(-1.0, -1.0, 3));         // at the mode: the bound itself
  CHECK_NOTHROW(ssm::check_within_bound(-1.0 + 1e-12, -1.0, 3)); // rounding
  CHECK_NOTHROW(ssm::check_within_bound(-INFINITY, -1.0, 3));    // zero density
  CHECK_NOTHROW(ssm::check_within_bound(NAN, -1.0, 3));          // NaN rejects elsewhere
  try {
    ssm::check_within_bound(-0.5, -1.0, 7);
    FAIL("no error for a density above its bound");
  } catch (const ssm::Error& e) {
    const std::string what = e.what();
    CHECK(what.find("smooth: at t=7 the transition log-density (-0.5) exceeds") == 0);
    CHECK(what.find("--backward exact") != std::string::npos);
  }
}
