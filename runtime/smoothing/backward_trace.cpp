// Trajectories from an online pass's backward draws: see backward_trace.h.
#include "smoothing/backward_trace.h"

#include "core/error.h"
#include "kernel/rng.h"
#include "smoothing/smoothers.h"

#include <numeric>

namespace ssm {

BackwardTrace::BackwardTrace(int64_t N_, int64_t Nt_, int64_t ns_, int64_t T)
    : N(N_), Nt(Nt_), ns(ns_), idx(T), w(T), x(T) {
  if (N >= (int64_t{1} << 31))
    throw Error("smooth: too many particles to keep their backward draws (at most 2^31 - 1)");
  for (int64_t t = 1; t < T; ++t) {
    idx[t].resize(N * Nt);
    w[t].resize(N * Nt);
  }
}

void BackwardTrace::record(int64_t t, int64_t jb, int64_t je, const int64_t* draws,
                           const double* weights) {
  for (int64_t p = 0; p < (je - jb) * Nt; ++p) {
    idx[t][jb * Nt + p] = static_cast<int32_t>(draws[p]);
    w[t][jb * Nt + p] = weights ? weights[p] : 1.0 / static_cast<double>(Nt);
  }
}

void BackwardTrace::keep_particles(int64_t t, const double* xs, int64_t stride) {
  x[t].resize(ns * N);
  for (int64_t c = 0; c < ns; ++c)
    std::copy_n(xs + c * stride, N, x[t].begin() + c * N);
}

std::vector<StepPoints> trace_trajectories(const BackwardTrace& trace, int64_t M, uint64_t seed) {
  const auto T = static_cast<int64_t>(trace.x.size());
  const int64_t N = trace.N, Nt = trace.Nt, ns = trace.ns;
  if (M >= (int64_t{1} << 32))
    throw Error("smooth: too many trajectories (at most 2^32 - 1)");
  std::vector<int64_t> J(T * M);
  std::vector<double> cum(N);
  std::partial_sum(trace.last_weights.begin(), trace.last_weights.end(), cum.begin());
  for (int64_t m = 0; m < M; ++m)
    J[(T - 1) * M + m] =
        draw_index(cum, philox_u01(seed, static_cast<uint32_t>(m), static_cast<uint32_t>(T - 1),
                                   kSiteTrajectory, 0));
  std::vector<double> wk(Nt);
  for (int64_t t = T - 1; t >= 1; --t)
    for (int64_t m = 0; m < M; ++m) {
      const int64_t j = J[t * M + m];
      std::partial_sum(&trace.w[t][j * Nt], &trace.w[t][j * Nt] + Nt, wk.begin());
      const int64_t k = draw_index(wk, philox_u01(seed, static_cast<uint32_t>(m),
                                                  static_cast<uint32_t>(t), kSiteTrajectory, 1));
      J[(t - 1) * M + m] = trace.idx[t][j * Nt + k];
    }
  return trajectory_steps(J, T, M, ns, N, [&](int64_t t) { return trace.x[t].data(); });
}

} // namespace ssm
