// online, paris and bis: forward-only smoothing of additive functionals alongside the filter.
//
// Each particle j at t carries a statistic tau_t^j, the estimate of E[sum_{s<=t} psi_s | x_t = x^j]
// given y_{0:t}; the functionals' estimates at T-1 are sum_j W_{T-1}^j tau_{T-1}^j. The methods
// differ in how tau_t^j averages tau_{t-1}^i + psi_t(x_{t-1}^i, x_t^j) over the backward kernel
// B(j, i) proportional to W_{t-1}^i f(x_t^j | x_{t-1}^i):
//   online  exactly, over all N particles (Del Moral, Doucet & Singh 2010): O(N^2) per step;
//   paris   over Ñ indices drawn from B(j, .) (Olsson & Westerborn 2017), by rejection from the
//           filter weights with the density bound, or exactly (O(N) per draw);
//   bis     over Ñ indices drawn from the filter weights W_{t-1}, self-normalised with the
//           transition density (Martin, Le Corff et al. 2022); no bound needed. The density enters
//           only through BackwardDensity, so a positive unbiased estimate of it can replace the
//           exact one for models whose transition density is intractable.
// Memory is O(N) whatever T. With --marginals the statistic also carries, for every step s <= t,
// the state, its square and the per-t functionals at s, which costs O(N T) memory.
#include "smoothers.h"
#include "ssm/error.h"
#include "ssm/rng.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

namespace ssm {

namespace {

constexpr int64_t kOnlineBlock = 64; // particles per parallel task; fixed for reproducibility

// The transition density on (previous, current) particle pairs, as backward weights see it.
class BackwardDensity {
public:
  BackwardDensity(const ssm_model& model, int64_t ns, int64_t stride)
      : model_(model), ns_(ns), stride_(stride) {}
  // out[i] = log f(x_cur^j | x_prev^i) for every i in [0, N); bc is scratch (ns x stride).
  void all(const double* frame, int64_t t, int64_t N, const double* x_prev, const double* x_cur,
           int64_t j, double* bc, double* out) const {
    backward_logpdf(model_, frame, t, N, stride_, ns_, x_prev, x_cur, j, bc, out);
  }
  // log f(x_cur^j | x_prev^i); anc and out are scratch of `stride` entries.
  double one(const double* frame, int64_t t, const double* x_prev, const double* x_cur, int64_t i,
             int64_t j, int64_t* anc, double* out) const {
    anc[j] = i;
    model_.transition_logpdf(frame, t, j, j + 1, stride_, x_prev, anc, x_cur, out);
    return out[j];
  }

private:
  const ssm_model& model_;
  int64_t ns_, stride_;
};

} // namespace

SmoothResult smooth_online(const ssm_model& model, const ModelInfo& info,
                           const std::vector<double>& fixed, const ObsData& data,
                           const SmoothOptions& opt, ThreadPool& pool) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t T = data.T, N = opt.filter.particles, ns = info.n_state;
  const StatLayout lay(info, opt.marginals);
  const int64_t nf = lay.nf, nper = static_cast<int64_t>(lay.per_t_comp.size());
  SmoothResult r = make_result(info, opt.method, T, N, opt.marginals);
  ParticleFilter pf(model, info, fixed, data, opt.filter, pool);
  const int64_t stride = pf.stride();
  const BackwardDensity density(model, ns, stride);
  const bool rejection = opt.backward == BackwardSampling::rejection;
  const int64_t Nt = opt.backward_samples;
  const uint64_t seed = opt.filter.seed;
  const int64_t nb = (N + kOnlineBlock - 1) / kOnlineBlock;

  // Statistics, SoA: component k of particle n at [k * N + n].
  std::vector<double> tau, tau_next;
  std::vector<double> w_prev(N), cum(N), terms0(std::max<int64_t>(nf, 1) * stride);
  const std::vector<double> nan_prev(ns * stride, NAN);
  int64_t D = 0;
  int64_t proposals = 0, accepts = 0, exact_draws = 0;

