// Expectation-maximisation for models with an exact smoother: finite-state models (hidden Markov
// models, and plate models with discrete latents such as mixtures, whose items are steps:
// passes/plate_items.cpp), by forward-backward, and linear-Gaussian models, by the Kalman
// smoother. The E-step gives each step's smoothing law as weighted points
// (exact/weighted_points.h): the probabilities of the pairs of states, or a cubature rule that is
// exact for the linear-Gaussian log-density, quadratic in the state. The M-step maximises the
// expected complete-data log-likelihood Q(theta) = E[log p(x, y; theta)] under them: in closed
// form for the parameters of the conjugate pieces the compiler recognised (closed_form.h), and by
// L-BFGS on the unconstrained space for the others, with the gradient from the compiler's score
// terms, so every model with a derived score gets EM, not only those with closed-form updates.
// Each iteration raises the log-likelihood (or the log posterior with --map); its path, one row
// per iteration, is the optimize path. Models without an exact smoother get Monte Carlo EM, with
// the same M-step (monte_carlo_em.h); what both share is em_steps.h.
#pragma once

#include "core/method_registry.h"
#include "learning/optimize.h"

namespace ssm {

// Why EM's E-step cannot be exact, or nullopt: the model is neither finite-state nor
// linear-Gaussian.
Refusal exact_em_refusal(const ModelInfo& info);

// Why EM cannot run on the model, or nullopt: no exact smoother, and no transition density for
// the particle E-step's backward draws (monte_carlo_em.h), nor, for an SDE, an estimator of its
// density with the gradient the M-step climbs (sde_q_term.h). A model without a score is refused
// later, by the run, if some learned parameter has no closed-form update.
Refusal em_refusal(const ssm_model& model, const ModelInfo& info);

// EM from the parameters in run.fixed (then options.inits - 1 random starts around them, as
// optimize's), until an iteration raises the objective by less than options.tolerance times
// max(1, |objective|) or after options.max_iterations iterations. The path has one evaluation per
// iteration: the log-likelihood at its parameters and the norm of the exact score there (the
// gradient of Q at the parameters it was built at, by Fisher's identity; NaN without a score).
// Optimum::m_steps says how each learned parameter was updated. Throws ssm::Error when
// exact_em_refusal refuses the model.
Optimum run_em(const MethodRun& run, const OptimizeOptions& options);

} // namespace ssm
