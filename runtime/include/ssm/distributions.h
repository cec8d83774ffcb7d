// Log-densities and samplers of the scalar distributions, shared by the runtime (host compiler) and
// the generated kernels (clang bitcode, inlined). Parameterisations follow Stan; see
// docs/distributions.md.
//
// Conventions:
//   - lpdf_*(x, params...) is the log-density (log-mass for counts); x outside the support gives
//     -inf, an invalid parameter gives NaN, a NaN x gives NaN.
//   - sample_*(seed, n, t, site, params...) draws with Philox counters (n, t, site, draw) for
//     draw = 0, 1, ... (ssm/rng.h); an invalid parameter gives NaN.
//   - Cheap functions end in a select rather than an early return, so that a kernel loop calling
//     them stays branch-free and vectorises.
// Nothing here allocates, throws or touches global state (hence log_gamma instead of std::lgamma,
// which writes the global `signgam` and so can be neither hoisted nor called from threads safely).
#ifndef SSM_DISTRIBUTIONS_H
#define SSM_DISTRIBUTIONS_H

#include "ssm/rng.h"

#include <cmath>
#include <cstdint>

namespace ssm {

inline constexpr double kNaN = __builtin_nan("");
inline constexpr double kInf = __builtin_inf();
inline constexpr double kPi = 3.14159265358979323846;
inline constexpr double kTwoPi = 6.28318530717958647693;
inline constexpr double kLogSqrtTwoPi = 0.91893853320467274178;      // log(sqrt(2 pi))
inline constexpr double kLogSqrtTwoOverPi = -0.22579135264472743236; // log(sqrt(2 / pi))
// Rejection loops give up (and return NaN) after this many proposals; every sampler here accepts
// with probability well above 1/2, so the cap only matters for corrupted inputs.
inline constexpr int kMaxRejections = 1000;

namespace detail {

// Stirling series of log Gamma(z) without its leading terms, to z^-13; the truncation error is
// below 1e-16 for z >= 10 and 5e-16 at z = 8.
SSM_INLINE double stirling_tail(double z) {
  const double r = 1.0 / z;
  const double r2 = r * r;
  return r * (1.0 / 12 +
              r2 * (-1.0 / 360 +
                    r2 * (1.0 / 1260 +
                          r2 * (-1.0 / 1680 +
                                r2 * (1.0 / 1188 + r2 * (-691.0 / 360360 + r2 * (1.0 / 156)))))));
}

SSM_INLINE bool finite(double v) {
  return std::isfinite(v);
}
SSM_INLINE bool positive_finite(double v) {
  return v > 0 && v < kInf;
}
// True for finite integer values (so false for NaN and +-inf).
SSM_INLINE bool integral(double k) {
  return finite(k) && std::floor(k) == k;
}

} // namespace detail

// log Gamma(x) for x > 0 (+inf at x = 0 and x = +inf); absolute error below ~3e-15 * max(1, value).
// Arguments below 10 are shifted up by Gamma(x) = Gamma(x + 10) / (x (x+1) ... (x+9)), with the
// Stirling leading terms folded into one logarithm, z^(z-1/2) e^(-z) / prod, which is O(1) (the
// difference of two logarithms of size ~13 would lose a digit near x = 1 and 2). Both branches
// are computed and selected, so calls in a loop stay vectorisable.
SSM_INLINE double log_gamma(double x) {
  const bool small = x < 10.0;
  double p = x;
  for (int i = 1; i < 10; ++i)
    p *= x + i;
  const double z = small ? x + 10.0 : x;
  const double tail = kLogSqrtTwoPi + detail::stirling_tail(z);
  const double v = small ? std::log(std::pow(z, z - 0.5) * std::exp(-z) / p) + tail
                         : (z - 0.5) * std::log(z) - z + tail;
  // Exact zeros at 1 and 2 keep log-masses such as lpdf_poisson(0 or 1, lambda) exact.
  return x == kInf ? kInf : (x == 1.0 || x == 2.0 ? 0.0 : v);
}

// log Gamma(a + 1/2) - log Gamma(a), without the cancellation of the plain difference at large a.
SSM_INLINE double log_gamma_half_ratio(double a) {
  const double direct = log_gamma(a + 0.5) - log_gamma(a);
  // a log(1 + 1/(2a)) - 1/2 is O(1/a) and computed without losing its leading digits.
  const double series = 0.5 * std::log(a) + (a * std::log1p(0.5 / a) - 0.5) +
                        detail::stirling_tail(a + 0.5) - detail::stirling_tail(a);
  return a >= 8.0 ? series : direct; // where each form is accurate to ~1e-15
}

// ---------------------------------------------------------------------------------------------
// Log-densities.

SSM_INLINE double lpdf_std_normal(double x) {
  return -0.5 * x * x - kLogSqrtTwoPi;
}

SSM_INLINE double lpdf_normal(double x, double mu, double sigma) {
  const double z = (x - mu) / sigma;
  const double v = -0.5 * z * z - std::log(sigma) - kLogSqrtTwoPi;
  return detail::finite(mu) && detail::positive_finite(sigma) ? v : kNaN;
}

// Support x > 0.
SSM_INLINE double lpdf_lognormal(double x, double mu, double sigma) {
  const double lx = std::log(x);
  const double z = (lx - mu) / sigma;
  const double v = -0.5 * z * z - lx - std::log(sigma) - kLogSqrtTwoPi;
  const double r = x > 0 ? v : (x <= 0 ? -kInf : x);
  return detail::finite(mu) && detail::positive_finite(sigma) ? r : kNaN;
}

SSM_INLINE double lpdf_student_t(double x, double nu, double mu, double sigma) {
  const double z = (x - mu) / sigma;
  const double v = log_gamma_half_ratio(0.5 * nu) - 0.5 * std::log(nu * kPi) - std::log(sigma) -
                   0.5 * (nu + 1.0) * std::log1p(z * z / nu);
  return detail::positive_finite(nu) && detail::finite(mu) && detail::positive_finite(sigma) ? v
                                                                                             : kNaN;
}

// Normal(0, sigma) truncated to x >= 0.
SSM_INLINE double lpdf_half_normal(double x, double sigma) {
  const double z = x / sigma;
  const double v = kLogSqrtTwoOverPi - std::log(sigma) - 0.5 * z * z;
  const double r = x >= 0 ? v : (x < 0 ? -kInf : x);
  return detail::positive_finite(sigma) ? r : kNaN;
}

// Support lo <= x <= hi.
SSM_INLINE double lpdf_uniform(double x, double lo, double hi) {
  const double v = -std::log(hi - lo);
  const double r = (x >= lo && x <= hi) ? v : (std::isnan(x) ? x : -kInf);
  return detail::finite(lo) && detail::finite(hi) && hi > lo ? r : kNaN;
}

// beta is a rate: density beta^alpha x^(alpha-1) exp(-beta x) / Gamma(alpha), support x > 0. At
// x = 0 the limit is returned: +inf (alpha < 1), log(beta) (alpha = 1), -inf (alpha > 1).
SSM_INLINE double lpdf_gamma(double x, double alpha, double beta) {
  const double v =
      alpha * std::log(beta) - log_gamma(alpha) + (alpha - 1.0) * std::log(x) - beta * x;
  const double at0 = alpha < 1.0 ? kInf : (alpha == 1.0 ? std::log(beta) : -kInf);
  const double r =
      (x > 0 && x < kInf) ? v : (x == 0 ? at0 : (std::isnan(x) ? x : -kInf)); // x < 0 or x = +inf
  return detail::positive_finite(alpha) && detail::positive_finite(beta) ? r : kNaN;
}

// beta is a rate; support x >= 0.
SSM_INLINE double lpdf_exponential(double x, double beta) {
  const double v = std::log(beta) - beta * x;
  const double r = x >= 0 ? v : (x < 0 ? -kInf : x);
  return detail::positive_finite(beta) ? r : kNaN;
}

// Log-mass of a count k (an integer-valued double); a non-integer k is invalid (NaN).
SSM_INLINE double lpdf_poisson(double k, double lambda) {
  // k log(lambda) with 0 log 0 = 0, so lambda = 0 puts all mass on k = 0.
  const double klog = k == 0 ? 0.0 : k * std::log(lambda);
  const double v = klog - lambda - log_gamma(k + 1.0);
  const double r = k >= 0 ? v : -kInf;
  return detail::integral(k) && lambda >= 0 && lambda < kInf ? r : kNaN;
}

// Log-mass of k in {0, 1} with P(k = 1) = p.
SSM_INLINE double lpdf_bernoulli(double k, double p) {
  const double r = k == 1 ? std::log(p) : (k == 0 ? std::log1p(-p) : -kInf);
  return detail::integral(k) && p >= 0 && p <= 1 ? r : kNaN;
}

// ---------------------------------------------------------------------------------------------
// Samplers.

namespace detail {

// Box-Muller on one Philox block: the cosine branch, or the sine branch (independent of it).
SSM_INLINE double box_muller(double u0, double u1, bool sine) {
  const double r = std::sqrt(-2.0 * std::log(u0));
  const double a = kTwoPi * u1;
  return r * (sine ? std::sin(a) : std::cos(a));
}

SSM_INLINE double std_normal_at(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                uint32_t draw) {
  double u0, u1;
  philox_u01x2(seed, n, t, site, draw, u0, u1);
  return box_muller(u0, u1, false);
}

// Gamma(alpha, rate 1) for alpha > 0 by Marsaglia & Tsang (2000), blocks first, first+1, ...
// Each proposal uses two blocks: one for its normal, one for its acceptance uniform (u0) and for
// the alpha < 1 boost uniform (u1, used only from the accepted proposal, independent of it).
inline double std_gamma(double alpha, uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                        uint32_t first) {
  const bool boost = alpha < 1.0; // Gamma(alpha) = Gamma(alpha + 1) * U^(1/alpha)
  const double d = (boost ? alpha + 1.0 : alpha) - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  uint32_t draw = first;
  for (int i = 0; i < kMaxRejections; ++i) {
    const double z = std_normal_at(seed, n, t, site, draw++);
    double u, ub;
    philox_u01x2(seed, n, t, site, draw++, u, ub);
    const double w = 1.0 + c * z;
    if (w <= 0)
      continue;
    const double v = w * w * w;
    const double z2 = z * z;
    // Squeeze first; the log test is exact.
    if (u < 1.0 - 0.0331 * z2 * z2 || std::log(u) < 0.5 * z2 + d * (1.0 - v + std::log(v))) {
      const double g = d * v;
      return boost ? g * std::exp(std::log(ub) / alpha) : g;
    }
  }
  return kNaN;
}

// Poisson by sequential inversion of the CDF with one uniform; for lambda < 10 the expected
// number of steps is lambda + 1. The loop also stops once the terms underflow, which happens long
// before the cap (only a u within rounding of 1 can get there).
SSM_INLINE double poisson_inversion(double lambda, double u) {
  double p = std::exp(-lambda);
  double cdf = p;
  double k = 0;
  for (int i = 0; i < kMaxRejections && u > cdf && p > 0; ++i) {
    k += 1.0;
    p *= lambda / k;
    cdf += p;
  }
  return k;
}

// Poisson for lambda >= 10 by Hoermann's transformed rejection with squeeze, PTRS (Hoermann 1993,
// "The transformed rejection method for generating Poisson random variables"). One block per
// proposal; a proposal is accepted with probability ~0.75 at lambda = 10, rising to ~0.89.
inline double poisson_ptrs(double lambda, uint64_t seed, uint32_t n, uint32_t t, uint32_t site) {
  const double slam = std::sqrt(lambda);
  const double loglam = std::log(lambda);
  const double b = 0.931 + 2.53 * slam;
  const double a = -0.059 + 0.02483 * b;
  const double inv_alpha = 1.1239 + 1.1328 / (b - 3.4);
  const double vr = 0.9277 - 3.6224 / (b - 2.0);
  for (uint32_t draw = 0; draw < static_cast<uint32_t>(kMaxRejections); ++draw) {
    double u, v;
    philox_u01x2(seed, n, t, site, draw, u, v);
    u -= 0.5;
    const double us = 0.5 - std::fabs(u);
    const double k = std::floor((2.0 * a / us + b) * u + lambda + 0.43);
    if (us >= 0.07 && v <= vr)
      return k;
    if (k < 0 || (us < 0.013 && v > us))
      continue;
    if (std::log(v) + std::log(inv_alpha) - std::log(a / (us * us) + b) <=
        -lambda + k * loglam - log_gamma(k + 1.0))
      return k;
  }
  return kNaN;
}

} // namespace detail

// Standard normal from block 0 (cosine branch of Box-Muller).
SSM_INLINE double sample_std_normal(uint64_t seed, uint32_t n, uint32_t t, uint32_t site) {
  return detail::std_normal_at(seed, n, t, site, 0);
}

// The k-th of a sequence of independent standard normals at one site (e.g. the components of an
// mvnormal): block k / 2, cosine branch for even k, sine branch for odd k. k = 0 equals
// sample_std_normal; components 2j and 2j+1 share one Philox call and one log/sqrt, which the
// optimiser merges when both are computed in the same loop body.
SSM_INLINE double sample_std_normal_k(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                      uint32_t k) {
  double u0, u1;
  philox_u01x2(seed, n, t, site, k >> 1, u0, u1);
  return detail::box_muller(u0, u1, (k & 1u) != 0);
}

SSM_INLINE double sample_normal(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double mu,
                                double sigma) {
  const double z = sample_std_normal(seed, n, t, site);
  return detail::finite(mu) && detail::positive_finite(sigma) ? mu + sigma * z : kNaN;
}

SSM_INLINE double sample_lognormal(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double mu,
                                   double sigma) {
  const double z = sample_std_normal(seed, n, t, site);
  return detail::finite(mu) && detail::positive_finite(sigma) ? std::exp(mu + sigma * z) : kNaN;
}

// Normal on block 0 over the square root of an independent Gamma(nu/2, rate nu/2) from block 1 on.
SSM_INLINE double sample_student_t(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double nu,
                                   double mu, double sigma) {
  if (!(detail::positive_finite(nu) && detail::finite(mu) && detail::positive_finite(sigma)))
    return kNaN;
  const double z = sample_std_normal(seed, n, t, site);
  const double g = detail::std_gamma(0.5 * nu, seed, n, t, site, 1);
  return mu + sigma * z * std::sqrt(0.5 * nu / g);
}

SSM_INLINE double sample_half_normal(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                     double sigma) {
  const double z = sample_std_normal(seed, n, t, site);
  return detail::positive_finite(sigma) ? sigma * std::fabs(z) : kNaN;
}

SSM_INLINE double sample_uniform(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double lo,
                                 double hi) {
  const double u = philox_u01(seed, n, t, site, 0);
  // The min guards against rounding past hi when hi - lo is inexact.
  const double x = std::fmin(lo + (hi - lo) * u, hi);
  return detail::finite(lo) && detail::finite(hi) && hi > lo ? x : kNaN;
}

SSM_INLINE double sample_gamma(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double alpha,
                               double beta) {
  if (!(detail::positive_finite(alpha) && detail::positive_finite(beta)))
    return kNaN;
  return detail::std_gamma(alpha, seed, n, t, site, 0) / beta;
}

SSM_INLINE double sample_exponential(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                     double beta) {
  const double u = philox_u01(seed, n, t, site, 0);
  return detail::positive_finite(beta) ? -std::log(u) / beta : kNaN;
}

// Exact for every lambda: inversion below 10, PTRS from 10 on. Returns the count as a double.
SSM_INLINE double sample_poisson(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                 double lambda) {
  if (!(lambda >= 0 && lambda < kInf))
    return kNaN;
  if (lambda < 10.0)
    return detail::poisson_inversion(lambda, philox_u01(seed, n, t, site, 0));
  return detail::poisson_ptrs(lambda, seed, n, t, site);
}

SSM_INLINE double sample_bernoulli(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double p) {
  const double u = philox_u01(seed, n, t, site, 0);
  return p >= 0 && p <= 1 ? (u < p ? 1.0 : 0.0) : kNaN;
}

} // namespace ssm

#endif
