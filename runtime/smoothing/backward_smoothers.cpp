// ffbsm and ffbsi: forward filtering, then a backward pass over the stored particle system
// (ffbsm.cpp, ffbsi.cpp). Memory is O(N T) for both (the particle system is stored).
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

SmoothResult smooth_backward(const ssm_model& model, const ModelInfo& info,
                             const std::vector<double>& fixed, const ObsData& data,
                             const SmoothOptions& opt, ThreadPool& pool) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t T = data.T, N = opt.filter.particles, ns = info.n_state;
  const StatLayout lay(info, true);
  SmoothResult r = make_result(info, opt.method, T, N, true);

  // Forward pass, storing the particle system.
  ParticleFilter pf(model, info, fixed, data, opt.filter, pool);
  StoredSystem sys;
  sys.T = T;
  sys.N = N;
  sys.stride = pf.stride();
  const int64_t stride = sys.stride;
  sys.x.resize(T * ns * stride);
  sys.w.resize(T * N);
  StepTimer timer;
  while (timer.step(pf)) {
    const int64_t t = pf.t();
    std::copy(pf.x(), pf.x() + ns * stride, sys.x.begin() + t * ns * stride);
    const double S = pf.weight_sum();
    for (int64_t n = 0; n < N; ++n)
      sys.w[t * N + n] = pf.weights()[n] / S;
  }
  r.log_likelihood = pf.result().log_likelihood;
  sys.frames = all_frames(info, fixed, data);

  OfflinePass pass{model,
                   info,
                   data,
                   opt,
                   pool,
                   lay,
                   sys,
                   r,
                   ns,
                   lay.nf,
                   static_cast<int64_t>(lay.per_t_comp.size()),
                   std::vector<double>(lay.nsum, 0.0),
                   std::vector<double>(lay.per_step, 0.0)};
  if (opt.method == SmoothMethod::Ffbsm && T > 0)
    ffbsm_pass(pass);
  if (opt.method == SmoothMethod::Ffbsi && T > 0)
    ffbsi_pass(pass);
  lay.store_sums(pass.sums.data(), r, info);
  timer.finish(r, start);
  return r;
}

} // namespace ssm
