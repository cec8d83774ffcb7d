// The kernel library: C wrappers over kernel/distributions.h that generated code calls. Built
// only as LLVM bitcode (lib/ssmc/kernel_lib.bc), which codegen links into every kernel module so
// the calls inline and vectorise; see runtime/kernel/CMakeLists.txt for the flags.

// Random123's array.h includes <iostream> for its stream operators, and libstdc++'s <iostream>
// defines a static std::ios_base::Init: a global constructor (and a libstdc++ dependency) in every
// kernel module. <istream> and <ostream> declare all array.h uses, so <iostream> itself is skipped
// by pre-defining its include guard, and the guard is dropped again afterwards.
#include <istream>
#include <ostream>
#if defined(__GLIBCXX__) && !defined(_GLIBCXX_IOSTREAM)
#define _GLIBCXX_IOSTREAM 1
#define SSM_SKIPPED_IOSTREAM
#endif
#include "kernel/distributions.h"
#ifdef SSM_SKIPPED_IOSTREAM
#undef _GLIBCXX_IOSTREAM
#undef SSM_SKIPPED_IOSTREAM
#endif

#include "kernel/kernel_lib.h"

// Generated code calls these once per particle inside its loops: they must inline there, whatever
// the inline cost model says, for the loops to vectorise. (Codegen gives them internal linkage.)
#if defined(__clang__)
#define SSM_KERNEL_FN __attribute__((always_inline))
#else
#define SSM_KERNEL_FN
#endif

