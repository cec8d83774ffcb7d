// ffbsm and ffbsi: forward filtering, then a backward pass over the stored particle system.
//
// ffbsm (marginal forward-filtering backward-smoothing) computes the smoothing weight of every
// particle at every step, w_{t|T}^i = W_t^i sum_j w_{t+1|T}^j f(x_{t+1}^j | x_t^i) / D_j with
// D_j = sum_k W_t^k f(x_{t+1}^j | x_t^k), and the functionals under the pairwise smoothing weights
// w_{t+1|T}^j W_t^i f(x_{t+1}^j | x_t^i) / D_j: O(N^2) per step, no sampling noise beyond the
// filter's.
// ffbsi draws M trajectories backward, index J_t ~ W_t^i f(x_{t+1}^{J_{t+1}} | x_t^i), and
// averages over them. Draws are exact (O(N) each) or by rejection from the filter weights with
// the transition density's bound, falling back to an exact draw after max_trials rejections.
// Memory is O(N T) for both (the particle system is stored).
#include "core/error.h"
#include "kernel/rng.h"
#include "smoothing/smoothers.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

namespace ssm {

namespace {

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

[[noreturn]] void no_parent(int64_t t, int64_t j) {
  throw Error(fmt::format("smooth: at t={} particle {} has zero transition density from every "
                          "particle at t={}: the backward kernel is undefined (check the "
                          "transition's support)",
                          t, j, t - 1));
}

} // namespace

SmoothResult smooth_backward(const ssm_model& model, const ModelInfo& info,
                             const std::vector<double>& fixed, const ObsData& data,
                             const SmoothOptions& opt, ThreadPool& pool) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t T = data.T, N = opt.filter.particles, ns = info.n_state;
  const StatLayout lay(info, true);
  const int64_t nf = lay.nf, nper = static_cast<int64_t>(lay.per_t_comp.size());
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
  const double* frames = sys.frames.data();
  auto frame_at = [&](int64_t t) { return frames + t * info.n_frame; };
  const std::vector<double> nan_prev(ns * stride, NAN);
  std::vector<double> sums(lay.nsum, 0.0);
  std::vector<double> q(lay.per_step, 0.0);

  // The state part of q: weighted moments of the stored particles x_t under weights ws.
  auto store_state_moments = [&](const double* ws, const double* x_t) {
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
  };
  // The terms at t = 0 (x_prev NaN) weighted by ws.
  auto add_initial_terms = [&](const double* ws) {
    if (nf == 0)
      return;
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
  };

  if (opt.method == SmoothMethod::Ffbsm && T > 0) {
    std::vector<double> ws(sys.w_at(T - 1), sys.w_at(T - 1) + N), ws_prev(N);
    const int64_t nb = (N + kBackwardBlock - 1) / kBackwardBlock;
    const int64_t part_width = N + lay.nsum + nper;
    std::vector<double> part(nb * part_width);
    for (int64_t t = T - 1; t >= 0; --t) {
      // Pairs (t-1, t): the weights at t-1 and the functionals' terms at t.
      std::fill(q.begin(), q.end(), 0.0);
      store_state_moments(ws.data(), sys.x_at(t, ns));
      if (t == 0) {
        add_initial_terms(ws.data());
        lay.store_estimates(0, q.data(), r, info);
        break;
      }
      const double* x_prev = sys.x_at(t - 1, ns);
      const double* x_cur = sys.x_at(t, ns);
      const double* W = sys.w_at(t - 1);
      std::fill(part.begin(), part.end(), 0.0);
      pool.parallel_for(nb, [&](int64_t b) {
        const int64_t jb = b * kBackwardBlock, je = std::min(N, jb + kBackwardBlock);
        std::vector<double> bc(ns * stride), l(stride), terms(std::max<int64_t>(nf, 1) * stride);
        double* p = &part[b * part_width];
        for (int64_t j = jb; j < je; ++j) {
          if (ws[j] <= 0)
            continue;
          backward_logpdf(model, frame_at(t), t, N, stride, ns, x_prev, x_cur, j, bc.data(),
                          l.data());
          const double D = backward_weights(W, l.data(), N);
          if (!(D > 0))
            no_parent(t, j);
          const double coef = ws[j] / D;
          for (int64_t i = 0; i < N; ++i)
            p[i] += coef * l[i];
          if (nf == 0)
            continue;
          model.functional_terms(frame_at(t), t, 0, N, stride, x_prev, nullptr, bc.data(),
                                 data.at(t), terms.data());
          for (int64_t k = 0; k < lay.nsum + nper; ++k) {
            const int64_t comp = k < lay.nsum ? lay.sum_comp[k] : lay.per_t_comp[k - lay.nsum];
            const double* row = terms.data() + comp * stride;
            double a = 0;
            for (int64_t i = 0; i < N; ++i)
              if (l[i] > 0)
                a += l[i] * row[i];
            if (!std::isfinite(a))
              check_terms(terms.data(), nf, stride, l.data(), 0, N, t, info);
            p[N + k] += coef * a;
          }
        }
      });
      std::fill(ws_prev.begin(), ws_prev.end(), 0.0);
      for (int64_t b = 0; b < nb; ++b) {
        const double* p = &part[b * part_width];
        for (int64_t i = 0; i < N; ++i)
          ws_prev[i] += p[i];
        for (int64_t k = 0; k < lay.nsum; ++k)
          sums[k] += p[N + k];
        for (int64_t k = 0; k < nper; ++k)
          q[2 * ns + k] += p[N + lay.nsum + k];
      }
      lay.store_estimates(t, q.data(), r, info);
      std::swap(ws, ws_prev);
    }
  }

