// Shared by the distribution tests (test_log_densities.cpp, test_extreme_value_densities.cpp,
// test_samplers.cpp): draws over a counter range, support checks, quadrature rules for
// normalisation, a binned chi-square, and long-double references for the truncated normal.
#pragma once

#include "kernel/distributions.h"
#include "stats.h"

#include <catch2/catch.hpp>

#include <boost/math/distributions/beta.hpp>
#include <boost/math/distributions/binomial.hpp>
#include <boost/math/distributions/cauchy.hpp>
#include <boost/math/distributions/extreme_value.hpp>
#include <boost/math/distributions/gamma.hpp>
#include <boost/math/distributions/inverse_gamma.hpp>
#include <boost/math/distributions/laplace.hpp>
#include <boost/math/distributions/lognormal.hpp>
#include <boost/math/distributions/negative_binomial.hpp>
#include <boost/math/distributions/normal.hpp>
#include <boost/math/distributions/poisson.hpp>
#include <boost/math/distributions/students_t.hpp>
#include <boost/math/distributions/weibull.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace dist_test {

constexpr uint64_t kSeed = 20240611;
constexpr uint32_t kT = 3;
constexpr uint32_t kSite = 5;
constexpr uint32_t kN = 100000;

using Sampler = std::function<double(uint64_t, uint32_t, uint32_t, uint32_t)>;

// kN draws over particle indices n = 0 .. kN-1, as a kernel would make them.
inline std::vector<double> draws(const Sampler& f, uint64_t seed = kSeed) {
  std::vector<double> xs(kN);
  for (uint32_t n = 0; n < kN; ++n)
    xs[n] = f(seed, n, kT, kSite);
  return xs;
}

inline bool all_in(const std::vector<double>& xs, double lo, double hi) {
  for (double x : xs)
    if (!(x >= lo && x <= hi))
      return false;
  return true;
}

inline bool all_integers(const std::vector<double>& xs) {
  for (double x : xs)
    if (std::floor(x) != x)
      return false;
  return true;
}

// Agreement up to a few ulps of the magnitudes involved.
inline void check_close(double actual, double expected, double rel = 1e-13) {
  INFO("actual " << actual << ", expected " << expected);
  CHECK(std::fabs(actual - expected) <= rel * std::max(1.0, std::fabs(expected)));
}

// Trapezoid rule for the integral of exp(lpdf) over the real line after x = c + s sinh(u), or over
// (0, inf) after x = exp(u). Both integrands decay exponentially or faster in u, where the
// trapezoid rule converges geometrically, so the result is accurate far beyond the tolerance used.
inline double integrate_real(const std::function<double(double)>& lpdf, double c, double s,
                             double umax, double h = 1e-3) {
  double sum = 0;
  for (double u = -umax; u <= umax; u += h)
    sum += std::exp(lpdf(c + s * std::sinh(u))) * s * std::cosh(u);
  return sum * h;
}

inline double integrate_positive(const std::function<double(double)>& lpdf, double umin,
                                 double umax, double h = 1e-3) {
  double sum = 0;
  for (double u = umin; u <= umax; u += h)
    sum += std::exp(lpdf(std::exp(u)) + u);
  return sum * h;
}

// Trapezoid rule over (0, 1) after x = 1 / (1 + exp(-u)), dx = x (1 - x) du, with 1 - x computed
// as exp(-u) x so that it keeps its precision near 1. For the beta density the integrand decays
// like exp(a u) and exp(-b u) at the two ends.
inline double integrate_unit(const std::function<double(double)>& lpdf, double umin, double umax,
                             double h = 1e-3) {
  double sum = 0;
  for (double u = umin; u <= umax; u += h) {
    const double x = 1 / (1 + std::exp(-u));
    sum += std::exp(lpdf(x)) * x * (std::exp(-u) * x);
  }
  return sum * h;
}

