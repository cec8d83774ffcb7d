// Expectation-maximisation with an exact E-step: see em.h.
#include "learning/em.h"
#include "core/error.h"
#include "exact/finite_state.h"
#include "exact/kalman.h"
#include "learning/closed_form.h"
#include "learning/parameter_space.h"
#include "learning/score.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

namespace ssm {

namespace {

// Q's terms at the weighted points of each step: sum_p w_p (log p(x_t | x_{t-1}) + log p(y_t |
// x_t)), log p(x_0) at t = 0, at the parameters in `fixed`; with `gradient`, its gradient per
// theta component from a model whose functional terms are the score terms (score.h).
double expected_log_joint(const ssm_model& model, const ModelInfo& info,
                          const std::vector<double>& fixed, const ObsData& data,
                          const std::vector<StepPoints>& steps, std::vector<double>* gradient) {
  const std::vector<double> frames = all_frames(info, fixed, data);
  const int64_t nf = info.n_functional;
  if (gradient)
    gradient->assign(nf, 0.0);
  double q = 0;
  std::vector<double> lp, emit, terms;
  for (int64_t t = 0; t < data.T; ++t) {
    const StepPoints& s = steps[t];
    const int64_t P = s.count;
    if (P == 0)
      continue;
    require_previous_obs(info, data, t);
    const double* frame = frames.data() + t * info.n_frame;
    lp.resize(P);
    emit.resize(P);
    if (t == 0)
      model.init_logpdf(frame, 0, P, P, s.cur.data(), lp.data());
    else
      model.transition_logpdf(frame, t, 0, P, P, s.prev.data(), nullptr, s.cur.data(), lp.data());
    model.obs_logpdf(frame, t, 0, P, P, s.cur.data(), data.at(t), emit.data());
    if (gradient) {
      terms.resize(std::max<int64_t>(nf, 1) * P);
      model.functional_terms(frame, t, 0, P, P, s.prev.data(), nullptr, s.cur.data(), data.at(t),
                             terms.data());
    }
    for (int64_t p = 0; p < P; ++p) {
      const double w = s.weight[p];
      q += w * (lp[p] + emit[p]);
      if (gradient)
        for (int64_t k = 0; k < nf; ++k)
          (*gradient)[k] += w * terms[k * P + p];
    }
  }
  return q;
}

// The E-step of each series (core/series.h: independent series add).
struct EStep {
  std::vector<ObsData> series;
  std::vector<std::vector<StepPoints>> points;
  double log_likelihood = 0;

