// Monte Carlo EM for models whose smoothing law is only sampled (particle models; Wei & Tanner
// 1990, and for state-space models Olsson, Douc, Cappe & Moulines 2008): each iteration's E-step
// runs a particle filter and draws M trajectories backward (FFBSi), whose pairs (x_{t-1}, x_t)
// are the weighted points of em_steps.h, so the M-step is exact EM's: closed form for the
// conjugate pieces the compiler recognised, L-BFGS on the rest. With a fixed Monte Carlo size
// the iterates do not settle but hover around EM's fixed point, with a spread of order
// 1/sqrt(M): the estimate is their average over the second half of the iterations (Polyak &
// Juditsky 1992, as stochastic_gradient.h), whose error then shrinks with the number of
// iterations averaged; what remains is a bias of order 1/N and 1/M from the particle smoother
// and from the M-step's curvature.
#pragma once

#include "core/method_registry.h"
#include "learning/optimize.h"
#include "smoothing/smooth.h"

#include <cstdint>

namespace ssm {

// The fewest iterations: the average and the verdict need ten in the second half.
inline constexpr int64_t kMonteCarloEmMinIterations = 20;
// The key mixed into an iteration's seed for the M-step's estimates of an SDE's density.
inline constexpr uint64_t kEmSdeKey = 0xE35D000000000000ull;

// Refuses options Monte Carlo EM cannot run with (fewer than kMonteCarloEmMinIterations
// iterations, --sde-estimates outside [1, kMaxSdeEstimates]): em's check before any work, and
// run_monte_carlo_em itself. Throws ssm::Error.
void check_monte_carlo_em_options(const OptimizeOptions& options);

// From the parameters in run.fixed (then options.inits - 1 random starts around them, as
// optimize's), options.max_iterations iterations, each E-step from `smoothing` (its filter,
// particles and trajectories; a fresh seed per iteration and series). The path has one row per
// iteration: the filter's log-likelihood estimate at the E-step's parameters and the norm of the
// estimated score there (NaN without a score); the estimate is the average, on the
// unconstrained scale, of the parameters of the rows of the second half, and gradient_norm the
// norm of their mean score. A closed-form update with a count that no trajectory reached (a
// simplex component of 0) is mixed with the previous value by 1/(M + 1) (em_steps.h), and the
// message counts such updates. The verdict, as stochastic_gradient.h's: converged
// when, over the averaged half, the mean of the estimated scores (each E-step's gradient of Q at
// its own parameters, Fisher's identity) is within 3 standard errors of 0 in every unconstrained
// coordinate; not judged without a score. EM's iterates approach the fixed point at EM's own
// rate, slow where the missing information is large (about 0.97 per iteration on the Nile local
// level model), so the first half must be long enough to reach it: a verdict of "still climbing"
// says it was not. The log-likelihood at the estimate is the mean of a few filter runs there,
// with its standard error.
// Throws ssm::Error as run_em, or when no start completes its iterations.
Optimum run_monte_carlo_em(const MethodRun& run, const OptimizeOptions& options,
                           const SmoothOptions& smoothing);

} // namespace ssm
