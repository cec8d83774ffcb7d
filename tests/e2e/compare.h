// Statistical comparison of a generated executable's particle filter with the exact Kalman filter:
// R independent filter runs (seeds seed0 .. seed0+R-1), their log-likelihoods and filtering
// moments checked against the reference within Monte Carlo error estimated from the runs.
#pragma once

#include "kalman.h"

#include <cstdint>
#include <string>
#include <vector>

namespace e2e {

struct PfVsKalman {
  std::string label;                   // names scratch files and the printed summary
  std::string exe;                     // the compiled model
  std::vector<std::string> args;       // --data, --params, ... (not --particles/--seed/--out)
  std::vector<std::string> state_cols; // CSV names of the state components, Kalman order
  int64_t particles = 0;
  int runs = 0;
  uint64_t seed0 = 1;
  std::vector<bool> missing; // per t: y_t entirely missing (the increment must be 0)
};

void compare_with_kalman(const PfVsKalman& c, const KalmanResult& exact);

} // namespace e2e