  explicit EStep(const ObsData& data) {
    for (int64_t k = 0; k < data.series.count(); ++k)
      series.push_back(data.one_series(k));
    points.resize(series.size());
  }
  void run(const MethodRun& run, const std::vector<double>& theta) {
    log_likelihood = 0;
    const bool finite = enumerable(run.info);
    for (size_t k = 0; k < series.size(); ++k) {
      double ll = 0;
      if (finite) {
        const PairMarginals m = pair_marginals(run.model, run.info, theta, series[k]);
        points[k] = pair_points(run.info, m);
        ll = m.log_likelihood;
      } else {
        points[k] = rts_points(run.model, run.info, theta, series[k], ll);
      }
      log_likelihood += ll;
    }
  }
  // Q at `theta` under the points, and its gradient per theta component.
  double q(const ScoreModel& sm, const std::vector<double>& theta,
           std::vector<double>* gradient) const {
    double total = 0;
    std::vector<double> g;
    if (gradient)
      gradient->assign(sm.info.n_functional, 0.0);
    for (size_t k = 0; k < series.size(); ++k) {
      total += expected_log_joint(sm.model, sm.info, theta, series[k], points[k],
                                  gradient ? &g : nullptr);
      if (gradient)
        for (size_t i = 0; i < g.size(); ++i)
          (*gradient)[i] += g[i];
    }
    return total;
  }
  void m_step(ClosedFormMStep& closed, std::vector<double>& theta) const {
    closed.reset();
    for (size_t k = 0; k < series.size(); ++k)
      for (int64_t t = 0; t < series[k].T; ++t)
        closed.add(t, points[k][t], series[k].at(t));
    closed.solve(theta);
  }
};

// The objective at theta (parameters then data values): the log-likelihood from the E-step, plus
// the log prior with --map; and the norm of its gradient on the unconstrained scale, from Q's
// gradient there (Fisher's identity: at the parameters of the E-step it is the score), NaN
// without a score.
std::pair<double, double> objective_at(const MethodRun& run, const std::optional<ScoreModel>& sm,
                                       const ParameterSpace& space, const EStep& m,
                                       const std::vector<double>& theta, bool map) {
  const int64_t n = space.n_theta();
  std::vector<double> gradient(n, 0.0);
  if (sm)
    m.q(*sm, theta, &gradient);
  double objective = m.log_likelihood;
  if (map) {
    std::vector<double> prior(1 + static_cast<size_t>(n));
    run.model.prior_logpdf(theta.data(), prior.data());
    objective += prior[0];
    for (int64_t k = 0; k < n; ++k)
      gradient[k] += prior[1 + k];
  }
  const std::vector<double> u = space.unconstrain({theta.data(), static_cast<size_t>(n)});
  if (!sm)
    return {objective, std::numeric_limits<double>::quiet_NaN()};
  double norm2 = 0;
  for (double g : space.gradient(u, gradient, false))
    norm2 += g * g;
  return {objective, std::sqrt(norm2)};
}

// The numerical M-step over the parameters the closed form leaves, from `theta`.
void numeric_m_step(const MethodRun& run, const ScoreModel& sm, const EStep& m,
                    const OptimizeOptions& options, const ClosedFormMStep& closed,
                    std::vector<double>& theta) {
  OptimizeOptions step = options;
  step.inits = 1;
  step.max_iterations = kEmStepIterations;
  step.tolerance = kEmStepTolerance;
  for (const auto& [name, from] : closed.closed())
    step.fixed.push_back(name);
  MethodRun at = run;
  at.fixed = &theta;
  const Optimum next = maximize(
      [&](const std::vector<double>& fixed) {
        std::vector<double> gradient;
        const double q = m.q(sm, fixed, &gradient);
        if (!std::isfinite(q))
          throw Error("Q is not finite");
        return ObjectiveValue{q, std::move(gradient), m.log_likelihood};
      },
      at, step);
  std::copy(next.theta.begin(), next.theta.end(), theta.begin());
}

// One start of EM from `theta` (parameters then data values), with the run's E-step and
// closed-form M-step (each start overwrites their state), its iterations appended to
// record.path.
Optimum::Start run_start(const MethodRun& run, const std::optional<ScoreModel>& sm,
                         const ParameterSpace& space, EStep& m, ClosedFormMStep& closed,
                         std::vector<double> theta, int64_t start, const OptimizeOptions& options,
                         Optimum& record, std::string& message, int64_t& iterations) {
  Optimum::Start out;
  double previous = -std::numeric_limits<double>::infinity();
  message = fmt::format("stopped after {} iterations", options.max_iterations);
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
    m.m_step(closed, theta);
    try { // a closed-form update on the boundary of a support: a degenerate maximum
      space.unconstrain({theta.data(), static_cast<size_t>(space.n_theta())});
    } catch (const Error& e) {
      throw Error(fmt::format("optimize (em): the closed-form M-step of iteration {} of start {} "
                              "leaves the support: {} (a degenerate maximum of the likelihood, "
                              "such as a component with one point)",
                              it + 1, start, e.what()));
    }
    if (!closed.numeric().empty())
      numeric_m_step(run, *sm, m, options, closed, theta);
  }
  return out;
}

} // namespace

Refusal em_refusal(const ssm_model&, const ModelInfo& info) {
  if (!enumerable(info) && !info.linear_gaussian)
    return "EM's E-step needs an exact smoother: the model is neither finite-state "
           "(forward-backward) nor linear-Gaussian (Kalman); see `info`";
  return std::nullopt; // without a score, run_em checks that the learned ones are closed-form
}

namespace {

// A missing observation that another relation reads: the E-step's points do not hold its
// posterior, so neither M-step would be exact.
void check_observations_read(const ModelInfo& info, const ObsData& data) {
  for (int64_t c : info.em_steps.observations_read)
    for (int64_t t = 0; t < data.T; ++t)
      if (std::isnan(data.at(t)[c]))
        throw Error(fmt::format("optimize --method em: {} is missing at step {}, and a relation "
                                "reads it to model another observation: EM's E-step does not "
                                "integrate over it (use --method lbfgs)",
                                obs_columns(info)[c], t));
}

} // namespace

Optimum run_em(const MethodRun& run, const OptimizeOptions& options) {
  if (Refusal why = em_refusal(run.model, run.info))
    throw Error("optimize --method em: " + *why);
  check_observations_read(run.info, *run.data);
  std::optional<ScoreModel> sm;
  if (!score_refusal(run.model, run.info))
    sm = score_model(run.model, run.info);
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
  EStep m(*run.data);
  ClosedFormMStep closed(run.info, space, options.map, m.series);
  if (!sm && !closed.numeric().empty())
    throw Error(fmt::format("optimize --method em: {} {} no closed-form M-step ({}), and the "
                            "model has no score for a numerical one: {}",
                            closed.numeric()[0].first,
                            closed.numeric().size() == 1 ? "has" : "and others have",
                            closed.numeric()[0].second, run.info.no_score_reason));
  for (const auto& [name, from] : closed.closed())
    best.m_steps.push_back({name, "closed form: " + from});
  for (const auto& [name, why] : closed.numeric())
    best.m_steps.push_back({name, "numerical (L-BFGS): " + why});
  for (int64_t k = 0; k < std::max<int64_t>(options.inits, 1); ++k) {
    std::vector<double> theta = given;
    space.constrain(start_point(u0, run.seed, k), {theta.data(), static_cast<size_t>(n)});
    std::string message;
    int64_t iterations = 0;
    Optimum::Start s;
    try {
      s = run_start(run, sm, space, m, closed, theta, k, options, best, message, iterations);
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
