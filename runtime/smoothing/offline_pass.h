// What the offline backward passes (ffbsm.cpp, ffbsi.cpp) share: the particle system that the
// forward pass of smooth_backward() stored, and the accumulation of their estimates.
#pragma once

#include "exact/weighted_points.h"
#include "smoothing/backward_kernel.h"

namespace ssm {

// Backward index draws are parallelised over blocks of this many particles or trajectories, and
// block partial sums are combined in block order.
constexpr int64_t kBackwardBlock = 64;

struct StoredSystem {
  int64_t T = 0, N = 0, stride = 0;
  std::vector<double> x;      // T x (n_state x stride)
  std::vector<double> w;      // T x N, normalised
  std::vector<double> frames; // T x n_frame
  const double* x_at(int64_t t, int64_t ns) const { return x.data() + t * ns * stride; }
  const double* w_at(int64_t t) const { return w.data() + t * N; }
};

// One backward pass over a stored system (T > 0): the functionals' totals accumulate in sums,
// each step's quantities in q before they are stored in r.
struct OfflinePass {
  const ssm_model& model;
  const ModelInfo& info;
  const ObsData& data;
  const SmoothOptions& opt;
  ThreadPool& pool;
  const StatLayout& lay;
  const StoredSystem& sys;
  SmoothResult& r;
  int64_t ns, nf, nper;
  std::vector<double> sums, q;
  const double* frame_at(int64_t t) const { return sys.frames.data() + t * info.n_frame; }
  // The state part of q: weighted moments of the stored particles x_t under weights ws.
  void store_state_moments(const double* ws, const double* x_t);
  // The terms at t = 0 (x_prev NaN) weighted by ws.
  void add_initial_terms(const double* ws);
  // Progress on the terminal: the backward pass has done `done` + 1 of its `total` steps.
  void report(int64_t done, int64_t total) const {
    if (opt.filter.progress)
      opt.filter.progress(done, total);
  }
};

void ffbsm_pass(OfflinePass& p); // ffbsm.cpp
void ffbsi_pass(OfflinePass& p); // ffbsi.cpp
// ffbsi's trajectories, each step's pairs as points of weight 1/M (ffbsi.cpp).
std::vector<StepPoints> ffbsi_points(OfflinePass& p);

} // namespace ssm
