// Expectation-maximisation with an exact E-step: see em.h.
#include "learning/em.h"
#include "core/error.h"
#include "exact/finite_state.h"
#include "exact/kalman.h"
#include "learning/em_steps.h"
#include "learning/parameter_space.h"
#include "sde/density_estimator.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

namespace ssm {

namespace {

// The exact E-step of every series at theta: forward-backward's pair probabilities, or cubature
// points of the Kalman smoother's pairs.
void exact_e_step(const MethodRun& run, const std::vector<double>& theta, EmPoints& e) {
  e.log_likelihood = 0;
  const bool finite = enumerable(run.info);
  for (size_t k = 0; k < e.series.size(); ++k) {
    double ll = 0;
    if (finite) {
      const PairMarginals m = pair_marginals(run.model, run.info, theta, e.series[k]);
      e.points[k] = pair_points(run.info, m);
      ll = m.log_likelihood;
    } else {
      e.points[k] = rts_points(run.model, run.info, theta, e.series[k], ll);
    }
    e.log_likelihood += ll;
  }
}

// One start of EM from `theta` (parameters then data values), with the run's E-step points and
// closed-form M-step (each start overwrites their state), its iterations appended to
// record.path.
Optimum::Start run_start(const MethodRun& run, EmSetup& setup, EmPoints& e,
                         std::vector<double> theta, int64_t start, const OptimizeOptions& options,
                         Optimum& record, std::string& message, int64_t& iterations) {
  Optimum::Start out;
  double previous = -std::numeric_limits<double>::infinity();
  message = fmt::format("stopped after {} iterations", options.max_iterations);
  for (int64_t it = 0;; ++it) {
    exact_e_step(run, theta, e);
    const EmObjective at = em_objective(run, setup, e, theta, options.map);
    const double objective = at.value;
    if (!std::isfinite(objective))
      throw Error(fmt::format("optimize (em): the {} is not finite at iteration {} of start {}",
                              options.map ? "log posterior" : "log-likelihood", it, start));
    if (it == 0)
      out.initial_objective = objective;
    const std::vector<double> n_theta(theta.begin(), theta.begin() + run.info.n_theta);
    record.path.push_back({start, e.log_likelihood, at.gradient_norm(), n_theta, objective});
    out.objective = objective;
    out.log_likelihood = e.log_likelihood;
    iterations = it;
    // A generalised EM step never lowers the objective; rounding in Q's maximiser may by a hair.
    const double rise = objective - previous;
    if (it > 0 && rise < options.tolerance * std::max(1.0, std::abs(objective))) {
      out.converged = rise > -1e-6 * std::max(1.0, std::abs(objective));
      message = out.converged
                    ? fmt::format("the objective rose by less than the tolerance ({:.3g})", rise)
                    : fmt::format("an iteration lowered the objective by {:.3g} (the M-step's "
                                  "maximiser failed)",
                                  -rise);
      break;
    }
    if (it == options.max_iterations)
      break;
    previous = objective;
    e.m_step(run, setup.sm, setup.space, setup.closed, options, theta, it + 1, start);
  }
  return out;
}

} // namespace

Refusal exact_em_refusal(const ModelInfo& info) {
  if (!enumerable(info) && !info.linear_gaussian)
    return "the model is neither finite-state (forward-backward) nor linear-Gaussian (Kalman); "
           "see `info`";
  return std::nullopt;
}

Refusal em_refusal(const ssm_model& model, const ModelInfo& info) {
  if (!exact_em_refusal(info))
    return std::nullopt;
  if (!info.transition_tractable && info.sde) { // paris's or bis's draws, Q by estimates
    if (const std::string why = density_estimator_problem(model, info); !why.empty())
      return fmt::format("no estimator of the density of the SDE {} applies: {}",
                         info.sde->relation, why);
    if (const std::string why = density_gradient_problem(info); !why.empty())
      return fmt::format("the M-step climbs Q with the gradient of the SDE's log density, which "
                         "the run's estimator cannot give: {}",
                         why);
    return std::nullopt;
  }
  if (!info.transition_tractable)
    return fmt::format("EM's E-step needs an exact smoother, or a particle smoother's backward "
                       "draws, which evaluate the transition density; the model is neither "
                       "finite-state nor linear-Gaussian, and its transition is sample-only ({})",
                       info.sample_only_reason);
  if (!model.transition_logpdf)
    return "the model table has no transition_logpdf kernel";
  return std::nullopt;
}

Optimum run_em(const MethodRun& run, const OptimizeOptions& options) {
  if (Refusal why = exact_em_refusal(run.info))
    throw Error("optimize --method em --e-step exact: " + *why);
  check_observations_read(run.info, *run.data);
  EmPoints e(*run.data);
  EmSetup setup(run, options, e);
  const ParameterSpace& space = setup.space;
  const int64_t n = space.n_theta();
  const std::vector<double>& given = *run.fixed;
  const std::vector<double> u0 = space.unconstrain({given.data(), static_cast<size_t>(n)});
  Optimum best;
  best.map = options.map;
  best.e_step = "exact";
  best.objective = -std::numeric_limits<double>::infinity();
  for (const LearnedParam& p : space.learned())
    best.learned.push_back(run.info.params[p.index].name);
  setup.describe(best);
  for (int64_t k = 0; k < std::max<int64_t>(options.inits, 1); ++k) {
    std::vector<double> theta = given;
    space.constrain(start_point(u0, run.seed, k), {theta.data(), static_cast<size_t>(n)});
    std::string message;
    int64_t iterations = 0;
    Optimum::Start s;
    try {
      s = run_start(run, setup, e, theta, k, options, best, message, iterations);
    } catch (const Error& error) {
      if (options.inits == 1)
        throw;
      s.initial_objective = s.objective = s.log_likelihood = -INFINITY;
      message = error.what();
    }
    best.starts.push_back(s);
    if (s.objective > best.objective) {
      best.objective = s.objective;
      best.log_likelihood = s.log_likelihood;
      best.converged = s.converged;
      best.message = message;
      best.iterations = iterations;
      const Optimum::Evaluation& last = best.path.back();
      best.theta = last.theta;
      best.gradient_norm = last.gradient_norm;
    }
  }
  if (best.theta.empty())
    throw Error("optimize (em): no start gave a finite log-likelihood (check the data and the "
                "starting values)");
  best.evaluations = static_cast<int64_t>(best.path.size());
  return best;
}

} // namespace ssm
