// Unit tests of kernel/rng.h: the Philox key/counter layout (against Random123's published
// known-answer vectors), the open-interval 53-bit mapping, determinism, and uniformity and
// independence over many counters.
#include "kernel/rng.h"
#include "stats.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

using namespace ssm;
using ssm::test::check_ks;

namespace {

constexpr uint64_t kRngSeed = 0x5eed1234abcd9876ull;

// Sample correlation of two equally long sequences.
double correlation(const std::vector<double>& a, const std::vector<double>& b) {
  const double ma = test::mean_of(a), mb = test::mean_of(b);
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
  }
  return sab / std::sqrt(saa * sbb);
}

} // namespace

TEST_CASE("u01_open53 maps 53 bits onto the open unit interval", "[rng]") {
  CHECK(u01_open53(0, 0) == 0x1p-54);
  CHECK(u01_open53(0, 0x7ff) == 0x1p-54); // the low 11 bits of the second word are dropped
  CHECK(u01_open53(0, 0x800) == 0x1p-53);
  CHECK(u01_open53(0x80000000u, 0) == 0.5);
  CHECK(u01_open53(0xffffffffu, 0xffffffffu) == 1.0 - 0x1p-53);
  CHECK(u01_open53(0xffffffffu, 0xffffffffu) < 1.0);
  CHECK(u01_open53(0x12345678u, 0x9abcdef0u) ==
        double((uint64_t(0x12345678u) << 21) | (0x9abcdef0u >> 11)) * 0x1p-53);
}

TEST_CASE("philox_u01x2 is Philox4x32-10 with key = seed words, counter = (n, t, site, draw)",
          "[rng]") {
  // Known-answer vectors of Philox4x32-10 from Random123's kat_vectors.
  double u0, u1;
  philox_u01x2(0, 0, 0, 0, 0, u0, u1);
  CHECK(u0 == u01_open53(0x6627e8d5u, 0xe169c58du));
  CHECK(u1 == u01_open53(0xbc57ac4cu, 0x9b00dbd8u));
  philox_u01x2(~uint64_t(0), ~0u, ~0u, ~0u, ~0u, u0, u1);
  CHECK(u0 == u01_open53(0x408f276du, 0x41c83b0eu));
  CHECK(u1 == u01_open53(0xa20bc7c6u, 0x6d5451fdu));
  // Key words (0xa4093822, 0x299f31d0): the low word of the seed comes first.
  philox_u01x2(0x299f31d0a4093822ull, 0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, u0, u1);
  CHECK(u0 == u01_open53(0xd16cfe09u, 0x94fdccebu));
  CHECK(u1 == u01_open53(0x5001e420u, 0x24126ea1u));
  CHECK(philox_u01(0x299f31d0a4093822ull, 0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u) ==
        u0);
}

TEST_CASE("philox_u01x2_run draws what philox_u01x2 draws, particle by particle", "[rng]") {
  // Lengths around the vector widths (4 and 8 lanes), and counters that wrap at 2^32.
  for (const int64_t count : {0, 1, 3, 7, 8, 9, 16, 63, 64, 65, 1000})
    for (const uint32_t first : {0u, 12345u, 0xfffffff0u})
      for (const uint64_t seed : {uint64_t(0), kRngSeed, ~uint64_t(0)}) {
        std::vector<double> u0(count + 1, -1.0), u1(count + 1, -1.0);
        philox_u01x2_run(seed, first, count, 77, 0xFFFF0002u, 3, u0.data(), u1.data());
        INFO("count " << count << " first " << first << " seed " << seed);
        int64_t mismatches = 0;
        for (int64_t i = 0; i < count; ++i) {
          double e0, e1;
          philox_u01x2(seed, first + static_cast<uint32_t>(i), 77, 0xFFFF0002u, 3, e0, e1);
          mismatches += u0[i] != e0 || u1[i] != e1;
        }
        CHECK(mismatches == 0);
        CHECK(u0[count] == -1.0); // nothing written past the run
        CHECK(u1[count] == -1.0);
      }
}

