// Constants and special functions of the kernel: log Gamma, log Beta and the normal tail masses
// in the forms that stay accurate where the plain formulas cancel or overflow, shared by the
// log-densities and samplers (kernel/distributions.h) and the kernel library. Like them, nothing
// here allocates, throws or touches global state, and cheap functions select rather than branch.
#pragma once

#include "kernel/rng.h"

#include <cmath>
#include <cstdint>

namespace ssm {

inline constexpr double kNaN = __builtin_nan("");
inline constexpr double kInf = __builtin_inf();
inline constexpr double kPi = 3.14159265358979323846;
inline constexpr double kTwoPi = 6.28318530717958647693;
inline constexpr double kLogSqrtTwoPi = 0.91893853320467274178;      // log(sqrt(2 pi))
inline constexpr double kLogSqrtTwoOverPi = -0.22579135264472743236; // log(sqrt(2 / pi))
inline constexpr double kLogPi = 1.14472988584940017414;
inline constexpr double kLn2 = 0.69314718055994530942;
inline constexpr double kSqrtHalf = 0.70710678118654752440; // 1 / sqrt(2)
inline constexpr double kSqrtTwoPi = 2.50662827463100050242;
// Rejection loops give up (and return NaN) after this many proposals; every sampler here accepts
// with probability about 1/2 or more (most well above), so the cap only matters for corrupted
// inputs.
inline constexpr int kMaxRejections = 1000;
// Philox blocks one gamma variate may use (two per Marsaglia-Tsang proposal).
inline constexpr uint32_t kGammaBlocks = 2 * kMaxRejections;

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

// log B(a, b) = log Gamma(a) + log Gamma(b) - log Gamma(a + b) for a, b > 0, without the
// cancellation of that difference when an argument is large (at a = b = 1e6 the plain difference
// of terms ~1e7 would lose seven digits). With lo <= hi: the plain difference while hi < 10;
// log Gamma(hi) - log Gamma(lo + hi) by Stirling, as (hi - 1/2) log(hi / (lo + hi)) + ..., once
// hi >= 10; and log Gamma(lo) by Stirling too once lo >= 10. All three are computed and selected.
SSM_INLINE double log_beta(double a, double b) {
  const double lo = std::fmin(a, b);
  const double hi = std::fmax(a, b);
  const double s = lo + hi;
  const double direct = log_gamma(lo) + log_gamma(hi) - log_gamma(s);
  // log Gamma(hi) - log Gamma(s) without its Stirling constant, which cancels.
  const double hi_minus_s = -(hi - 0.5) * std::log1p(lo / hi) - lo * std::log(s) + lo +
                            detail::stirling_tail(hi) - detail::stirling_tail(s);
  const double one_large = log_gamma(lo) + hi_minus_s;
  const double both_large = kLogSqrtTwoPi - 0.5 * std::log(s) + (lo - 0.5) * std::log(lo / s) -
                            (hi - 0.5) * std::log1p(lo / hi) + detail::stirling_tail(lo) +
                            detail::stirling_tail(hi) - detail::stirling_tail(s);
  return hi < 10.0 ? direct : (lo < 10.0 ? one_large : both_large);
}

namespace detail {

// log(1 - exp(d)) for d <= 0, each form where it is accurate (Maechler 2012).
SSM_INLINE double log1mexp(double d) {
  return d > -kLn2 ? std::log(-std::expm1(d)) : std::log1p(-std::exp(d));
}

// log Q(z), Q(z) = 1 - Phi(z) the standard normal upper tail. Up to z = 30 from erfc (accurate to
// a few ulps there, and far from its underflow near z = 38); beyond, from the asymptotic series
// of the Mills ratio, Q(z) = phi(z) / z (1 - z^-2 + 3 z^-4 - 15 z^-6 + ...), cut after the z^-14
// term, whose successor is below 5e-18 at z = 30.
SSM_INLINE double log_normal_sf(double z) {
  const double direct = std::log(0.5 * std::erfc(z * kSqrtHalf));
  const double r = 1.0 / (z * z);
  const double series =
      1.0 -
      r * (1.0 -
           3.0 * r *
               (1.0 -
                5.0 * r * (1.0 - 7.0 * r * (1.0 - 9.0 * r * (1.0 - 11.0 * r * (1.0 - 13.0 * r))))));
  const double asymptotic = -0.5 * z * z - std::log(z) - kLogSqrtTwoPi + std::log(series);
  return z > 30.0 ? asymptotic : direct;
}

// log(Phi(b) - Phi(a)) for a < b (either may be infinite). An interval in a tail (a >= 1/2, or
// b <= -1/2 mirrored) uses Q(lo) - Q(hi) = Q(lo) (1 - Q(hi) / Q(lo)) in logs, so it stays
// accurate however far out the interval lies; any other interval (erf(b/sqrt2) - erf(a/sqrt2)) / 2,
// which has no cancellation when the interval contains 0. Either way a narrow interval of
// standardised width w loses about log10(1/w) digits to cancellation.
SSM_INLINE double log_normal_mass(double a, double b) {
  const bool right = a >= 0.5;
  const double tlo = right ? a : -b;
  const double thi = right ? b : -a;
  const double llo = log_normal_sf(tlo);
  const double tail = llo + log1mexp(log_normal_sf(thi) - llo);
  const double central = std::log(0.5 * (std::erf(b * kSqrtHalf) - std::erf(a * kSqrtHalf)));
  return tlo >= 0.5 ? tail : central;
}

} // namespace detail

} // namespace ssm
