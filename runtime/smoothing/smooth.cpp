// The smoothing front door: the checks that refuse a method before any work, the dispatch to each
// method's implementation, and the CSV and JSON outputs they share. (The methods' names and
// applicability are their registration's: smoothing/methods.cpp.)
#include "smoothing/smooth.h"
#include "core/error.h"
#include "exact/finite_state.h"
#include "exact/kalman.h"
#include "smc/filter_methods.h"
#include "smc/proposal.h"
#include "smoothing/methods.h"
#include "smoothing/smoothers.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace ssm {

namespace {

// The smoothers that apply to this model (for the messages that refuse one).
std::vector<std::string> applicable_methods(const ssm_model& model, const ModelInfo& info) {
  std::vector<std::string> out;
  for (const Smoother& s : smoothers())
    if (!s.applies || !s.applies(model, info))
      out.push_back(s.name);
  return out;
}

// "ffbsi and paris": the smoothers with a property.
std::string smoothers_that(bool Smoother::*property) {
  std::vector<std::string> names;
  for (const Smoother& s : smoothers())
    if (s.*property)
      names.push_back(s.name);
  return fmt::format("{}", fmt::join(names, " and "));
}

// paris under the bootstrap filter: MCMC moves from the ancestor cost 1 + K density evaluations
// per particle and never fall back to an O(N) exact draw, where rejection's cost per draw is
// heavy-tailed (Dau & Chopin 2023; bench/README.md). Otherwise rejection when there is a bound.
// An SDE's estimated density: rejection where the estimates are bounded, else mcmc.
BackwardSampling automatic_backward(const ssm_model& model, const ModelInfo& info,
                                    const SmoothOptions& opt) {
  if (!info.transition_tractable && info.sde) // estimated densities: no exact draws
    return sde_estimates_bounded(info) ? BackwardSampling::Rejection : BackwardSampling::Mcmc;
  if (opt.method == SmoothMethod::Paris && is_bootstrap_filter(opt.filter))
    return BackwardSampling::Mcmc;
  return model.transition_log_bound ? BackwardSampling::Rejection : BackwardSampling::Exact;
}

} // namespace

