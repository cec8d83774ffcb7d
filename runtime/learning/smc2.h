// SMC^2 (Chopin, Jacob & Papaspiliopoulos 2013): a sequential Monte Carlo sampler over the
// parameters in which each parameter particle carries its own particle filter over the states.
// The observations are assimilated one at a time, each parameter particle weighted by its
// filter's estimate of p(y_t | y_{0:t-1}, theta); when the weights' ESS falls below half, the
// particles are resampled and moved by particle marginal Metropolis-Hastings kernels (a random
// walk on the unconstrained scale scaled to the particles' covariance, each proposal running a
// fresh filter up to t), and when the moves' acceptance rate collapses the filters' particle count
// doubles (the exchange step). The normalising constants of the weights give the log evidence
// log p(y); independent runs (the chains) give its standard error and the draws' R-hat.
#pragma once

#include "core/method_registry.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ssm {

struct Smc2Options {
  std::vector<std::string> fixed; // --fix
  int64_t chains = 4;             // independent runs
  int64_t theta_particles = 1000; // N_theta, also the draws per run
  int64_t particles = 100;        // N_x at the start
  int64_t moves = 3;              // PMMH moves per resample-move step
  std::string filter = "auto";    // a registered particle filter, or auto's choice
};

// The runs' final particles, resampled to equal weights, as the chains of `sample`; each run is
// reproducible from (seed, chain) whatever the thread count. Throws ssm::Error for a parameter
// without a prior, a filter that is not a particle filter, or a run whose weights all vanish.
Posterior sample_smc2(const MethodRun& run, const Smc2Options& options);

} // namespace ssm
