// What a kernel of the item layout reads per particle (kernel/abi.h, ssm_item_kernel_fn): each
// (item, draw) pair of a batch is one particle, p = i * draws + s, with the item's step, its
// observation and its inputs copied structure-of-arrays over the particles, so that one kernel
// call covers the batch and vectorises across it.
#pragma once

#include "core/csv.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ssm::nn {

struct ItemBatch {            // over N = items x draws particles
  std::vector<int64_t> steps; // the step of each particle's item
  std::vector<double> obs;    // component k of particle p at [k * N + p]
  std::vector<double> inputs; // the same; empty when the model has no inputs
};

// The items `items` (steps of `data`), `draws` particles each; `missing_obs`: every observation
// NaN (what the gradient kernels skip), for the prior alone.
ItemBatch item_batch(const ObsData& data, const std::vector<int64_t>& items, int64_t draws,
                     bool missing_obs);

// Calls f(begin, end) over consecutive blocks of 64 of the n particles, on LibTorch's threads.
// The blocks do not depend on the thread count, so neither do the results: a vectorised kernel
// computes a particle in its vector body or in its scalar remainder depending on where its block
// starts, and the two can differ in the last bit (libmvec's exp against libm's).
template <class F> void for_item_blocks(int64_t n, F&& f) {
  constexpr int64_t kBlock = 64; // an item's kernels take about a microsecond
  at::parallel_for(0, (n + kBlock - 1) / kBlock, 1, [&](int64_t first, int64_t last) {
    for (int64_t b = first; b < last; ++b)
      f(b * kBlock, std::min(n, (b + 1) * kBlock));
  });
}

} // namespace ssm::nn
