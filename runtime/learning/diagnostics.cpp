// MCMC diagnostics after Vehtari et al. (2021), and importance weights' (PSIS's k̂): see
// diagnostics.h.
#include "learning/diagnostics.h"
#include "core/error.h"

#include <boost/math/special_functions/erf.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace ssm {

namespace {

using Chains = std::vector<std::vector<double>>;

double mean_of(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double variance_of(const std::vector<double>& v) { // unbiased
  const double m = mean_of(v);
  double s = 0;
  for (double x : v)
    s += (x - m) * (x - m);
  return s / static_cast<double>(v.size() - 1);
}

// Each chain cut in two halves (the middle draw of an odd chain dropped).
Chains split(const Chains& chains) {
  Chains out;
  for (const std::vector<double>& c : chains) {
    const size_t h = c.size() / 2;
    out.emplace_back(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(h));
    out.emplace_back(c.end() - static_cast<std::ptrdiff_t>(h), c.end());
  }
  return out;
}

// boost's policy for double precision throughout (its default promotes to long double).
constexpr auto kDouble =
    boost::math::policies::make_policy(boost::math::policies::promote_double<false>());

// Rank-normalised: z = Phi^-1((r - 3/8) / (S + 1/4)) of the pooled ranks r (ties averaged).
Chains rank_normalize(const Chains& chains) {
  std::vector<std::pair<double, size_t>> all;
  for (size_t c = 0; c < chains.size(); ++c)
    for (size_t i = 0; i < chains[c].size(); ++i)
      all.push_back({chains[c][i], c * chains[0].size() + i});
  std::sort(all.begin(), all.end());
  const auto S = static_cast<double>(all.size());
  Chains out(chains.size(), std::vector<double>(chains[0].size()));
  for (size_t k = 0; k < all.size();) {
    size_t j = k;
    while (j < all.size() && all[j].first == all[k].first)
      ++j;
    const double rank = (static_cast<double>(k + 1) + static_cast<double>(j)) / 2; // 1-based
    // In double precision: boost's default promotes to long double, several times slower, for
    // z-scores that only feed R-hat and ESS.
    const double z =
        std::sqrt(2.0) * boost::math::erf_inv(2 * (rank - 0.375) / (S + 0.25) - 1, kDouble);
    for (size_t m = k; m < j; ++m)
      out[all[m].second / chains[0].size()][all[m].second % chains[0].size()] = z;
    k = j;
  }
  return out;
}

// Of sorted values, by linear interpolation (R type 7).
double sorted_quantile(const std::vector<double>& v, double p) {
  const double h = (static_cast<double>(v.size()) - 1) * p;
  const auto lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (h - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

std::vector<double> pooled(const Chains& chains) {
  std::vector<double> all;
  for (const std::vector<double>& c : chains)
    all.insert(all.end(), c.begin(), c.end());
  return all;
}

} // namespace

double split_rhat(const Chains& chains) {
  const auto n = static_cast<double>(chains[0].size());
  std::vector<double> means, vars;
  for (const std::vector<double>& c : chains) {
    means.push_back(mean_of(c));
    vars.push_back(variance_of(c));
  }
  const double W = mean_of(vars), B_over_n = means.size() > 1 ? variance_of(means) : 0.0;
  if (!(W > 0))
    return NAN; // constant chains
  const double var_plus = (n - 1) / n * W + B_over_n;
  return std::sqrt(var_plus / W);
}

double effective_sample_size(const Chains& chains) {
  const size_t M = chains.size(), n = chains[0].size();
  std::vector<double> means, vars;
  for (const std::vector<double>& c : chains) {
    means.push_back(mean_of(c));
    vars.push_back(variance_of(c));
  }
  const double W = mean_of(vars);
  const double var_plus =
      (static_cast<double>(n) - 1) / static_cast<double>(n) * W + (M > 1 ? variance_of(means) : 0);
  if (!(var_plus > 0))
    return NAN;
  // rho_t = 1 - (W - mean over chains of the autocovariance at lag t) / var+.
  auto rho = [&](size_t t) {
    double acov = 0;
    for (size_t c = 0; c < M; ++c) {
      double s = 0;
      for (size_t i = 0; i + t < n; ++i)
        s += (chains[c][i] - means[c]) * (chains[c][i + t] - means[c]);
      acov += s / static_cast<double>(n);
    }
    acov /= static_cast<double>(M);
    return 1 - (W - acov) / var_plus;
  };
  // Geyer: sums of pairs P_k = rho_2k + rho_2k+1 while positive, made monotone.
  double tau = -1, previous = INFINITY;
  for (size_t t = 0; t + 1 < n; t += 2) {
    double p = rho(t) + rho(t + 1);
    if (t == 0)
      p = 1 + rho(1); // rho_0 = 1 exactly
    if (p < 0)
      break;
    p = std::min(p, previous);
    previous = p;
    tau += 2 * p;
  }
  const double total = static_cast<double>(M * n);
  return total / std::max(tau, 1.0 / std::log10(total)); // the bound Stan uses
}

DrawSummary summarize_draws(const Chains& chains) {
  if (chains.empty() || chains[0].size() < 4)
    throw Error("summaries need at least 4 draws per chain");
  for (const std::vector<double>& c : chains)
    if (c.size() != chains[0].size())
      throw Error("summaries need chains of one length");
  DrawSummary s;
  const std::vector<double> all = pooled(chains);
  s.mean = mean_of(all);
  s.sd = std::sqrt(variance_of(all));
  std::vector<double> sorted = all;
  std::sort(sorted.begin(), sorted.end());
  s.q5 = sorted_quantile(sorted, 0.05);
  s.q50 = sorted_quantile(sorted, 0.5);
  s.q95 = sorted_quantile(sorted, 0.95);
  const Chains halves = split(chains);
  const Chains z = rank_normalize(halves);
  Chains folded = halves;
  for (std::vector<double>& c : folded)
    for (double& x : c)
      x = std::abs(x - s.q50);
  s.rhat = std::max(split_rhat(z), split_rhat(rank_normalize(folded)));
  s.ess_bulk = effective_sample_size(z);
  auto indicator = [&](double q) {
    Chains ind = halves;
    for (std::vector<double>& c : ind)
      for (double& x : c)
        x = x <= q ? 1.0 : 0.0;
    return effective_sample_size(ind);
  };
  s.ess_tail = std::min(indicator(s.q5), indicator(s.q95));
  s.mcse_mean = s.sd / std::sqrt(s.ess_bulk);
  return s;
}

namespace {

// The tail PSIS fits: the indices of the largest min(n / 5, 3 sqrt(n)) log weights (ascending),
// the cutoff (the next largest) and the largest, and the generalised Pareto fit to the weights'
// excesses over the cutoff on the scale of the largest: k (with PSIS's prior) and sigma. No fit
// (k NaN) with fewer than 5 excesses or a constant tail.
struct TailFit {
  std::vector<size_t> tail;
  double cutoff = 0, top = 0, k = NAN, sigma = NAN;
};

TailFit fit_tail(const std::vector<double>& log_weights) {
  TailFit f;
  // The finite weights only (a draw of weight 0 is never in the tail, never given one).
  std::vector<size_t> order;
  for (size_t i = 0; i < log_weights.size(); ++i)
    if (std::isfinite(log_weights[i]))
      order.push_back(i);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return log_weights[a] < log_weights[b]; });
  const size_t n = order.size();
  const auto tail = static_cast<size_t>(std::min(std::ceil(0.2 * static_cast<double>(n)),
                                                 std::ceil(3 * std::sqrt(static_cast<double>(n)))));
  if (tail < 5 || tail >= n)
    return f;
  f.tail.assign(order.end() - static_cast<std::ptrdiff_t>(tail), order.end());
  f.top = log_weights[order.back()];
  f.cutoff = log_weights[order[n - tail - 1]];
  std::vector<double> x; // the excesses, ascending, on the scale of the largest weight
  for (size_t i : f.tail)
    x.push_back(std::exp(log_weights[i] - f.top) - std::exp(f.cutoff - f.top));
  const auto m = static_cast<double>(x.size());
  const double quartile = x[static_cast<size_t>(std::floor(m / 4 + 0.5)) - 1];
  if (!(x.back() > 0) || !(quartile > 0))
    return f;
  // The profile likelihood of θ = -k / σ on Zhang & Stephens's grid, averaged under it.
  const int grid = 30 + static_cast<int>(std::floor(std::sqrt(m)));
  const double prior = 3;
  std::vector<double> theta(grid), log_lik(grid);
  auto mean_log1p = [&](double t) {
    double sum = 0;
    for (double v : x)
      sum += std::log1p(-t * v);
    return sum / m;
  };
  for (int j = 0; j < grid; ++j) {
    theta[j] = 1 / x.back() + (1 - std::sqrt(grid / (j + 0.5))) / (prior * quartile);
    const double k = mean_log1p(theta[j]);
    log_lik[j] = m * (std::log(-theta[j] / k) - k - 1);
  }
  const double top_lik = *std::max_element(log_lik.begin(), log_lik.end());
  double total = 0, theta_hat = 0;
  for (int j = 0; j < grid; ++j) {
    const double w = std::exp(log_lik[j] - top_lik);
    total += w;
    theta_hat += w * theta[j];
  }
  theta_hat /= total;
  const double k = mean_log1p(theta_hat);
  f.sigma = -k / theta_hat;
  f.k = (m * k + 10 * 0.5) / (m + 10);
  return f;
}

} // namespace

double pareto_khat(const std::vector<double>& log_weights) {
  return fit_tail(log_weights).k;
}

std::vector<double> psis_log_weights(const std::vector<double>& log_weights) {
  std::vector<double> out = log_weights;
  for (double& v : out)
    if (!std::isfinite(v))
      v = -std::numeric_limits<double>::infinity();
  const TailFit f = fit_tail(log_weights);
  if (!std::isfinite(f.k) || !(f.sigma > 0))
    return out;
  const auto m = static_cast<double>(f.tail.size());
  for (size_t i = 0; i < f.tail.size(); ++i) {
    // The GPD's quantile at (i + 1/2) / m above the cutoff, no larger than the largest weight.
    const double p = (static_cast<double>(i) + 0.5) / m;
    const double excess = std::abs(f.k) < 1e-12 ? -f.sigma * std::log1p(-p)
                                                : f.sigma * std::expm1(-f.k * std::log1p(-p)) / f.k;
    const double smoothed = f.top + std::log(excess + std::exp(f.cutoff - f.top));
    out[f.tail[i]] = std::min(smoothed, f.top);
  }
  return out;
}

ImportanceDiagnostics importance_diagnostics(const std::vector<double>& log_weights) {
  ImportanceDiagnostics d;
  double top = -std::numeric_limits<double>::infinity();
  for (double v : log_weights)
    if (std::isfinite(v))
      top = std::max(top, v);
  const auto n = static_cast<double>(log_weights.size());
  double sum = 0, sum2 = 0;
  for (double v : log_weights)
    if (std::isfinite(v)) {
      const double w = std::exp(v - top);
      sum += w;
      sum2 += w * w;
    }
  if (!(sum > 0))
    return {-std::numeric_limits<double>::infinity(), NAN, 0, NAN};
  const double mean = sum / n;
  d.log_mean_weight = top + std::log(mean);
  const double var = std::max(0.0, sum2 / n - mean * mean) * n / std::max(1.0, n - 1);
  d.log_mean_weight_se = std::sqrt(var / n) / mean;
  d.ess = sum * sum / sum2;
  d.pareto_k = pareto_khat(log_weights);
  return d;
}

} // namespace ssm
