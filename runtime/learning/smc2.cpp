// SMC^2 over the parameters, a particle filter per parameter particle: see smc2.h.
#include "learning/smc2.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernel/rng.h"
#include "kernel/sampler_algorithms.h"
#include "learning/log_posterior.h"
#include "learning/parameter_space.h"
#include "learning/pmmh.h"
#include "smc/filter.h"
#include "smc/filter_methods.h"
#include "smc/resample.h"

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numbers>

namespace ssm {

namespace {

// Random streams of a run (counters (index, step, site, draw) under the run's seed).
constexpr uint32_t kSiteStart = 0x5332, kSiteResampleTheta = 0x5333, kSiteMove = 0x5334,
                   kSiteMoveAccept = 0x5335, kSiteFinal = 0x5336;
// The initial parameter particles: independent Cauchy draws of scale kStartScale around u0 on
// the unconstrained scale, importance-weighted to the prior (priors are compiled as densities,
// not samplers). Cauchy tails are heavier than those of the priors on that scale (Gaussian,
// logistic, exponential for a log-transformed scale parameter), so the weights are bounded.
// A --prior density is a sampler: the particles are its draws, of equal weights.
constexpr double kStartScale = 2;
// Below this acceptance rate of a move step the filters' particle count doubles, up to
// kMaxParticleFactor times the starting count.
constexpr double kLowAcceptance = 0.2;
constexpr int64_t kMaxParticleFactor = 64;
constexpr double kEssThreshold = 0.5;

double log_sum_exp(const std::vector<double>& v) {
  double m = -std::numeric_limits<double>::infinity();
  for (double x : v)
    m = std::max(m, x);
  if (!std::isfinite(m))
    return m;
  double s = 0;
  for (double x : v)
    s += std::exp(x - m);
  return m + std::log(s);
}

// What every run shares: the model, the series, the filter's options, the parameter space.
struct Setting {
  const MethodRun& run;
  const ParameterSpace& space;
  const LogPrior& prior;
  std::vector<ObsData> series; // the data's series, in order
  FilterOptions filter;        // particles set per filter
  int64_t steps = 0;           // observations over all series
};

// One parameter particle's filters over the series, one after the other.
class Likelihood {
public:
  Likelihood(const Setting& s, std::vector<double> fixed, int64_t particles, ThreadPool& pool)
      : s_(s), fixed_(std::move(fixed)), particles_(particles), pool_(pool) {}

  // Assimilates the next observation under `seed`'s streams (a new filter at a series'
  // start) and returns log p(y_t | y_{0:t-1}, theta) as the filter estimates it.
  double advance(uint64_t seed) {
    while (!pf_ || pf_->t() + 1 >= pf_->T()) { // the next series (data series are not empty)
      const int64_t next = pf_ ? series_ + 1 : 0;
      FilterOptions o = s_.filter;
      o.particles = particles_;
      o.seed = seed;
      o.history = o.moments = false; // the log-likelihood is all it reads
      pf_ = std::make_unique<ParticleFilter>(s_.run.model, s_.run.info, fixed_, s_.series[next], o,
                                             pool_);
      series_ = next;
      before_ = 0;
    }
    pf_->step();
    const double ll = pf_->result().log_likelihood, inc = ll - before_;
    before_ = ll;
    return inc;
  }
  std::unique_ptr<Likelihood> clone(uint64_t seed) const {
    auto c = std::make_unique<Likelihood>(s_, fixed_, particles_, pool_);
    c->series_ = series_;
    c->before_ = before_;
    if (pf_)
      c->pf_ = pf_->clone(seed, pool_);
    return c;
  }
  const std::vector<double>& fixed() const { return fixed_; }

private:
  const Setting& s_;
  std::vector<double> fixed_;
  int64_t particles_;
  ThreadPool& pool_;
  std::unique_ptr<ParticleFilter> pf_;
  int64_t series_ = 0;
  double before_ = 0;
};

struct ThetaParticle {
  std::vector<double> u;
  double log_prior = 0; // log prior density + log-Jacobian at u
  double loglik = 0;    // the filter's estimate of log p(y_{0:t-1} | theta)
  std::unique_ptr<Likelihood> filters;
  double accept = 0; // acceptance probability of its last move (0: never moved)
};

// One SMC^2 run.
class Run {
public:
  Run(const Setting& s, const Smc2Options& opt, uint64_t seed, uint32_t chain,
      std::function<void(int64_t, int64_t)> progress)
      : s_(s), opt_(opt), seed_(seed), chain_(chain), progress_(std::move(progress)), pool_(1),
        particles_(opt.particles) {}

