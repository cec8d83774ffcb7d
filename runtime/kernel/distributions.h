// Log-densities and samplers of the scalar distributions, shared by the runtime (host compiler) and
// the generated kernels (clang bitcode, inlined). Parameterisations follow Stan; see
// docs/distributions.md.
//
// Conventions:
//   - lpdf_*(x, params...) is the log-density (log-mass for counts); x outside the support gives
//     -inf, an invalid parameter gives NaN, a NaN x gives NaN.
//   - sample_*(seed, n, t, site, params...) draws with Philox counters (n, t, site, draw) for
//     draw = 0, 1, ... (kernel/rng.h); an invalid parameter gives NaN. A sampler built from two
//     gamma variates starts the second at draw kGammaBlocks, past any block the first can use.
//   - Cheap functions end in a select rather than an early return, so that a kernel loop calling
//     them stays branch-free and vectorises.
// Nothing here allocates, throws or touches global state (hence log_gamma instead of std::lgamma,
// which writes the global `signgam` and so can be neither hoisted nor called from threads safely).
// The special functions (log_gamma, log_beta, ...) are in kernel/special_functions.h and the
// samplers' generators (gamma, Poisson, binomial, truncated normal) in kernel/sampler_algorithms.h;
// a distribution's own lpdf and sample functions, and its entry in SSM_SCALAR_DISTRIBUTIONS, are
// here.
#pragma once

#include "kernel/rng.h"
#include "kernel/sampler_algorithms.h"
#include "kernel/special_functions.h"

#include <cmath>
#include <cstdint>