  StepTimer timer;
  while (timer.step(pf)) {
    const int64_t t = pf.t();
    const double* x = pf.x();
    const double* frame = pf.frame();
    if (t == 0) {
      D = lay.nsum + lay.per_step;
      tau.assign(D * N, 0.0);
      if (nf > 0) {
        model.functional_terms(frame, 0, 0, N, stride, nan_prev.data(), nullptr, x, pf.y(),
                               terms0.data());
        check_terms(terms0.data(), nf, stride, pf.weights(), 0, N, 0, info);
      }
      for (int64_t n = 0; n < N; ++n) {
        for (int64_t k = 0; k < lay.nsum; ++k)
          tau[k * N + n] = terms0[lay.sum_comp[k] * stride + n];
        lay.step_quantities(x, n, stride, terms0.data(), n, stride, tau.data() + lay.nsum * N + n,
                            N);
      }
    } else {
      const int64_t D_next = D + lay.per_step;
      const int64_t slot = lay.nsum + t * lay.per_step; // where step t's quantities go
      tau_next.assign(D_next * N, 0.0);
      const double* x_prev = pf.x_prev();
      std::vector<int64_t> tries(nb, 0), acc(nb, 0), exact(nb, 0);
      pool.parallel_for(nb, [&](int64_t b) {
        const int64_t jb = b * kOnlineBlock, je = std::min(N, jb + kOnlineBlock);
        std::vector<double> bc(ns * stride), l(stride), terms(std::max<int64_t>(nf, 1) * stride);
        std::vector<int64_t> anc(stride), idx(Nt);
        std::vector<double> wk(Nt);
        std::vector<double> step_q(std::max<int64_t>(lay.per_step, 1));
        for (int64_t j = jb; j < je; ++j) {
          const auto uj = static_cast<uint32_t>(j);
          const auto ut = static_cast<uint32_t>(t);
          // The backward sample: indices idx[k] with weights wk[k] summing to 1 (online: all).
          int64_t K = Nt;
          if (opt.method == SmoothMethod::online ||
              (opt.method == SmoothMethod::paris && !rejection)) {
            density.all(frame, t, N, x_prev, x, j, bc.data(), l.data());
            const double s = backward_weights(w_prev.data(), l.data(), N);
            if (!(s > 0))
              throw Error(fmt::format("smooth: at t={} particle {} has zero transition density "
                                      "from every particle at t={}",
                                      t, j, t - 1));
            if (opt.method == SmoothMethod::online) {
              // tau_next^j = sum_i B(j, i) (tau^i + psi(i, j)), all pairs at once.
              for (int64_t k = 0; k < D; ++k) {
                const double* row = tau.data() + k * N;
                double a = 0;
                for (int64_t i = 0; i < N; ++i)
                  if (l[i] > 0)
                    a += l[i] * row[i];
                tau_next[k * N + j] = a / s;
              }
              if (nf > 0) {
                model.functional_terms(frame, t, 0, N, stride, x_prev, nullptr, bc.data(), pf.y(),
                                       terms.data());
                for (int64_t k = 0; k < lay.nsum + nper; ++k) {
                  const int64_t comp =
                      k < lay.nsum ? lay.sum_comp[k] : lay.per_t_comp[k - lay.nsum];
                  const double* row = terms.data() + comp * stride;
                  double a = 0;
                  for (int64_t i = 0; i < N; ++i)
                    if (l[i] > 0)
                      a += l[i] * row[i];
                  if (!std::isfinite(a))
                    check_terms(terms.data(), nf, stride, l.data(), 0, N, t, info);
                  if (k < lay.nsum)
                    tau_next[k * N + j] += a / s;
                  else
                    step_q[2 * ns + (k - lay.nsum)] = a / s;
                }
              }
              lay.state_quantities(x, j, stride, step_q.data());
              if (lay.marginals)
                for (int64_t k = 0; k < lay.per_step; ++k)
                  tau_next[(slot + k) * N + j] = step_q[k];
              continue;
            }
            for (int64_t i = 1; i < N; ++i)
              l[i] += l[i - 1];
            for (int64_t k = 0; k < Nt; ++k) {
              const double u = philox_u01(seed, uj, ut, kSiteBackward, static_cast<uint32_t>(k));
              idx[k] = std::min<int64_t>(
                  std::upper_bound(l.begin(), l.begin() + N, u * l[N - 1]) - l.begin(), N - 1);
              wk[k] = 1.0 / static_cast<double>(Nt);
            }
            exact[b] += Nt;
          } else if (opt.method == SmoothMethod::paris) { // rejection, exact fallback
            const double log_bound = opt.log_bound(frame, t);
            for (int64_t k = 0; k < Nt; ++k) {
              int64_t chosen = -1;
              for (int64_t trial = 0; trial < opt.max_trials && chosen < 0; ++trial) {
                double u0, u1;
                philox_u01x2(seed, uj, ut, kSiteBackward,
                             static_cast<uint32_t>(k * (opt.max_trials + 1) + trial), u0, u1);
                const int64_t i = draw_index(cum, u0);
                ++tries[b];
                if (std::log(u1) <
                    density.one(frame, t, x_prev, x, i, j, anc.data(), l.data()) - log_bound) {
                  chosen = i;
                  ++acc[b];
                }
              }
              if (chosen < 0) {
                density.all(frame, t, N, x_prev, x, j, bc.data(), l.data());
                if (!(backward_weights(w_prev.data(), l.data(), N) > 0))
                  throw Error(fmt::format("smooth: at t={} particle {} has zero transition "
                                          "density from every particle at t={}",
                                          t, j, t - 1));
                std::partial_sum(l.begin(), l.begin() + N, l.begin());
                const double s = l[N - 1];
                const double u =
                    philox_u01(seed, uj, ut, kSiteBackward,
                               static_cast<uint32_t>(k * (opt.max_trials + 1) + opt.max_trials));
                chosen = std::min<int64_t>(
                    std::upper_bound(l.begin(), l.begin() + N, u * s) - l.begin(), N - 1);
                ++exact[b];
              }
              idx[k] = chosen;
              wk[k] = 1.0 / static_cast<double>(Nt);
            }
          } else { // bis: indices from the filter weights, self-normalised density weights
            double m = -std::numeric_limits<double>::infinity();
            for (int64_t k = 0; k < Nt; ++k) {
              idx[k] = draw_index(
                  cum, philox_u01(seed, uj, ut, kSiteBackward, static_cast<uint32_t>(k)));
              wk[k] = density.one(frame, t, x_prev, x, idx[k], j, anc.data(), l.data());
              if (wk[k] > m)
                m = wk[k];
            }
            double s = 0;
            for (int64_t k = 0; k < Nt; ++k) {
              wk[k] = std::isfinite(m) && !std::isnan(wk[k]) ? std::exp(wk[k] - m) : 0.0;
              s += wk[k];
            }
            if (!(s > 0)) {
              // No drawn index can be the parent: fall back to uniform weights over the draws,
              // which keeps the estimate defined (it happens only with a bounded-support
              // transition density and few backward samples).
              for (int64_t k = 0; k < Nt; ++k)
                wk[k] = 1.0 / static_cast<double>(Nt);
            } else {
              for (int64_t k = 0; k < Nt; ++k)
                wk[k] /= s;
            }
          }
          // tau_next^j = sum_k wk[k] (tau^{idx[k]} + psi(idx[k], j)).
          std::fill(step_q.begin(), step_q.end(), 0.0);
          for (int64_t k = 0; k < K; ++k) {
            const int64_t i = idx[k];
            for (int64_t c = 0; c < D; ++c)
              tau_next[c * N + j] += wk[k] * tau[c * N + i];
            if (nf > 0) {
              anc[j] = i;
              model.functional_terms(frame, t, j, j + 1, stride, x_prev, anc.data(), x, pf.y(),
                                     terms.data());
              for (int64_t c = 0; c < lay.nsum; ++c)
                tau_next[c * N + j] += wk[k] * terms[lay.sum_comp[c] * stride + j];
              for (int64_t c = 0; c < nper; ++c)
                step_q[2 * ns + c] += wk[k] * terms[lay.per_t_comp[c] * stride + j];
            }
          }
          if (nf > 0)
            for (int64_t c = 0; c < nf; ++c)
              if (!std::isfinite(terms[c * stride + j]))
                check_terms(terms.data(), nf, stride, pf.weights(), j, j + 1, t, info);
          lay.state_quantities(x, j, stride, step_q.data());
          if (lay.marginals)
            for (int64_t k = 0; k < lay.per_step; ++k)
              tau_next[(slot + k) * N + j] = step_q[k];
        }
      });
      for (int64_t b = 0; b < nb; ++b) {
        proposals += tries[b];
        accepts += acc[b];
        exact_draws += exact[b];
      }
      std::swap(tau, tau_next);
      D = D_next;
    }
    // The filter weights at t, for the next step's backward kernel.
    std::copy(pf.weights(), pf.weights() + N, w_prev.begin());
    std::partial_sum(w_prev.begin(), w_prev.end(), cum.begin());
  }

  // Estimates: sum_j W_{T-1}^j tau^j.
  std::vector<double> est(D, 0.0);
  if (T > 0) {
    const double W = cum.back();
    for (int64_t k = 0; k < D; ++k) {
      double a = 0;
      for (int64_t n = 0; n < N; ++n)
        if (w_prev[n] > 0)
          a += w_prev[n] * tau[k * N + n];
      est[k] = a / W;
    }
  }
  lay.store_sums(est.data(), r, info);
  if (lay.marginals)
    for (int64_t t = 0; t < T; ++t)
      lay.store_estimates(t, est.data() + lay.nsum + t * lay.per_step, r, info);
  r.log_likelihood = pf.result().log_likelihood;
  r.details = {{"backward_samples", opt.method == SmoothMethod::online ? N : Nt},
               {"memory_statistics_per_particle", D}};
  if (opt.method == SmoothMethod::paris) {
    r.details["backward"] = rejection ? "rejection" : "exact";
    r.details["proposals"] = proposals;
    r.details["acceptance_rate"] = proposals > 0 ? double(accepts) / double(proposals) : 0.0;
    r.details["exact_draws"] = exact_draws;
  }
  timer.finish(r, start);
  return r;
}

} // namespace ssm
