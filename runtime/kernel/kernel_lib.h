// C entry points of the kernel library (runtime/kernel/kernel_lib.cpp), the functions generated
// code calls for random draws and log-densities. The library is compiled to LLVM bitcode
// (lib/ssmc/kernel_lib.bc) that codegen links into each kernel module and inlines; the semantics
// are those of the same-named inline functions in kernel/distributions.h, whose list
// SSM_SCALAR_DISTRIBUTIONS declares most of them (so the header is C++ only).
#pragma once

#include "kernel/distributions.h"

#include <stdint.h>

extern "C" {

// u0 of Philox block (seed; n, t, site, draw = 0), uniform in (0, 1).
double ssm_rng_uniform(uint64_t seed, uint32_t n, uint32_t t, uint32_t site);
// log Gamma(x) for x > 0.
double ssm_log_gamma(double x);
// log(Phi(b) - Phi(a)) for a < b, Phi the standard normal distribution function.
double ssm_log_normal_mass(double a, double b);

double ssm_lpdf_std_normal(double x);
double ssm_sample_std_normal(uint64_t seed, uint32_t n, uint32_t t, uint32_t site);
double ssm_sample_std_normal_k(uint64_t seed, uint32_t n, uint32_t t, uint32_t site, uint32_t k);

// ssm_lpdf_NAME(x, params...) and ssm_sample_NAME(seed, n, t, site, params...) for each entry of
// SSM_SCALAR_DISTRIBUTIONS (kernel/distributions.h).
#define SSM_DECLARE_LPDF(name, params, args) double ssm_lpdf_##name(double x, SSM_UNPAREN params);
#define SSM_DECLARE_SAMPLE(name, params, args)                                                     \
  double ssm_sample_##name(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,                   \
                           SSM_UNPAREN params);
SSM_SCALAR_DISTRIBUTIONS(SSM_DECLARE_LPDF, SSM_SKIP)
SSM_SCALAR_DISTRIBUTIONS(SSM_DECLARE_SAMPLE, SSM_DECLARE_SAMPLE)
#undef SSM_DECLARE_LPDF
#undef SSM_DECLARE_SAMPLE

} // extern "C"