namespace ssm {

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

// Log-mass of k in {0, 1} with P(k = 1) = logistic(alpha): -softplus(-alpha) and -softplus(alpha),
// written so that neither overflows (bernoulli(logistic(alpha)) is -inf at 0 once logistic(alpha)
// rounds to 1, past alpha = 37).
SSM_INLINE double lpdf_bernoulli_logit(double k, double alpha) {
  const double s = alpha * (k == 1 ? -1.0 : 1.0); // log P(k) = -softplus(s)
  const double softplus = (s > 0 ? s : 0.0) + std::log1p(std::exp(-std::fabs(s)));
  const double r = k == 1 || k == 0 ? -softplus : -kInf;
  return detail::integral(k) && !std::isnan(alpha) ? r : kNaN;
}

// Support 0 <= x <= 1. At x = 0 the limit is returned: +inf (a < 1), log(b) = -log B(1, b)
// (a = 1), -inf (a > 1); likewise at x = 1 with the roles of a and b swapped.
SSM_INLINE double lpdf_beta(double x, double a, double b) {
  const double lb = log_beta(a, b);
  const double v = (a - 1.0) * std::log(x) + (b - 1.0) * std::log1p(-x) - lb;
  const double at0 = a < 1.0 ? kInf : (a == 1.0 ? -lb : -kInf);
  const double at1 = b < 1.0 ? kInf : (b == 1.0 ? -lb : -kInf);
  const double r =
      (x > 0 && x < 1) ? v : (x == 0 ? at0 : (x == 1 ? at1 : (std::isnan(x) ? x : -kInf)));
  return detail::positive_finite(a) && detail::positive_finite(b) ? r : kNaN;
}

// beta is a scale: density beta^alpha x^(-alpha-1) exp(-beta / x) / Gamma(alpha), support x > 0
// (the density tends to 0 at both ends, so x = 0 and x = +inf give -inf).
SSM_INLINE double lpdf_inverse_gamma(double x, double alpha, double beta) {
  const double v =
      alpha * std::log(beta) - log_gamma(alpha) - (alpha + 1.0) * std::log(x) - beta / x;
  const double r = (x > 0 && x < kInf) ? v : (std::isnan(x) ? x : -kInf);
  return detail::positive_finite(alpha) && detail::positive_finite(beta) ? r : kNaN;
}

// Stan's double_exponential(mu, sigma): density exp(-|x - mu| / b) / (2 b), b a scale.
SSM_INLINE double lpdf_laplace(double x, double mu, double b) {
  const double v = -std::fabs(x - mu) / b - std::log(b) - kLn2;
  return detail::finite(mu) && detail::positive_finite(b) ? v : kNaN;
}

SSM_INLINE double lpdf_cauchy(double x, double mu, double sigma) {
  const double z = (x - mu) / sigma;
  // log(1 + z^2), as 2 log|z| + log(1 + z^-2) for |z| > 1 so that z^2 cannot overflow.
  const double az = std::fabs(z);
  const double l = az > 1.0 ? 2.0 * std::log(az) + std::log1p(1.0 / (z * z)) : std::log1p(z * z);
  const double v = -l - std::log(sigma) - kLogPi;
  return detail::finite(mu) && detail::positive_finite(sigma) ? v : kNaN;
}

// Normal(mu, sigma) restricted to lo <= x <= hi; lo may be -inf and hi +inf, lo < hi. The
// normalising mass is computed in logs (detail::log_normal_mass), accurate far in either tail.
SSM_INLINE double lpdf_truncated_normal(double x, double mu, double sigma, double lo, double hi) {
  const double z = (x - mu) / sigma;
  const double lmass = detail::log_normal_mass((lo - mu) / sigma, (hi - mu) / sigma);
  const double v = -0.5 * z * z - std::log(sigma) - kLogSqrtTwoPi - lmass;
  const double r = (x >= lo && x <= hi) ? v : (std::isnan(x) ? x : -kInf);
  return detail::finite(mu) && detail::positive_finite(sigma) && lo < hi ? r : kNaN;
}

// Log-mass of k successes in `trials` independent trials with success probability p; trials is
// a non-negative integer (as a double), a non-integer k is invalid (NaN).
SSM_INLINE double lpdf_binomial(double k, double trials, double p) {
  // log C(N, k) = -log(N + 1) - log B(k + 1, N - k + 1), exactly 0 at k = 0 and k = N; and
  // 0 log 0 = 0, so p = 0 and p = 1 put all mass on k = 0 and k = N.
  const bool edge = k == 0 || k == trials;
  const double lchoose = edge ? 0.0 : -std::log1p(trials) - log_beta(k + 1.0, trials - k + 1.0);
  const double ksucc = k == 0 ? 0.0 : k * std::log(p);
  const double kfail = k == trials ? 0.0 : (trials - k) * std::log1p(-p);
  const double r = (k >= 0 && k <= trials) ? lchoose + ksucc + kfail : -kInf;
  return detail::integral(k) && detail::integral(trials) && trials >= 0 && p >= 0 && p <= 1 ? r
                                                                                            : kNaN;
}

// Stan's neg_binomial_2: mean mu, variance mu + mu^2 / phi. mu = 0 is allowed (all mass on 0),
// as for poisson.
SSM_INLINE double lpdf_negative_binomial(double k, double mu, double phi) {
  // log C(k + phi - 1, k) = -log(k + phi) - log B(k + 1, phi); log(mu / (mu + phi)) and
  // log(phi / (mu + phi)) as -log1p of the inverse ratios, accurate for any mu / phi (in
  // particular phi -> inf, the Poisson limit).
  const double lchoose = k == 0 ? 0.0 : -std::log(k + phi) - log_beta(k + 1.0, phi);
  const double kterm = k == 0 ? 0.0 : -k * std::log1p(phi / mu);
  const double v = lchoose + kterm - phi * std::log1p(mu / phi);
  const double r = k >= 0 ? v : -kInf;
  return detail::integral(k) && mu >= 0 && mu < kInf && detail::positive_finite(phi) ? r : kNaN;
}

// Shape k, scale lambda: density (k / lambda) z^(k-1) exp(-z^k) with z = x / lambda, support
// x >= 0. log z is taken from the ratio (one rounding) unless the ratio over- or underflows, then
// as log x - log lambda; z^k is pow(z, k), or exp(k log z) in that case, where it may still be
// finite. At x = 0 the limit: +inf (k < 1), -log(lambda) (k = 1), -inf (k > 1).
SSM_INLINE double lpdf_weibull(double x, double k, double lambda) {
  const double z = x / lambda;
  const bool normal_ratio = z >= 0x1p-1022 && z < kInf;
  const double lz = normal_ratio ? std::log(z) : std::log(x) - std::log(lambda);
  const double zk = normal_ratio ? std::pow(z, k) : std::exp(k * lz);
  const double v = std::log(k) - std::log(lambda) + (k - 1.0) * lz - zk;
  const double at0 = k < 1.0 ? kInf : (k == 1.0 ? -std::log(lambda) : -kInf);
  const double r = (x > 0 && x < kInf) ? v : (x == 0 ? at0 : (std::isnan(x) ? x : -kInf));
  return detail::positive_finite(k) && detail::positive_finite(lambda) ? r : kNaN;
}

// Gumbel (maximum) with location mu and scale beta: density exp(-z - exp(-z)) / beta with
// z = (x - mu) / beta. x = -inf gives -inf (exp(-z) overflows there long before; the plain formula
// would be inf - inf).
SSM_INLINE double lpdf_gumbel(double x, double mu, double beta) {
  const double z = (x - mu) / beta;
  const double v = -std::log(beta) - z - std::exp(-z);
  const double r = x == -kInf ? -kInf : v;
  return detail::finite(mu) && detail::positive_finite(beta) ? r : kNaN;
}

// ---------------------------------------------------------------------------------------------
// Samplers.

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
  return detail::poisson_from(lambda, seed, n, t, site, 0);
}