  struct Outcome {
    Posterior::Chain draws;
    double log_evidence = 0;
    int64_t resample_moves = 0, particles = 0;
    std::vector<double> acceptance; // per move step
  };

  Outcome operator()(const std::vector<double>& u0) {
    const int64_t M = opt_.theta_particles, d = s_.space.dimension();
    std::vector<ThetaParticle> p(M);
    std::vector<double> logw(M);
    std::vector<double> draws;
    if (s_.run.prior) {
      std::string error;
      draws =
          s_.run.prior->sample(M, mix_seed(seed_ ^ (uint64_t{kSiteStart} << 32 | chain_)), error);
      if (draws.size() != static_cast<size_t>(M * d))
        throw Error(fmt::format("sample --method smc2: --prior {}: drawing the starting "
                                "parameter particles failed: {}",
                                s_.run.prior->path(), error));
    }
    for (int64_t i = 0; i < M; ++i) {
      p[i].u = u0;
      double log_q = 0;
      if (s_.run.prior)
        std::copy_n(draws.begin() + i * d, d, p[i].u.begin());
      else
        for (int64_t k = 0; k < d; ++k) {
          const double z =
              std::tan(std::numbers::pi * (philox_u01(seed_, chain_, static_cast<uint32_t>(i),
                                                      kSiteStart, static_cast<uint32_t>(k)) -
                                           0.5));
          p[i].u[k] += kStartScale * z;
          log_q += -std::log(std::numbers::pi * kStartScale * (1 + z * z));
        }
      p[i].log_prior = log_prior(p[i].u);
      p[i].filters = fresh(p[i].u);
      // The prior's own draws weigh equally (q is the prior).
      logw[i] = s_.run.prior && std::isfinite(p[i].log_prior) ? 0 : p[i].log_prior - log_q;
    }
    Outcome out;
    // The starting importance sampling's normalising constant: the mean of its weights.
    out.log_evidence = log_sum_exp(logw) - std::log(static_cast<double>(M));
    if (!std::isfinite(out.log_evidence))
      throw Error(fmt::format("sample --method smc2: no starting parameter particle has a finite "
                              "prior density (run {})",
                              chain_ + 1));
    for (int64_t t = 0; t < s_.steps; ++t) {
      if (ess(logw) < kEssThreshold * static_cast<double>(M)) {
        resample(p, logw, t);
        out.acceptance.push_back(move(p, t));
        ++out.resample_moves;
        // At t = 0 the moves target the prior alone: their acceptance says nothing of N_x.
        if (t > 0 && out.acceptance.back() < kLowAcceptance &&
            particles_ * 2 <= kMaxParticleFactor * opt_.particles) {
          // The exchange's incremental weights p_new / p_old enter the evidence too.
          const double before = log_sum_exp(logw);
          exchange(p, logw, t);
          out.log_evidence += log_sum_exp(logw) - before;
        }
      }
      std::vector<double> inc(M);
      for (int64_t i = 0; i < M; ++i) {
        try {
          inc[i] = p[i].filters->advance(filter_seed());
        } catch (const Error&) { // every state particle's weight vanished: this theta is out
          inc[i] = -std::numeric_limits<double>::infinity();
        }
        if (!std::isfinite(inc[i]))
          inc[i] = -std::numeric_limits<double>::infinity();
        p[i].loglik += inc[i];
      }
      // log sum_i W_i p(y_t | ..., theta_i), W the normalised weights before y_t.
      const double norm = log_sum_exp(logw);
      for (int64_t i = 0; i < M; ++i)
        logw[i] += inc[i];
      const double next = log_sum_exp(logw);
      if (!std::isfinite(next))
        throw Error(fmt::format("sample --method smc2: every parameter particle's weight "
                                "vanished at observation {} (run {}); more --particles",
                                t, chain_ + 1));
      out.log_evidence += next - norm;
      if (progress_)
        progress_(t, s_.steps);
    }
    // The draws: the final particles resampled to equal weights.
    std::vector<double> w(M);
    const double top = *std::max_element(logw.begin(), logw.end());
    for (int64_t i = 0; i < M; ++i)
      w[i] = std::exp(logw[i] - top);
    std::vector<int64_t> a(M);
    systematic_resample(w.data(), M, philox_u01(seed_, chain_, 0, kSiteFinal, 0), a.data());
    const auto n = static_cast<size_t>(s_.space.n_theta());
    double accepted = 0;
    for (double r : out.acceptance)
      accepted += r;
    out.draws.acceptance_rate =
        out.acceptance.empty() ? 0 : accepted / static_cast<double>(out.acceptance.size());
    for (int64_t i = 0; i < M; ++i) {
      const ThetaParticle& q = p[a[i]];
      std::vector<double> theta(s_.run.fixed->begin(), s_.run.fixed->begin() + n);
      s_.space.constrain(q.u, theta);
      out.draws.theta.push_back(std::move(theta));
      out.draws.lp.push_back(q.log_prior + q.loglik);
      out.draws.accept_stat.push_back(q.accept);
    }
    out.particles = particles_;
    return out;
  }

private:
  const Setting& s_;
  const Smc2Options& opt_;
  uint64_t seed_;
  uint32_t chain_;
  std::function<void(int64_t, int64_t)> progress_;
  ThreadPool pool_; // one thread: the runs are what runs in parallel
  int64_t particles_;
  uint64_t filters_made_ = 0;

