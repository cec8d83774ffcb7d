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
// The wrappers of SSM_SCALAR_DISTRIBUTIONS (kernel/distributions.h), in the list's order.
#define SSM_DEFINE_LPDF(name, params, args)                                                        \
  SSM_KERNEL_FN double ssm_lpdf_##name(double x, SSM_UNPAREN params) {                             \
    return ssm::lpdf_##name(x, SSM_UNPAREN args);                                                  \
  }
SSM_SCALAR_DISTRIBUTIONS(SSM_DEFINE_LPDF, SSM_SKIP)
#undef SSM_DEFINE_LPDF

SSM_KERNEL_FN double ssm_sample_std_normal(uint64_t seed, uint32_t n, uint32_t t, uint32_t site) {
  return ssm::sample_std_normal(seed, n, t, site);
}
SSM_KERNEL_FN double ssm_sample_std_normal_k(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,
                                             uint32_t k) {
  return ssm::sample_std_normal_k(seed, n, t, site, k);
}
#define SSM_DEFINE_SAMPLE(name, params, args)                                                      \
  SSM_KERNEL_FN double ssm_sample_##name(uint64_t seed, uint32_t n, uint32_t t, uint32_t site,     \
                                         SSM_UNPAREN params) {                                     \
    return ssm::sample_##name(seed, n, t, site, SSM_UNPAREN args);                                 \
  }
SSM_SCALAR_DISTRIBUTIONS(SSM_DEFINE_SAMPLE, SSM_DEFINE_SAMPLE)
#undef SSM_DEFINE_SAMPLE

} // extern "C"