SSM_INLINE double sample_bernoulli(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double p) {
  const double u = philox_u01(seed, n, t, site, 0);
  return p >= 0 && p <= 1 ? (u < p ? 1.0 : 0.0) : kNaN;
}

// P(1) = logistic(alpha), drawn as bernoulli(logistic(alpha)) is from the same uniform.
SSM_INLINE double sample_bernoulli_logit(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                         double alpha) {
  const double u = philox_u01(seed, n, t, site, 0);
  return std::isnan(alpha) ? kNaN : (u < 1.0 / (1.0 + std::exp(-alpha)) ? 1.0 : 0.0);
}

// Gamma(alpha, rate 1), the same draw as sample_gamma(..., alpha, 1); codegen builds a Dirichlet
// from one per component, at distinct sites.
SSM_INLINE double sample_std_gamma(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                   double alpha) {
  if (!detail::positive_finite(alpha))
    return kNaN;
  return detail::std_gamma(alpha, seed, n, t, site, 0);
}

// Ga / (Ga + Gb) with Ga ~ Gamma(a) from block 0 on and Gb ~ Gamma(b) from block kGammaBlocks on,
// formed from their logarithms so that small shapes (where both draws may underflow) still give
// a value in [0, 1]. Values within rounding of 0 or 1 come out as 0 or 1.
SSM_INLINE double sample_beta(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double a,
                              double b) {
  if (!(detail::positive_finite(a) && detail::positive_finite(b)))
    return kNaN;
  const double la = detail::log_std_gamma(a, seed, n, t, site, 0);
  const double lb = detail::log_std_gamma(b, seed, n, t, site, kGammaBlocks);
  // 1 / (1 + exp(d)) with d = lb - la, in the form whose exponential cannot overflow.
  const double d = lb - la;
  const double e = std::exp(-std::fabs(d));
  return d > 0 ? e / (1.0 + e) : 1.0 / (1.0 + e);
}

// beta / G with G ~ Gamma(alpha, rate 1) from block 0 on.
SSM_INLINE double sample_inverse_gamma(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                       double alpha, double beta) {
  if (!(detail::positive_finite(alpha) && detail::positive_finite(beta)))
    return kNaN;
  return beta / detail::std_gamma(alpha, seed, n, t, site, 0);
}

