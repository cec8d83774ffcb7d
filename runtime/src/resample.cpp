// Systematic resampling.
#include "ssm/resample.h"

namespace ssm {

void systematic_resample(const double* w, int64_t n, double u, int64_t* ancestors) {
  if (n <= 0)
    return;
  double total = 0;
  int64_t last = 0; // last particle with positive weight: rounding must never select past it
  for (int64_t j = 0; j < n; ++j) {
    total += w[j];
    if (w[j] > 0)
      last = j;
  }
  // Points are (u + i) * step; walking the running sum against them gives each particle
  // floor or ceil of n w_j / total offspring. Scaling the points by the computed total (instead
  // of normalising w) keeps the last point inside the last interval despite rounding.
  const double step = total / static_cast<double>(n);
  double cum = w[0];
  int64_t j = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double point = (u + static_cast<double>(i)) * step;
    while (cum <= point && j < last)
      cum += w[++j];
    ancestors[i] = j;
  }
}

} // namespace ssm
