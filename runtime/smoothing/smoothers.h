// The smoothing methods behind ssm::smooth() (each method in a file of its own), and what they
// share: runtime random streams and evaluation of the transition density on arbitrary
// (previous, current) particle pairs. (The statistics layout, shared with the exact smoothers, is
// core/results.h; the backward kernel is backward_kernel.h.)
#pragma once

#include "smoothing/backward_trace.h"
#include "smoothing/smooth.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

namespace ssm {

// Runtime random streams of the smoothers (kernel/rng.h counters (index, t, site, draw)).
inline constexpr uint32_t kSiteBackward = 0xFFFF0002u; // backward index draws
// ffbsi's and the kept draws' trajectories (backward_trace.h): draw 0 the final index of each
// path, draw 1 (the trace's) the pick among a particle's draws at each step.
inline constexpr uint32_t kSiteTrajectory = 0xFFFF0003u;

// genealogy and fixed-lag (genealogy.cpp).
SmoothResult smooth_genealogy(const ssm_model& model, const ModelInfo& info,
                              const std::vector<double>& fixed, const ObsData& data,
                              const SmoothOptions& options, ThreadPool& pool);
// ffbsm and ffbsi (backward_smoothers.cpp, then ffbsm.cpp or ffbsi.cpp).
SmoothResult smooth_backward(const ssm_model& model, const ModelInfo& info,
                             const std::vector<double>& fixed, const ObsData& data,
                             const SmoothOptions& options, ThreadPool& pool);
// smooth.h's trajectory_points, its options resolved (backward_smoothers.cpp, ffbsi.cpp).
std::vector<StepPoints> backward_trajectory_points(const ssm_model& model, const ModelInfo& info,
                                                   const std::vector<double>& fixed,
                                                   const ObsData& data,
                                                   const SmoothOptions& options, ThreadPool& pool,
                                                   double& log_likelihood);
// online, paris and bis (online_stats.cpp, then online_smoother.cpp, paris_smoother.cpp or
// bis_smoother.cpp), with smooth()'s observer; with `trace` (paris and bis, sized for the run),
// their backward draws are kept there too.
SmoothResult smooth_online(const ssm_model& model, const ModelInfo& info,
                           const std::vector<double>& fixed, const ObsData& data,
                           const SmoothOptions& options, ThreadPool& pool,
                           const OnlineObserver& observer, BackwardTrace* trace = nullptr);

// Splits a smoother's wall time into the filter's steps and the rest.
struct StepTimer {
  double filter_s = 0;
  bool step(ParticleFilter& pf) {
    const auto t0 = std::chrono::steady_clock::now();
    const bool more = pf.step();
    filter_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return more;
  }
  void finish(SmoothResult& r, std::chrono::steady_clock::time_point start) const {
    r.filter_s = filter_s;
    r.smooth_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() - filter_s;
  }
};

// log f(x_next^j | x_prev^i) for every i in [0, N): out[i]. `bc` (n_state x stride) receives
// x_next^j repeated N times, since the kernel pairs x_prev[a_n] with x[n].
void backward_logpdf(const ssm_model& model, const double* frame, int64_t t_next, int64_t N,
                     int64_t stride, int64_t ns, const double* x_prev, const double* x_next,
                     int64_t j, double* bc, double* out);

// The backward kernel's unnormalised weights b_i = W_i exp(l_i - max l), written over l; returns
// their sum, 0 when no particle of positive weight can be the parent.
double backward_weights(const double* W, double* l, int64_t N);

// log of an upper bound of f(x_t | x_{t-1}^i) over x_t and over the N particles x_{t-1}^i (the
// model's transition_log_bound kernel, maximised); not finite when the model has no bound or its
// condition fails for these parameters: the caller then draws exactly at this step.
double transition_log_bound(const ssm_model& model, const double* frame, int64_t t, int64_t N,
                            int64_t stride, const double* x_prev, std::vector<double>& scratch);

// Rejection sampling is exact only if the density never exceeds the bound: a density above it
// (beyond rounding) means the compiler derived a wrong bound, an error rather than a silent bias.
[[noreturn]] void throw_bound_exceeded(double log_density, double log_bound, int64_t t);
inline void check_within_bound(double log_density, double log_bound, int64_t t) {
  if (log_density > log_bound + 1e-9 * std::max(1.0, std::abs(log_bound)))
    throw_bound_exceeded(log_density, log_bound, t);
}

// The range of the log bounds that rejection sampling used, and the steps without a finite one,
// for the JSON details (a user can check the bound against the model).
struct BoundRange {
  double lo = INFINITY, hi = -INFINITY;
  int64_t unbounded_steps = 0;
  void add(double log_bound);
  nlohmann::json json() const;
};

// Walker's alias table over weights (Vose's construction, O(N)): draws in O(1) with one uniform,
// for the many proposals from the filter weights that rejection sampling and bis make. Both the
// construction and the draw are branch-free where the branch would depend on the weights or on u:
// a mispredicted branch per draw costs more than the rest of the draw.
class AliasTable {
public:
  void build(const double* w, int64_t n); // w >= 0 with a positive sum
  // u in (0, 1): its integer part of u n picks a column, the fractional part a side.
  int64_t draw(double u) const {
    const double s = u * static_cast<double>(n_);
    const int64_t k = std::min(static_cast<int64_t>(s), n_ - 1);
    const Column c = columns_[k];
    const int64_t keep = s - static_cast<double>(k) < c.prob;
    return c.alias + keep * (k - c.alias);
  }

private:
  struct Column {
    double prob; // of keeping the column's own index
    int64_t alias;
  };
  int64_t n_ = 0;
  std::vector<Column> columns_;
  std::vector<int64_t> small_, large_; // construction scratch
};

// Inverse-CDF draw from cumulative weights (cumulative.back() > 0) with u in (0, 1).
int64_t draw_index(const std::vector<double>& cumulative, double u);

// The points of M equally weighted trajectories, index J[t * M + m] at step t (T x M), through
// each step's particles x_at(t) (component c of particle n at [c * stride + n]): EM's points.
std::vector<StepPoints> trajectory_steps(const std::vector<int64_t>& J, int64_t T, int64_t M,
                                         int64_t ns, int64_t stride,
                                         const std::function<const double*(int64_t)>& x_at);

} // namespace ssm
