// Approximate Bayesian computation: see abc.h.
#include "lfi/abc.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernel/rng.h"
#include "kernel/sampler_algorithms.h"

#include <Eigen/Dense>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ssm::lfi {

namespace {

constexpr int64_t kAbcBatch = 4096;

uint64_t stream(uint64_t seed, uint64_t what, uint64_t index) {
  return mix_seed(seed ^ mix_seed(what * 0x100000000ULL + index));
}

// Standardised Euclidean distances of simulations x (n x D) to x_obs; +inf for a non-finite one.
class Distance {
public:
  Distance(std::vector<double> x_obs, std::vector<double> scale)
      : x_obs_(std::move(x_obs)), scale_(std::move(scale)) {}
  double operator()(const double* x) const {
    double s = 0;
    for (size_t k = 0; k < x_obs_.size(); ++k) {
      const double z = (x[k] - x_obs_[k]) / scale_[k];
      s += z * z;
    }
    return std::isfinite(s) ? std::sqrt(s) : INFINITY;
  }

private:
  std::vector<double> x_obs_, scale_;
};

// The prior predictive's standard deviation per component, over the finite simulations.
std::vector<double> predictive_scale(const std::vector<double>& x, int64_t n, int64_t D) {
  std::vector<double> scale(D, 1.0);
  for (int64_t k = 0; k < D; ++k) {
    double sum = 0, sq = 0;
    int64_t m = 0;
    for (int64_t i = 0; i < n; ++i)
      if (std::isfinite(x[i * D + k])) {
        sum += x[i * D + k];
        sq += x[i * D + k] * x[i * D + k];
        ++m;
      }
    const double var = m > 1 ? (sq - sum * sum / m) / (m - 1) : 0;
    scale[k] = var > 0 ? std::sqrt(var) : 1.0;
  }
  return scale;
}

AbcResult rejection(const Simulator& sim, const std::vector<double>& x_obs, const AbcOptions& o,
                    ThreadPool& pool) {
  const int64_t P = sim.n_params(), D = sim.n_obs(), n = o.simulations;
  std::vector<double> theta(n * P), x(n * D);
  sim.simulate(stream(o.seed, 1, 0), n, theta.data(), x.data(), &pool);
  const Distance distance(x_obs, predictive_scale(x, n, D));
  std::vector<double> d(n);
  AbcResult out;
  for (int64_t i = 0; i < n; ++i) {
    d[i] = distance(x.data() + i * D);
    out.dropped += d[i] == INFINITY;
  }
  const int64_t keep = std::max<int64_t>(1, std::llround(o.quantile * static_cast<double>(n)));
  if (keep > n - out.dropped)
    throw Error(fmt::format("abc: {} of {} simulations gave a non-finite observation; fewer than "
                            "the {} to keep",
                            out.dropped, n, keep));
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::nth_element(order.begin(), order.begin() + (keep - 1), order.end(),
                   [&](int64_t a, int64_t b) { return d[a] < d[b] || (d[a] == d[b] && a < b); });
  std::sort(order.begin(), order.begin() + keep);
  for (int64_t j = 0; j < keep; ++j) {
    const int64_t i = order[j];
    out.theta.insert(out.theta.end(), theta.begin() + i * P, theta.begin() + (i + 1) * P);
    out.distance.push_back(d[i]);
    out.epsilon = std::max(out.epsilon, d[i]);
  }
  out.simulations = n;
  return out;
}

AbcResult smc(const Simulator& sim, const std::vector<double>& x_obs, const AbcOptions& o,
              ThreadPool& pool) {
  const int64_t P = sim.n_params(), D = sim.n_obs(), M = o.population;
  AbcResult out;
  // Generation 0: the prior, every draw accepted; its simulations set the distance's scale.
  std::vector<double> theta(M * P), x(M * D), d(M), w(M, 1.0 / static_cast<double>(M));
  sim.simulate(stream(o.seed, 1, 0), M, theta.data(), x.data(), &pool);
  const Distance distance(x_obs, predictive_scale(x, M, D));
  for (int64_t i = 0; i < M; ++i) {
    d[i] = distance(x.data() + i * D);
    out.dropped += d[i] == INFINITY;
  }
  out.simulations = M;
  out.epsilons.push_back(INFINITY);
  out.acceptance.push_back(1.0);
  out.generation_simulations.push_back(M);
  std::vector<double> cand(kAbcBatch * P), cand_x(kAbcBatch * D), log_prior(kAbcBatch);
  for (int64_t generation = 1;; ++generation) {
    // The next tolerance: the alpha quantile of the population's distances.
    std::vector<double> sorted = d;
    std::sort(sorted.begin(), sorted.end());
    const double epsilon = sorted[std::min<int64_t>(
        M - 1, static_cast<int64_t>(std::floor(o.alpha * static_cast<double>(M))))];
    if (!std::isfinite(epsilon))
      throw Error("abc: most simulations give a non-finite observation");
    // The move: a Gaussian of twice the population's weighted covariance.
    Eigen::VectorXd mean = Eigen::VectorXd::Zero(P);
    for (int64_t i = 0; i < M; ++i)
      mean += w[i] * Eigen::Map<const Eigen::VectorXd>(theta.data() + i * P, P);
    Eigen::MatrixXd cov = Eigen::MatrixXd::Zero(P, P);
    for (int64_t i = 0; i < M; ++i) {
      const Eigen::VectorXd c = Eigen::Map<const Eigen::VectorXd>(theta.data() + i * P, P) - mean;
      cov += w[i] * c * c.transpose();
    }
    cov = 2 * cov + 1e-12 * Eigen::MatrixXd::Identity(P, P);
    const Eigen::LLT<Eigen::MatrixXd> chol(cov);
    if (chol.info() != Eigen::Success)
      throw Error(
          fmt::format("abc: generation {}: the population's covariance is singular", generation));
    const Eigen::MatrixXd L = chol.matrixL();
    std::vector<double> cumulative(M);
    std::partial_sum(w.begin(), w.end(), cumulative.begin());
    std::vector<double> next_theta, next_d;
    int64_t made = 0, examined = 0, batch_index = 0;
    while (static_cast<int64_t>(next_d.size()) < M) {
      if (out.simulations + made >= o.simulations)
        break;
      // Batches of about a population: a larger one would overshoot the last acceptances.
      const int64_t B = std::min<int64_t>(std::min(kAbcBatch, std::max<int64_t>(M, 256)),
                                          o.simulations - out.simulations - made);
      const uint64_t seed = stream(o.seed, 2 + generation, batch_index++);
      for (int64_t b = 0; b < B; ++b) {
        const double u = philox_u01(seed, static_cast<uint32_t>(b), 0, 0, 0) * cumulative.back();
        const int64_t a = std::min<int64_t>(
            M - 1, std::upper_bound(cumulative.begin(), cumulative.end(), u) - cumulative.begin());
        Eigen::VectorXd z(P);
        for (int64_t k = 0; k < P; ++k)
          z[k] =
              detail::std_normal_at(seed, static_cast<uint32_t>(b), 1, 0, static_cast<uint32_t>(k));
        Eigen::Map<Eigen::VectorXd>(cand.data() + b * P, P) =
            Eigen::Map<const Eigen::VectorXd>(theta.data() + a * P, P) + L * z;
      }
      sim.log_prior(cand.data(), B, log_prior.data());
      sim.simulate_at(seed, cand.data(), B, cand_x.data(), &pool);
      made += B;
      for (int64_t b = 0; b < B && static_cast<int64_t>(next_d.size()) < M; ++b) {
        ++examined;
        if (log_prior[b] == -INFINITY)
          continue; // outside the prior's support: no simulation counts there
        const double db = distance(cand_x.data() + b * D);
        out.dropped += db == INFINITY;
        if (db <= epsilon) {
          next_theta.insert(next_theta.end(), cand.begin() + b * P, cand.begin() + (b + 1) * P);
          next_d.push_back(db);
        }
      }
    }
    const double rate =
        static_cast<double>(next_d.size()) / static_cast<double>(std::max<int64_t>(1, examined));
    out.simulations += made;
    if (static_cast<int64_t>(next_d.size()) < M) // the budget ran out: keep the last population
      break;
    // Weights p(theta) / sum_j w_j K(theta | theta_j), in logs.
    const Eigen::MatrixXd inv = chol.solve(Eigen::MatrixXd::Identity(P, P));
    std::vector<double> lp(M), log_w(M);
    sim.log_prior(next_theta.data(), M, lp.data());
    for (int64_t i = 0; i < M; ++i) {
      const Eigen::Map<const Eigen::VectorXd> ti(next_theta.data() + i * P, P);
      double top = -INFINITY;
      std::vector<double> terms(M);
      for (int64_t j = 0; j < M; ++j) {
        const Eigen::VectorXd diff =
            ti - Eigen::Map<const Eigen::VectorXd>(theta.data() + j * P, P);
        terms[j] = std::log(w[j]) - 0.5 * diff.dot(inv * diff);
        top = std::max(top, terms[j]);
      }
      double sum = 0;
      for (double t : terms)
        sum += std::exp(t - top);
      log_w[i] = lp[i] - (top + std::log(sum));
    }
    const double top = *std::max_element(log_w.begin(), log_w.end());
    double total = 0;
    for (int64_t i = 0; i < M; ++i)
      total += (w[i] = std::exp(log_w[i] - top));
    for (double& wi : w)
      wi /= total;
    theta = std::move(next_theta);
    d = std::move(next_d);
    out.epsilons.push_back(epsilon);
    out.acceptance.push_back(rate);
    out.generation_simulations.push_back(made);
    if (rate < o.min_acceptance)
      break;
  }
  // The last population, resampled into M equally weighted draws.
  double sum_sq = 0;
  for (double wi : w)
    sum_sq += wi * wi;
  out.ess = 1 / sum_sq;
  std::vector<double> cumulative(M);
  std::partial_sum(w.begin(), w.end(), cumulative.begin());
  const uint64_t seed = stream(o.seed, 1000000, 0);
  for (int64_t m = 0; m < M; ++m) {
    const double u = philox_u01(seed, static_cast<uint32_t>(m), 0, 0, 0) * cumulative.back();
    const int64_t i = std::min<int64_t>(
        M - 1, std::upper_bound(cumulative.begin(), cumulative.end(), u) - cumulative.begin());
    out.theta.insert(out.theta.end(), theta.begin() + i * P, theta.begin() + (i + 1) * P);
    out.distance.push_back(d[i]);
  }
  out.epsilon = out.epsilons.back();
  return out;
}

} // namespace

AbcResult abc(const Simulator& sim, const std::vector<double>& x_obs, const AbcOptions& o) {
  require_parameters(sim, "abc");
  if (!(o.quantile > 0 && o.quantile <= 1) || !(o.alpha > 0 && o.alpha < 1) || o.population < 2)
    throw Error("abc: --quantile in (0, 1], --alpha in (0, 1) and --population >= 2");
  ThreadPool pool(std::max(1, o.threads));
  AbcResult out = o.method == "rejection" ? rejection(sim, x_obs, o, pool)
                  : o.method == "smc"     ? smc(sim, x_obs, o, pool)
                                          : throw Error("abc: unknown method '" + o.method + "'");
  out.n_params = sim.n_params();
  return out;
}

} // namespace ssm::lfi