TEST_CASE("the same counter gives the same bits, any changed field different ones", "[rng]") {
  double a0, a1, b0, b1;
  philox_u01x2(kRngSeed, 17, 5, 3, 2, a0, a1);
  philox_u01x2(kRngSeed, 17, 5, 3, 2, b0, b1);
  CHECK(a0 == b0);
  CHECK(a1 == b1);
  CHECK(a0 != a1);
  const auto differs = [&](uint64_t seed, uint32_t n, uint32_t t, uint32_t site, uint32_t draw) {
    double c0, c1;
    philox_u01x2(seed, n, t, site, draw, c0, c1);
    return c0 != a0 && c1 != a1;
  };
  CHECK(differs(kRngSeed ^ 1, 17, 5, 3, 2));
  CHECK(differs(kRngSeed ^ (uint64_t(1) << 32), 17, 5, 3, 2)); // high word of the seed matters
  CHECK(differs(kRngSeed, 18, 5, 3, 2));
  CHECK(differs(kRngSeed, 17, 6, 3, 2));
  CHECK(differs(kRngSeed, 17, 5, 4, 2));
  CHECK(differs(kRngSeed, 17, 5, 3, 3));
  CHECK(differs(kRngSeed, 5, 17, 3, 2)); // fields are not interchangeable
}

TEST_CASE("uniforms lie in (0, 1) and pass Kolmogorov-Smirnov", "[rng]") {
  const uint32_t N = 100000;
  std::vector<double> first(N), second(N);
  for (uint32_t n = 0; n < N; ++n)
    philox_u01x2(kRngSeed, n, 42, 7, 0, first[n], second[n]);
  const auto cdf = [](double u) { return u; };
  for (const auto* xs : {&first, &second}) {
    for (double u : *xs)
      REQUIRE((u > 0 && u < 1));
    check_ks(*xs, cdf);
    test::check_moments(*xs, 0.5, 1.0 / 12, 1.0 / 80);
  }
  // Along the other counter fields too.
  std::vector<double> by_t(N), by_site(N), by_draw(N);
  for (uint32_t i = 0; i < N; ++i) {
    by_t[i] = philox_u01(kRngSeed, 3, i, 7, 0);
    by_site[i] = philox_u01(kRngSeed, 3, 42, 0xFFFF0000u + i, 0);
    by_draw[i] = philox_u01(kRngSeed, 3, 42, 7, i);
  }
  check_ks(by_t, cdf);
  check_ks(by_site, cdf);
  check_ks(by_draw, cdf);
}

TEST_CASE("a million uniforms never reach 0 or 1", "[rng]") {
  double lo = 1, hi = 0;
  for (uint32_t n = 0; n < 500000; ++n) {
    double u0, u1;
    philox_u01x2(kRngSeed + 1, n, 0, 0, 0, u0, u1);
    lo = std::min({lo, u0, u1});
    hi = std::max({hi, u0, u1});
  }
  CHECK(lo > 0);
  CHECK(hi < 1);
  // The extremes of 10^6 uniforms are within ~10/10^6 of the ends with overwhelming probability.
  CHECK(lo < 1e-5);
  CHECK(hi > 1 - 1e-5);
}

TEST_CASE("neighbouring counters are uncorrelated", "[rng]") {
  const uint32_t N = 100000;
  const double tol = 4 / std::sqrt(double(N));
  std::vector<double> x(N + 1), x_next_t(N), x_next_site(N), x_next_draw(N), x_pair(N);
  for (uint32_t n = 0; n <= N; ++n)
    x[n] = philox_u01(kRngSeed, n, 9, 11, 0);
  for (uint32_t n = 0; n < N; ++n) {
    x_next_t[n] = philox_u01(kRngSeed, n, 10, 11, 0);
    x_next_site[n] = philox_u01(kRngSeed, n, 9, 12, 0);
    x_next_draw[n] = philox_u01(kRngSeed, n, 9, 11, 1);
    double u0;
    philox_u01x2(kRngSeed, n, 9, 11, 0, u0, x_pair[n]);
  }
  const std::vector<double> here(x.begin(), x.end() - 1), next_n(x.begin() + 1, x.end());
  CHECK(std::fabs(correlation(here, next_n)) < tol);      // particle n and n+1
  CHECK(std::fabs(correlation(here, x_next_t)) < tol);    // time t and t+1
  CHECK(std::fabs(correlation(here, x_next_site)) < tol); // adjacent sites
  CHECK(std::fabs(correlation(here, x_next_draw)) < tol); // adjacent draws
  CHECK(std::fabs(correlation(here, x_pair)) < tol);      // the two halves of one block
}
