// Particle marginal Metropolis-Hastings: see pmmh.h.
#include "learning/pmmh.h"
#include "core/error.h"
#include "core/series.h"
#include "core/thread_pool.h"
#include "kernel/rng.h"
#include "kernel/sampler_algorithms.h"
#include "learning/log_posterior.h"
#include "learning/parameter_space.h"

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace ssm {

namespace {

constexpr uint32_t kSiteStep = 0x504d, kSiteAccept = 0x504e, kSiteInit = 0x504f;
constexpr int64_t kPilotRuns = 16, kPilotParticles = 100;

// The log target on the unconstrained scale, and what a chain needs to evaluate it.
class Target {
public:
  Target(const MethodRun& run, const Method& filter, const OptionValues& filter_options,
         const ParameterSpace& space)
      : run_(run), filter_(filter), options_(filter_options), space_(space),
        prior_(run.model, space, *run.fixed, run.prior) {}

  // log-likelihood (estimate) + log prior + log-Jacobian at u; theta (parameters then data)
  // receives the constrained point. -inf where the likelihood or prior is not finite.
  double operator()(const Eigen::VectorXd& u, uint64_t seed, ThreadPool& pool,
                    std::vector<double>& theta) const {
    theta = *run_.fixed;
    const size_t n = static_cast<size_t>(space_.n_theta());
    try {
      space_.constrain({u.data(), static_cast<size_t>(u.size())}, {theta.data(), n});
    } catch (const Error&) {
      return -std::numeric_limits<double>::infinity();
    }
    const double log_prior = prior_.evaluate({u.data(), static_cast<size_t>(u.size())}, nullptr);
    if (!std::isfinite(log_prior)) // outside the prior's support: no filter to run
      return -std::numeric_limits<double>::infinity();
    const double lp = loglik(theta, seed, pool) + log_prior;
    return std::isfinite(lp) ? lp : -std::numeric_limits<double>::infinity();
  }

  double loglik(const std::vector<double>& theta, uint64_t seed, ThreadPool& pool) const {
    MethodRun r{run_.model, run_.info, options_, seed, false, 1};
    r.registry = run_.registry;
    r.fixed = &theta;
    r.data = run_.data;
    r.pool = &pool;
    r.likelihood_only = true;
    try {
      return filter_each_series(filter_, r).log_likelihood;
    } catch (const Error&) { // every particle's weight zero, a non-finite Kalman step
      return -std::numeric_limits<double>::infinity();
    }
  }

private:
  const MethodRun& run_;
  const Method& filter_;
  const OptionValues& options_;
  const ParameterSpace& space_;
  const LogPrior prior_;
};

// The particle count whose log-likelihood estimates at theta have a standard deviation near
// kTargetLoglikSd (the variance scales as 1/N), from kPilotRuns runs with kPilotParticles.
int64_t pilot_particles(const Target& target, OptionValues& options,
                        const std::vector<double>& theta, uint64_t seed, ThreadPool& pool,
                        double& sd) {
  options.slot("--particles") = kPilotParticles;
  std::vector<double> lls;
  for (int64_t k = 0; k < kPilotRuns; ++k)
    lls.push_back(
        target.loglik(theta, mix_seed(seed ^ mix_seed(static_cast<uint64_t>(k) + 77)), pool));
  double mean = 0, var = 0;
  for (double v : lls)
    mean += v / kPilotRuns;
  for (double v : lls)
    var += (v - mean) * (v - mean) / (kPilotRuns - 1);
  if (!std::isfinite(var))
    throw Error("sample: the pilot runs of the particle filter at the starting values give no "
                "finite log-likelihood (check the data and the starting values)");
  const auto n =
      static_cast<int64_t>(std::ceil(kPilotParticles * var / (kTargetLoglikSd * kTargetLoglikSd)));
  const int64_t chosen = std::clamp<int64_t>(n, 32, 1'000'000);
  sd = std::sqrt(var * kPilotParticles / static_cast<double>(chosen));
  return chosen;
}

Posterior::Chain run_chain(const Target& target, const ParameterSpace& space,
                           const Eigen::VectorXd& u0, const SampleOptions& opt, uint64_t seed,
                           uint32_t chain, const std::function<void(int64_t, int64_t)>& progress) {
  ThreadPool pool(1);
  const Eigen::Index d = u0.size();
  Eigen::VectorXd u = u0;
  if (chain > 0) // dispersed starts, so that R-hat can see a chain that has not mixed
    for (Eigen::Index k = 0; k < d; ++k)
      u[k] += philox_u01(seed, chain, 0, kSiteInit, static_cast<uint32_t>(k)) - 0.5;
  std::vector<double> theta, proposed_theta;
  double lp = target(u, mix_seed(seed ^ mix_seed(chain)), pool, theta);
  for (int tries = 0; !std::isfinite(lp) && tries < 20 && chain > 0; ++tries) {
    u = u0; // a dispersed start outside the support's finite region: fall back
    lp = target(u, mix_seed(seed ^ mix_seed(chain) ^ mix_seed(100 + tries)), pool, theta);
  }
  if (!std::isfinite(lp))
    throw Error(fmt::format("sample: the log posterior is not finite at the start of chain {} "
                            "(check the starting values, the data and the priors)",
                            chain + 1));
  Eigen::MatrixXd L = Eigen::MatrixXd::Identity(d, d) * (0.1 / std::sqrt(double(d)));
  Eigen::VectorXd sum = Eigen::VectorXd::Zero(d);
  Eigen::MatrixXd outer = Eigen::MatrixXd::Zero(d, d);
  int64_t adapt_count = 0, accepted = 0;
  Posterior::Chain out;
  const int64_t total = opt.warmup + opt.iterations;
  for (int64_t i = 1; i <= total; ++i) {
    const auto it = static_cast<uint32_t>(i);
    Eigen::VectorXd z(d);
    for (Eigen::Index k = 0; k < d; ++k)
      z[k] = detail::std_normal_at(seed, chain, it, kSiteStep, static_cast<uint32_t>(k));
    const Eigen::VectorXd proposal = u + L * z;
    const double lp_new =
        target(proposal, mix_seed(seed ^ mix_seed((static_cast<uint64_t>(chain) << 40) + i)), pool,
               proposed_theta);
    const double log_ratio = lp_new - lp;
    const double accept = std::isfinite(log_ratio) ? std::min(1.0, std::exp(log_ratio)) : 0.0;
    if (philox_u01(seed, chain, it, kSiteAccept, 0) < accept) {
      u = proposal;
      lp = lp_new;
      theta.swap(proposed_theta);
      if (i > opt.warmup)
        ++accepted;
    }
    if (i <= opt.warmup) { // adapt from the second half of the first 100 draws on
      if (i > 50) {
        sum += u;
        outer += u * u.transpose();
        ++adapt_count;
      }
      if (i >= 100 && i % 50 == 0 && adapt_count > 2 * d) {
        const double m = static_cast<double>(adapt_count);
        Eigen::MatrixXd cov = (outer - sum * sum.transpose() / m) / (m - 1);
        cov =
            cov * (2.38 * 2.38 / static_cast<double>(d)) + Eigen::MatrixXd::Identity(d, d) * 1e-10;
        Eigen::LLT<Eigen::MatrixXd> llt(cov);
        if (llt.info() == Eigen::Success)
          L = llt.matrixL();
      }
    } else {
      out.theta.emplace_back(theta.begin(), theta.begin() + space.n_theta());
      out.lp.push_back(lp);
      out.accept_stat.push_back(accept);
    }
    if (progress)
      progress(i, total);
  }
  out.acceptance_rate =
      opt.iterations > 0 ? static_cast<double>(accepted) / static_cast<double>(opt.iterations) : 0;
  return out;
}

} // namespace

ParameterSpace sampled_parameters(const MethodRun& run, const std::vector<std::string>& fixed,
                                  const std::string& who) {
  const ModelInfo& info = run.info;
  ParameterSpace space(info, fixed);
  space.require_some(who, "infer");
  if (run.prior) // --prior: its density replaces the model's priors
    return space;
  if (!run.model.prior_logpdf)
    throw Error(fmt::format("{}: the compiler derived no prior density for model '{}': {}", who,
                            info.name, info.no_prior_reason));
  for (const LearnedParam& p : space.learned())
    if (info.params[p.index].prior.empty())
      throw Error(fmt::format("{}: parameter '{}' has no prior; give it one (`param {} ~ "
                              "...`) or keep it at its value with --fix {}",
                              who, info.params[p.index].name, info.params[p.index].name,
                              info.params[p.index].name));
  return space;
}

Posterior sample_pmmh(const MethodRun& run, const SampleOptions& opt) {
  const ModelInfo& info = run.info;
  const ParameterSpace space = sampled_parameters(run, opt.fixed);
  const MethodRegistry& registry = *run.registry;
  const Method* filter = opt.filter == "auto" ? &registry.choose(Task::Filter, run.model, info)
                                              : registry.find(Task::Filter, opt.filter);
  if (!filter)
    throw Error(fmt::format("sample: --filter {}: no such filter ({})", opt.filter,
                            fmt::join(registry.names(Task::Filter), ", ")));
  if (Refusal why = filter->why_not(run.model, info))
    throw Error(fmt::format("sample: --filter {}: {}", filter->name, *why));
  if (Refusal why = filter->likelihood_bias(run.model, info))
    throw Error(fmt::format("sample: --filter {}: PMMH needs an unbiased likelihood estimate, "
                            "and {}",
                            filter->name, *why));
  OptionValues filter_options = registry.default_options(Task::Filter);
  const Target target(run, *filter, filter_options, space);

  Posterior post;
  post.likelihood = filter->name;
  post.exact_likelihood = !filter->particles;
  post.warmup = opt.warmup;
  post.iterations = opt.iterations;
  for (const LearnedParam& p : space.learned())
    post.learned.push_back(info.params[p.index].name);
  const std::vector<double>& given = *run.fixed;
  const std::vector<double> u0v =
      space.unconstrain({given.data(), static_cast<size_t>(space.n_theta())});
  const Eigen::VectorXd u0 = Eigen::Map<const Eigen::VectorXd>(u0v.data(), u0v.size());
  if (filter->particles) {
    ThreadPool pool(std::max(1, run.threads));
    if (opt.particles > 0) {
      post.particles = opt.particles;
    } else {
      post.particles =
          pilot_particles(target, filter_options, given, run.seed, pool, post.pilot_loglik_sd);
      post.particles_chosen = true;
    }
    filter_options.slot("--particles") = post.particles;
  }

  // Chains on min(chains, threads) workers; each chain's draws depend on (seed, chain) only.
  post.chains.resize(static_cast<size_t>(opt.chains));
  run_independent(opt.chains, run.threads, [&](int64_t c) {
    post.chains[static_cast<size_t>(c)] =
        run_chain(target, space, u0, opt, run.seed, static_cast<uint32_t>(c),
                  c == 0 ? run.progress : nullptr);
  });
  for (size_t c = 0; c < post.chains.size(); ++c)
    if (post.chains[c].acceptance_rate < 0.01 && opt.iterations > 0)
      post.warnings.push_back(fmt::format(
          "chain {} accepted {:.2g}% of its proposals: it is stuck{}", c + 1,
          100 * post.chains[c].acceptance_rate,
          post.exact_likelihood ? ""
                                : "; more --particles make the likelihood estimate less noisy"));
  return post;
}

} // namespace ssm
