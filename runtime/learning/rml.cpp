// Recursive maximum likelihood over an online smoother's running score: see rml.h.
#include "learning/rml.h"
#include "core/error.h"
#include "core/series.h"
#include "learning/parameter_space.h"
#include "learning/score.h"
#include "smc/filter_methods.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

namespace ssm {

namespace {

bool entirely_missing(const double* y, int64_t n_obs) {
  for (int64_t c = 0; c < n_obs; ++c)
    if (!std::isnan(y[c]))
      return false;
  return n_obs > 0;
}

} // namespace

void check_rml_options(const RmlOptions& o) {
  if (!(o.step_size > 0) || !std::isfinite(o.step_size))
    throw Error(fmt::format("rml: --step-size must be positive (got {})", o.step_size));
  if (!(o.step_decay > 0.5 && o.step_decay <= 1))
    throw Error(fmt::format("rml: --step-decay must be in (0.5, 1], where the step sizes satisfy "
                            "the Robbins-Monro conditions (got {})",
                            o.step_decay));
  if (!(o.clip >= 0))
    throw Error(fmt::format("rml: --clip must be at least 0 (0: no clip; got {})", o.clip));
  if (o.step_hold < 0)
    throw Error(fmt::format("rml: --step-hold must be at least 0 (got {})", o.step_hold));
  if (o.average_from < 0)
    throw Error(fmt::format("rml: --average-from must be at least 0 (got {})", o.average_from));
}

double rml_step_size(const RmlOptions& options, int64_t k) {
  if (k <= options.step_hold)
    return options.step_size;
  return options.step_size *
         std::pow(static_cast<double>(k - options.step_hold), -options.step_decay);
}

RecursiveFit recursive_maximum_likelihood(const MethodRun& run, const SmoothOptions& smoothing,
                                          const RmlOptions& opt, const ParameterTrace& trace) {
  const auto start = std::chrono::steady_clock::now();
  const ParameterSpace space(run.info, opt.fixed);
  space.require_some("rml");
  check_rml_options(opt);
  const ScoreModel sm = score_model(run.model, run.info);
  const auto n_theta = static_cast<size_t>(space.n_theta());
  std::vector<double> fixed = *run.fixed; // the moving parameters, then the data values
  std::vector<double> u = space.unconstrain({fixed.data(), n_theta});

  RecursiveFit fit;
  for (const LearnedParam& p : space.learned())
    fit.learned.push_back(run.info.params[p.index].name);
  fit.smoother = smooth_method_name(smoothing.method);
  fit.particles = smoothing.filter.particles;
  fit.backward_samples =
      smoothing.method == SmoothMethod::Online ? fit.particles : smoothing.backward_samples;
  const ObsData& data = *run.data;
  int64_t observed = 0; // the steps the run will take: rows not entirely missing
  for (int64_t t = 0; t < data.T; ++t)
    observed += !entirely_missing(data.at(t), data.n_obs);
  fit.average_from = opt.average_from > 0 ? opt.average_from : observed / 2 + 1;
  std::vector<double> average(n_theta, 0.0), before(n_theta), increment(n_theta);

  const int64_t n_series = data.series.start.empty() ? 1 : data.series.count();
  int64_t k = 0; // observations so far, all series
  for (int64_t s = 0; s < n_series; ++s) {
    ObsData one;
    const ObsData* series = &data;
    if (!data.series.start.empty()) {
      one = data.one_series(s);
      series = &one;
    }
    SmoothOptions so = smoothing;
    so.marginals = false;
    so.filter.seed = series_seed(run.seed, s);
    // The score so far, E[sum_{s<=t} d/dtheta log p(x_s, y_s | x_{s-1}) | y_{0:t}]: its change
    // over one observation is the gradient of log p(y_t | y_{0:t-1}).
    std::fill(before.begin(), before.end(), 0.0);
    const OnlineObserver observe = [&](ParticleFilter& pf, const double* score) {
      for (size_t c = 0; c < n_theta; ++c) {
        increment[c] = score[c] - before[c];
        before[c] = score[c];
      }
      if (entirely_missing(pf.y(), data.n_obs)) // its increment is noise around 0
        return;
      ++k;
      std::vector<double> g = space.gradient(u, increment, false);
      const double gamma = rml_step_size(opt, k);
      bool clipped = false;
      for (size_t i = 0; i < g.size(); ++i) {
        if (!std::isfinite(g[i]))
          throw Error(fmt::format("rml: the score increment of observation {} ({}) is not finite "
                                  "in {} (the parameters may have left the region where the "
                                  "model is defined; try a smaller --step-size)",
                                  k, data_row_text(run.info, *series, pf.t()),
                                  space.coordinate_names()[i]));
        double move = gamma * g[i];
        if (opt.clip > 0 && std::abs(move) > opt.clip) {
          move = std::copysign(opt.clip, move);
          clipped = true;
        }
        u[i] += move;
      }
      fit.clipped += clipped;
      try {
        space.constrain(u, {fixed.data(), n_theta});
      } catch (const Error& e) {
        throw Error(fmt::format("rml: after observation {} ({}): {}", k,
                                data_row_text(run.info, *series, pf.t()), e.what()));
      }
      pf.set_parameters(fixed.data());
      if (k >= fit.average_from) {
        ++fit.averaged_over;
        const double w = 1.0 / static_cast<double>(fit.averaged_over);
        for (size_t c = 0; c < n_theta; ++c)
          average[c] += w * (fixed[c] - average[c]);
      }
      if (trace)
        trace(k, s, pf.t(), gamma, fixed.data());
    };
    SmoothResult r;
    try {
      const std::vector<double> start = fixed; // smooth() reads a copy; the observer moves fixed
      r = smooth(sm.model, sm.info, start, *series, so, *run.pool, observe);
    } catch (const Error& e) {
      const std::string what = e.what();
      if (what.starts_with("rml: "))
        throw;
      std::vector<std::string> at;
      for (const LearnedParam& p : space.learned()) {
        const ParamInfo& info = run.info.params[p.index];
        for (int64_t c = 0; c < info.size; ++c)
          at.push_back(fmt::format("{}={:.6g}", column_names(info.name, info.shape)[c],
                                   fixed[info.offset + c]));
      }
      throw Error(fmt::format("rml: after {} step{}, at {}: {}", k, k == 1 ? "" : "s",
                              fmt::join(at, ", "), what));
    }
    fit.log_likelihood += r.log_likelihood;
    fit.filter_s += r.filter_s;
    if (s == 0)
      fit.filter = particle_filter_name(so.filter);
  }
  fit.observations = k;
  fit.theta.assign(fixed.begin(), fixed.begin() + static_cast<int64_t>(n_theta));
  fit.averaged = fit.averaged_over > 0 ? average : fit.theta;
  fit.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return fit;
}

} // namespace ssm
