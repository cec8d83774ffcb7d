// Recursive maximum likelihood (Le Gland & Mevel 1997; Poyiadjis, Doucet & Singh 2011; Olsson &
// Westerborn 2017; Martin 2022, ch. 7): one pass over the observations, each used once. After
// observation k the parameters move by theta_k = theta_{k-1} + gamma_k zeta_k, where zeta_k
// estimates the gradient of log p(y_k | y_{0:k-1}) (the tangent filter, eq. 7.6-7.8): the
// difference between the online smoother's estimates of the score after and before y_k, its
// statistics carrying the compiler's score terms, each term evaluated at the parameters of its
// step. The move is made on the unconstrained scale, so it never leaves a support; the estimate
// is the iterates' Polyak average. Memory is O(N) whatever the number of observations.
#pragma once

#include "core/method_registry.h"
#include "smoothing/smooth.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ssm {

struct RmlOptions {
  std::vector<std::string> fixed; // --fix
  // gamma_k = step_size for k <= step_hold, then step_size (k - step_hold)^(-step_decay).
  double step_size = 0.05;
  int64_t step_hold = 100;
  double step_decay = 0.6;
  // Polyak average of theta_k for k >= this; 0: the second half of the observations.
  int64_t average_from = 0;
  // The largest move of one unconstrained coordinate in one step: a guard against the early
  // steps' large increments (counted in RecursiveFit::clipped); 0: none.
  double clip = 1.0;
};

// Runs the online smoother `smoothing` (online, paris or bis; its marginals are not kept) on
// run.data's series one after another as a single stream, from run.fixed's parameters. An
// observation that is entirely missing carries no information on theta (its predictive
// log-likelihood is 0): no step is taken and it is not counted. `trace` (may be empty) receives
// the parameters after every step. Throws ssm::Error naming the observation and the parameters
// reached when a step fails (non-finite terms, the filter's weights collapsing).
RecursiveFit recursive_maximum_likelihood(const MethodRun& run, const SmoothOptions& smoothing,
                                          const RmlOptions& options, const ParameterTrace& trace);

// gamma_k of the options (k >= 1).
double rml_step_size(const RmlOptions& options, int64_t k);

// Throws ssm::Error naming the option when the step sizes could not converge or have no meaning:
// a step size that is not positive, a decay outside (0.5, 1], a negative clip, hold or start.
void check_rml_options(const RmlOptions& options);

} // namespace ssm
