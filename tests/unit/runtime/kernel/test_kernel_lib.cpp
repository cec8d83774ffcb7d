// Unit tests of the kernel library: the C wrappers in kernel_lib.bc, compiled by clang from LLVM
// bitcode and linked into this test, must return bit for bit what the host compiler's build of
// kernel/distributions.h returns, so kernels and runtime agree on every draw and density.
#include "kernel/distributions.h"
#include "kernel/kernel_lib.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

using namespace ssm;

namespace {

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0 || (a != a && b != b);
}

constexpr uint64_t kLibSeed = 0xfeedfacecafebeefull;

} // namespace

TEST_CASE("kernel_lib.bc agrees bit for bit with the host build", "[kernel_lib]") {
  const std::vector<double> xs = {-3.5, -1e-3, 0.0, 0.2, 1.0, 2.75, 17.0, 1e4, kInf, kNaN};
  const std::vector<double> ps = {0.25, 0.5,  0.999, 1.0, 2.5,  9.5,
                                  10.0, 44.0, 1e6,   0.0, -1.0, kNaN};
  int mismatches = 0;
  const auto check = [&](double a, double b, const char* what) {
    if (!same_bits(a, b)) {
      ++mismatches;
      UNSCOPED_INFO(what << ": kernel_lib " << a << ", host " << b);
    }
  };
  for (double x : xs) {
    check(ssm_lpdf_std_normal(x), lpdf_std_normal(x), "lpdf_std_normal");
    check(ssm_log_gamma(std::fabs(x)), log_gamma(std::fabs(x)), "log_gamma");
    for (double a : ps) {
      check(ssm_lpdf_half_normal(x, a), lpdf_half_normal(x, a), "lpdf_half_normal");
      check(ssm_lpdf_exponential(x, a), lpdf_exponential(x, a), "lpdf_exponential");
      check(ssm_lpdf_poisson(x, a), lpdf_poisson(x, a), "lpdf_poisson");
      check(ssm_lpdf_bernoulli(x, a), lpdf_bernoulli(x, a), "lpdf_bernoulli");
      check(ssm_lpdf_bernoulli_logit(x, a), lpdf_bernoulli_logit(x, a), "lpdf_bernoulli_logit");
      for (double b : ps) {
        check(ssm_lpdf_normal(x, a, b), lpdf_normal(x, a, b), "lpdf_normal");
        check(ssm_lpdf_lognormal(x, a, b), lpdf_lognormal(x, a, b), "lpdf_lognormal");
        check(ssm_lpdf_uniform(x, a, b), lpdf_uniform(x, a, b), "lpdf_uniform");
        check(ssm_lpdf_gamma(x, a, b), lpdf_gamma(x, a, b), "lpdf_gamma");
        check(ssm_lpdf_student_t(x, a, 0.3, b), lpdf_student_t(x, a, 0.3, b), "lpdf_student_t");
        check(ssm_lpdf_inverse_gamma(x, a, b), lpdf_inverse_gamma(x, a, b), "lpdf_inverse_gamma");
        check(ssm_lpdf_laplace(x, a, b), lpdf_laplace(x, a, b), "lpdf_laplace");
        check(ssm_lpdf_cauchy(x, a, b), lpdf_cauchy(x, a, b), "lpdf_cauchy");
        check(ssm_lpdf_weibull(x, a, b), lpdf_weibull(x, a, b), "lpdf_weibull");
        check(ssm_lpdf_gumbel(x, a, b), lpdf_gumbel(x, a, b), "lpdf_gumbel");
        check(ssm_lpdf_negative_binomial(x, a, b), lpdf_negative_binomial(x, a, b),
              "lpdf_negative_binomial");
        // x / 20 puts some of the grid inside (0, 1).
        check(ssm_lpdf_beta(x / 20, a, b), lpdf_beta(x / 20, a, b), "lpdf_beta");
        check(ssm_lpdf_binomial(x, std::floor(b), a / 10), lpdf_binomial(x, std::floor(b), a / 10),
              "lpdf_binomial");
        // Bounds on every side of mu = 0.3 and x, out to far tails and infinities.
        for (double lo : {-kInf, -2.0, 0.25, 8.0, 40.0})
          check(ssm_lpdf_truncated_normal(x, 0.3, a, lo, lo + b),
                lpdf_truncated_normal(x, 0.3, a, lo, lo + b), "lpdf_truncated_normal");
      }
    }
  }
  for (uint32_t n = 0; n < 200; ++n) {
    const uint32_t t = n * 7, site = 3 + n % 5;
    check(ssm_rng_uniform(kLibSeed, n, t, site), philox_u01(kLibSeed, n, t, site, 0),
          "rng_uniform");
    check(ssm_sample_std_normal(kLibSeed, n, t, site), sample_std_normal(kLibSeed, n, t, site),
          "sample_std_normal");
    check(ssm_sample_std_normal_k(kLibSeed, n, t, site, n % 7),
          sample_std_normal_k(kLibSeed, n, t, site, n % 7), "sample_std_normal_k");
    for (double a : ps) {
      check(ssm_sample_half_normal(kLibSeed, n, t, site, a),
            sample_half_normal(kLibSeed, n, t, site, a), "sample_half_normal");
      check(ssm_sample_exponential(kLibSeed, n, t, site, a),
            sample_exponential(kLibSeed, n, t, site, a), "sample_exponential");
      check(ssm_sample_poisson(kLibSeed, n, t, site, a), sample_poisson(kLibSeed, n, t, site, a),
            "sample_poisson");
      check(ssm_sample_bernoulli(kLibSeed, n, t, site, a),
            sample_bernoulli(kLibSeed, n, t, site, a), "sample_bernoulli");
      for (double b : {0.3, 2.0, 0.0}) {
        check(ssm_sample_normal(kLibSeed, n, t, site, a, b),
              sample_normal(kLibSeed, n, t, site, a, b), "sample_normal");
        check(ssm_sample_lognormal(kLibSeed, n, t, site, a, b),
              sample_lognormal(kLibSeed, n, t, site, a, b), "sample_lognormal");
        check(ssm_sample_uniform(kLibSeed, n, t, site, a, a + b),
              sample_uniform(kLibSeed, n, t, site, a, a + b), "sample_uniform");
        check(ssm_sample_gamma(kLibSeed, n, t, site, a, b),
              sample_gamma(kLibSeed, n, t, site, a, b), "sample_gamma");
        check(ssm_sample_student_t(kLibSeed, n, t, site, a, -1.0, b),
              sample_student_t(kLibSeed, n, t, site, a, -1.0, b), "sample_student_t");
        check(ssm_sample_beta(kLibSeed, n, t, site, a, b), sample_beta(kLibSeed, n, t, site, a, b),
              "sample_beta");
        check(ssm_sample_inverse_gamma(kLibSeed, n, t, site, a, b),
              sample_inverse_gamma(kLibSeed, n, t, site, a, b), "sample_inverse_gamma");
        check(ssm_sample_laplace(kLibSeed, n, t, site, a, b),
              sample_laplace(kLibSeed, n, t, site, a, b), "sample_laplace");
        check(ssm_sample_cauchy(kLibSeed, n, t, site, a, b),
              sample_cauchy(kLibSeed, n, t, site, a, b), "sample_cauchy");
        check(ssm_sample_weibull(kLibSeed, n, t, site, a, b),
              sample_weibull(kLibSeed, n, t, site, a, b), "sample_weibull");
        check(ssm_sample_gumbel(kLibSeed, n, t, site, a, b),
              sample_gumbel(kLibSeed, n, t, site, a, b), "sample_gumbel");
        check(ssm_sample_negative_binomial(kLibSeed, n, t, site, a, b),
              sample_negative_binomial(kLibSeed, n, t, site, a, b), "sample_negative_binomial");
        check(ssm_sample_binomial(kLibSeed, n, t, site, std::floor(a), b / 2),
              sample_binomial(kLibSeed, n, t, site, std::floor(a), b / 2), "sample_binomial");
        // Every proposal regime: intervals around, beside and far from mu = a.
        for (double lo : {-kInf, -0.1, 0.25, 8.0, 40.0})
          for (double w : {0.05, 1.0, 3.0, kInf})
            check(ssm_sample_truncated_normal(kLibSeed, n, t, site, a, b + 0.1, a + lo, a + lo + w),
                  sample_truncated_normal(kLibSeed, n, t, site, a, b + 0.1, a + lo, a + lo + w),
                  "sample_truncated_normal");
      }
      check(ssm_sample_std_gamma(kLibSeed, n, t, site, a),
            sample_std_gamma(kLibSeed, n, t, site, a), "sample_std_gamma");
      check(ssm_sample_binomial(kLibSeed, n, t, site, 1e6, a / 20),
            sample_binomial(kLibSeed, n, t, site, 1e6, a / 20), "sample_binomial");
    }
  }
  CHECK(mismatches == 0);
}