  uint64_t filter_seed() {
    return mix_seed(seed_ ^ mix_seed((uint64_t{chain_} << 44) + ++filters_made_));
  }

  // log prior density + log-Jacobian at u (or --prior's density of u); -inf outside the
  // support's finite region.
  double log_prior(const std::vector<double>& u) const {
    try {
      const double lp = s_.prior.evaluate(u, nullptr);
      return std::isfinite(lp) ? lp : -std::numeric_limits<double>::infinity();
    } catch (const Error&) { // θ(u) overflows
      return -std::numeric_limits<double>::infinity();
    }
  }

  // Filters for the parameters at u that have assimilated nothing yet.
  std::unique_ptr<Likelihood> fresh(const std::vector<double>& u) {
    std::vector<double> fixed = *s_.run.fixed;
    const auto n = static_cast<size_t>(s_.space.n_theta());
    try {
      s_.space.constrain(u, {fixed.data(), n});
    } catch (const Error&) {
    }
    return std::make_unique<Likelihood>(s_, std::move(fixed), particles_, pool_);
  }

  // Filters for u run over the first t observations; the estimate of log p(y_{0:t-1} | theta).
  std::unique_ptr<Likelihood> run_to(const std::vector<double>& u, int64_t t, double& loglik) {
    std::unique_ptr<Likelihood> f = fresh(u);
    loglik = 0;
    try {
      for (int64_t k = 0; k < t && std::isfinite(loglik); ++k)
        loglik += f->advance(filter_seed());
    } catch (const Error&) {
      loglik = -std::numeric_limits<double>::infinity();
    }
    if (!std::isfinite(loglik))
      loglik = -std::numeric_limits<double>::infinity();
    return f;
  }

  static double ess(const std::vector<double>& logw) {
    const double top = *std::max_element(logw.begin(), logw.end());
    double s = 0, s2 = 0;
    for (double l : logw) {
      const double w = std::exp(l - top);
      s += w;
      s2 += w * w;
    }
    return s * s / s2;
  }

  // Systematic resampling of the parameter particles; a duplicate's filters are copies that draw
  // from new streams.
  void resample(std::vector<ThetaParticle>& p, std::vector<double>& logw, int64_t t) {
    const auto M = static_cast<int64_t>(p.size());
    std::vector<double> w(M);
    const double top = *std::max_element(logw.begin(), logw.end());
    for (int64_t i = 0; i < M; ++i)
      w[i] = std::exp(logw[i] - top);
    std::vector<int64_t> a(M);
    systematic_resample(w.data(), M,
                        philox_u01(seed_, chain_, static_cast<uint32_t>(t), kSiteResampleTheta, 0),
                        a.data());
    std::vector<ThetaParticle> next(M);
    std::vector<char> taken(M, 0);
    for (int64_t i = 0; i < M; ++i) {
      ThetaParticle& from = p[a[i]];
      next[i].u = from.u;
      next[i].log_prior = from.log_prior;
      next[i].loglik = from.loglik;
      next[i].accept = from.accept;
      next[i].filters = taken[a[i]] ? from.filters->clone(filter_seed()) : nullptr;
      taken[a[i]] = 1;
    }
    // First copies take the original filters (after every clone was made from them).
    for (int64_t i = 0; i < M; ++i)
      if (!next[i].filters) {
        next[i].filters = std::move(p[a[i]].filters);
      }
    p = std::move(next);
    std::fill(logw.begin(), logw.end(), 0.0);
  }