// Composite Simpson rule on [lo, hi] with m (even) intervals, for smooth integrands on a finite
// interval; the error is O(((hi - lo) / m)^4).
inline double simpson(const std::function<double(double)>& f, double lo, double hi, int m = 20000) {
  const double h = (hi - lo) / m;
  double sum = f(lo) + f(hi);
  for (int i = 1; i < m; ++i)
    sum += (i % 2 ? 4 : 2) * f(lo + i * h);
  return sum * h / 3;
}

// Every density's normalisation is checked to this absolute accuracy.
constexpr double kIntegralTol = 1e-9;

// Pearson chi-square of draws from a continuous distribution over the bins (-inf, e0], (e0, e1],
// ..., (e_last, inf) against the CDF, at the level of stats.h; for draws that round to atoms,
// where KS does not apply. The bins need expected counts >= 20.
inline void check_binned(const std::vector<double>& xs, const std::vector<double>& edges,
                         const std::function<double(double)>& cdf) {
  const double n = double(xs.size());
  std::vector<double> prob;
  double below = 0;
  for (double e : edges) {
    prob.push_back(cdf(e) - below);
    below = cdf(e);
  }
  prob.push_back(1 - below);
  std::vector<double> counts(prob.size(), 0);
  for (double x : xs)
    counts[size_t(std::lower_bound(edges.begin(), edges.end(), x) - edges.begin())] += 1;
  double chi2 = 0;
  for (size_t i = 0; i < prob.size(); ++i) {
    REQUIRE(n * prob[i] >= 20);
    chi2 += (counts[i] - n * prob[i]) * (counts[i] - n * prob[i]) / (n * prob[i]);
  }
  const double crit = boost::math::quantile(boost::math::chi_squared(double(prob.size() - 1)),
                                            1 - ssm::test::kLevel);
  INFO("chi-square " << chi2 << " on " << prob.size() - 1 << " df, critical " << crit);
  CHECK(chi2 < crit);
}

// Standard normal quantities in long double, whose range (to ~1e-4951) holds the tail masses the
// truncated-normal tests need (Q(40) ~ 1e-350), computed independently of the code under test.
inline long double phi_l(long double z) {
  return std::isinf(z) ? 0.0L : std::exp(-0.5L * z * z) / std::sqrt(2 * 3.14159265358979323846L);
}
inline long double q_l(long double z) {
  return 0.5L * std::erfc(z / std::sqrt(2.0L));
}

// Phi(b) - Phi(a), from the side where it does not cancel.
inline long double normal_mass_l(long double a, long double b) {
  return a >= 0 ? q_l(a) - q_l(b) : (b <= 0 ? q_l(-b) - q_l(-a) : 1 - q_l(-a) - q_l(b));
}

struct TruncatedNormal {
  double mu, sigma, lo, hi;
  long double a() const { return (static_cast<long double>(lo) - mu) / sigma; }
  long double b() const { return (static_cast<long double>(hi) - mu) / sigma; }
  double cdf(double x) const {
    if (x <= lo)
      return 0;
    if (x >= hi)
      return 1;
    const long double z = (static_cast<long double>(x) - mu) / sigma;
    return double(normal_mass_l(a(), z) / normal_mass_l(a(), b()));
  }
  // Raw moments E z^k of the standardised variable, k = 0..4, by the recursion
  // E z^k = (k - 1) E z^(k-2) + (a^(k-1) phi(a) - b^(k-1) phi(b)) / Z.
  std::vector<long double> raw_moments() const {
    const long double za = a(), zb = b(), mass = normal_mass_l(za, zb);
    const auto term = [](long double z, int p) {
      return std::isinf(z) ? 0.0L : std::pow(z, p) * phi_l(z);
    };
    std::vector<long double> m = {1};
    for (int k = 1; k <= 4; ++k)
      m.push_back((k >= 2 ? (k - 1) * m[k - 2] : 0) + (term(za, k - 1) - term(zb, k - 1)) / mass);
    return m;
  }
};

} // namespace dist_test