void check_smooth_method(const ssm_model& model, const ModelInfo& info, const SmoothOptions& opt,
                         std::string_view command, std::string_view method_flag) {
  const Smoother& method = smoother(opt.method);
  const std::string& name = method.name;
  const bool smoothing = command == "smooth"; // else the smoother serves another subcommand
  auto refuse = [&](std::string why) {
    if (!smoothing) { // advice to pick another method names the flag that picks it here
      const std::string from = "(--method ", to = fmt::format("({} ", method_flag);
      if (from != to)
        for (size_t at = why.find(from); at != std::string::npos;
             at = why.find(from, at + to.size()))
          why.replace(at, from.size(), to);
      throw Error(fmt::format("{} {} {}: {}", command, method_flag, name, why));
    }
    throw Error(fmt::format("smooth --method {}: {}; methods that apply to model '{}': {}", name,
                            why, info.name, fmt::join(applicable_methods(model, info), ", ")));
  };
  auto refuse_functional = [&](const FunctionalInfo& f, const std::string& why) {
    throw Error(fmt::format("{} {} {}: functional '{}' {}. Methods that can estimate "
                            "it: {} (or leave it out with --functional NAME for the others)",
                            command, method_flag, name, f.name, why, fmt::join(f.methods, ", ")));
  };
  if (opt.method == SmoothMethod::ForwardBackward && !info.finite_state)
    refuse("the model's state is not finite (see `info` for the reason)");
  if (Refusal why = sde_score_refusal(opt.method, info))
    refuse(*why);
  if (method.applies)
    if (Refusal why = method.applies(model, info))
      refuse(*why);
  if (!info.functionals.empty() && !model.functional_terms)
    refuse("the model table has no functional_terms kernel");
  if (opt.backward == BackwardSampling::Rejection && !method.rejection)
    refuse(fmt::format("--backward rejection applies to {} only",
                       smoothers_that(&Smoother::rejection)));
  if (opt.backward == BackwardSampling::Mcmc && !method.mcmc)
    refuse(fmt::format("--backward mcmc applies to {} only", smoothers_that(&Smoother::mcmc)));
  if (opt.filter.guided && !model.proposal_sample)
    refuse(fmt::format("--filter {}: the model has no proposal; add one, as in `proposal x[t] ~ "
                       "normal(m, s);` (docs/language.md#proposals)",
                       particle_filter_name(opt.filter)));
  if (opt.filter.random_weight)
    if (std::string why = random_weight_problem(model, info); !why.empty())
      refuse(fmt::format("--filter {}: {}", particle_filter_name(opt.filter), why));
  const bool estimated = !info.transition_tractable && info.sde; // an SDE's (bis, paris)
  if (opt.backward_proposal == BackwardProposal::Euler && !estimated)
    refuse(fmt::format("--backward-proposal euler draws from the Euler density of an SDE "
                       "transition, and the model's transition is not one ({} draws from the "
                       "filter weights)",
                       name));
  // An SDE's paris: the backward sampling that auto would use, checked before any work.
  const BackwardSampling backward =
      estimated && opt.method == SmoothMethod::Paris && opt.backward == BackwardSampling::Automatic
          ? automatic_backward(model, info, opt)
          : opt.backward;
  const std::string& bootstrap = particle_filter_name(FilterOptions{}); // the default filter
  if (estimated && opt.method == SmoothMethod::Paris) {
    if (opt.backward_proposal != BackwardProposal::Automatic && backward != BackwardSampling::Mcmc)
      refuse("--backward-proposal applies to paris's Metropolis-Hastings moves (--backward mcmc); "
             "its rejection sampling proposes from the filter weights");
    if (backward == BackwardSampling::Exact)
      refuse(fmt::format("exact backward draws need the transition density, and the SDE {} has "
                         "only estimates of it: --backward rejection (estimates with a bound) or "
                         "mcmc",
                         info.sde->relation));
    if (backward == BackwardSampling::Rejection && !sde_estimates_bounded(info))
      refuse(fmt::format("the density estimates of the SDE {} have no bound ({}), which "
                         "rejection sampling needs: --backward mcmc draws by pseudo-marginal "
                         "Metropolis-Hastings moves; bis needs no bound",
                         info.sde->relation,
                         info.sde->estimator == "gpe"
                             ? "psi or the drift has none: the drift's bounds come from "
                               "the compiler, psi's from it or the model's psi_lower and "
                               "psi_upper"
                             : "the parametrix estimator's are signed"));
  }
  // (After another filter than the bootstrap one, an SDE's chains start from proposals.)
  if (backward == BackwardSampling::Mcmc && !is_bootstrap_filter(opt.filter) && !estimated)
    refuse(fmt::format("--backward mcmc starts each chain at the particle's ancestor, which is a "
                       "draw from the backward kernel only under the {} filter; use --filter {}, "
                       "or --backward rejection or exact",
                       bootstrap, bootstrap));
  if (opt.backward == BackwardSampling::Mcmc && opt.mcmc_steps < 1)
    refuse("--mcmc-steps must be at least 1");
  if (backward == BackwardSampling::Mcmc && opt.start_estimates < 1)
    refuse("--start-estimates must be at least 1");
  if (opt.backward == BackwardSampling::Rejection && !model.transition_log_bound && !estimated)
    refuse(fmt::format("rejection sampling needs an upper bound of the transition density over "
                       "the next state, and the model has none ({}); use --backward exact",
                       info.no_bound_reason.empty() ? "no bound derived" : info.no_bound_reason));
  if (opt.method == SmoothMethod::FixedLag && opt.lag < 0)
    refuse("--lag must be at least 0");
  if (std::ranges::count(method.options, "--backward-samples") && opt.backward_samples < 1)
    refuse("--backward-samples must be at least 1");
  if (method.online)
    for (const FunctionalInfo& f : info.functionals) {
      if (!f.sum && opt.marginals)
        continue; // a per-t functional is carried with the marginals
      if (!f.sum)
        refuse_functional(f, "is a quantity at each t, which an online method estimates only "
                             "with --marginals (O(T) memory per particle)");
      if (!f.additive)
        refuse_functional(f, "is not additive: " + f.why_not);
    }
}