extern "C" {

SSM_KERNEL_FN double ssm_rng_uniform(uint64_t seed, uint32_t n, uint32_t t, uint32_t site) {
  return ssm::philox_u01(seed, n, t, site, 0);
}
SSM_KERNEL_FN double ssm_log_gamma(double x) {
  return ssm::log_gamma(x);
}
SSM_KERNEL_FN double ssm_log_normal_mass(double a, double b) {
  return ssm::detail::log_normal_mass(a, b);
}

SSM_KERNEL_FN double ssm_lpdf_std_normal(double x) {
  return ssm::lpdf_std_normal(x);
}
SSM_KERNEL_FN double ssm_lpdf_normal(double x, double mu, double sigma) {
  return ssm::lpdf_normal(x, mu, sigma);
}
SSM_KERNEL_FN double ssm_lpdf_lognormal(double x, double mu, double sigma) {
  return ssm::lpdf_lognormal(x, mu, sigma);
}
SSM_KERNEL_FN double ssm_lpdf_student_t(double x, double nu, double mu, double sigma) {
  return ssm::lpdf_student_t(x, nu, mu, sigma);
}
SSM_KERNEL_FN double ssm_lpdf_half_normal(double x, double sigma) {
  return ssm::lpdf_half_normal(x, sigma);
}
SSM_KERNEL_FN double ssm_lpdf_uniform(double x, double lo, double hi) {
  return ssm::lpdf_uniform(x, lo, hi);
}
SSM_KERNEL_FN double ssm_lpdf_gamma(double x, double alpha, double beta) {
  return ssm::lpdf_gamma(x, alpha, beta);
}
SSM_KERNEL_FN double ssm_lpdf_exponential(double x, double beta) {
  return ssm::lpdf_exponential(x, beta);
}
SSM_KERNEL_FN double ssm_lpdf_poisson(double k, double lambda) {
  return ssm::lpdf_poisson(k, lambda);
}
SSM_KERNEL_FN double ssm_lpdf_bernoulli(double k, double p) {
  return ssm::lpdf_bernoulli(k, p);
}
SSM_KERNEL_FN double ssm_lpdf_beta(double x, double a, double b) {
  return ssm::lpdf_beta(x, a, b);
}
SSM_KERNEL_FN double ssm_lpdf_inverse_gamma(double x, double alpha, double beta) {
  return ssm::lpdf_inverse_gamma(x, alpha, beta);
}
SSM_KERNEL_FN double ssm_lpdf_laplace(double x, double mu, double b) {
  return ssm::lpdf_laplace(x, mu, b);
}
SSM_KERNEL_FN double ssm_lpdf_cauchy(double x, double mu, double sigma) {
  return ssm::lpdf_cauchy(x, mu, sigma);
}
SSM_KERNEL_FN double ssm_lpdf_truncated_normal(double x, double mu, double sigma, double lo,
                                               double hi) {
  return ssm::lpdf_truncated_normal(x, mu, sigma, lo, hi);
}
SSM_KERNEL_FN double ssm_lpdf_binomial(double k, double trials, double p) {
  return ssm::lpdf_binomial(k, trials, p);
}
SSM_KERNEL_FN double ssm_lpdf_negative_binomial(double k, double mu, double phi) {
  return ssm::lpdf_negative_binomial(k, mu, phi);
}
SSM_KERNEL_FN double ssm_lpdf_weibull(double x, double k, double lambda) {
  return ssm::lpdf_weibull(x, k, lambda);
}

SSM_KERNEL_FN double ssm_sample_std_normal(uint64_t seed, uint32_t n, uint32_t t, uint32_t site) {
  return ssm::sample_std_normal(seed, n, t, site);
}
SSM_KERNEL_FN double ssm_sample_std_normal_k(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                             uint32_t k) {
  return ssm::sample_std_normal_k(seed, n, t, site, k);
}
SSM_KERNEL_FN double ssm_sample_normal(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                       double mu, double sigma) {
  return ssm::sample_normal(seed, n, t, site, mu, sigma);
}
SSM_KERNEL_FN double ssm_sample_lognormal(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                          double mu, double sigma) {
  return ssm::sample_lognormal(seed, n, t, site, mu, sigma);
}
SSM_KERNEL_FN double ssm_sample_student_t(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                          double nu, double mu, double sigma) {
  return ssm::sample_student_t(seed, n, t, site, nu, mu, sigma);
}
SSM_KERNEL_FN double ssm_sample_half_normal(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                            double sigma) {
  return ssm::sample_half_normal(seed, n, t, site, sigma);
}
SSM_KERNEL_FN double ssm_sample_uniform(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                        double lo, double hi) {
  return ssm::sample_uniform(seed, n, t, site, lo, hi);
}
SSM_KERNEL_FN double ssm_sample_gamma(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                      double alpha, double beta) {
  return ssm::sample_gamma(seed, n, t, site, alpha, beta);
}
SSM_KERNEL_FN double ssm_sample_exponential(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                            double beta) {
  return ssm::sample_exponential(seed, n, t, site, beta);
}
SSM_KERNEL_FN double ssm_sample_poisson(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                        double lambda) {
  return ssm::sample_poisson(seed, n, t, site, lambda);
}
SSM_KERNEL_FN double ssm_sample_bernoulli(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                          double p) {
  return ssm::sample_bernoulli(seed, n, t, site, p);
}
SSM_KERNEL_FN double ssm_sample_std_gamma(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                          double alpha) {
  return ssm::sample_std_gamma(seed, n, t, site, alpha);
}
SSM_KERNEL_FN double ssm_sample_beta(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double a,
                                     double b) {
  return ssm::sample_beta(seed, n, t, site, a, b);
}
SSM_KERNEL_FN double ssm_sample_inverse_gamma(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                              double alpha, double beta) {
  return ssm::sample_inverse_gamma(seed, n, t, site, alpha, beta);
}
SSM_KERNEL_FN double ssm_sample_laplace(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                        double mu, double b) {
  return ssm::sample_laplace(seed, n, t, site, mu, b);
}
SSM_KERNEL_FN double ssm_sample_cauchy(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                       double mu, double sigma) {
  return ssm::sample_cauchy(seed, n, t, site, mu, sigma);
}
SSM_KERNEL_FN double ssm_sample_truncated_normal(uint64_t seed, uint32_t n, uint32_t t,
                                                 uint32_t site, double mu, double sigma, double lo,
                                                 double hi) {
  return ssm::sample_truncated_normal(seed, n, t, site, mu, sigma, lo, hi);
}
SSM_KERNEL_FN double ssm_sample_binomial(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                         double trials, double p) {
  return ssm::sample_binomial(seed, n, t, site, trials, p);
}
SSM_KERNEL_FN double ssm_sample_negative_binomial(uint64_t seed, uint32_t n, uint32_t t,
                                                  uint32_t site, double mu, double phi) {
  return ssm::sample_negative_binomial(seed, n, t, site, mu, phi);
}
SSM_KERNEL_FN double ssm_sample_weibull(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                        double k, double lambda) {
  return ssm::sample_weibull(seed, n, t, site, k, lambda);
}

} // extern "C"
