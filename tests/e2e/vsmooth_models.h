// The 2-D linear-Gaussian model of the variational smoothing tests (test_vsmooth*.cpp), whose guide
// family holds its exact smoothing law: one source, so one compiled executable serves them all.
#pragma once

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

} // namespace e2e
