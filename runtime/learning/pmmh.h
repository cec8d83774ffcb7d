// Particle marginal Metropolis-Hastings (Andrieu, Doucet & Holenstein 2010): a random walk on the
// unconstrained space of the learned parameters whose acceptance uses a filter's log-likelihood
// estimate (exact for a Kalman or forward filter, unbiased in the likelihood for a particle
// filter, which keeps the chain exact), the compiler's prior density and the transforms'
// log-Jacobians. The walk's covariance adapts during warmup (2.38^2 / d times the draws'
// covariance, Haario et al. 2001) and is frozen after; chains run in parallel, each reproducible
// from (seed, chain) whatever the thread count.
#pragma once

#include "core/method_registry.h"
#include "learning/parameter_space.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ssm {

struct SampleOptions {
  std::vector<std::string> fixed; // --fix
  int64_t chains = 4, warmup = 1000, iterations = 1000;
  int64_t particles = 0;       // 0: chosen by the pilot so that sd(log-likelihood) ~ 1.2
  std::string filter = "auto"; // a registered filter, or auto's choice
};

// The log-likelihood estimate's standard deviation the pilot aims at (Doucet et al. 2015).
inline constexpr double kTargetLoglikSd = 1.2;

Posterior sample_pmmh(const MethodRun& run, const SampleOptions& options);

// The sampled parameters (every one with a value, minus `fixed`), each of which must have a
// prior, with the compiler's prior density, unless run.prior replaces them: throws ssm::Error,
// prefixed by `who`, naming what is missing.
ParameterSpace sampled_parameters(const MethodRun& run, const std::vector<std::string>& fixed,
                                  const std::string& who = "sample");

} // namespace ssm
