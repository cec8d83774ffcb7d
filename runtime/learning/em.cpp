// Expectation-maximisation over the enumerated state space: see em.h.
#include "learning/em.h"
#include "core/error.h"
#include "exact/finite_state.h"
#include "learning/parameter_space.h"
#include "learning/score.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <utility>

namespace ssm {

namespace {

// The E-step's marginals of each series (core/series.h: independent series add).
struct EStep {
  std::vector<ObsData> series;
  std::vector<PairMarginals> marginals;
  double log_likelihood = 0;

  explicit EStep(const ObsData& data) {
    for (int64_t k = 0; k < data.series.count(); ++k)
      series.push_back(data.one_series(k));
    marginals.resize(series.size());
  }
  void run(const MethodRun& run, const std::vector<double>& theta) {
    log_likelihood = 0;
    for (size_t k = 0; k < series.size(); ++k) {
      marginals[k] = pair_marginals(run.model, run.info, theta, series[k]);
      log_likelihood += marginals[k].log_likelihood;
    }
  }
  // Q at `theta` under the marginals, and its gradient per theta component.
  double q(const ScoreModel& sm, const std::vector<double>& theta,
           std::vector<double>& gradient) const {
    double total = 0;
    std::vector<double> g;
    gradient.assign(sm.info.n_functional, 0.0);
    for (size_t k = 0; k < series.size(); ++k) {
      total += expected_log_joint(sm.model, sm.info, theta, series[k], marginals[k], &g);
      for (size_t i = 0; i < g.size(); ++i)
        gradient[i] += g[i];
    }
    return total;
  }
};

// The objective at theta (parameters then data values): the log-likelihood from the marginals,
// plus the log prior with --map; and the norm of its gradient on the unconstrained scale, from
// Q's gradient there (Fisher's identity: at the parameters of the E-step it is the score).
std::pair<double, double> objective_at(const MethodRun& run, const ScoreModel& sm,
                                       const ParameterSpace& space, const EStep& m,
                                       const std::vector<double>& theta, bool map) {
  const int64_t n = space.n_theta();
  std::vector<double> gradient;
  m.q(sm, theta, gradient);
  double objective = m.log_likelihood;
  if (map) {
    std::vector<double> prior(1 + static_cast<size_t>(n));
    run.model.prior_logpdf(theta.data(), prior.data());
    objective += prior[0];
    for (int64_t k = 0; k < n; ++k)
      gradient[k] += prior[1 + k];
  }
  const std::vector<double> u = space.unconstrain({theta.data(), static_cast<size_t>(n)});
  double norm2 = 0;
  for (double g : space.gradient(u, gradient, false))
    norm2 += g * g;
  return {objective, std::sqrt(norm2)};
}

// One start of EM from `theta` (parameters then data values), its iterations appended to
// record.path.
Optimum::Start run_start(const MethodRun& run, const ScoreModel& sm, const ParameterSpace& space,
                         std::vector<double> theta, int64_t start, const OptimizeOptions& options,
                         Optimum& record, std::string& message, int64_t& iterations) {
  OptimizeOptions step = options;
  step.inits = 1;
  step.max_iterations = kEmStepIterations;
  step.tolerance = kEmStepTolerance;
  Optimum::Start out;
  double previous = -std::numeric_limits<double>::infinity();
  message = fmt::format("stopped after {} iterations", options.max_iterations);
  EStep m(*run.data);
  for (int64_t it = 0;; ++it) {
    m.run(run, theta);
    const auto [objective, gradient_norm] = objective_at(run, sm, space, m, theta, options.map);
    if (!std::isfinite(objective))
      throw Error(fmt::format("optimize (em): the {} is not finite at iteration {} of start {}",
                              options.map ? "log posterior" : "log-likelihood", it, start));
    if (it == 0)
      out.initial_objective = objective;
    const std::vector<double> n_theta(theta.begin(), theta.begin() + run.info.n_theta);
    record.path.push_back({start, m.log_likelihood, gradient_norm, n_theta, objective});
    out.objective = objective;
    out.log_likelihood = m.log_likelihood;
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
    // The M-step: Q and its gradient at the marginals just computed.
    MethodRun at = run;
    at.fixed = &theta;
    const Optimum next = maximize(
        [&](const std::vector<double>& fixed) {
          std::vector<double> gradient;
          const double q = m.q(sm, fixed, gradient);
          if (!std::isfinite(q))
            throw Error("Q is not finite");
          return ObjectiveValue{q, std::move(gradient), m.log_likelihood};
        },
        at, step);
    std::copy(next.theta.begin(), next.theta.end(), theta.begin());
  }
  return out;
}

} // namespace

Optimum run_em(const MethodRun& run, const OptimizeOptions& options) {
  if (!enumerable(run.info))
    throw Error("optimize --method em: the model is not finite-state (EM's E-step enumerates the "
                "states; see `info`)");
  const ScoreModel sm = score_model(run.model, run.info);
  if (options.map && !run.model.prior_logpdf)
    throw Error(fmt::format("optimize --map: the compiler derived no prior density for model "
                            "'{}': {}",
                            run.info.name, run.info.no_prior_reason));
  const ParameterSpace space(run.info, options.fixed);
  if (space.dimension() == 0)
    throw Error("optimize: no parameter to learn (every parameter is fixed or has no value)");
  const int64_t n = space.n_theta();
  const std::vector<double>& given = *run.fixed;
  const std::vector<double> u0 = space.unconstrain({given.data(), static_cast<size_t>(n)});
  Optimum best;
  best.map = options.map;
  best.objective = -std::numeric_limits<double>::infinity();
  for (const LearnedParam& p : space.learned())
    best.learned.push_back(run.info.params[p.index].name);
  for (int64_t k = 0; k < std::max<int64_t>(options.inits, 1); ++k) {
    std::vector<double> theta = given;
    space.constrain(start_point(u0, run.seed, k), {theta.data(), static_cast<size_t>(n)});
    std::string message;
    int64_t iterations = 0;
    Optimum::Start s;
    try {
      s = run_start(run, sm, space, theta, k, options, best, message, iterations);
    } catch (const Error& e) {
      if (options.inits == 1)
        throw;
      s.initial_objective = s.objective = s.log_likelihood = -INFINITY;
      message = e.what();
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
