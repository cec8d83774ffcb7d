// The random variate generators behind the samplers of kernel/distributions.h: Box-Muller,
// Marsaglia-Tsang gamma, Poisson by inversion and by Hoermann's transformed rejection, the binomial
// by inversion, the truncated standard normal by Robert's rejection. Each draws from Philox blocks
// (kernel/rng.h) numbered from a given first block, so a sampler can place several generators at
// one site. (The binomial's BTRS stays in kernel/distributions.h: its acceptance test is
// lpdf_binomial.)
#pragma once

#include "kernel/rng.h"
#include "kernel/special_functions.h"

#include <cmath>
#include <cstdint>

namespace ssm {

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
// (at most kGammaBlocks of them). Each proposal uses two blocks: one for its normal, one for its
// acceptance uniform (u0) and for the alpha < 1 boost uniform (u1, used only from the accepted
// proposal, independent of it). The draw is g * exp(log_boost): for alpha < 1, g ~ Gamma(alpha + 1)
// and log_boost = log(U) / alpha (Gamma(alpha) = Gamma(alpha + 1) U^(1/alpha)), returned apart so
// that callers can work in logs where the product would underflow; otherwise log_boost = 0.
inline double std_gamma_parts(double alpha, uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                              uint32_t first, double& log_boost) {
  const bool boost = alpha < 1.0;
  const double d = (boost ? alpha + 1.0 : alpha) - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  uint32_t draw = first;
  log_boost = 0.0;
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
      log_boost = boost ? std::log(ub) / alpha : 0.0;
      return d * v;
    }
  }
  return kNaN;
}

inline double std_gamma(double alpha, uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                        uint32_t first) {
  double log_boost;
  const double g = std_gamma_parts(alpha, seed, n, t, site, first, log_boost);
  return alpha < 1.0 ? g * std::exp(log_boost) : g;
}

// log of a Gamma(alpha, rate 1) draw (the same draw as std_gamma), finite even where the draw
// itself underflows (alpha well below 1).
inline double log_std_gamma(double alpha, uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                            uint32_t first) {
  double log_boost;
  const double g = std_gamma_parts(alpha, seed, n, t, site, first, log_boost);
  return std::log(g) + log_boost;
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
inline double poisson_ptrs(double lambda, uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                           uint32_t first) {
  const double slam = std::sqrt(lambda);
  const double loglam = std::log(lambda);
  const double b = 0.931 + 2.53 * slam;
  const double a = -0.059 + 0.02483 * b;
  const double inv_alpha = 1.1239 + 1.1328 / (b - 3.4);
  const double vr = 0.9277 - 3.6224 / (b - 2.0);
  for (uint32_t i = 0; i < static_cast<uint32_t>(kMaxRejections); ++i) {
    double u, v;
    philox_u01x2(seed, n, t, site, first + i, u, v);
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

// Poisson(lambda) for lambda >= 0 from blocks first, first + 1, ...: inversion below 10, PTRS
// from 10 on.
SSM_INLINE double poisson_from(double lambda, uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                               uint32_t first) {
  if (lambda < 10.0)
    return poisson_inversion(lambda, philox_u01(seed, n, t, site, first));
  return poisson_ptrs(lambda, seed, n, t, site, first);
}

// Binomial(trials, p) for trials * p < 10 by sequential inversion of the CDF with one uniform
// (expected number of steps trials * p + 1); stops like poisson_inversion. p <= 1/2, so the first
// term (1 - p)^trials >= exp(-10 * 2 log 2) does not underflow.
SSM_INLINE double binomial_inversion(double trials, double p, double u) {
  const double odds = p / (1.0 - p);
  double f = std::exp(trials * std::log1p(-p));
  double cdf = f;
  double k = 0;
  for (int i = 0; i < kMaxRejections && u > cdf && k < trials && f > 0; ++i) {
    f *= (trials - k) / (k + 1.0) * odds;
    k += 1.0;
    cdf += f;
  }
  return k;
}

// Standard normal restricted to [a, b], a < b, by rejection (Robert 1995, "Simulation of truncated
// normal variables"). The interval is first mirrored so that a + b >= 0; then, with w = b - a:
//   - a < 0 < b, w > sqrt(2 pi): normal proposals (both Box-Muller branches of a block), accepted
//     with probability Phi(b) - Phi(a) > 0.49;
//   - a < 0 < b, w <= sqrt(2 pi): uniform proposals on [a, b], accepted with exp(-z^2 / 2);
//     acceptance > 0.49;
//   - a >= 0, w max(a, 1) < 1/2 (narrow): uniform proposals, accepted with exp((a^2 - z^2) / 2);
//     acceptance > 0.74;
//   - a >= 0 otherwise: a + Exp(lambda) restricted to [a, b] by inversion, lambda = (a +
//     sqrt(a^2 + 4)) / 2 (Robert's optimal rate for b = inf), accepted with exp(-(z - lambda)^2 /
//     2); acceptance > 0.74, tending to 1 far in the tail, with no loss of precision there.
// One block per proposal (its two uniforms). Returns z in [a, b] up to rounding, mirrored back.
inline double truncated_std_normal(double a, double b, uint64_t seed, uint32_t n, uint32_t t,
                                   uint32_t site) {
  const bool flip = a + b < 0;
  const double lo = flip ? -b : a;
  const double hi = flip ? -a : b;
  const double w = hi - lo;
  const double sign = flip ? -1.0 : 1.0;
  // lambda for the exponential proposal; any lambda > 0 is valid, this one is only efficient, so
  // huge lo may drop the sqrt (whose square would overflow).
  const double lambda = lo > 1e150 ? lo : 0.5 * (lo + std::sqrt(lo * lo + 4.0));
  const bool normal = lo < 0 && w > kSqrtTwoPi;
  const bool uniform = lo < 0 ? w <= kSqrtTwoPi : w * std::fmax(lo, 1.0) < 0.5;
  const double tail_mass = -std::expm1(-lambda * w); // of the exponential on [0, w]
  for (uint32_t draw = 0; draw < static_cast<uint32_t>(kMaxRejections); ++draw) {
    double u0, u1;
    philox_u01x2(seed, n, t, site, draw, u0, u1);
    if (normal) {
      const double z0 = box_muller(u0, u1, false);
      if (z0 >= lo && z0 <= hi)
        return sign * z0;
      const double z1 = box_muller(u0, u1, true);
      if (z1 >= lo && z1 <= hi)
        return sign * z1;
    } else if (uniform) {
      const double z = lo + w * u0;
      // log of the density ratio against its maximum, at 0 or at lo.
      const double lr = lo < 0 ? -0.5 * z * z : 0.5 * (lo - z) * (lo + z);
      if (std::log(u1) <= lr)
        return sign * z;
    } else {
      const double z = lo - std::log1p(-u0 * tail_mass) / lambda;
      const double d = z - lambda;
      if (std::log(u1) <= -0.5 * d * d)
        return sign * z;
    }
  }
  return kNaN;
}

} // namespace detail

} // namespace ssm