// mu +- b E with E = -log(u0) exponential and the sign from u1 (block 0): both tails keep the
// full resolution of u0.
SSM_INLINE double sample_laplace(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double mu,
                                 double b) {
  double u0, u1;
  philox_u01x2(seed, n, t, site, 0, u0, u1);
  const double e = -std::log(u0);
  return detail::finite(mu) && detail::positive_finite(b) ? mu + (u1 < 0.5 ? -b : b) * e : kNaN;
}

// mu + sigma cot(pi v) with v = u0 (block 0) moved to (-1/2, 1/2] by subtracting 1 above 1/2
// (exactly): a standard Cauchy by inversion, with full relative precision in both tails, where
// |v| is small; cos and sin rather than tan, which LLVM has no intrinsic for.
SSM_INLINE double sample_cauchy(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double mu,
                                double sigma) {
  const double u = philox_u01(seed, n, t, site, 0);
  const double a = kPi * (u > 0.5 ? u - 1.0 : u);
  const double z = std::cos(a) / std::sin(a);
  return detail::finite(mu) && detail::positive_finite(sigma) ? mu + sigma * z : kNaN;
}

// Rejection on the standardised interval (detail::truncated_std_normal, one block per proposal
// from block 0), clamped to [lo, hi] against rounding in mu + sigma z.
SSM_INLINE double sample_truncated_normal(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                          double mu, double sigma, double lo, double hi) {
  if (!(detail::finite(mu) && detail::positive_finite(sigma) && lo < hi))
    return kNaN;
  const double z =
      detail::truncated_std_normal((lo - mu) / sigma, (hi - mu) / sigma, seed, n, t, site);
  return std::fmin(std::fmax(mu + sigma * z, lo), hi);
}

namespace detail {

// Binomial(trials, p) for p <= 1/2 and trials * p >= 10 by Hoermann's transformed rejection with
// squeeze, BTRS (Hoermann 1993, "The generation of binomial random variates", constants of his
// table 1). One block per proposal; as in the paper, the exact test is against f(k) / f(m) with m
// the mode. A proposal is accepted with probability ~0.7 at trials * p = 10, rising to ~0.89.
inline double binomial_btrs(double trials, double p, uint64_t seed, uint32_t n, uint32_t t,
                            uint32_t site) {
  const double spq = std::sqrt(trials * p * (1.0 - p));
  const double b = 1.15 + 2.53 * spq;
  const double a = -0.0873 + 0.0248 * b + 0.01 * p;
  const double c = trials * p + 0.5;
  const double alpha = (2.83 + 5.1 / b) * spq;
  const double vr = 0.92 - 4.2 / b;
  const double m = std::floor((trials + 1.0) * p);
  const double lfm = lpdf_binomial(m, trials, p);
  for (uint32_t draw = 0; draw < static_cast<uint32_t>(kMaxRejections); ++draw) {
    double u, v;
    philox_u01x2(seed, n, t, site, draw, u, v);
    u -= 0.5;
    const double us = 0.5 - std::fabs(u);
    const double k = std::floor((2.0 * a / us + b) * u + c);
    if (us >= 0.07 && v <= vr)
      return k;
    if (k < 0 || k > trials)
      continue;
    if (std::log(v * alpha / (a / (us * us) + b)) <= lpdf_binomial(k, trials, p) - lfm)
      return k;
  }
  return kNaN;
}

} // namespace detail

// Exact for every trials and p: with q = min(p, 1 - p), inversion while trials * q < 10 and BTRS
// from 10 on, on q (and trials - k returned for p > 1/2). The count is returned as a double.
SSM_INLINE double sample_binomial(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                  double trials, double p) {
  if (!(detail::integral(trials) && trials >= 0 && p >= 0 && p <= 1))
    return kNaN;
  const bool flip = p > 0.5;
  const double q = flip ? 1.0 - p : p; // exact
  const double k = trials * q < 10.0
                       ? detail::binomial_inversion(trials, q, philox_u01(seed, n, t, site, 0))
                       : detail::binomial_btrs(trials, q, seed, n, t, site);
  return flip ? trials - k : k;
}

