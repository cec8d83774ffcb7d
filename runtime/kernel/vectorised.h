// Runtime loops compiled for several instruction sets (vectorised.cpp); philox_u01x2_run, the
// other one, is declared with the scalar Philox in ssm/rng.h.
#pragma once

#include <cstdint>

namespace ssm {

// out[i] = exp(x[i]) for i < n, with glibc's vector exp (within a few ulp of std::exp; NaN stays
// NaN, -inf gives 0).
void exp_run(const double* __restrict x, double* __restrict out, int64_t n);

} // namespace ssm