SmoothResult smooth(const ssm_model& model, const ModelInfo& info, const std::vector<double>& fixed,
                    const ObsData& data, const SmoothOptions& options, ThreadPool& pool,
                    const OnlineObserver& observer) {
  check_smooth_method(model, info, options);
  if (observer && !is_online(options.method))
    throw Error(fmt::format("internal error: smooth --method {} has no running estimates",
                            smooth_method_name(options.method)));
  SmoothOptions opt = options;
  if (opt.backward == BackwardSampling::Automatic)
    opt.backward = automatic_backward(model, info, opt);
  // The particle methods' filter; the online ones and fixed-lag do all their work in it.
  if (opt.progress_phase && !smoother(opt.method).exact)
    opt.progress_phase("forward pass");
  switch (opt.method) {
  case SmoothMethod::Rts:
    return smooth_rts(model, info, fixed, data);
  case SmoothMethod::ForwardBackward:
    return forward_backward(model, info, fixed, data);
  case SmoothMethod::Genealogy:
  case SmoothMethod::FixedLag:
    return smooth_genealogy(model, info, fixed, data, opt, pool);
  case SmoothMethod::Ffbsm:
  case SmoothMethod::Ffbsi:
    return smooth_backward(model, info, fixed, data, opt, pool);
  case SmoothMethod::Online:
  case SmoothMethod::Paris:
  case SmoothMethod::Bis:
    return smooth_online(model, info, fixed, data, opt, pool, observer);
  case SmoothMethod::Variational: // the vsmooth room's own entry point, never dispatched here
    break;
  }
  throw Error(fmt::format("smooth --method {} is not available in this runtime",
                          smooth_method_name(opt.method)));
}

ModelInfo without_functionals(const ModelInfo& info) {
  ModelInfo bare = info;
  bare.functionals.clear();
  bare.n_functional = 0;
  return bare;
}

std::vector<StepPoints> trajectory_points(const ssm_model& model, const ModelInfo& model_info,
                                          const std::vector<double>& fixed, const ObsData& data,
                                          const SmoothOptions& options, ThreadPool& pool,
                                          double& log_likelihood) {
  const ModelInfo info = without_functionals(model_info);
  SmoothOptions opt = options;
  if (opt.method != SmoothMethod::Paris && opt.method != SmoothMethod::Bis)
    opt.method = SmoothMethod::Ffbsi;
  if (opt.backward == BackwardSampling::Automatic)
    opt.backward = automatic_backward(model, info, opt);
  if (opt.method == SmoothMethod::Ffbsi)
    return backward_trajectory_points(model, info, fixed, data, opt, pool, log_likelihood);
  if (data.T == 0)
    return {};
  // paris's or bis's draws, kept through the pass; the statistics are only the moments.
  opt.marginals = false;
  BackwardTrace trace(opt.filter.particles, opt.backward_samples, info.n_state, data.T);
  const SmoothResult r = smooth_online(model, info, fixed, data, opt, pool, {}, &trace);
  log_likelihood = r.log_likelihood;
  return trace_trajectories(trace, opt.trajectories > 0 ? opt.trajectories : opt.filter.particles,
                            opt.filter.seed);
}

