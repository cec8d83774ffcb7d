// C entry points of the kernel library (runtime/kernel/kernel_lib.cpp), the functions generated
// code calls for random draws and log-densities. The library is compiled to LLVM bitcode
// (lib/ssmc/kernel_lib.bc) that codegen links into each kernel module and inlines; the semantics
// are those of the same-named inline functions in kernel/distributions.h.
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// u0 of Philox block (seed; n, t, site, draw = 0), uniform in (0, 1).
double ssm_rng_uniform(uint64_t seed, uint32_t n, uint32_t t, uint32_t site);
// log Gamma(x) for x > 0.
double ssm_log_gamma(double x);
// log(Phi(b) - Phi(a)) for a < b, Phi the standard normal distribution function.
double ssm_log_normal_mass(double a, double b);

double ssm_lpdf_std_normal(double x);
double ssm_lpdf_normal(double x, double mu, double sigma);
double ssm_lpdf_lognormal(double x, double mu, double sigma);
double ssm_lpdf_student_t(double x, double nu, double mu, double sigma);
double ssm_lpdf_half_normal(double x, double sigma);
double ssm_lpdf_uniform(double x, double lo, double hi);
double ssm_lpdf_gamma(double x, double alpha, double beta);
double ssm_lpdf_exponential(double x, double beta);
double ssm_lpdf_poisson(double k, double lambda);
double ssm_lpdf_bernoulli(double k, double p);
double ssm_lpdf_beta(double x, double a, double b);
double ssm_lpdf_inverse_gamma(double x, double alpha, double beta);
double ssm_lpdf_laplace(double x, double mu, double b);
double ssm_lpdf_cauchy(double x, double mu, double sigma);
double ssm_lpdf_truncated_normal(double x, double mu, double sigma, double lo, double hi);
double ssm_lpdf_binomial(double k, double trials, double p);
double ssm_lpdf_negative_binomial(double k, double mu, double phi);
double ssm_lpdf_weibull(double x, double k, double lambda);

double ssm_sample_std_normal(uint64_t seed, uint32_t n, uint32_t t, uint32_t site);
double ssm_sample_std_normal_k(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, uint32_t k);
double ssm_sample_normal(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double mu,
                         double sigma);
double ssm_sample_lognormal(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double mu,
                            double sigma);
double ssm_sample_student_t(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double nu,
                            double mu, double sigma);
double ssm_sample_half_normal(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double sigma);
double ssm_sample_uniform(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double lo,
                          double hi);
double ssm_sample_gamma(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double alpha,
                        double beta);
double ssm_sample_exponential(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double beta);
double ssm_sample_poisson(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double lambda);
double ssm_sample_bernoulli(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double p);
// Gamma(alpha, rate 1); a Dirichlet is built from one per component, at distinct sites.
double ssm_sample_std_gamma(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double alpha);
double ssm_sample_beta(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double a, double b);
double ssm_sample_inverse_gamma(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double alpha,
                                double beta);
double ssm_sample_laplace(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double mu,
                          double b);
double ssm_sample_cauchy(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double mu,
                         double sigma);
double ssm_sample_truncated_normal(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double mu,
                                   double sigma, double lo, double hi);
double ssm_sample_binomial(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double trials,
                           double p);
double ssm_sample_negative_binomial(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double mu,
                                    double phi);
double ssm_sample_weibull(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, double k,
                          double lambda);

#ifdef __cplusplus
}
#endif
