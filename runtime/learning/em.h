// Expectation-maximisation for finite-state models (hidden Markov models, and plate models with
// discrete latents such as mixtures, whose items are steps: passes/plate_items.cpp). The E-step is
// exact: forward-backward on the enumerated state space gives the smoothing probabilities of every
// state and pair of states. The M-step maximises the expected complete-data log-likelihood
// Q(theta) = E[log p(x, y; theta)] under them by L-BFGS on the unconstrained space, with the
// gradient from the compiler's score terms, so every model with a derived score gets EM, not only
// those with closed-form updates. Each iteration raises the log-likelihood (or the log posterior
// with --map); its path, one row per iteration, is the optimize path.
#pragma once

#include "core/method_registry.h"
#include "learning/optimize.h"

namespace ssm {

// The M-step's own L-BFGS: tight, so that an EM iteration is the exact update to rounding.
inline constexpr double kEmStepTolerance = 1e-10;
inline constexpr int64_t kEmStepIterations = 100;

// EM from the parameters in run.fixed (then options.inits - 1 random starts around them, as
// optimize's), until an iteration raises the objective by less than options.tolerance times
// max(1, |objective|) or after options.max_iterations iterations. The path has one evaluation per
// iteration: the log-likelihood at its parameters and the norm of the exact score there (the
// gradient of Q at the parameters it was built at, by Fisher's identity). Throws ssm::Error when
// the model is not finite-state or has no score terms.
Optimum run_em(const MethodRun& run, const OptimizeOptions& options);

} // namespace ssm