  if (opt.method == SmoothMethod::Ffbsi && T > 0) {
    const int64_t M = opt.trajectories > 0 ? opt.trajectories : N;
    if (M >= (int64_t(1) << 32))
      throw Error("smooth: too many trajectories (at most 2^32 - 1)");
    const bool rejection = opt.backward == BackwardSampling::Rejection;
    std::vector<int64_t> J(T * M);
    std::vector<double> cum(N);
    const uint64_t seed = opt.filter.seed;
    std::partial_sum(sys.w_at(T - 1), sys.w_at(T - 1) + N, cum.begin());
    for (int64_t m = 0; m < M; ++m)
      J[(T - 1) * M + m] =
          draw_index(cum, philox_u01(seed, static_cast<uint32_t>(m), static_cast<uint32_t>(T - 1),
                                     kSiteTrajectory, 0));
    const int64_t nb = (M + kBackwardBlock - 1) / kBackwardBlock;
    std::vector<double> bound_scratch;
    BoundRange bounds;
    AliasTable from_weights;
    int64_t proposals = 0, accepts = 0, exact_draws = 0;
    for (int64_t t = T - 1; t >= 1; --t) {
      const double* x_prev = sys.x_at(t - 1, ns);
      const double* x_cur = sys.x_at(t, ns);
      const double* W = sys.w_at(t - 1);
      std::partial_sum(W, W + N, cum.begin());
      if (rejection)
        from_weights.build(W, N);
      const double log_bound =
          rejection ? transition_log_bound(model, frame_at(t), t, N, stride, x_prev, bound_scratch)
                    : NAN;
      const bool reject_here = std::isfinite(log_bound);
      if (rejection)
        bounds.add(log_bound);
      std::vector<int64_t> tries(nb, 0), acc(nb, 0), exact(nb, 0);
      pool.parallel_for(nb, [&](int64_t b) {
        const int64_t mb = b * kBackwardBlock, me = std::min(M, mb + kBackwardBlock);
        std::vector<double> bc(ns * stride), l(stride);
        std::vector<int64_t> anc(stride);
        for (int64_t m = mb; m < me; ++m) {
          const int64_t j = J[t * M + m];
          const auto um = static_cast<uint32_t>(m);
          const auto ut = static_cast<uint32_t>(t);
          int64_t chosen = -1;
          if (reject_here)
            for (int64_t k = 0; k < opt.max_trials && chosen < 0; ++k) {
              double u0, u1;
              philox_u01x2(seed, um, ut, kSiteBackward, static_cast<uint32_t>(k), u0, u1);
              const int64_t i = from_weights.draw(u0);
              anc[j] = i;
              model.transition_logpdf(frame_at(t), t, j, j + 1, stride, x_prev, anc.data(), x_cur,
                                      l.data());
              ++tries[b];
              check_within_bound(l[j], log_bound, t);
              if (std::log(u1) < l[j] - log_bound) {
                chosen = i;
                ++acc[b];
              }
            }
          if (chosen < 0) {
            backward_logpdf(model, frame_at(t), t, N, stride, ns, x_prev, x_cur, j, bc.data(),
                            l.data());
            const double D = backward_weights(W, l.data(), N);
            if (!(D > 0))
              no_parent(t, j);
            for (int64_t i = 1; i < N; ++i)
              l[i] += l[i - 1];
            const double u = philox_u01(seed, um, ut, kSiteBackward,
                                        static_cast<uint32_t>(rejection ? opt.max_trials : 0));
            const double target = u * l[N - 1];
            chosen = std::min<int64_t>(
                std::upper_bound(l.begin(), l.begin() + N, target) - l.begin(), N - 1);
            ++exact[b];
          }
          J[(t - 1) * M + m] = chosen;
        }
      });
      for (int64_t b = 0; b < nb; ++b) {
        proposals += tries[b];
        accepts += acc[b];
        exact_draws += exact[b];
      }
    }
    // Average along the trajectories.
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
                               data.at(t), terms.data());
        check_terms(terms.data(), nf, mstride, ones.data(), 0, M, t, info);
        for (int64_t k = 0; k < lay.nsum; ++k)
          for (int64_t m = 0; m < M; ++m)
            sums[k] += terms[lay.sum_comp[k] * mstride + m] / M;
        for (int64_t k = 0; k < nper; ++k)
          for (int64_t m = 0; m < M; ++m)
            q[2 * ns + k] += terms[lay.per_t_comp[k] * mstride + m] / M;
      }
      lay.store_estimates(t, q.data(), r, info);
    }
    r.details = {{"trajectories", M},
                 {"backward", rejection ? "rejection" : "exact"},
                 {"proposals", proposals},
                 {"acceptance_rate", proposals > 0 ? double(accepts) / double(proposals) : 0.0},
                 {"exact_draws", exact_draws}};
    if (rejection)
      r.details["log_bound"] = bounds.json();
  }
  lay.store_sums(sums.data(), r, info);
  timer.finish(r, start);
  return r;
}

} // namespace ssm