std::string smooth_csv(const ModelInfo& info, const SmoothResult& r) {
  const std::vector<std::string> cols = state_columns(info);
  fmt::memory_buffer out;
  auto put = [&]<class... Args>(fmt::format_string<Args...> f, Args&&... args) {
    fmt::format_to(std::back_inserter(out), f, std::forward<Args>(args)...);
  };
  put("{}{}", series_header(r.series), info.step);
  for (const std::string& c : cols)
    put(",mean_{},var_{}", c, c);
  std::vector<const FunctionalEstimate*> per_t;
  for (const FunctionalEstimate& f : r.functionals)
    if (!f.sum) {
      per_t.push_back(&f);
      for (const FunctionalInfo& fi : info.functionals)
        if (fi.name == f.name)
          for (const std::string& c : column_names(fi.name, fi.shape))
            put(",{}", c);
    }
  // rts: lag-one covariances Cov[x_t[a], x_{t-1}[b] | y], empty at t = 0.
  const bool lag_one = !r.lag_one_cov.empty();
  if (lag_one)
    for (const std::string& a : cols)
      for (const std::string& b : cols)
        put(",lagcov_{}_{}", a, b);
  put("\n");
  if (!r.has_marginals)
    return fmt::to_string(out);
  const int64_t ns = r.n_state, shown = static_cast<int64_t>(cols.size());
  for (int64_t t = 0; t < r.T; ++t) {
    put("{}", step_cells(r.series, t));
    const bool first = r.series.locate(t).second == 0; // of its series
    for (int64_t c = 0; c < shown; ++c)
      put(",{},{}", format_double(r.mean[t * ns + c]), format_double(r.var[t * ns + c]));
    for (const FunctionalEstimate* f : per_t)
      for (int64_t k = 0; k < f->size; ++k)
        put(",{}", format_double(f->per_t[t * f->size + k]));
    if (lag_one)
      for (int64_t a = 0; a < shown; ++a)
        for (int64_t b = 0; b < shown; ++b)
          put(",{}", first ? "" : format_double(r.lag_one_cov[(t * ns + a) * ns + b]));
    put("\n");
  }
  return fmt::to_string(out);
}

nlohmann::json functionals_json(const ModelInfo& info, const SmoothResult& r) {
  using nlohmann::json;
  json functionals = json::object();
  for (const FunctionalEstimate& f : r.functionals) {
    if (!f.sum)
      continue;
    const FunctionalInfo* fi = nullptr;
    for (const FunctionalInfo& i : info.functionals)
      if (i.name == f.name)
        fi = &i;
    json value = f.size == 1 && fi && fi->shape.empty() ? json(f.total[0]) : json(f.total);
    functionals[f.name] = value;
    if (!f.se.empty())
      functionals[f.name + "_se"] = f.size == 1 ? json(f.se[0]) : json(f.se);
  }
  return functionals;
}

nlohmann::json smooth_json(const ModelInfo& info, const SmoothResult& r, const SmoothOptions& opt) {
  using nlohmann::json;
  const json functionals = functionals_json(info, r);
  json j = {{"model", info.name},
            {"method", smooth_method_name(r.method)},
            {"T", r.T},
            {"log_likelihood", r.log_likelihood},
            {"functionals", functionals},
            {"marginals", r.has_marginals},
            {"filter_s", r.filter_s},
            {"smooth_s", r.smooth_s},
            {"seed", opt.filter.seed}};
  if (!smoother(r.method).exact) {
    j["particles"] = r.particles;
    j["resampling"] = resampling_name(opt.filter.resampling);
    j["filter"] = particle_filter_name(opt.filter);
  }
  add_random_weight_caveat(j, info, opt.filter.random_weight && !smoother(r.method).exact);
  if (r.method == SmoothMethod::FixedLag)
    j["lag"] = opt.lag;
  if (r.method == SmoothMethod::Paris || r.method == SmoothMethod::Bis)
    j["backward_samples"] = opt.backward_samples;
  if (!r.details.is_null())
    j["details"] = r.details;
  return j;
}

} // namespace ssm
