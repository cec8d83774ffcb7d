// What EM's exact and Monte Carlo E-steps share: see em_steps.h.
#include "learning/em_steps.h"
#include "core/error.h"
#include "core/series.h"
#include "learning/parameter_space.h"
#include "learning/sde_q_term.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace ssm {

namespace {

// Q's terms at the weighted points of each step: sum_p w_p (log p(x_t | x_{t-1}) + log p(y_t |
// x_t)), log p(x_0) at t = 0, at the parameters in `fixed`; with `gradient`, its gradient per
// theta component from a model whose functional terms are the score terms (score.h).
double expected_log_joint(const ssm_model& model, const ModelInfo& info,
                          const std::vector<double>& fixed, const ObsData& data,
                          const std::vector<StepPoints>& steps, const EmPoints& e,
                          uint64_t sde_seed, std::vector<double>* gradient) {
  const std::vector<double> frames = all_frames(info, fixed, data);
  const int64_t nf = info.n_functional;
  if (gradient)
    gradient->assign(nf, 0.0);
  // An SDE's transition term is estimated; the score's terms then lack its gradient too.
  const bool estimated = e.sde_estimates > 0;
  double q = estimated ? sde_q_term(model, info, frames, steps, e.sde_estimates, sde_seed, *e.pool,
                                    gradient)
                       : 0.0;
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
    else if (estimated)
      std::fill(lp.begin(), lp.end(), 0.0); // in q already
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

// The numerical M-step over the parameters the closed form leaves, from `theta`.
void numeric_m_step(const MethodRun& run, const ScoreModel& sm, const EmPoints& e,
                    const OptimizeOptions& options, const ClosedFormMStep& closed,
                    std::vector<double>& theta) {
  OptimizeOptions step = options;
  step.inits = 1;
  step.max_iterations = e.sde_estimates > 0 ? kSdeEmStepIterations : kEmStepIterations;
  step.tolerance = kEmStepTolerance;
  for (const auto& [name, from] : closed.closed())
    step.fixed.push_back(name);
  MethodRun at = run;
  at.fixed = &theta;
  const Optimum next = maximize(
      [&](const std::vector<double>& fixed) {
        std::vector<double> gradient;
        const double q = e.q(sm, fixed, &gradient);
        if (!std::isfinite(q))
          throw Error("Q is not finite");
        return ObjectiveValue{q, std::move(gradient), e.log_likelihood};
      },
      at, step);
  std::copy(next.theta.begin(), next.theta.end(), theta.begin());
}

} // namespace

EmPoints::EmPoints(const ObsData& data) {
  for (int64_t k = 0; k < data.series.count(); ++k)
    series.push_back(data.one_series(k));
  points.resize(series.size());
}

double EmPoints::q(const ScoreModel& sm, const std::vector<double>& theta,
                   std::vector<double>* gradient) const {
  double total = 0;
  std::vector<double> g;
  if (gradient)
    gradient->assign(sm.info.n_functional, 0.0);
  for (size_t k = 0; k < series.size(); ++k) {
    total +=
        expected_log_joint(sm.model, sm.info, theta, series[k], points[k], *this,
                           series_seed(sde_seed, static_cast<int64_t>(k)), gradient ? &g : nullptr);
    if (gradient)
      for (size_t i = 0; i < g.size(); ++i)
        (*gradient)[i] += g[i];
  }
  return total;
}

bool EmPoints::m_step(const MethodRun& run, const std::optional<ScoreModel>& sm,
                      const ParameterSpace& space, ClosedFormMStep& closed,
                      const OptimizeOptions& options, std::vector<double>& theta, int64_t iteration,
                      int64_t start, double boundary_shrink) const {
  const std::vector<double> previous = theta;
  closed.reset();
  for (size_t k = 0; k < series.size(); ++k)
    for (int64_t t = 0; t < series[k].T; ++t)
      closed.add(t, points[k][t], series[k].at(t), series[k].inputs_at(t));
  closed.solve(theta);
  const std::span<const double> learned{theta.data(), static_cast<size_t>(space.n_theta())};
  bool shrunk = false;
  try {
    space.unconstrain(learned);
  } catch (const Error& e) {
    if (boundary_shrink <= 0)
      throw Error(fmt::format("optimize (em): the closed-form M-step of iteration {} of start {} "
                              "leaves the support: {} (a degenerate maximum of the likelihood, "
                              "such as a component with one point)",
                              iteration, start, e.what()));
    for (size_t i = 0; i < theta.size(); ++i) // only the closed-form components differ
      theta[i] = (1 - boundary_shrink) * theta[i] + boundary_shrink * previous[i];
    space.unconstrain(learned); // inside now, but for rounding at the very edge
    shrunk = true;
  }
  if (!closed.numeric().empty())
    numeric_m_step(run, *sm, *this, options, closed, theta);
  return shrunk;
}

void check_observations_read(const ModelInfo& info, const ObsData& data) {
  for (int64_t c : info.em_steps.observations_read)
    for (int64_t t = 0; t < data.T; ++t)
      if (std::isnan(data.at(t)[c]))
        throw Error(fmt::format("optimize --method em: {} is missing at step {}, and a relation "
                                "reads it to model another observation: EM's E-step does not "
                                "integrate over it (use --method lbfgs, or adam for a particle "
                                "model)",
                                obs_columns(info)[c], t));
}

namespace {

std::optional<ScoreModel> score_if_any(const MethodRun& run) {
  if (score_refusal(run.model, run.info))
    return std::nullopt;
  return score_model(run.model, run.info);
}

} // namespace

EmSetup::EmSetup(const MethodRun& run, const OptimizeOptions& options, const EmPoints& e)
    : sm(score_if_any(run)), space(run.info, options.fixed),
      closed(run.info, space, options.map, e.series) {
  if (options.map && !run.model.prior_logpdf)
    throw Error(fmt::format("optimize --map: the compiler derived no prior density for model "
                            "'{}': {}",
                            run.info.name, run.info.no_prior_reason));
  space.require_some("optimize");
  if (!sm && !closed.numeric().empty())
    throw Error(fmt::format("optimize --method em: {} {} no closed-form M-step ({}), and the "
                            "model has no score for a numerical one: {}",
                            closed.numeric()[0].first,
                            closed.numeric().size() == 1 ? "has" : "and others have",
                            closed.numeric()[0].second, run.info.no_score_reason));
}

void EmSetup::describe(Optimum& out) const {
  for (const auto& [name, from] : closed.closed())
    out.m_steps.push_back({name, "closed form: " + from});
  for (const auto& [name, why] : closed.numeric())
    out.m_steps.push_back({name, "numerical (L-BFGS): " + why});
}

double EmObjective::gradient_norm() const {
  if (gradient.empty())
    return std::numeric_limits<double>::quiet_NaN();
  double norm2 = 0;
  for (double g : gradient)
    norm2 += g * g;
  return std::sqrt(norm2);
}

EmObjective em_objective(const MethodRun& run, const EmSetup& setup, const EmPoints& e,
                         const std::vector<double>& theta, bool map) {
  const int64_t n = setup.space.n_theta();
  std::vector<double> gradient(n, 0.0);
  if (setup.sm)
    e.q(*setup.sm, theta, &gradient);
  EmObjective out{e.log_likelihood, {}};
  if (map) {
    std::vector<double> prior(1 + static_cast<size_t>(n));
    run.model.prior_logpdf(theta.data(), prior.data());
    out.value += prior[0];
    for (int64_t k = 0; k < n; ++k)
      gradient[k] += prior[1 + k];
  }
  if (setup.sm) {
    const std::vector<double> u = setup.space.unconstrain({theta.data(), static_cast<size_t>(n)});
    out.gradient = setup.space.gradient(u, gradient, false);
  }
  return out;
}

} // namespace ssm
