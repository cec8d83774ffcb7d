// The runtime's hot loops that only vectorise well with more than the baseline x86-64 ISA: each is
// compiled for AVX-512, AVX2 and the baseline, and the variant for the machine is resolved once at
// load time (the kernels, compiled by LLVM for the host, need no such thing).
//
// philox_u01x2_run: the backward samplers of the online smoothers draw two Philox blocks per
// particle and step, and Random123's scalar Philox4x32 was a sixth of paris' time: its round loop
// has control flow that gcc does not vectorise. Here the ten rounds are straight-line code over one
// lane per particle; the draws are those of philox_u01x2, bit for bit (tests/unit/test_rng.cpp),
// so results do not depend on the machine.
//
// exp_run: Metropolis-Hastings acceptance ratios, with glibc's vector exp (libmvec), which gcc
// calls only for functions declared SIMD-callable; glibc declares them so under -ffast-math only.
// This file is compiled with -fno-math-errno, which the vector calls need.
#include "kernel/vectorised.h"
#include "kernel/rng.h"

#include <cmath>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SSM_TARGET_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
extern "C" double exp(double) noexcept __attribute__((simd("notinbranch")));
#else
#define SSM_TARGET_CLONES
#endif

namespace ssm {

SSM_TARGET_CLONES
void philox_u01x2_run(uint64_t seed, uint32_t n_begin, int64_t count, uint32_t t, uint32_t site,
                      uint32_t draw, double* __restrict u0, double* __restrict u1) {
  // Random123's Philox4x32 constants: the round multipliers and the Weyl key increments.
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  const auto seed_lo = static_cast<uint32_t>(seed), seed_hi = static_cast<uint32_t>(seed >> 32);
  for (int64_t i = 0; i < count; ++i) {
    uint32_t c0 = n_begin + static_cast<uint32_t>(i), c1 = t, c2 = site, c3 = draw;
    uint32_t k0 = seed_lo, k1 = seed_hi;
#pragma GCC unroll 10
    for (int round = 0; round < 10; ++round) {
      const uint64_t p0 = static_cast<uint64_t>(kM0) * c0, p1 = static_cast<uint64_t>(kM1) * c2;
      c0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
      c1 = static_cast<uint32_t>(p1);
      c2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
      c3 = static_cast<uint32_t>(p0);
      k0 += kW0;
      k1 += kW1;
    }
    // u01_open53 without its 64-bit integer conversion, which has no vector form before
    // AVX-512DQ: hi 2^-32 + (lo >> 11) 2^-53 is the same multiple of 2^-53, exactly.
    const double a = static_cast<double>(c0) * 0x1p-32 + static_cast<double>(c1 >> 11) * 0x1p-53;
    const double b = static_cast<double>(c2) * 0x1p-32 + static_cast<double>(c3 >> 11) * 0x1p-53;
    u0[i] = a == 0 ? 0x1p-54 : a;
    u1[i] = b == 0 ? 0x1p-54 : b;
  }
}

SSM_TARGET_CLONES
void exp_run(const double* __restrict x, double* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = exp(x[i]);
}

} // namespace ssm