  // opt_.moves PMMH moves of every particle at t (y_{0:t-1} assimilated): a Gaussian random walk
  // with 2.38^2 / d times the particles' covariance. Returns the acceptance rate.
  double move(std::vector<ThetaParticle>& p, int64_t t) {
    const auto M = static_cast<int64_t>(p.size());
    const int64_t d = s_.space.dimension();
    Eigen::VectorXd mean = Eigen::VectorXd::Zero(d);
    for (const ThetaParticle& q : p)
      mean += Eigen::Map<const Eigen::VectorXd>(q.u.data(), d);
    mean /= static_cast<double>(M);
    Eigen::MatrixXd cov = Eigen::MatrixXd::Zero(d, d);
    for (const ThetaParticle& q : p) {
      const Eigen::VectorXd c = Eigen::Map<const Eigen::VectorXd>(q.u.data(), d) - mean;
      cov += c * c.transpose();
    }
    cov = cov / static_cast<double>(std::max<int64_t>(M - 1, 1)) * (2.38 * 2.38 / double(d)) +
          Eigen::MatrixXd::Identity(d, d) * 1e-10;
    Eigen::LLT<Eigen::MatrixXd> llt(cov);
    const Eigen::MatrixXd L = llt.info() == Eigen::Success ? Eigen::MatrixXd(llt.matrixL())
                                                           : Eigen::MatrixXd::Identity(d, d) * 0.1;
    int64_t accepted = 0;
    for (int64_t m = 0; m < opt_.moves; ++m)
      for (int64_t i = 0; i < M; ++i) {
        const auto draw = static_cast<uint32_t>(i);
        const auto at = static_cast<uint32_t>(t * opt_.moves + m);
        Eigen::VectorXd z(d);
        for (int64_t k = 0; k < d; ++k)
          z[k] = detail::std_normal_at(seed_ ^ mix_seed(chain_), draw, at, kSiteMove,
                                       static_cast<uint32_t>(k));
        const Eigen::VectorXd step = L * z;
        std::vector<double> u = p[i].u;
        for (int64_t k = 0; k < d; ++k)
          u[k] += step[k];
        const double lp = log_prior(u);
        double ll = -std::numeric_limits<double>::infinity();
        std::unique_ptr<Likelihood> f;
        if (std::isfinite(lp))
          f = run_to(u, t, ll);
        const double log_ratio = lp + ll - p[i].log_prior - p[i].loglik;
        const double accept = std::isfinite(log_ratio) ? std::min(1.0, std::exp(log_ratio)) : 0;
        p[i].accept = accept;
        if (philox_u01(seed_ ^ mix_seed(chain_), draw, at, kSiteMoveAccept, 0) < accept) {
          p[i].u = std::move(u);
          p[i].log_prior = lp;
          p[i].loglik = ll;
          p[i].filters = std::move(f);
          ++accepted;
        }
      }
    return static_cast<double>(accepted) / static_cast<double>(M * opt_.moves);
  }

