// Maximum likelihood by L-BFGS (LBFGSpp, Debian's liblbfgspp-dev) on the unconstrained space of
// the learned parameters (parameter_space.h), for models whose likelihood and score are exact:
// the score comes from an exact smoother (rts, forward-backward) over the compiler's score terms
// (score.h), the log-likelihood with it.
#pragma once

#include "core/method_registry.h"
#include "learning/parameter_space.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ssm {

struct OptimizeOptions {
  std::vector<std::string> fixed; // --fix: parameters kept at their values
  int64_t inits = 1;              // starts: the given values, then random ones around them
  int64_t max_iterations = 200;
  double tolerance = 1e-8; // on the gradient norm, relative to max(1, |x|) (LBFGSpp's epsilon_rel)
  bool map = false; // the posterior mode: add the log prior density (without the Jacobian, as Stan)
  // em with an SDE transition: the estimates of each pair's density averaged in Q (sde_q_term.h).
  int64_t sde_estimates = 32;
};

// L-BFGS from the parameters in run.fixed (its first n_theta values) with `smoother`, an exact
// smoother applicable to the score model (score_model in score.h). Throws ssm::Error when a start
// fails (a parameter without a value, a value outside its support) or no start gives a finite
// log-likelihood.
// With options.map, the objective is the log-likelihood plus the log prior density of the
// parameters that have a prior (the model's prior_logpdf kernel).
Optimum maximize_likelihood(const Method& smoother, const MethodRun& run,
                            const OptimizeOptions& options);

// What a function to maximise gives at the parameters `fixed` (then the data values): its value,
// its gradient per theta component, and the log-likelihood reported with it. Throws ssm::Error
// where it is not finite (the line search then steps back).
struct ObjectiveValue {
  double value = 0;
  std::vector<double> gradient;
  double log_likelihood = 0;
};
using ObjectiveFunction = std::function<ObjectiveValue(const std::vector<double>& fixed)>;

// The learned parameters of an optimisation (every one with a default or a prior, minus
// options.fixed). Throws ssm::Error when there is none, or with options.map when the compiler
// derived no prior density.
ParameterSpace optimized_parameters(const MethodRun& run, const OptimizeOptions& options);

// The unconstrained point of start k (--inits): u0 for k = 0, else u0 plus independent
// uniform(-2, 2) draws from `seed`, as Stan draws its inits.
std::vector<double> start_point(std::vector<double> u0, uint64_t seed, int64_t k);

// The seed of iteration `it` of start k of a stochastic method that runs `iterations` per start:
// hashed, so that the series' seeds derived from it (core/series.h adds multiples of a constant)
// never meet another iteration's.
uint64_t iteration_seed(uint64_t seed, int64_t k, int64_t it, int64_t iterations);

// L-BFGS of `objective` (plus the log prior with options.map) over the learned parameters'
// unconstrained space, from run.fixed and options.inits - 1 random starts around it: what
// maximize_likelihood does with the log-likelihood, and EM's M-step with its expected log joint.
Optimum maximize(const ObjectiveFunction& objective, const MethodRun& run,
                 const OptimizeOptions& options);

} // namespace ssm
