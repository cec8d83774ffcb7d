// Posterior samplers driven by a likelihood-to-evidence ratio: see ratio_samplers.h.
#include "lfi/ratio_samplers.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernel/rng.h"
#include "kernel/sampler_algorithms.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace ssm::lfi {

namespace {

constexpr int64_t kBatch = 4096; // prior draws simulated and evaluated together

// Streams of one run, so that no two uses share Philox counters.
enum Stream : uint64_t { BoundDraws = 1, Proposals, Accept, Start, Moves, Tempering };

uint64_t stream_seed(uint64_t seed, uint64_t stream, uint64_t index) {
  return mix_seed(seed ^ mix_seed(stream * 0x100000000ULL + index));
}

// A uniform for decision `k` of chain `chain` in a run.
double uniform(uint64_t seed, int64_t chain, int64_t k) {
  return philox_u01(stream_seed(seed, Accept, chain), static_cast<uint32_t>(k),
                    static_cast<uint32_t>(k >> 32), 0, 0);
}

void check_finite_ratio(const std::vector<double>& lr, const std::vector<double>& theta,
                        int64_t P) {
  for (size_t i = 0; i < lr.size(); ++i)
    if (std::isnan(lr[i]) || lr[i] == INFINITY) {
      std::vector<double> at(theta.begin() + i * P, theta.begin() + (i + 1) * P);
      throw Error(
          fmt::format("the log ratio is {} at parameters ({})", lr[i], fmt::join(at, ", ")));
    }
}

// Prior draws and their log ratios, batch after batch of one stream.
class PriorProposals {
public:
  PriorProposals(const Simulator& sim, const LogRatio& log_ratio, uint64_t seed, ThreadPool& pool,
                 int64_t batch = kBatch)
      : sim_(sim), log_ratio_(log_ratio), seed_(seed), pool_(pool), batch_(batch) {}

  // The next draw: its parameters (valid until the next call) and log r.
  std::pair<const double*, double> next() {
    if (i_ == static_cast<int64_t>(lr_.size()))
      refill();
    const int64_t i = i_++;
    return {theta_.data() + i * sim_.n_params(), lr_[i]};
  }
  int64_t evaluations() const { return evaluations_; }

private:
  void refill() {
    const int64_t P = sim_.n_params();
    theta_.resize(batch_ * P);
    lr_.resize(batch_);
    sim_.simulate(mix_seed(seed_ ^ mix_seed(batch_index_++)), batch_, theta_.data(), nullptr,
                  &pool_);
    log_ratio_(theta_.data(), batch_, lr_.data());
    check_finite_ratio(lr_, theta_, P);
    evaluations_ += batch_;
    i_ = 0;
  }

