// Monte Carlo EM with FFBSi trajectories and iterate averaging: see monte_carlo_em.h.
#include "learning/monte_carlo_em.h"
#include "core/error.h"
#include "core/series.h"
#include "kernel/rng.h"
#include "learning/em_steps.h"
#include "learning/parameter_space.h"
#include "learning/sde_q_term.h"
#include "learning/stochastic_gradient.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace ssm {

namespace {

// Filter runs averaged for the log-likelihood reported at the estimate.
constexpr int64_t kFinalLoglikRuns = 4;

// The E-step of every series at theta, from the seed of this iteration.
void particle_e_step(const MethodRun& run, const SmoothOptions& smoothing,
                     const std::vector<double>& theta, uint64_t seed, EmPoints& e) {
  e.log_likelihood = 0;
  // The M-step's estimates of an SDE's density: common to every theta tried, apart from the
  // streams the E-step's own estimates drew from.
  e.sde_seed = mix_seed(seed ^ kEmSdeKey);
  for (size_t k = 0; k < e.series.size(); ++k) {
    SmoothOptions at = smoothing;
    at.filter.seed = series_seed(seed, static_cast<int64_t>(k));
    at.filter.progress = nullptr;
    double ll = 0;
    e.points[k] = trajectory_points(run.model, run.info, theta, e.series[k], at, *run.pool, ll);
    e.log_likelihood += ll;
  }
}

// The scores estimated over the averaged window (each E-step's gradient of Q at its own
// parameters, on the unconstrained scale): whether their mean is within 3 standard errors of 0 in
// every coordinate. Each estimate has fresh Monte Carlo noise, which dominates the slow wandering
// of the iterates around the fixed point, so their spread gives the standard errors. `worst`
// receives the largest ratio of a mean to its standard error.
bool mean_score_within_noise(const std::vector<std::vector<double>>& scores, double& worst) {
  const auto W = static_cast<double>(scores.size());
  worst = 0;
  bool within = true;
  for (size_t i = 0; i < scores[0].size(); ++i) {
    double mean = 0, var = 0;
    for (const std::vector<double>& g : scores)
      mean += g[i] / W;
    for (const std::vector<double>& g : scores)
      var += (g[i] - mean) * (g[i] - mean) / (W - 1);
    const double se = std::sqrt(var / W);
    const double ratio = se > 0 ? std::abs(mean) / se : (mean == 0 ? 0 : INFINITY);
    worst = std::max(worst, ratio);
    within &= ratio <= 3;
  }
  return within;
}

// kFinalLoglikRuns filter estimates of the log-likelihood at theta (every series).
std::vector<double> final_log_likelihoods(const MethodRun& run, const SmoothOptions& smoothing,
                                          const EmPoints& e, const std::vector<double>& theta,
                                          uint64_t seed) {
  std::vector<double> runs;
  for (int64_t r = 0; r < kFinalLoglikRuns; ++r) {
    double ll = 0;
    for (size_t k = 0; k < e.series.size(); ++k) {
      FilterOptions at = smoothing.filter;
      at.seed = series_seed(iteration_seed(seed, r, 0, kFinalLoglikRuns), static_cast<int64_t>(k));
      at.history = at.moments = false;
      at.progress = nullptr;
      ll += bootstrap_filter(run.model, run.info, theta, e.series[k], at, *run.pool).log_likelihood;
    }
    runs.push_back(ll);
  }
  return runs;
}

} // namespace

void check_monte_carlo_em_options(const OptimizeOptions& options) {
  if (options.sde_estimates < 1 || options.sde_estimates > kMaxSdeEstimates)
    throw Error(fmt::format("optimize --method em: --sde-estimates must be in [1, {}] (got {})",
                            kMaxSdeEstimates, options.sde_estimates));
  if (options.max_iterations < kMonteCarloEmMinIterations)
    throw Error(fmt::format("optimize --method em with a particle E-step: --max-iterations must "
                            "be at least {} (the estimate averages the second half of the "
                            "iterations)",
                            kMonteCarloEmMinIterations));
}

