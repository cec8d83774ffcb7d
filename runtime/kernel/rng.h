// Counter-based random numbers for kernels and runtime: Philox4x32-10 (Random123) keyed by the
// 64-bit seed, counter (n = particle, t = time step, site, draw). Header-only; compiled both by the
// host compiler into the runtime and by clang into the kernel bitcode, so it allocates nothing,
// throws nothing and keeps no state.
#pragma once

#include <cstdint>

// Philox4x32 needs neither SSE nor exceptions; Random123's SSE helpers and array::at() throw, which
// does not compile under -fno-exceptions.
#if !defined(__cpp_exceptions)
#ifndef R123_USE_SSE
#define R123_USE_SSE 0
#endif
#ifndef R123_THROW
#define R123_THROW(x) __builtin_trap()
#endif
#endif
#include <Random123/philox.h>

// Forces inlining of the small hot functions. Kernels call them once per particle in a loop that
// LLVM only vectorises if nothing is left as a call; the default inline cost model would keep
// Philox (ten unrolled rounds) and the log-densities as calls.
#if defined(__GNUC__) || defined(__clang__)
#define SSM_INLINE inline __attribute__((always_inline))
#else
#define SSM_INLINE inline
#endif

namespace ssm {

// Maps 53 random bits (32 from `hi`, the top 21 of `lo`) to m * 2^-53, with m = 0 sent to 2^-54.
// Every value is a double in the open interval (0, 1) on the 2^-53 grid: 1 - 2^-53 is the largest
// double below 1, so no rounding can reach 1, and the 2^-54 substitute keeps log(u) finite. The
// only departure from an exact 53-bit grid is the value at 0 moved by 2^-54 with probability 2^-53.
SSM_INLINE double u01_open53(uint32_t hi, uint32_t lo) {
  const uint64_t m = (static_cast<uint64_t>(hi) << 21) | (lo >> 11);
  // m < 2^53 converts exactly as a signed integer, which is one instruction (unsigned 64-bit
  // conversion is a branch and a fix-up without AVX-512).
  return m == 0 ? 0x1p-54 : static_cast<double>(static_cast<int64_t>(m)) * 0x1p-53;
}

// One Philox4x32-10 block: key = (seed low word, seed high word), counter = (n, t, site, draw).
SSM_INLINE void philox_u01x2(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, uint32_t draw,
                             double& u0, double& u1) {
  const r123::Philox4x32::ctr_type ctr = {{n, t, site, draw}};
  const r123::Philox4x32::key_type key = {
      {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}};
  const r123::Philox4x32::ctr_type r = r123::Philox4x32()(ctr, key);
  u0 = u01_open53(r[0], r[1]);
  u1 = u01_open53(r[2], r[3]);
}

// splitmix64's finaliser: a seed for a derived stream (a chain's, a step's, a filter's) from a
// seed and an index, so that derived seeds never meet as sums of multiples would.
SSM_INLINE uint64_t mix_seed(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// First uniform of a block, for callers that need a single one.
SSM_INLINE double philox_u01(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, uint32_t draw) {
  double u0, u1;
  philox_u01x2(seed, n, t, site, draw, u0, u1);
  return u0;
}

// philox_u01x2 for the particles n_begin .. n_begin + count - 1 (same t, site and draw), into
// u0[0 .. count) and u1[0 .. count): vectorised, bit-identical. Runtime only (vectorised.cpp).
void philox_u01x2_run(uint64_t seed, uint32_t n_begin, int64_t count, uint32_t t, uint32_t site,
                      uint32_t draw, double* __restrict u0, double* __restrict u1);

} // namespace ssm
