// Particle filter runs against the Kalman reference (see compare.h).
//
// Tolerances, all derived from the spread of the R independent runs:
//
// * Log-likelihood. The filter's likelihood estimate Z^ is unbiased, E[Z^] = Z, so log Z^ is biased
//   downwards: log Z^ is asymptotically normal with a variance s2 = O(T/N) (Berard, Del Moral &
//   Doucet 2014), and E[Z^] = Z then gives E[log Z^] ~= log Z - s2/2. We estimate s2 by the sample
//   variance across seeds and require |mean log Z^ - (log Z - s2/2)| <= 4 s/sqrt(R). N is chosen so
//   that the correction is below one standard error (checked), where the normal approximation
//   behind it cannot decide the outcome.
//
// * Filtering means. Each run's mean is a self-normalised weighted average, with standard
//   deviation s (estimated across runs) and a bias of order 1/N. For the final weighting step the
//   delta method gives bias ~= -Cov(w, w (x - mu)) / N for normalised weights w, which
//   Cauchy-Schwarz bounds by sqrt(Var(w) / N) * s ~= s / sqrt(ESS) (Var(w) ~= N/ESS - 1). We allow
//   4 s/sqrt(R) + s/sqrt(ESS_t); the bias term is sqrt(R/ESS_t) of one standard error, a few
//   percent with the particle numbers used, so the check is essentially the 4-standard-error one.
//   (Bias inherited from earlier steps is of the same O(1/N) order; this term covers it only
//   heuristically, and it is small against the standard error either way.)
//
// * Filtering variances. The weighted variance is sum w (x - mu)^2 - (xbar - mu)^2: the first term
//   is a self-normalised average (bias bounded as above by s_v / sqrt(ESS), s_v the spread of the
//   variance estimates), the second has expectation Var(xbar) ~= s_m^2 (the spread of the means).
//   We allow 4 s_v/sqrt(R) + s_m^2 + s_v/sqrt(ESS_t).
//
// With 4 standard errors and a t-distributed statistic (the standard error is estimated from R
// runs) each comparison fails by chance with probability ~1e-4 to 1e-3; with a few hundred
// correlated comparisons per model the chance of a spurious failure is a few percent. Seeds are
// fixed, so an outcome reproduces exactly.
#include "compare.h"
#include "support.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace e2e {

void compare_with_kalman(const PfVsKalman& c, const KalmanResult& exact) {
  const int R = c.runs;
  const size_t T = exact.mean.size(), ns = c.state_cols.size();
  REQUIRE(R >= 2);
  std::vector<double> loglik;
  // values[t][k][r]
  std::vector<std::vector<std::vector<double>>> means(T, std::vector<std::vector<double>>(ns)),
      vars = means;
  std::vector<double> ess_sum(T, 0.0);

  for (int r = 0; r < R; ++r) {
    const uint64_t seed = c.seed0 + static_cast<uint64_t>(r);
    std::vector<std::string> args = c.args;
    args.insert(args.end(),
                {"--particles", std::to_string(c.particles), "--seed", std::to_string(seed)});
    FilterRun f = run_filter(c.exe, args, scratch_path(fmt::format("{}-{}.csv", c.label, r)));
    INFO(c.label << " seed " << seed);
    REQUIRE(f.summary.at("T").get<size_t>() == T);
    REQUIRE(f.summary.at("particles").get<int64_t>() == c.particles);
    REQUIRE(f.table.rows.size() == T);
    const double ll = f.summary.at("log_likelihood").get<double>();
    REQUIRE(std::isfinite(ll));
    loglik.push_back(ll);

    // The increments sum to the log-likelihood; a missing y_t contributes exactly 0.
    std::vector<double> inc = f.table.column("loglik_increment"), ess = f.table.column("ess");
    double sum = 0;
    for (size_t t = 0; t < T; ++t) {
      sum += inc[t];
      ess_sum[t] += ess[t];
      CHECK(ess[t] > 0);
      CHECK(ess[t] <= c.particles * (1 + 1e-12));
      if (t < c.missing.size() && c.missing[t]) {
        INFO("t = " << t << " has no observation");
        CHECK(inc[t] == 0);
      }
    }
    CHECK(sum == Approx(ll).epsilon(1e-12).margin(1e-9));

    for (size_t k = 0; k < ns; ++k) {
      std::vector<double> m = f.table.column("mean_" + c.state_cols[k]),
                          v = f.table.column("var_" + c.state_cols[k]);
      for (size_t t = 0; t < T; ++t) {
        means[t][k].push_back(m[t]);
        vars[t][k].push_back(v[t]);
      }
    }
  }

  // Log-likelihood.
  const double ll_mean = sample_mean(loglik), ll_var = sample_variance(loglik);
  const double ll_se = std::sqrt(ll_var / R), expected = exact.log_likelihood - ll_var / 2;
  fmt::print("{}: N={} R={} Kalman loglik {:.4f}; particle mean {:.4f}, sd {:.4f}, "
             "bias correction {:.4f}, z = {:.2f}\n",
             c.label, c.particles, R, exact.log_likelihood, ll_mean, std::sqrt(ll_var), ll_var / 2,
             (ll_mean - expected) / ll_se);
  {
    INFO(fmt::format("{}: Kalman log-likelihood {}, particle mean {} (sd {} over {} runs), "
                     "expected mean log Z - s2/2 = {}",
                     c.label, exact.log_likelihood, ll_mean, std::sqrt(ll_var), R, expected));
    CHECK(std::abs(ll_mean - expected) <= 4 * ll_se);
    CHECK(ll_var / 2 <= ll_se); // the regime where the correction is reliable
  }

  // Filtering means and variances.
  double zmax_mean = 0, zmax_var = 0;
  for (size_t t = 0; t < T; ++t) {
    const double ess = ess_sum[t] / R;
    for (size_t k = 0; k < ns; ++k) {
      const double km = exact.mean[t][k], kv = exact.cov[t](k, k);
      const double m = sample_mean(means[t][k]), sm = std::sqrt(sample_variance(means[t][k]));
      const double v = sample_mean(vars[t][k]), sv = std::sqrt(sample_variance(vars[t][k]));
      const double tol_m = 4 * sm / std::sqrt(R) + sm / std::sqrt(ess);
      const double tol_v = 4 * sv / std::sqrt(R) + sm * sm + sv / std::sqrt(ess);
      zmax_mean = std::max(zmax_mean, std::abs(m - km) / (sm / std::sqrt(R)));
      zmax_var = std::max(zmax_var, std::abs(v - kv) / (sv / std::sqrt(R)));
      INFO(fmt::format("{}: t={} {}: Kalman mean {} var {}; particle mean {} (sd {}) var {} "
                       "(sd {}), mean ESS {}",
                       c.label, t, c.state_cols[k], km, kv, m, sm, v, sv, ess));
      CHECK(std::abs(m - km) <= tol_m);
      CHECK(std::abs(v - kv) <= tol_v);
    }
  }
  fmt::print("{}: max |z| over t and components: means {:.2f}, variances {:.2f}\n", c.label,
             zmax_mean, zmax_var);
}

} // namespace e2e