  const Simulator& sim_;
  const LogRatio& log_ratio_;
  uint64_t seed_;
  ThreadPool& pool_;
  int64_t batch_;
  uint64_t batch_index_ = 0;
  std::vector<double> theta_, lr_;
  int64_t i_ = 0, evaluations_ = 0;
};

// log(target(new) / target(old)) for a Metropolis-Hastings test, where a target of 0 (log -inf)
// never is moved to and is always left: -inf - -inf would be NaN.
double log_odds(double log_new, double log_old) {
  if (log_new == -INFINITY)
    return -INFINITY;
  if (log_old == -INFINITY)
    return INFINITY;
  return log_new - log_old;
}

void keep(RatioDraws::Chain& chain, const double* theta, int64_t P, double lr, double accept) {
  chain.theta.insert(chain.theta.end(), theta, theta + P);
  chain.log_ratio.push_back(lr);
  chain.accept_stat.push_back(accept);
}

RatioDraws accept_reject(const Simulator& sim, const LogRatio& log_ratio,
                         const RatioSamplerOptions& o, ThreadPool& pool) {
  const int64_t P = sim.n_params();
  RatioDraws out;
  out.chains.resize(1);
  // C starts at the largest ratio among prior draws (the thesis takes the training parameters,
  // which are prior draws too).
  const int64_t bound_draws = std::max<int64_t>(1, o.bound_draws);
  PriorProposals start(sim, log_ratio, stream_seed(o.seed, BoundDraws, 0), pool, bound_draws);
  double log_c = -INFINITY;
  for (int64_t i = 0; i < bound_draws; ++i)
    log_c = std::max(log_c, start.next().second);
  if (log_c == -INFINITY)
    throw Error(fmt::format("accept-reject: every one of the {} prior draws that set the bound has "
                            "ratio 0: the observation is out of the prior predictive's reach (or "
                            "give more --bound-draws)",
                            bound_draws));
  out.log_bound_start = log_c;
  PriorProposals proposals(sim, log_ratio, stream_seed(o.seed, Proposals, 0), pool);
  int64_t accepted = 0;
  while (accepted < o.draws) {
    if (out.proposals >= o.max_proposals)
      throw Error(fmt::format("accept-reject accepted {} of {} prior draws before the limit of "
                              "{} proposals: the posterior is far narrower than the prior; "
                              "sir or imh need fewer ratio evaluations",
                              accepted, out.proposals, o.max_proposals));
    const auto [theta, lr] = proposals.next();
    if (lr > log_c) { // Algorithm 2: the bound rises before the test
      log_c = lr;
      out.accepted_under_lower_bound = accepted;
      ++out.bound_raises;
    }
    if (lr > -INFINITY && std::log(uniform(o.seed, 0, out.proposals++)) <= lr - log_c) {
      keep(out.chains[0], theta, P, lr, 1.0);
      ++accepted;
    }
  }
  out.log_bound = log_c;
  out.acceptance_rate = static_cast<double>(accepted) / static_cast<double>(out.proposals);
  out.chains[0].acceptance_rate = out.acceptance_rate;
  out.ratio_evaluations = start.evaluations() + proposals.evaluations();
  // Until C stops rising, every proposal is accepted with probability r / C for one C, so the
  // draws follow prior x ratio wherever the ratio is below the starting bound; only the
  // proposals that raised it were accepted too often.
  if (out.accepted_under_lower_bound > 0)
    out.warnings.push_back(fmt::format(
        "accept-reject: {} proposal(s) had a larger ratio than the largest of the {} "
        "--bound-draws prior draws (up to {:.6g} times it) and raised the bound, each accepted "
        "with probability 1: parameters with such ratios are over-represented among the first "
        "{} of the {} draws (more --bound-draws start the bound higher)",
        out.bound_raises, bound_draws, std::exp(out.log_bound - out.log_bound_start),
        out.accepted_under_lower_bound, o.draws));
  return out;
}

// imh and barker: chains of independent prior proposals.
RatioDraws independent_chains(const Simulator& sim, const LogRatio& log_ratio,
                              const RatioSamplerOptions& o, ThreadPool& pool, bool barker) {
  const int64_t P = sim.n_params();
  RatioDraws out;
  int64_t accepted = 0;
  for (int64_t c = 0; c < o.chains; ++c) {
    RatioDraws::Chain& chain = out.chains.emplace_back();
    PriorProposals proposals(sim, log_ratio, stream_seed(o.seed, Proposals, c), pool,
                             std::min<int64_t>(kBatch, o.warmup + o.draws + 1));
    auto [first, lr] = proposals.next();
    std::vector<double> current(first, first + P);
    int64_t chain_accepted = 0;
    for (int64_t t = 0; t < o.warmup + o.draws; ++t) {
      const auto [theta, lr_new] = proposals.next();
      const double odds = log_odds(lr_new, lr);
      const double alpha = barker ? 1.0 / (1.0 + std::exp(-odds)) : std::exp(std::min(0.0, odds));
      if (uniform(o.seed, c, t) < alpha) {
        std::copy(theta, theta + P, current.begin());
        lr = lr_new;
        ++accepted;
        chain_accepted += t >= o.warmup;
      }
      if (t >= o.warmup)
        keep(chain, current.data(), P, lr, alpha);
    }
    chain.acceptance_rate = static_cast<double>(chain_accepted) / static_cast<double>(o.draws);
    out.ratio_evaluations += proposals.evaluations();
  }
  out.proposals = o.chains * (o.warmup + o.draws);
  out.acceptance_rate = static_cast<double>(accepted) / static_cast<double>(out.proposals);
  return out;
}

// is and sir: a pool of prior draws weighted by r.
RatioDraws importance(const Simulator& sim, const LogRatio& log_ratio, const RatioSamplerOptions& o,
                      ThreadPool& pool, bool resample) {
  const int64_t P = sim.n_params();
  const int64_t n = resample ? (o.pool > 0 ? o.pool : 20 * o.draws) : o.draws;
  std::vector<double> theta(n * P), lr(n);
  sim.simulate(stream_seed(o.seed, Proposals, 0), n, theta.data(), nullptr, &pool);
  log_ratio(theta.data(), n, lr.data());
  check_finite_ratio(lr, theta, P);
  const double top = *std::max_element(lr.begin(), lr.end());
  if (top == -INFINITY)
    throw Error(fmt::format("every one of the {} prior draws has ratio 0: the observation is "
                            "out of the prior predictive's reach",
                            n));
  double sum = 0, sum_sq = 0;
  for (double l : lr) {
    const double w = std::exp(l - top);
    sum += w;
    sum_sq += w * w;
  }
  RatioDraws out;
  out.proposals = out.ratio_evaluations = n;
  out.importance_ess = sum * sum / sum_sq;
  out.chains.resize(1);
  const double log_sum = top + std::log(sum);
  if (!resample) {
    for (int64_t i = 0; i < n; ++i) {
      keep(out.chains[0], theta.data() + i * P, P, lr[i], 1.0);
      out.log_weight.push_back(lr[i] - log_sum);
    }
    return out;
  }
  std::vector<double> cumulative(n);
  double running = 0;
  for (int64_t i = 0; i < n; ++i)
    cumulative[i] = running += std::exp(lr[i] - top) / sum;
  for (int64_t m = 0; m < o.draws; ++m) {
    const double u = uniform(o.seed, 0, m) * running;
    const int64_t i = std::min<int64_t>(
        n - 1, std::upper_bound(cumulative.begin(), cumulative.end(), u) - cumulative.begin());
    keep(out.chains[0], theta.data() + i * P, P, lr[i], 1.0);
  }
  return out;
}

// Random-walk Metropolis on log p(theta) + log r(theta), chains in lockstep so that each step's
// ratios are one batch.
RatioDraws random_walk(const Simulator& sim, const LogRatio& log_ratio,
                       const RatioSamplerOptions& o, ThreadPool& pool) {
  const int64_t P = sim.n_params(), C = o.chains;
  // The prior's spread per component sets the proposal's shape.
  const int64_t n_scale = 2000;
  std::vector<double> prior(n_scale * P);
  sim.simulate(stream_seed(o.seed, BoundDraws, 0), n_scale, prior.data(), nullptr, &pool);
  std::vector<double> sd(P);
  for (int64_t c = 0; c < P; ++c) {
    double mean = 0, sq = 0;
    for (int64_t i = 0; i < n_scale; ++i)
      mean += prior[i * P + c] / n_scale;
    for (int64_t i = 0; i < n_scale; ++i)
      sq += (prior[i * P + c] - mean) * (prior[i * P + c] - mean) / (n_scale - 1);
    sd[c] = std::sqrt(sq) > 0 ? std::sqrt(sq) : 1.0;
  }
  std::vector<double> theta(C * P), proposal(C * P), lp(C), lp_new(C), lr(C), lr_new(C),
      prior_new(C);
  // Each chain starts at a prior draw of positive ratio.
  RatioDraws out;
  PriorProposals starts(sim, log_ratio, stream_seed(o.seed, Start, 0), pool,
                        std::max<int64_t>(C, 256));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t tries = 0;; ++tries) {
      if (tries == 100000)
        throw Error("mcmc: 100000 prior draws have ratio 0: the observation is out of the prior "
                    "predictive's reach");
      const auto [th, l] = starts.next();
      if (l > -INFINITY) {
        std::copy(th, th + P, theta.begin() + c * P);
        lr[c] = l;
        break;
      }
    }
  sim.log_prior(theta.data(), C, lp.data());
  for (int64_t c = 0; c < C; ++c)
    lp[c] += lr[c];
  out.chains.resize(C);
  out.ratio_evaluations = starts.evaluations();
  double log_step = std::log(2.38 / std::sqrt(static_cast<double>(std::max<int64_t>(P, 1))));
  int64_t accepted = 0;
  std::vector<int64_t> chain_accepted(C, 0);
  const uint64_t moves = stream_seed(o.seed, Moves, 0);
  for (int64_t t = 0; t < o.warmup + o.draws; ++t) {
    const double step = std::exp(log_step);
    for (int64_t c = 0; c < C; ++c)
      for (int64_t k = 0; k < P; ++k)
        proposal[c * P + k] =
            theta[c * P + k] + step * sd[k] *
                                   detail::std_normal_at(moves, static_cast<uint32_t>(c * P + k),
                                                         static_cast<uint32_t>(t), 0,
                                                         static_cast<uint32_t>(t >> 32));
    sim.log_prior(proposal.data(), C, prior_new.data());
    log_ratio(proposal.data(), C, lr_new.data());
    out.ratio_evaluations += C;
    double mean_alpha = 0;
    for (int64_t c = 0; c < C; ++c) {
      const bool inside = prior_new[c] > -INFINITY;
      if (inside && (std::isnan(lr_new[c]) || lr_new[c] == INFINITY))
        throw Error(fmt::format("the log ratio is {} at a proposal of mcmc", lr_new[c]));
      lp_new[c] = inside ? prior_new[c] + lr_new[c] : -INFINITY;
      const double alpha = std::exp(std::min(0.0, log_odds(lp_new[c], lp[c])));
      mean_alpha += alpha / C;
      if (uniform(o.seed, c, t) < alpha) {
        std::copy(proposal.begin() + c * P, proposal.begin() + (c + 1) * P, theta.begin() + c * P);
        lp[c] = lp_new[c];
        lr[c] = lr_new[c];
        ++accepted;
        chain_accepted[c] += t >= o.warmup;
      }
      if (t >= o.warmup)
        keep(out.chains[c], theta.data() + c * P, P, lr[c], alpha);
    }
    if (t < o.warmup) // Robbins-Monro towards the random walk's optimal acceptance
      log_step += (mean_alpha - 0.234) / std::sqrt(static_cast<double>(t + 1));
  }
  for (int64_t c = 0; c < C; ++c)
    out.chains[c].acceptance_rate =
        static_cast<double>(chain_accepted[c]) / static_cast<double>(std::max<int64_t>(1, o.draws));
  out.proposals = C * (o.warmup + o.draws);
  out.acceptance_rate = static_cast<double>(accepted) / static_cast<double>(out.proposals);
  out.step = std::exp(log_step);
  return out;
}

