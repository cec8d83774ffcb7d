// The bootstrap particle filter over a compiled model's kernels.
#ifndef SSM_FILTER_H
#define SSM_FILTER_H

#include "ssm/abi.h"
#include "ssm/csv.h"
#include "ssm/metadata.h"
#include "ssm/resample.h"
#include "ssm/thread_pool.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ssm {

// Particles are processed in blocks of this many, with block boundaries at multiples of it: a
// particle always takes the same path through the kernels (vector body or remainder loop) and
// partial sums are combined in block order, whatever the thread count.
inline constexpr int64_t kParticleBlock = 4096;

// Runtime random stream of the resampling uniforms: counters (k, t, kSiteResample, 0), k = 0, 1,
// ... as resample() documents for each scheme (systematic uses the single block k = 0).
inline constexpr uint32_t kSiteResample = 0xFFFF0001u;

struct FilterOptions {
  int64_t particles = 1000;
  double ess_threshold = 0.5; // resample at t > 0 when ESS < r N; r >= 1: every step
  Resampling resampling = Resampling::systematic;
  uint64_t seed = 1;
  // Called after each time step with (t, T); may be empty.
  std::function<void(int64_t, int64_t)> progress;
};

struct FilterResult {
  double log_likelihood = 0;
  int64_t T = 0, particles = 0, n_state = 0;
  int64_t resample_count = 0;
  double ess_min = 0;
  double elapsed_s = 0;
  // Per time step, after the update at t: filtering mean and variance of each state component
  // ([t * n_state + c]), ESS and log-likelihood increment.
  std::vector<double> mean, var, ess, loglik_increment;
  std::vector<uint8_t> resampled; // whether resampling happened before propagating to t
};

// Runs the filter on data.T time steps. `theta` is the parameters followed by the data values.
// Throws ssm::Error if the weights collapse.
FilterResult bootstrap_filter(const ssm_model& model, const ModelInfo& info,
                              const std::vector<double>& theta, const ObsData& data,
                              const FilterOptions& options, ThreadPool& pool);

// CSV `t,mean_<col>,var_<col>...,ess,loglik_increment`, one row per time step.
std::string filter_csv(const ModelInfo& info, const FilterResult& result);

} // namespace ssm

#endif
