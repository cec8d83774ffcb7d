// What the variational smoothing tests (test_vsmooth*.cpp) share: their 2-D linear-Gaussian model,
// whose guide family holds its exact smoothing law (one source, so one compiled executable serves
// them all), and the check of the online recursion's `cross` functional against RTS's.
#pragma once

#include "support.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <vector>

namespace e2e {

inline constexpr const char* kVsLg2Source = R"(model vs_lg2 {
  param A : matrix[2, 2] = [[0.8, 0.2], [-0.3, 0.7]];
  state x : vector[2];
  obs y : vector[2];
  x[0] ~ normal(0, 1);
  x[t] ~ normal(A * x[t-1], 0.5);
  y[t] ~ normal(x[t], 0.7);
  functional level = sum_t x[t];
  functional cross = sum_t (t == 0 ? 0 : dot(x[t-1], x[t]));
}
)";

// `cross` by an online pass without updates (--epochs 0) at the model's exact guide, N = 64, over
// seeds 1 to `runs`: the recursion's self-normalised backward weights over draws from the filter
// are consistent but biased by O(1/N) (about 1% of `cross` here), so the mean is compared with
// RTS's value at 4 standard errors of the runs plus 2% of the value.
inline void check_online_cross(const std::string& exe, const std::string& data, double exact,
                               int runs) {
  std::vector<double> cross;
  for (int seed = 1; seed <= runs; ++seed)
    cross.push_back(run_json({exe, "smooth", "--data", data, "--method", "variational", "--online",
                              "--epochs", "0", "--samples", "64", "--seed", std::to_string(seed),
                              "--json"})["functionals"]["cross"]
                        .get<double>());
  const double mean = sample_mean(cross);
  const double se = std::sqrt(sample_variance(cross) / static_cast<double>(runs));
  INFO("online " << mean << " +- " << se << ", RTS " << exact);
  CHECK(std::abs(mean - exact) <= 4 * se + 0.02 * std::abs(exact));
}

} // namespace e2e