// The sample covariance's Cholesky factor of particles (N x P rows), scaled.
std::vector<double> scaled_cholesky(const std::vector<double>& theta, int64_t N, int64_t P,
                                    double scale) {
  std::vector<double> mean(P, 0.0), cov(P * P, 0.0), L(P * P, 0.0);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t k = 0; k < P; ++k)
      mean[k] += theta[i * P + k] / static_cast<double>(N);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t a = 0; a < P; ++a)
      for (int64_t b = 0; b <= a; ++b)
        cov[a * P + b] += (theta[i * P + a] - mean[a]) * (theta[i * P + b] - mean[b]) /
                          static_cast<double>(N - 1);
  for (int64_t a = 0; a < P; ++a) // Cholesky, with a floor against a collapsed component
    for (int64_t b = 0; b <= a; ++b) {
      double sum = cov[a * P + b];
      for (int64_t k = 0; k < b; ++k)
        sum -= L[a * P + k] * L[b * P + k];
      L[a * P + b] = a == b ? std::sqrt(std::max(sum, 1e-24)) : sum / L[b * P + b];
    }
  for (double& v : L)
    v *= scale;
  return L;
}

// The incremental weights exp(delta lr_i), scaled by their largest, into w; returns the log of
// that scale.
double incremental_weights(const std::vector<double>& lr, double delta, std::vector<double>& w) {
  double top = -INFINITY;
  for (double l : lr)
    if (l > -INFINITY)
      top = std::max(top, delta * l);
  for (size_t i = 0; i < lr.size(); ++i)
    w[i] = lr[i] == -INFINITY ? 0.0 : std::exp(delta * lr[i] - top);
  return top;
}