// Poisson(G mu / phi) with G ~ Gamma(phi, rate 1) from block 0 on and the Poisson draw from block
// kGammaBlocks on: a gamma-Poisson mixture with mean mu and variance mu + mu^2 / phi.
SSM_INLINE double sample_negative_binomial(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                           double mu, double phi) {
  if (!(mu >= 0 && mu < kInf && detail::positive_finite(phi)))
    return kNaN;
  const double g = detail::std_gamma(phi, seed, n, t, site, 0);
  return detail::poisson_from(g * (mu / phi), seed, n, t, site, kGammaBlocks);
}

// lambda E^(1/k) with E = -log(u0) exponential (block 0): inversion of the distribution function.
// E lies in [1.1e-16, 37.5] (u0's extremes), so only ~1e-16 of the mass at either end is missed.
SSM_INLINE double sample_weibull(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double k,
                                 double lambda) {
  const double e = -std::log(philox_u01(seed, n, t, site, 0));
  const double v = lambda * std::pow(e, 1.0 / k);
  return detail::positive_finite(k) && detail::positive_finite(lambda) ? v : kNaN;
}

// mu - beta log(E) with E = -log(u0) exponential (block 0): inversion of the distribution function
// exp(-exp(-z)). E lies in [1.1e-16, 37.5] (u0's extremes), so the draw is finite.
SSM_INLINE double sample_gumbel(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double mu,
                                double beta) {
  const double e = -std::log(philox_u01(seed, n, t, site, 0));
  const double v = mu - beta * std::log(e);
  return detail::finite(mu) && detail::positive_finite(beta) ? v : kNaN;
}

} // namespace ssm

// The scalar distributions generated code calls through C wrappers: kernel/kernel_lib.h declares
// and kernel/kernel_lib.cpp defines ssm_lpdf_NAME(x, params...) and ssm_sample_NAME(seed, n, t,
// site, params...) over lpdf_NAME and sample_NAME above, one pair per X(NAME, (params...),
// (names...)) here. S(...) is a sampler without a density of its own (std_gamma, from which codegen
// builds a Dirichlet). The order is the order of the wrappers in kernel_lib.bc.
#define SSM_SCALAR_DISTRIBUTIONS(X, S)                                                             \
  X(normal, (double mu, double sigma), (mu, sigma))                                                \
  X(lognormal, (double mu, double sigma), (mu, sigma))                                             \
  X(student_t, (double nu, double mu, double sigma), (nu, mu, sigma))                              \
  X(half_normal, (double sigma), (sigma))                                                          \
  X(uniform, (double lo, double hi), (lo, hi))                                                     \
  X(gamma, (double alpha, double beta), (alpha, beta))                                             \
  X(exponential, (double beta), (beta))                                                            \
  X(poisson, (double lambda), (lambda))                                                            \
  X(bernoulli, (double p), (p))                                                                    \
  S(std_gamma, (double alpha), (alpha))                                                            \
  X(beta, (double a, double b), (a, b))                                                            \
  X(inverse_gamma, (double alpha, double beta), (alpha, beta))                                     \
  X(laplace, (double mu, double b), (mu, b))                                                       \
  X(cauchy, (double mu, double sigma), (mu, sigma))                                                \
  X(truncated_normal, (double mu, double sigma, double lo, double hi), (mu, sigma, lo, hi))        \
  X(binomial, (double trials, double p), (trials, p))                                              \
  X(negative_binomial, (double mu, double phi), (mu, phi))                                         \
  X(weibull, (double k, double lambda), (k, lambda))                                               \
  X(gumbel, (double mu, double beta), (mu, beta))                                                  \
  X(bernoulli_logit, (double alpha), (alpha))

// Helpers of the list: a parenthesised list without its parentheses; nothing.
#define SSM_UNPAREN(...) __VA_ARGS__
#define SSM_SKIP(...)
