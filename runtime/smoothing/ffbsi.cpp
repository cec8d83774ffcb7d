// ffbsi: M trajectories drawn backward over the stored particle system, index
// J_t ~ W_t^i f(x_{t+1}^{J_{t+1}} | x_t^i), and the estimates averaged over them. Draws are the
// backward kernel's: exact (O(N) each) or by rejection from the filter weights with the transition
// density's bound, falling back to an exact draw after max_trials rejections.
#include "smoothing/offline_pass.h"

#include "core/error.h"
#include "kernel/rng.h"

#include <numeric>
#include <optional>

namespace ssm {

namespace {

// Draws the M trajectories' indices J (T x M), last step first.
std::vector<int64_t> draw_trajectories(const OfflinePass& p, int64_t M, bool rejection,
                                       BackwardCounts& counts, BoundRange& bounds) {
  const ssm_model& model = p.model;
  const StoredSystem& sys = p.sys;
  const int64_t T = sys.T, N = sys.N, stride = sys.stride, ns = p.ns;
  auto frame_at = [&](int64_t t) { return p.frame_at(t); };
  std::vector<int64_t> J(T * M);
  std::vector<double> cum(N);
  const uint64_t seed = p.opt.filter.seed;
  std::partial_sum(sys.w_at(T - 1), sys.w_at(T - 1) + N, cum.begin());
  for (int64_t m = 0; m < M; ++m)
    J[(T - 1) * M + m] =
        draw_index(cum, philox_u01(seed, static_cast<uint32_t>(m), static_cast<uint32_t>(T - 1),
                                   kSiteTrajectory, 0));
  const int64_t nb = (M + kBackwardBlock - 1) / kBackwardBlock;
  std::vector<double> bound_scratch;
  AliasTable from_weights;
  const BackwardDensity density(model, ns, stride);
  for (int64_t t = T - 1; t >= 1; --t) {
    const double* x_prev = sys.x_at(t - 1, ns);
    const double* x_cur = sys.x_at(t, ns);
    const double* W = sys.w_at(t - 1);
    if (rejection)
      from_weights.build(W, N);
    const double log_bound =
        rejection ? transition_log_bound(model, frame_at(t), t, N, stride, x_prev, bound_scratch)
                  : NAN;
    if (rejection)
      bounds.add(log_bound);
    counts.reset(nb);
    const BackwardStep back{frame_at(t), t, N, x_prev, x_cur, W, &from_weights, log_bound, seed};
    p.pool.parallel_for(nb, [&](int64_t b) {
      const int64_t mb = b * kBackwardBlock, me = std::min(M, mb + kBackwardBlock);
      std::vector<double> bc(rejection ? 0 : ns * stride), l(rejection ? 0 : stride);
      std::optional<RejectionSampler> sampler;
      if (rejection)
        sampler.emplace(density, p.opt.max_trials, true);
      for (int64_t m = mb; m < me; ++m) {
        const int64_t j = J[t * M + m];
        const auto um = static_cast<uint32_t>(m);
        if (rejection) {
          sampler->next_particle();
          J[(t - 1) * M + m] =
              sampler->draw(back, um, 0, j, counts.tries[b], counts.accepts[b], counts.exact[b]);
          continue;
        }
        exact_backward_cumulative(density, frame_at(t), t, N, x_prev, x_cur, j, W, bc.data(),
                                  l.data(), true);
        J[(t - 1) * M + m] = draw_cumulative(
            l.data(), N, philox_u01(seed, um, static_cast<uint32_t>(t), kSiteBackward, 0));
        ++counts.exact[b];
      }
    });
    counts.collect();
    p.report(T - 1 - t, T - 1);
  }
  return J;
}

// The estimates: averages along the trajectories J.
void average_trajectories(OfflinePass& p, const std::vector<int64_t>& J, int64_t M) {
  const ssm_model& model = p.model;
  const ModelInfo& info = p.info;
  const StatLayout& lay = p.lay;
  const StoredSystem& sys = p.sys;
  const int64_t T = sys.T, stride = sys.stride, ns = p.ns, nf = p.nf, nper = p.nper;
  auto frame_at = [&](int64_t t) { return p.frame_at(t); };
  std::vector<double>& sums = p.sums;
  std::vector<double>& q = p.q;
  const int64_t mstride = (M + 7) / 8 * 8;
  std::vector<double> xa(ns * mstride), xb(ns * mstride, NAN),
      terms(std::max<int64_t>(nf, 1) * mstride);
  const std::vector<double> ones(M, 1.0);
  for (int64_t t = 0; t < T; ++t) {
    std::swap(xa, xb); // xb: the trajectories at t-1 (NaN at t = 0)
    const double* xs = sys.x_at(t, ns);
    for (int64_t c = 0; c < ns; ++c)
      for (int64_t m = 0; m < M; ++m)
        xa[c * mstride + m] = xs[c * stride + J[t * M + m]];
    if (t == 0)
      std::fill(xb.begin(), xb.end(), NAN);
    std::fill(q.begin(), q.end(), 0.0);
    for (int64_t c = 0; c < ns; ++c)
      for (int64_t m = 0; m < M; ++m) {
        const double v = xa[c * mstride + m];
        q[c] += v / M;
        q[ns + c] += v * v / M;
      }
    if (nf > 0) {
      model.functional_terms(frame_at(t), t, 0, M, mstride, xb.data(), nullptr, xa.data(),
                             p.data.at(t), terms.data());
      check_terms(terms.data(), nf, mstride, ones.data(), 0, M, t, info);
      for (int64_t k = 0; k < lay.nsum; ++k)
        for (int64_t m = 0; m < M; ++m)
          sums[k] += terms[lay.sum_comp[k] * mstride + m] / M;
      for (int64_t k = 0; k < nper; ++k)
        for (int64_t m = 0; m < M; ++m)
          q[2 * ns + k] += terms[lay.per_t_comp[k] * mstride + m] / M;
    }
    lay.store_estimates(t, q.data(), p.r, info);
  }
}

// M: --trajectories, or as many as particles.
int64_t trajectory_count(const OfflinePass& p) {
  const int64_t M = p.opt.trajectories > 0 ? p.opt.trajectories : p.sys.N;
  if (M >= (int64_t(1) << 32))
    throw Error("smooth: too many trajectories (at most 2^32 - 1)");
  return M;
}

} // namespace

std::vector<StepPoints> ffbsi_points(OfflinePass& p) {
  const int64_t M = trajectory_count(p), T = p.sys.T, ns = p.ns, stride = p.sys.stride;
  BackwardCounts counts;
  BoundRange bounds;
  const std::vector<int64_t> J =
      draw_trajectories(p, M, p.opt.backward == BackwardSampling::Rejection, counts, bounds);
  return trajectory_steps(J, T, M, ns, stride, [&](int64_t t) { return p.sys.x_at(t, ns); });
}

void ffbsi_pass(OfflinePass& p) {
  const int64_t M = trajectory_count(p);
  const bool rejection = p.opt.backward == BackwardSampling::Rejection;
  BackwardCounts counts;
  BoundRange bounds;
  const std::vector<int64_t> J = draw_trajectories(p, M, rejection, counts, bounds);
  average_trajectories(p, J, M);
  SmoothResult& r = p.r;
  r.details = {{"trajectories", M},
               {"backward", rejection ? "rejection" : "exact"},
               {"proposals", counts.total_tries},
               {"acceptance_rate", counts.acceptance_rate()},
               {"exact_draws", counts.total_exact}};
  if (rejection)
    r.details["log_bound"] = bounds.json();
}

} // namespace ssm