// Tempered SMC: prior -> prior x ratio^beta -> prior x ratio.
RatioDraws tempered_smc(const Simulator& sim, const LogRatio& log_ratio,
                        const RatioSamplerOptions& o, ThreadPool& pool) {
  const int64_t P = sim.n_params();
  const int64_t N = o.pool > 0 ? o.pool : std::max<int64_t>(o.draws, 2000);
  std::vector<double> theta(N * P), lr(N), lp(N);
  sim.simulate(stream_seed(o.seed, Proposals, 0), N, theta.data(), nullptr, &pool);
  log_ratio(theta.data(), N, lr.data());
  check_finite_ratio(lr, theta, P);
  if (*std::max_element(lr.begin(), lr.end()) == -INFINITY)
    throw Error(fmt::format("smc: every one of the {} prior draws has ratio 0: the observation "
                            "is out of the prior predictive's reach",
                            N));
  sim.log_prior(theta.data(), N, lp.data());
  RatioDraws out;
  out.ratio_evaluations = N;
  out.temperatures.push_back(0);
  double beta = 0, scale = 2.38 / std::sqrt(static_cast<double>(P));
  int64_t accepted = 0, proposed = 0;
  std::vector<double> w(N), proposal(N * P), lr_new(N), lp_new(N), next(N * P);
  auto ess_at = [&](double b) {
    incremental_weights(lr, b - beta, w);
    double sum = 0, sq = 0;
    for (double v : w) {
      sum += v;
      sq += v * v;
    }
    return sum * sum / sq;
  };
  for (int64_t step = 1; beta < 1; ++step) {
    if (step > 1000)
      throw Error("smc: no tempering schedule in 1000 steps: the ratio is too sharp for the "
                  "particles (give more with --pool)");
    // The next beta keeps the incremental weights' ESS at half the particles (bisection).
    double next_beta = 1;
    if (ess_at(1) < 0.5 * static_cast<double>(N)) {
      double lo = beta, hi = 1;
      for (int it = 0; it < 60; ++it) {
        const double mid = 0.5 * (lo + hi);
        (ess_at(mid) < 0.5 * static_cast<double>(N) ? hi : lo) = mid;
      }
      next_beta = std::max(lo, beta + 1e-12);
    }
    const double top = incremental_weights(lr, next_beta - beta, w);
    double sum = 0;
    for (double v : w)
      sum += v;
    out.log_evidence += top + std::log(sum / static_cast<double>(N));
    beta = next_beta;
    out.temperatures.push_back(beta);
    // Systematic resampling.
    const double u0 = philox_u01(stream_seed(o.seed, Tempering, step), 0, 0, 0, 0);
    double cumulative = w[0];
    int64_t j = 0;
    for (int64_t i = 0; i < N; ++i) {
      const double u = (static_cast<double>(i) + u0) * sum / static_cast<double>(N);
      while (j < N - 1 && cumulative < u)
        cumulative += w[++j];
      std::copy_n(theta.begin() + j * P, P, next.begin() + i * P);
      lr_new[i] = lr[j];
      lp_new[i] = lp[j];
    }
    theta.swap(next);
    lr.swap(lr_new);
    lp.swap(lp_new);
    // Moves: random-walk Metropolis on prior x ratio^beta, the step scaled towards 0.234.
    for (int64_t m = 0; m < o.moves; ++m) {
      const std::vector<double> L = scaled_cholesky(theta, N, P, scale);
      const uint64_t seed = stream_seed(o.seed, Tempering, step * 1000 + m + 1);
      for (int64_t i = 0; i < N; ++i)
        for (int64_t a = 0; a < P; ++a) {
          double v = theta[i * P + a];
          for (int64_t b = 0; b <= a; ++b)
            v += L[a * P + b] * detail::std_normal_at(seed, static_cast<uint32_t>(i), 0, 0,
                                                      static_cast<uint32_t>(b));
          proposal[i * P + a] = v;
        }
      sim.log_prior(proposal.data(), N, lp_new.data());
      log_ratio(proposal.data(), N, lr_new.data());
      out.ratio_evaluations += N;
      int64_t moved = 0;
      for (int64_t i = 0; i < N; ++i) {
        const bool inside = lp_new[i] > -INFINITY;
        if (inside && (std::isnan(lr_new[i]) || lr_new[i] == INFINITY))
          throw Error(fmt::format("the log ratio is {} at a proposal of smc", lr_new[i]));
        // beta * -inf is -inf for beta > 0; the prior's -inf rules outside the support.
        const double target_new = inside ? lp_new[i] + beta * lr_new[i] : -INFINITY;
        const double alpha = std::exp(std::min(0.0, log_odds(target_new, lp[i] + beta * lr[i])));
        if (philox_u01(seed, static_cast<uint32_t>(i), 1, 0, 0) < alpha) {
          std::copy_n(proposal.begin() + i * P, P, theta.begin() + i * P);
          lr[i] = lr_new[i];
          lp[i] = lp_new[i];
          ++moved;
        }
      }
      accepted += moved;
      proposed += N;
      scale *= std::exp(static_cast<double>(moved) / static_cast<double>(N) - 0.234);
    }
  }
  // The particles are equally weighted after the last resampling and moves.
  out.chains.resize(1);
  for (int64_t i = 0; i < o.draws; ++i) {
    const int64_t k = i * N / o.draws;
    keep(out.chains[0], theta.data() + k * P, P, lr[k], 1.0);
  }
  out.proposals = proposed + N;
  out.acceptance_rate =
      static_cast<double>(accepted) / static_cast<double>(std::max<int64_t>(1, proposed));
  out.chains[0].acceptance_rate = out.acceptance_rate;
  return out;
}

} // namespace

