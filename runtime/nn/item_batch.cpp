// The per-particle arrays of the item layout: see item_batch.h.
#include "nn/item_batch.h"

#include <cmath>

namespace ssm::nn {

ItemBatch item_batch(const ObsData& data, const std::vector<int64_t>& items, int64_t draws,
                     bool missing_obs) {
  ItemBatch b;
  const int64_t N = static_cast<int64_t>(items.size()) * draws, O = data.n_obs, U = data.n_inputs;
  b.steps.resize(N);
  b.obs.assign(O * N, NAN);
  b.inputs.resize(U * N);
  for (size_t i = 0; i < items.size(); ++i) {
    const int64_t t = items[i];
    const double* y = data.at(t);
    const double* u = data.inputs_at(t);
    for (int64_t s = 0; s < draws; ++s) {
      const int64_t p = static_cast<int64_t>(i) * draws + s;
      b.steps[p] = t;
      if (!missing_obs)
        for (int64_t k = 0; k < O; ++k)
          b.obs[k * N + p] = y[k];
      for (int64_t k = 0; k < U; ++k)
        b.inputs[k * N + p] = u[k];
    }
  }
  return b;
}

} // namespace ssm::nn
