// Maximum likelihood for models whose likelihood is only estimated (particle filters): stochastic
// gradient ascent by Adam (Kingma & Ba 2015) on the unconstrained space of the learned
// parameters, each gradient the score at the current point estimated by a particle smoother over
// the compiler's score terms (Fisher's identity, score.h) with a fresh seed, and the estimate the
// average of the iterates over the second half of the run (Polyak & Juditsky 1992), which
// averages the gradient noise away where the last iterate would keep it.
#pragma once

#include "core/method_registry.h"
#include "learning/optimize.h"

namespace ssm {

// The fewest steps: the average and the verdict need a few in the second half.
inline constexpr int64_t kAdamMinSteps = 4;

struct AdamOptions {
  double learning_rate = 0.05; // on the unconstrained scale
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
};

// From the parameters in run.fixed (then options.inits - 1 random starts around them, as
// optimize's), options.max_iterations Adam steps along the score that `smoother` (a particle
// smoother applicable to the score model) estimates. The path has one evaluation per step: the
// filter's log-likelihood estimate and the norm of the estimated gradient at the iterate. The
// verdict: converged when, over the averaged half, the mean gradient of every coordinate is
// within 3 standard errors of 0 (the iterates hover around a stationary point rather than
// drift). With options.map the log prior density and its gradient are added. Throws ssm::Error
// when no start gives a finite estimate.
Optimum maximize_stochastic(const Method& smoother, const MethodRun& run,
                            const OptimizeOptions& options, const AdamOptions& adam);

} // namespace ssm