const std::vector<RatioSamplerInfo>& ratio_samplers() {
  static const std::vector<RatioSamplerInfo> table = {
      {"ar", "accept-reject with the running bound of Algorithm 2"},
      {"imh", "independent Metropolis-Hastings with prior proposals"},
      {"barker", "independent proposals with Barker's acceptance"},
      {"is", "importance sampling: prior draws weighted by the ratio"},
      {"sir", "sampling importance resampling"},
      {"mcmc", "random-walk Metropolis on prior x ratio"},
      {"smc", "tempered SMC from the prior to prior x ratio"},
  };
  return table;
}

RatioDraws sample_with_ratio(const Simulator& sim, const LogRatio& log_ratio,
                             const RatioSamplerOptions& o) {
  if (o.draws < 1 || o.chains < 1 || o.warmup < 0)
    throw Error("posterior: --draws and --chains must be positive, --warmup non-negative");
  ThreadPool pool(std::max(1, o.threads));
  RatioDraws out;
  if (o.sampler == "ar")
    out = accept_reject(sim, log_ratio, o, pool);
  else if (o.sampler == "imh" || o.sampler == "barker")
    out = independent_chains(sim, log_ratio, o, pool, o.sampler == "barker");
  else if (o.sampler == "is" || o.sampler == "sir")
    out = importance(sim, log_ratio, o, pool, o.sampler == "sir");
  else if (o.sampler == "mcmc")
    out = random_walk(sim, log_ratio, o, pool);
  else if (o.sampler == "smc")
    out = tempered_smc(sim, log_ratio, o, pool);
  else
    throw Error(fmt::format("posterior: unknown sampler '{}'", o.sampler));
  out.n_params = sim.n_params();
  return out;
}

} // namespace ssm::lfi