Optimum run_monte_carlo_em(const MethodRun& run, const OptimizeOptions& options,
                           const SmoothOptions& smoothing) {
  check_observations_read(run.info, *run.data);
  EmPoints e(*run.data);
  if (run.info.sde && !run.info.transition_tractable) {
    e.sde_estimates = options.sde_estimates;
    e.pool = run.pool;
  }
  EmSetup setup(run, options, e);
  const ParameterSpace& space = setup.space;
  const int64_t n = space.n_theta(), d = space.dimension(), steps = options.max_iterations;
  const auto nt = static_cast<size_t>(n);
  check_monte_carlo_em_options(options);
  const std::vector<double>& given = *run.fixed;
  const std::vector<double> u0 = space.unconstrain({given.data(), nt});
  const int64_t window_start = steps / 2;

  Optimum best;
  best.map = options.map;
  best.e_step = smooth_method_name(smoothing.method);
  best.sde_estimates = e.sde_estimates;
  for (const LearnedParam& p : space.learned())
    best.learned.push_back(run.info.params[p.index].name);
  setup.describe(best);
  const int64_t inits = std::max<int64_t>(options.inits, 1);
  // An update on the boundary of a support (a count no trajectory reached) is mixed with the
  // previous value by the weight of one more trajectory.
  const int64_t M =
      smoothing.trajectories > 0 ? smoothing.trajectories : smoothing.filter.particles;
  const double boundary_shrink = 1.0 / static_cast<double>(M + 1);
  std::vector<AveragedStart> starts;
  for (int64_t k = 0; k < inits; ++k) {
    AveragedStart out;
    std::vector<double> theta = given;
    space.constrain(start_point(u0, run.seed, k), {theta.data(), nt});
    // Over the second half: the unconstrained iterates the E-steps ran at (the path's rows), and
    // the scores estimated there.
    std::vector<std::vector<double>> window, scores;
    double objective_sum = 0;
    int64_t shrunk = 0;
    out.message = fmt::format("{} iterations", steps);
    for (int64_t it = 0; it < steps; ++it) {
      try {
        particle_e_step(run, smoothing, theta, iteration_seed(run.seed, k, it, steps), e);
        const EmObjective at = em_objective(run, setup, e, theta, options.map);
        if (!std::isfinite(at.value))
          throw Error(fmt::format("the estimated {} is not finite",
                                  options.map ? "log posterior" : "log-likelihood"));
        if (!std::isfinite(at.gradient_norm()) && setup.sm)
          throw Error("the estimated score is not finite");
        best.path.push_back({k,
                             e.log_likelihood,
                             at.gradient_norm(),
                             {theta.begin(), theta.begin() + n},
                             at.value});
        if (it == 0)
          out.start.initial_objective = at.value;
        if (it >= window_start) {
          objective_sum += at.value;
          window.push_back(space.unconstrain({theta.data(), nt}));
          if (setup.sm)
            scores.push_back(at.gradient);
        }
        shrunk += e.m_step(run, setup.sm, space, setup.closed, options, theta, it + 1, k,
                           boundary_shrink);
      } catch (const Error& error) {
        out.message = fmt::format("start {}, iteration {}: {}", k, it + 1, error.what());
        break;
      }
      ++out.iterations;
      if (run.progress)
        run.progress(k * steps + it, inits * steps);
    }
    if (out.iterations == steps) { // a start that failed is not a candidate
      const auto W = static_cast<double>(window.size());
      std::vector<double> average(d, 0.0);
      for (const std::vector<double>& u : window)
        for (int64_t i = 0; i < d; ++i)
          average[i] += u[i] / W;
      out.averaged.assign(given.begin(), given.begin() + n);
      space.constrain(average, out.averaged);
      out.window_objective = objective_sum / W;
      if (setup.sm) {
        double worst = 0, norm2 = 0;
        out.stationary = mean_score_within_noise(scores, worst);
        for (int64_t i = 0; i < d; ++i) {
          double m = 0;
          for (const std::vector<double>& g : scores)
            m += g[i] / W;
          norm2 += m * m;
        }
        out.mean_gradient_norm = std::sqrt(norm2);
        out.message = fmt::format(
            "{} iterations; over the averaged last {}, the mean estimated score is {:.2g} "
            "standard errors from 0 in the worst coordinate ({}){}",
            steps, window.size(), worst, out.stationary ? "at most 3: stationary" : "over 3",
            out.stationary ? "" : ": still climbing (more --max-iterations)");
      } else {
        out.mean_gradient_norm = NAN;
        out.message = fmt::format("{} iterations; convergence not judged: the model has no "
                                  "score ({})",
                                  steps, run.info.no_score_reason);
      }
      if (shrunk > 0)
        out.message += fmt::format(
            "; {} closed-form update{} reached the boundary of a support (a count no trajectory "
            "reached) and {} mixed with the previous value (weight 1/(M+1)): more "
            "--trajectories, or --fix the parameter",
            shrunk, shrunk == 1 ? "" : "s", shrunk == 1 ? "was" : "were");
    }
    out.start.converged = out.stationary;
    out.start.objective = out.window_objective;
    out.start.log_likelihood = NAN; // known at the chosen start's estimate only
    starts.push_back(std::move(out));
  }
  finish_averaged_starts(best, starts, run, options,
                         "optimize (em): no start completed its iterations",
                         [&](const std::vector<double>& fixed) {
                           return final_log_likelihoods(run, smoothing, e, fixed,
                                                        iteration_seed(run.seed, inits, 0, steps));
                         });
  return best;
}

} // namespace ssm
