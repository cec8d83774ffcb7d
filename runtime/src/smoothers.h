// The smoothing methods behind ssm::smooth(), one family per file, and what they share: runtime
// random streams, the frame at any time step, and evaluation of the transition density and of
// the functionals' terms on arbitrary (previous, current) particle pairs.
#ifndef SSM_RUNTIME_SMOOTHERS_H
#define SSM_RUNTIME_SMOOTHERS_H

#include "ssm/smooth.h"

#include <cstdint>
#include <vector>

namespace ssm {

// Runtime random streams of the smoothers (ssm/rng.h counters (index, t, site, draw)).
inline constexpr uint32_t kSiteBackward = 0xFFFF0002u;   // backward index draws
inline constexpr uint32_t kSiteTrajectory = 0xFFFF0003u; // ffbsi: the final index of each path

// genealogy and fixed-lag (genealogy.cpp).
SmoothResult smooth_genealogy(const ssm_model& model, const ModelInfo& info,
                              const std::vector<double>& fixed, const ObsData& data,
                              const SmoothOptions& options, ThreadPool& pool);
// ffbsm and ffbsi (backward_smoothers.cpp).
SmoothResult smooth_backward(const ssm_model& model, const ModelInfo& info,
                             const std::vector<double>& fixed, const ObsData& data,
                             const SmoothOptions& options, ThreadPool& pool);
// online, paris and bis (online_smoothers.cpp).
SmoothResult smooth_online(const ssm_model& model, const ModelInfo& info,
                           const std::vector<double>& fixed, const ObsData& data,
                           const SmoothOptions& options, ThreadPool& pool);

// The frame of every time step (inputs and previous observation filled in), for methods that
// revisit past steps. n_frame * T doubles.
std::vector<double> all_frames(const ModelInfo& info, const std::vector<double>& fixed,
                               const ObsData& data);

// Empty result with the model's functionals listed and sized (totals zero, per_t zero when
// marginals are computed).
SmoothResult make_result(const ModelInfo& info, SmoothMethod method, int64_t T, int64_t particles,
                         bool marginals);

} // namespace ssm

#endif
