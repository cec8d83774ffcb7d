// ffbsm and ffbsi: forward filtering, then a backward pass over the stored particle system
// (ffbsm.cpp, ffbsi.cpp); and ffbsi's trajectories as EM's points. Memory is O(N T) for all
// (the particle system is stored).
#include "core/error.h"
#include "smoothing/offline_pass.h"

#include <chrono>

namespace ssm {

void OfflinePass::store_state_moments(const double* ws, const double* x_t) {
  const int64_t N = sys.N, stride = sys.stride;
  for (int64_t c = 0; c < ns; ++c) {
    double m = 0, m2 = 0;
    for (int64_t n = 0; n < N; ++n)
      if (ws[n] > 0) {
        const double v = x_t[c * stride + n];
        m += ws[n] * v;
        m2 += ws[n] * v * v;
      }
    q[c] = m;
    q[ns + c] = m2;
  }
}

void OfflinePass::add_initial_terms(const double* ws) {
  if (nf == 0)
    return;
  const int64_t N = sys.N, stride = sys.stride;
  const std::vector<double> nan_prev(ns * stride, NAN);
  std::vector<double> terms(nf * stride);
  model.functional_terms(frame_at(0), 0, 0, N, stride, nan_prev.data(), nullptr, sys.x_at(0, ns),
                         data.at(0), terms.data());
  check_terms(terms.data(), nf, stride, ws, 0, N, 0, info);
  for (int64_t k = 0; k < lay.nsum; ++k)
    for (int64_t n = 0; n < N; ++n)
      if (ws[n] > 0)
        sums[k] += ws[n] * terms[lay.sum_comp[k] * stride + n];
  for (int64_t k = 0; k < nper; ++k) {
    double a = 0;
    for (int64_t n = 0; n < N; ++n)
      if (ws[n] > 0)
        a += ws[n] * terms[lay.per_t_comp[k] * stride + n];
    q[2 * ns + k] = a;
  }
}

namespace {

// The forward pass: the filter's particles and normalised weights at every step.
StoredSystem store_forward_pass(const ssm_model& model, const ModelInfo& info,
                                const std::vector<double>& fixed, const ObsData& data,
                                const FilterOptions& options, ThreadPool& pool, StepTimer& timer,
                                double& log_likelihood) {
  const int64_t T = data.T, N = options.particles, ns = info.n_state;
  FilterOptions only_weights = options; // the system is stored here; the filter's moments unread
  only_weights.history = only_weights.moments = false;
  ParticleFilter pf(model, info, fixed, data, only_weights, pool);
  StoredSystem sys;
  sys.T = T;
  sys.N = N;
  sys.stride = pf.stride();
  const int64_t stride = sys.stride;
  sys.x.resize(T * ns * stride);
  sys.w.resize(T * N);
  while (timer.step(pf)) {
    const int64_t t = pf.t();
    std::copy(pf.x(), pf.x() + ns * stride, sys.x.begin() + t * ns * stride);
    const double S = pf.weight_sum();
    for (int64_t n = 0; n < N; ++n)
      sys.w[t * N + n] = pf.weights()[n] / S;
  }
  log_likelihood = pf.result().log_likelihood;
  sys.frames = all_frames(info, fixed, data);
  return sys;
}

OfflinePass offline_pass(const ssm_model& model, const ModelInfo& info, const ObsData& data,
                         const SmoothOptions& opt, ThreadPool& pool, const StatLayout& lay,
                         const StoredSystem& sys, SmoothResult& r) {
  return {model,
          info,
          data,
          opt,
          pool,
          lay,
          sys,
          r,
          info.n_state,
          lay.nf,
          static_cast<int64_t>(lay.per_t_comp.size()),
          std::vector<double>(lay.nsum, 0.0),
          std::vector<double>(lay.per_step, 0.0)};
}

} // namespace

SmoothResult smooth_backward(const ssm_model& model, const ModelInfo& info,
                             const std::vector<double>& fixed, const ObsData& data,
                             const SmoothOptions& opt, ThreadPool& pool) {
  const auto start = std::chrono::steady_clock::now();
  const StatLayout lay(info, true);
  SmoothResult r = make_result(info, opt.method, data.T, opt.filter.particles, true);
  StepTimer timer;
  const StoredSystem sys =
      store_forward_pass(model, info, fixed, data, opt.filter, pool, timer, r.log_likelihood);
  OfflinePass pass = offline_pass(model, info, data, opt, pool, lay, sys, r);
  if (opt.progress_phase)
    opt.progress_phase("backward pass");
  if (opt.method == SmoothMethod::Ffbsm && data.T > 0)
    ffbsm_pass(pass);
  if (opt.method == SmoothMethod::Ffbsi && data.T > 0)
    ffbsi_pass(pass);
  lay.store_sums(pass.sums.data(), r, info);
  timer.finish(r, start);
  return r;
}

std::vector<StepPoints> backward_trajectory_points(const ssm_model& model, const ModelInfo& info,
                                                   const std::vector<double>& fixed,
                                                   const ObsData& data, const SmoothOptions& opt,
                                                   ThreadPool& pool, double& log_likelihood) {
  const StatLayout lay(info, true);
  SmoothResult r = make_result(info, SmoothMethod::Ffbsi, data.T, opt.filter.particles, true);
  StepTimer timer;
  const StoredSystem sys =
      store_forward_pass(model, info, fixed, data, opt.filter, pool, timer, log_likelihood);
  if (data.T == 0)
    return {};
  OfflinePass pass = offline_pass(model, info, data, opt, pool, lay, sys, r);
  return ffbsi_points(pass);
}

} // namespace ssm