  // Doubles the filters' particles: every particle's filters rerun over y_{0:t-1} with twice as
  // many, its weight multiplied by the ratio of the new estimate to the old (Chopin et al. 2013,
  // the exchange step).
  void exchange(std::vector<ThetaParticle>& p, std::vector<double>& logw, int64_t t) {
    particles_ *= 2;
    for (size_t i = 0; i < p.size(); ++i) {
      double ll = 0;
      p[i].filters = run_to(p[i].u, t, ll);
      logw[i] += ll - p[i].loglik;
      p[i].loglik = ll;
    }
  }
};

} // namespace

Posterior sample_smc2(const MethodRun& run, const Smc2Options& opt) {
  const ModelInfo& info = run.info;
  const ParameterSpace space = sampled_parameters(run, opt.fixed);
  const MethodRegistry& registry = *run.registry;
  const Method* filter = opt.filter == "auto"
                             ? &registry.choose(Task::Filter, run.model, info, true)
                             : registry.find(Task::Filter, opt.filter);
  if (!filter)
    throw Error(fmt::format("sample --method smc2: --filter {}: no such filter ({})", opt.filter,
                            fmt::join(registry.names(Task::Filter), ", ")));
  if (!filter->particles)
    throw Error(fmt::format("sample --method smc2: --filter {} is exact; SMC^2 runs a particle "
                            "filter per parameter particle (use --method pmmh with an exact "
                            "filter, or --filter {})",
                            filter->name,
                            registry.choose(Task::Filter, run.model, info, true).name));
  if (Refusal why = filter->why_not(run.model, info))
    throw Error(fmt::format("sample --method smc2: --filter {}: {}", filter->name, *why));
  if (Refusal why = filter->likelihood_bias(run.model, info))
    throw Error(fmt::format("sample --method smc2: --filter {}: SMC^2 needs an unbiased "
                            "likelihood estimate, and {}",
                            filter->name, *why));

  const LogPrior prior(run.model, space, *run.fixed, run.prior);
  Setting setting{
      run,
      space,
      prior,
      {},
      particle_filter_options(filter->name, registry.default_options(Task::Filter), run.seed),
      0};
  const ObsData& data = *run.data;
  if (data.series.start.empty())
    setting.series.push_back(data);
  else
    for (int64_t k = 0; k < data.series.count(); ++k)
      setting.series.push_back(data.one_series(k));
  setting.steps = data.T;

  const std::vector<double> u0 =
      space.unconstrain({run.fixed->data(), static_cast<size_t>(space.n_theta())});
  std::vector<Run::Outcome> outcomes(static_cast<size_t>(opt.chains));
  run_independent(opt.chains, run.threads, [&](int64_t c) { // run 0 reports progress
    Run one(setting, opt, run.seed, static_cast<uint32_t>(c),
            c == 0 ? run.progress : std::function<void(int64_t, int64_t)>());
    outcomes[static_cast<size_t>(c)] = one(u0);
  });

  Posterior post;
  post.likelihood = filter->name;
  post.exact_likelihood = false;
  post.particles = opt.particles; // at the start; details.final_particles after exchanges
  post.iterations = opt.theta_particles;
  for (const LearnedParam& p : space.learned())
    post.learned.push_back(info.params[p.index].name);
  std::vector<double> log_z;
  nlohmann::json resample_moves = nlohmann::json::array(),
                 final_particles = nlohmann::json::array();
  for (Run::Outcome& o : outcomes) {
    post.chains.push_back(std::move(o.draws));
    log_z.push_back(o.log_evidence);
    resample_moves.push_back(o.resample_moves);
    final_particles.push_back(o.particles);
  }
  // The evidence of the pooled runs: the mean of their (unbiased) estimates of p(y); its
  // standard error by the delta method from their spread.
  const auto R = static_cast<double>(log_z.size());
  const double log_mean = log_sum_exp(log_z) - std::log(R);
  double var = 0;
  for (double l : log_z)
    var += (std::exp(l - log_mean) - 1) * (std::exp(l - log_mean) - 1);
  post.log_evidence = log_mean;
  post.log_evidence_se = R > 1 ? std::sqrt(var / (R - 1) / R) : NAN;
  post.details = {{"theta_particles", opt.theta_particles},
                  {"particles_start", opt.particles},
                  {"moves", opt.moves},
                  {"run_log_evidence", log_z},
                  {"resample_moves", resample_moves},
                  {"final_particles", final_particles}};
  for (size_t c = 0; c < post.chains.size(); ++c)
    if (post.chains[c].acceptance_rate < 0.01 && !outcomes[c].acceptance.empty())
      post.warnings.push_back(fmt::format(
          "run {} accepted {:.2g}% of its moves: more --particles make the likelihood estimates "
          "less noisy",
          c + 1, 100 * post.chains[c].acceptance_rate));
  return post;
}

} // namespace ssm
