// A smoothing law of one time step as weighted points: how EM's E-step hands what it computed to
// the M-step (learning/em.cpp), whichever exact smoother computed it: the forward-backward
// algorithm's probabilities of the pairs of states (finite_state.h), or a cubature rule over the
// Kalman smoother's Gaussian of (x_{t-1}, x_t) that is exact for what EM integrates (kalman.h).
#pragma once

#include <cstdint>
#include <vector>

namespace ssm {

struct StepPoints {
  int64_t count = 0;
  // Component c of point p at [c * count + p]: x_{t-1} (NaN at t = 0) and x_t.
  std::vector<double> prev, cur;
  std::vector<double> weight; // they sum to 1
};

} // namespace ssm
