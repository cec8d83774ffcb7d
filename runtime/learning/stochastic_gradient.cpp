// Stochastic-gradient maximum likelihood by Adam with iterate averaging: see
// stochastic_gradient.h.
#include "learning/stochastic_gradient.h"
#include "core/error.h"
#include "learning/log_posterior.h"
#include "learning/parameter_space.h"
#include "learning/score.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <limits>

namespace ssm {

namespace {

// Filter runs averaged for the log-likelihood reported at the estimate.
constexpr int64_t kFinalRuns = 4;

} // namespace

Optimum maximize_stochastic(const Method& smoother, const MethodRun& run,
                            const OptimizeOptions& options, const AdamOptions& adam) {
  const ParameterSpace space = optimized_parameters(run, options);
  const int64_t n = space.n_theta(), d = space.dimension(), steps = options.max_iterations;
  const auto nt = static_cast<size_t>(n);
  const std::vector<double>& given = *run.fixed;
  const std::vector<double> u0 = space.unconstrain({given.data(), nt});
  const int64_t window_start = steps / 2; // the averaged half

  Optimum best;
  best.map = options.map;
  best.objective = -std::numeric_limits<double>::infinity();
  for (const LearnedParam& p : space.learned())
    best.learned.push_back(run.info.params[p.index].name);
  std::vector<Optimum::Evaluation> path;
  std::vector<AveragedStart> starts;
  const LogPrior prior(run.model, space, given, run.prior);
  for (int64_t k = 0; k < std::max<int64_t>(options.inits, 1); ++k) {
    AveragedStart out;
    std::vector<double> u = start_point(u0, run.seed, k);
    std::vector<double> m(d, 0.0), v(d, 0.0), g_sum(d, 0.0), g_sq(d, 0.0);
    std::vector<double> average(d, 0.0); // of u over the second half
    std::vector<double> fixed = given;
    double objective_sum = 0;
    int64_t in_window = 0;
    out.message = fmt::format("{} Adam steps", steps);
    for (int64_t it = 0; it < steps; ++it) {
      MethodRun at = run;
      at.fixed = &fixed;
      at.seed = iteration_seed(run.seed, k, it, steps);
      at.progress = nullptr; // the steps report progress, not each smoother pass
      ScoreResult s;
      try {
        space.constrain(u, {fixed.data(), nt});
        s = estimate_score(smoother, at, 1);
      } catch (const Error& e) {
        out.message = fmt::format("step {}: {}", it + 1, e.what());
        break;
      }
      double objective = s.log_likelihood;
      std::vector<double> g = space.gradient(u, s.score, false);
      if (options.map) { // log p(θ) and its gradient in u
        std::vector<double> prior_gradient(g.size());
        objective += prior.theta_density(u, prior_gradient.data());
        for (size_t i = 0; i < g.size(); ++i)
          g[i] += prior_gradient[i];
      }
      double norm2 = 0;
      bool finite = std::isfinite(objective);
      for (double gi : g) {
        norm2 += gi * gi;
        finite &= std::isfinite(gi);
      }
      path.push_back({k, s.log_likelihood, std::sqrt(norm2),
                      std::vector<double>(fixed.begin(), fixed.begin() + n), objective});
      if (it == 0)
        out.start.initial_objective = objective;
      if (!finite) {
        out.message = fmt::format("step {}: the estimated log-likelihood or score is not finite "
                                  "(try a smaller --learning-rate)",
                                  it + 1);
        break;
      }
      ++out.iterations;
      if (run.progress)
        run.progress(k * steps + it, std::max<int64_t>(options.inits, 1) * steps);
      if (it >= window_start) { // Polyak-Ruppert: the iterates u averaged
        ++in_window;
        const double w = 1.0 / static_cast<double>(in_window);
        for (int64_t i = 0; i < d; ++i)
          average[i] += w * (u[i] - average[i]);
        for (int64_t i = 0; i < d; ++i) {
          g_sum[i] += g[i];
          g_sq[i] += g[i] * g[i];
        }
        objective_sum += objective;
      }
      // Adam's step, bias-corrected.
      const double c1 = 1 - std::pow(adam.beta1, static_cast<double>(it + 1));
      const double c2 = 1 - std::pow(adam.beta2, static_cast<double>(it + 1));
      for (int64_t i = 0; i < d; ++i) {
        m[i] = adam.beta1 * m[i] + (1 - adam.beta1) * g[i];
        v[i] = adam.beta2 * v[i] + (1 - adam.beta2) * g[i] * g[i];
        u[i] += adam.learning_rate * (m[i] / c1) / (std::sqrt(v[i] / c2) + adam.epsilon);
      }
    }
    if (in_window >= 2 && out.iterations == steps) { // a start that failed is not a candidate
      out.averaged.assign(given.begin(), given.begin() + n);
      space.constrain(average, out.averaged);
      out.window_objective = objective_sum / static_cast<double>(in_window);
      const auto W = static_cast<double>(in_window);
      double norm2 = 0;
      bool stationary = true;
      for (int64_t i = 0; i < d; ++i) {
        const double mean = g_sum[i] / W;
        const double var = std::max(0.0, (g_sq[i] - W * mean * mean) / (W - 1));
        stationary &= std::abs(mean) <= 3 * std::sqrt(var / W);
        norm2 += mean * mean;
      }
      out.mean_gradient_norm = std::sqrt(norm2);
      out.stationary = stationary;
      out.message =
          stationary ? fmt::format("{} Adam steps; over the averaged last {}, the mean gradient is "
                                   "within 3 standard errors of 0 in every coordinate",
                                   steps, in_window)
                     : fmt::format("{} Adam steps; over the averaged last {}, the mean gradient is "
                                   "still away from 0 (more --max-iterations, or a larger "
                                   "--learning-rate)",
                                   steps, in_window);
    }
    out.start.converged = out.stationary;
    out.start.objective = out.window_objective;
    out.start.log_likelihood = NAN; // known at the chosen start's estimate only
    starts.push_back(out);
  }
  best.path = std::move(path);
  finish_averaged_starts(
      best, starts, run, options, "optimize: no start gave finite estimates over its last half",
      [&](const std::vector<double>& fixed) {
        MethodRun at = run;
        at.fixed = &fixed;
        at.seed = iteration_seed(run.seed, static_cast<int64_t>(starts.size()), 0, steps);
        at.progress = nullptr;
        return estimate_score(smoother, at, kFinalRuns).replicate_loglik;
      });
  return best;
}

void finish_averaged_starts(
    Optimum& best, const std::vector<AveragedStart>& starts, const MethodRun& run,
    const OptimizeOptions& options, const std::string& none,
    const std::function<std::vector<double>(const std::vector<double>& fixed)>& final_runs) {
  const AveragedStart* chosen = nullptr;
  for (const AveragedStart& s : starts) {
    best.starts.push_back(s.start);
    if (!s.averaged.empty() && (!chosen || s.window_objective > chosen->window_objective))
      chosen = &s;
  }
  if (!chosen) {
    std::vector<std::string> why;
    for (const AveragedStart& s : starts)
      why.push_back(s.message);
    throw Error(fmt::format("{} ({})", none, fmt::join(why, "; ")));
  }
  best.theta = chosen->averaged;
  best.converged = chosen->stationary;
  best.message = chosen->message;
  best.iterations = chosen->iterations;
  best.gradient_norm = chosen->mean_gradient_norm;
  std::vector<double> fixed = *run.fixed;
  std::copy(best.theta.begin(), best.theta.end(), fixed.begin());
  try { // the mean of the replicates, and its standard error
    const std::vector<double> runs = final_runs(fixed);
    const auto R = static_cast<double>(runs.size());
    double mean = 0, ss = 0;
    for (double l : runs)
      mean += l / R;
    for (double l : runs)
      ss += (l - mean) * (l - mean);
    best.log_likelihood = mean;
    best.log_likelihood_se = std::sqrt(ss / (R - 1) / R);
  } catch (const Error&) { // the estimate stands; its log-likelihood is unknown
    best.log_likelihood = NAN;
    best.log_likelihood_se = NAN;
  }
  best.objective = best.log_likelihood;
  if (options.map) {
    const ParameterSpace space(run.info, options.fixed);
    best.objective += LogPrior(run.model, space, fixed, run.prior).theta_density_at(fixed);
  }
  for (size_t k = 0; k < starts.size(); ++k)
    if (&starts[k] == chosen)
      best.starts[k].log_likelihood = best.log_likelihood;
  best.evaluations = static_cast<int64_t>(best.path.size());
}

} // namespace ssm
