// Resampling schemes over (unnormalised, non-negative) weights.
#ifndef SSM_RESAMPLE_H
#define SSM_RESAMPLE_H

#include <cstdint>

namespace ssm {

// Systematic resampling: ancestors[i] = the index j whose cumulative-weight interval contains
// (u + i) / n * sum(w), for i in [0, n). u in [0, 1). Particle j gets floor(n w_j / sum w) or
// ceil(n w_j / sum w) offspring; ancestors come out sorted. Requires sum(w) > 0 and finite.
void systematic_resample(const double* w, int64_t n, double u, int64_t* ancestors);

} // namespace ssm

#endif
