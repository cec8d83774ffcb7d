// Statistical checks shared by the RNG and distribution unit tests: moments within a number of
// Monte Carlo standard errors, and Kolmogorov-Smirnov / chi-square goodness of fit at a fixed
// level.
#pragma once

#include <catch2/catch.hpp>

#include <boost/math/distributions/chi_squared.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

namespace ssm::test {

// Every goodness-of-fit test runs at level 0.001. The seeds are fixed, so a passing test passes
// forever; the level bounds how likely a correct sampler would have needed a different seed.
inline constexpr double kLevel = 0.001;
// Asymptotic one-sample Kolmogorov-Smirnov critical value sqrt(-log(level / 2) / 2) * N^-1/2 ,
// conservative for N >= 10^4 (the exact finite-N value is slightly smaller).
inline double ks_critical(size_t n) {
  return std::sqrt(-0.5 * std::log(kLevel / 2)) / std::sqrt(double(n));
}

// sup_x |F_N(x) - F(x)| for a continuous F.
inline double ks_statistic(std::vector<double> xs, const std::function<double(double)>& cdf) {
  std::sort(xs.begin(), xs.end());
  const double n = double(xs.size());
  double d = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double f = cdf(xs[i]);
    d = std::max({d, (double(i) + 1) / n - f, f - double(i) / n});
  }
  return d;
}

inline double mean_of(const std::vector<double>& xs) {
  double s = 0;
  for (double x : xs)
    s += x;
  return s / double(xs.size());
}

inline double variance_of(const std::vector<double>& xs) {
  const double m = mean_of(xs);
  double s = 0;
  for (double x : xs)
    s += (x - m) * (x - m);
  return s / double(xs.size() - 1);
}

// Central fourth moment from the first four raw moments.
inline double central_mu4(double m1, double m2, double m3, double m4) {
  return m4 - 4 * m1 * m3 + 6 * m1 * m1 * m2 - 3 * m1 * m1 * m1 * m1;
}

// Sample mean within 5 standard errors sqrt(var / N) of `mean`; if mu4 (the central fourth moment)
// is given, sample variance within 5 standard errors sqrt((mu4 - var^2) / N) of `var`.
inline void check_moments(const std::vector<double>& xs, double mean, double var,
                          double mu4 = NAN) {
  const double n = double(xs.size());
  const double m = mean_of(xs);
  INFO("sample mean " << m << ", exact " << mean << ", sd " << std::sqrt(var));
  CHECK(std::fabs(m - mean) <= 5 * std::sqrt(var / n));
  if (!std::isnan(mu4)) {
    const double v = variance_of(xs);
    INFO("sample variance " << v << ", exact " << var);
    CHECK(std::fabs(v - var) <= 5 * std::sqrt((mu4 - var * var) / n));
  }
}

inline void check_ks(const std::vector<double>& xs, const std::function<double(double)>& cdf) {
  const double d = ks_statistic(xs, cdf);
  INFO("KS statistic " << d << ", critical " << ks_critical(xs.size()) << " at level " << kLevel);
  CHECK(d < ks_critical(xs.size()));
}

// Pearson chi-square of integer-valued samples against a discrete CDF on {0, 1, ...}, compared with
// the chi-square quantile at 1 - level. Consecutive values are merged into bins of probability
// >= 1 / target_bins; in the upper tail, where less than that is left, bins close as soon as their
// expected count reaches 20, and the open last bin also has an expected count >= 20. The scan for
// bin edges starts at k_start (everything below falls in the first bin).
inline void check_chi_square(const std::vector<double>& xs,
                             const std::function<double(double)>& cdf, double k_start = 0,
                             int target_bins = 40) {
  const double n = double(xs.size());
  const double min_p = 1.0 / target_bins;
  const double min_count = 20;
  std::vector<double> upper; // bin i is (upper[i-1], upper[i]], the last bin is open above
  std::vector<double> prob;
  double lo_cdf = 0;
  for (double k = k_start;; k += 1) {
    const double c = cdf(k);
    const double rest = 1 - c;
    if (n * rest < min_count)
      break;
    if (c - lo_cdf >= min_p || (rest < min_p && n * (c - lo_cdf) >= min_count)) {
      upper.push_back(k);
      prob.push_back(c - lo_cdf);
      lo_cdf = c;
    }
  }
  prob.push_back(1 - lo_cdf);
  REQUIRE(prob.size() >= 2);
  std::vector<double> counts(prob.size(), 0);
  for (double x : xs) {
    const size_t i = size_t(std::lower_bound(upper.begin(), upper.end(), x) - upper.begin());
    counts[i] += 1;
  }
  double chi2 = 0;
  for (size_t i = 0; i < prob.size(); ++i)
    chi2 += (counts[i] - n * prob[i]) * (counts[i] - n * prob[i]) / (n * prob[i]);
  const double crit =
      boost::math::quantile(boost::math::chi_squared(double(prob.size() - 1)), 1 - kLevel);
  INFO("chi-square " << chi2 << " on " << prob.size() - 1 << " df, critical " << crit);
  CHECK(chi2 < crit);
}

} // namespace ssm::test
