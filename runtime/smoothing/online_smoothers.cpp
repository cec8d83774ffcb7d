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
#include "core/error.h"
#include "kernel/rng.h"
#include "kernel/vectorised.h"
#include "smoothing/smoothers.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

namespace ssm {

namespace {

constexpr int64_t kOnlineBlock = 64; // particles per parallel task; fixed for reproducibility

// Pairs (x_prev^{i_p}, x_cur^{j_p}) gathered into compact arrays of stride P, so that one kernel
// call evaluates the transition density, or the functionals' terms, of many pairs.
class PairBatch {
public:
  void gather(int64_t ns, int64_t stride, const double* x_prev, const double* x_cur,
              const int64_t* i, const int64_t* j, int64_t P) {
    size_ = P;
    prev_.resize(ns * P);
    cur_.resize(ns * P);
    for (int64_t c = 0; c < ns; ++c)
      for (int64_t p = 0; p < P; ++p) {
        prev_[c * P + p] = x_prev[c * stride + i[p]];
        cur_[c * P + p] = x_cur[c * stride + j[p]];
      }
  }
  int64_t size() const { return size_; }
  const double* prev() const { return prev_.data(); }
  const double* cur() const { return cur_.data(); }
  const double* terms(const ssm_model& model, const double* frame, int64_t t, const double* y,
                      int64_t nf) {
    out_.resize(nf * size_);
    model.functional_terms(frame, t, 0, size_, size_, prev_.data(), nullptr, cur_.data(), y,
                           out_.data());
    return out_.data();
  }

private:
  int64_t size_ = 0;
  std::vector<double> prev_, cur_, out_;
};

// Accepts with probability min(1, exp(log_ratio)) given u ~ U(0, 1): log u < log_ratio, without
// the logarithm when the ratio is at least 1 (an accepted uphill move). NaN rejects.
inline bool accept(double u, double log_ratio) {
  return log_ratio >= 0 || u < std::exp(log_ratio);
}

// The same decision without a branch on the outcome, for loops where about half the moves are
// accepted and a mispredicted branch would cost more than the exponential. NaN rejects.
inline bool accept_branch_free(double u, double log_ratio) {
  return u < std::exp(std::min(log_ratio, 0.0));
}

// What the batched methods (paris mcmc, bis) keep for one block of particles.
struct BatchScratch {
  std::vector<int64_t> bidx, pi, pj, qj;
  std::vector<double> bw, index_u, move_u, log_ratio, ratio, lp, ones;
  PairBatch pairs;
};

// tau_next^j = sum_k w_jk (tau^{i_jk} + psi(i_jk, j)) for the particles j in [jb, je), from the
// batched methods' draws: particle j's indices i_jk and weights w_jk at [(j - jb) Nt + k], the
// functionals' terms psi (nf rows of stride nj Nt, null when there are none). One component at a
// time over the block, so the loops carry no per-particle dispatch; the sums add in the order of
// the one-particle path (for each k, the statistic then its term), so results do not change.
void add_backward_sample_block(const StatLayout& lay, int64_t D, int64_t N, int64_t jb, int64_t je,
                               int64_t Nt, const int64_t* idx, const double* w, const double* psi,
                               const double* x, int64_t stride, int64_t slot, double* tau_next,
                               const double* tau, std::vector<double>& step_q) {
  const int64_t nj = je - jb;
  for (int64_t c = 0; c < D; ++c) {
    const double* row = tau + c * N;
    const double* term = psi && c < lay.nsum ? psi + lay.sum_comp[c] * nj * Nt : nullptr;
    double* out = tau_next + c * N;
    for (int64_t j = jb; j < je; ++j) {
      const int64_t* ij = idx + (j - jb) * Nt;
      const double* wj = w + (j - jb) * Nt;
      double a = 0;
      for (int64_t k = 0; k < Nt; ++k) {
        a += wj[k] * row[ij[k]];
        if (term)
          a += wj[k] * term[(j - jb) * Nt + k];
      }
      out[j] = a;
    }
  }
  if (!lay.marginals)
    return;
  const int64_t ns = lay.ns, nper = static_cast<int64_t>(lay.per_t_comp.size());
  for (int64_t j = jb; j < je; ++j) {
    std::fill(step_q.begin(), step_q.end(), 0.0);
    if (psi)
      for (int64_t k = 0; k < Nt; ++k)
        for (int64_t c = 0; c < nper; ++c)
          step_q[2 * ns + c] +=
              w[(j - jb) * Nt + k] * psi[lay.per_t_comp[c] * nj * Nt + (j - jb) * Nt + k];
    lay.state_quantities(x, j, stride, step_q.data());
    for (int64_t k = 0; k < lay.per_step; ++k)
      tau_next[(slot + k) * N + j] = step_q[k];
  }
}

// The transition density on (previous, current) particle pairs, as the backward samplers see it:
// the one place they evaluate it, so that a positive unbiased estimate can replace it for models
// whose transition density is intractable (bis needs nothing else).
class BackwardDensity {
public:
  BackwardDensity(const ssm_model& model, int64_t ns, int64_t stride)
      : model_(model), ns_(ns), stride_(stride) {}
  // out[i] = log f(x_cur^j | x_prev^i) for every i in [0, N); bc is scratch (ns x stride).
  void all(const double* frame, int64_t t, int64_t N, const double* x_prev, const double* x_cur,
           int64_t j, double* bc, double* out) const {
    backward_logpdf(model_, frame, t, N, stride_, ns_, x_prev, x_cur, j, bc, out);
  }
  // out[m] = log f(x_cur^j | x_prev^{idx[m]}) for m in [0, count), in one kernel call; bc (ns x
  // stride) and anc (stride) are scratch, count <= stride.
  void some(const double* frame, int64_t t, const double* x_prev, const double* x_cur, int64_t j,
            const int64_t* idx, int64_t count, double* bc, int64_t* anc, double* out) const {
    for (int64_t c = 0; c < ns_; ++c)
      std::fill_n(bc + c * stride_, count, x_cur[c * stride_ + j]);
    std::copy_n(idx, count, anc);
    model_.transition_logpdf(frame, t, 0, count, stride_, x_prev, anc, bc, out);
  }
  // out[p] = log f(cur_p | prev_p) for the batch's pairs.
  void pairs(const double* frame, int64_t t, const PairBatch& batch,
             std::vector<double>& out) const {
    out.resize(batch.size());
    model_.transition_logpdf(frame, t, 0, batch.size(), batch.size(), batch.prev(), nullptr,
                             batch.cur(), out.data());
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
  FilterOptions filter_options = opt.filter;
  filter_options.history = false; // only the log-likelihood is used: memory stays O(N)
  ParticleFilter pf(model, info, fixed, data, filter_options, pool);
  const int64_t stride = pf.stride();
  const BackwardDensity density(model, ns, stride);
  const bool rejection = opt.backward == BackwardSampling::Rejection;
  const bool mcmc = opt.backward == BackwardSampling::Mcmc;
  const bool batched = mcmc || opt.method == SmoothMethod::Bis;
  const int64_t Nt = opt.backward_samples;
  const double inv_Nt = 1.0 / static_cast<double>(Nt);
  const uint64_t seed = opt.filter.seed;
  const int64_t nb = (N + kOnlineBlock - 1) / kOnlineBlock;

  // Statistics, SoA: component k of particle n at [k * N + n].
  std::vector<double> tau, tau_next;
  std::vector<double> w_prev(N), terms0(std::max<int64_t>(nf, 1) * stride);
  const std::vector<double> nan_prev(ns * stride, NAN);
  std::vector<double> bound_scratch;
  BoundRange bounds;
  AliasTable from_weights; // proposals of paris' rejection sampling and bis' indices
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
      const int64_t* ancestors = pf.ancestors();
      const double log_bound =
          opt.method == SmoothMethod::Paris && rejection
              ? transition_log_bound(model, frame, t, N, stride, x_prev, bound_scratch)
              : NAN;
      const bool reject_here = std::isfinite(log_bound);
      if (opt.method == SmoothMethod::Paris && rejection)
        bounds.add(log_bound);
      std::vector<int64_t> tries(nb, 0), acc(nb, 0), exact(nb, 0);
      pool.parallel_for(nb, [&](int64_t b) {
        const int64_t jb = b * kOnlineBlock, je = std::min(N, jb + kOnlineBlock);
        // Scratch for the methods that evaluate pairs one particle j at a time (the batched ones
        // need none): O(N) per block, so not allocated when unused.
        const int64_t one_j = batched ? 0 : stride, rej = rejection ? stride : 0;
        std::vector<double> bc(ns * one_j), l(one_j), terms(std::max<int64_t>(nf, 1) * one_j);
        std::vector<int64_t> anc(one_j), idx(Nt), idx_try(rej);
        std::vector<double> wk(Nt), wk_u(rej), back_cum(rejection ? N : 0);
        std::vector<double> step_q(std::max<int64_t>(lay.per_step, 1));
        // mcmc and bis fix their proposals before evaluating anything: the whole block's pairs
        // go through one kernel call each for the density and for the functionals' terms.
        const int64_t nj = je - jb;
        // Kept per thread across blocks and steps: these grow with the block's pairs (64 Ñ S),
        // and allocating them afresh each time would dominate.
        static thread_local BatchScratch scratch;
        auto& [bidx, pi, pj, qj, bw, index_u, move_u, log_ratio, ratio, pair_lp, ones, pairs] =
            scratch;
        if (batched) {
          const int64_t S = opt.mcmc_steps, per = mcmc ? 1 + Nt * S : Nt, P = nj * per;
          pi.resize(P);
          pj.resize(P);
          // The uniforms first, in a loop of their own, then the indices: the alias lookups then
          // overlap instead of each waiting on its Philox block. Draw d of particle j is at
          // [d nj + j - jb]: index_u picks a proposal, move_u decides the move to it.
          index_u.resize(P);
          move_u.resize(P);
          const auto ut = static_cast<uint32_t>(t);
          const int64_t draws = mcmc ? per - 1 : Nt;
          for (int64_t d = 0; d < draws; ++d)
            philox_u01x2_run(seed, static_cast<uint32_t>(jb), nj, ut, kSiteBackward,
                             static_cast<uint32_t>(d), &index_u[d * nj], &move_u[d * nj]);
          const int64_t first = mcmc ? 1 : 0; // mcmc: slot 0 is j's ancestor, the chains' start
          for (int64_t j = jb; j < je; ++j) {
            std::fill_n(&pj[(j - jb) * per], per, j);
            int64_t* row = &pi[(j - jb) * per];
            if (mcmc)
              row[0] = ancestors ? ancestors[j] : j;
            for (int64_t d = 0; d < draws; ++d)
              row[first + d] = from_weights.draw(index_u[d * nj + (j - jb)]);
          }
          pairs.gather(ns, stride, x_prev, x, pi.data(), pj.data(), P);
          density.pairs(frame, t, pairs, pair_lp);
          const double* lp = pair_lp.data();
          bidx.resize(nj * Nt);
          bw.resize(nj * Nt);
          if (mcmc && S == 1) {
            // Every chain makes one move from slot 0 (j's ancestor) to slot 1 + k: the ratios
            // and decisions of the whole block in flat loops, draw k of particle j at k nj + j.
            const int64_t M = nj * Nt;
            log_ratio.resize(M);
            ratio.resize(M);
            for (int64_t k = 0; k < Nt; ++k)
              for (int64_t jj = 0; jj < nj; ++jj) // NaN stays NaN, and rejects
                log_ratio[k * nj + jj] = std::min(lp[jj * per + 1 + k] - lp[jj * per], 0.0);
            exp_run(log_ratio.data(), ratio.data(), M);
            // The outcome selects an index arithmetically: a branch on it (accepted about half
            // the time) would mispredict at every other move.
            int64_t moved = 0;
            const double *u = move_u.data(), *r = ratio.data();
            const int64_t* from = pi.data();
            int64_t* to = bidx.data();
            for (int64_t k = 0; k < Nt; ++k)
              for (int64_t jj = 0; jj < nj; ++jj) {
                const int64_t moves = u[k * nj + jj] < r[k * nj + jj];
                moved += moves;
                to[jj * Nt + k] = from[jj * per + moves * (1 + k)];
              }
            std::fill_n(bw.begin(), M, inv_Nt);
            acc[b] += moved;
            tries[b] += M;
          } else {
            for (int64_t j = jb; j < je; ++j) {
              const double* lj = lp + (j - jb) * per;
              const int64_t* ij = &pi[(j - jb) * per];
              int64_t* out_i = &bidx[(j - jb) * Nt];
              double* out_w = &bw[(j - jb) * Nt];
              if (mcmc) { // independent Metropolis-Hastings moves, S per draw
                for (int64_t k = 0; k < Nt; ++k) {
                  int64_t cur = 0;
                  for (int64_t s = 0; s < S; ++s) {
                    const int64_t m = 1 + k * S + s;
                    const bool moves =
                        accept_branch_free(move_u[(m - 1) * nj + (j - jb)], lj[m] - lj[cur]);
                    cur = moves ? m : cur;
                    acc[b] += moves;
                  }
                  tries[b] += S;
                  out_i[k] = ij[cur];
                  out_w[k] = inv_Nt;
                }
                continue;
              }
              // bis: self-normalised transition-density weights over the draws.
              double m = -std::numeric_limits<double>::infinity();
              for (int64_t k = 0; k < Nt; ++k) {
                out_i[k] = ij[k];
                m = std::max(m, lj[k]);
              }
              double total = 0;
              for (int64_t k = 0; k < Nt; ++k) {
                out_w[k] = std::isfinite(m) && !std::isnan(lj[k]) ? std::exp(lj[k] - m) : 0.0;
                total += out_w[k];
              }
              // No drawn index can be the parent: uniform weights over the draws keep the estimate
              // defined (only with a bounded-support transition density and few backward samples).
              for (int64_t k = 0; k < Nt; ++k)
                out_w[k] = total > 0 ? out_w[k] / total : inv_Nt;
            }
          }
          const double* bterms = nullptr;
          if (nf > 0) {
            qj.resize(nj * Nt);
            for (int64_t j = jb; j < je; ++j)
              std::fill_n(&qj[(j - jb) * Nt], Nt, j);
            pairs.gather(ns, stride, x_prev, x, bidx.data(), qj.data(), nj * Nt);
            bterms = pairs.terms(model, frame, t, pf.y(), nf);
            // Every drawn pair is used: a non-finite term is an error (check_terms says which).
            bool finite = true;
            for (int64_t p = 0; p < nf * nj * Nt; ++p)
              finite &= std::isfinite(bterms[p]);
            if (!finite) {
              ones.assign(nj * Nt, 1.0);
              check_terms(bterms, nf, nj * Nt, ones.data(), 0, nj * Nt, t, info);
            }
          }
          add_backward_sample_block(lay, D, N, jb, je, Nt, bidx.data(), bw.data(), bterms, x,
                                    stride, slot, tau_next.data(), tau.data(), step_q);
          return;
        }
        for (int64_t j = jb; j < je; ++j) {
          const auto uj = static_cast<uint32_t>(j);
          const auto ut = static_cast<uint32_t>(t);
          // The backward sample: indices idx[k] with weights wk[k] summing to 1 (online: all).
          int64_t K = Nt;
          if (opt.method == SmoothMethod::Online ||
              (opt.method == SmoothMethod::Paris && !reject_here)) {
            density.all(frame, t, N, x_prev, x, j, bc.data(), l.data());
            const double s = backward_weights(w_prev.data(), l.data(), N);
            if (!(s > 0))
              throw Error(fmt::format("smooth: at t={} particle {} has zero transition density "
                                      "from every particle at t={}",
                                      t, j, t - 1));
            if (opt.method == SmoothMethod::Online) {
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
              wk[k] = inv_Nt;
            }
            exact[b] += Nt;
          } else if (opt.method == SmoothMethod::Paris) { // rejection, exact fallback
            // Proposals are evaluated in batches (one kernel call each) and scanned in order, so
            // the draw is that of one-at-a-time rejection. Once a draw of particle j falls back,
            // its backward weights are kept: j's later draws use them directly, since a particle
            // that rejected max_trials proposals is unlikely to accept the next ones.
            bool have_weights = false;
            for (int64_t k = 0; k < Nt; ++k) {
              const auto draw_base = static_cast<uint32_t>(k * (opt.max_trials + 1));
              int64_t chosen = -1;
              for (int64_t trial = 0, batch = 4;
                   !have_weights && trial < opt.max_trials && chosen < 0;
                   trial += batch, batch *= 2) {
                const int64_t count = std::min({batch, opt.max_trials - trial, stride});
                for (int64_t m = 0; m < count; ++m) {
                  double u0;
                  philox_u01x2(seed, uj, ut, kSiteBackward,
                               draw_base + static_cast<uint32_t>(trial + m), u0, wk_u[m]);
                  idx_try[m] = from_weights.draw(u0);
                }
                density.some(frame, t, x_prev, x, j, idx_try.data(), count, bc.data(), anc.data(),
                             l.data());
                for (int64_t m = 0; m < count && chosen < 0; ++m) {
                  ++tries[b];
                  check_within_bound(l[m], log_bound, t);
                  if (accept(wk_u[m], l[m] - log_bound)) {
                    chosen = idx_try[m];
                    ++acc[b];
                  }
                }
              }
              if (chosen < 0) {
                if (!have_weights) {
                  density.all(frame, t, N, x_prev, x, j, bc.data(), l.data());
                  if (!(backward_weights(w_prev.data(), l.data(), N) > 0))
                    throw Error(fmt::format("smooth: at t={} particle {} has zero transition "
                                            "density from every particle at t={}",
                                            t, j, t - 1));
                  std::partial_sum(l.begin(), l.begin() + N, back_cum.begin());
                  have_weights = true;
                }
                const double u = philox_u01(seed, uj, ut, kSiteBackward,
                                            draw_base + static_cast<uint32_t>(opt.max_trials));
                chosen = draw_index(back_cum, u);
                ++exact[b];
              }
              idx[k] = chosen;
              wk[k] = inv_Nt;
            }
          } else {
            throw Error("internal error: no backward sampler for this method");
          }
          // tau_next^j = sum_k wk[k] (tau^{idx[k]} + psi(idx[k], j)).
          std::fill(step_q.begin(), step_q.end(), 0.0);
          for (int64_t k = 0; k < K; ++k) {
            const int64_t i = idx[k];
            for (int64_t c = 0; c < D; ++c)
              tau_next[c * N + j] += wk[k] * tau[c * N + i];
            if (nf > 0) { // psi(i, j), component c at psi[c stride]
              anc[j] = i;
              model.functional_terms(frame, t, j, j + 1, stride, x_prev, anc.data(), x, pf.y(),
                                     terms.data());
              const double* psi = terms.data() + j;
              for (int64_t c = 0; c < nf; ++c)
                if (!std::isfinite(psi[c * stride]))
                  check_terms(terms.data(), nf, stride, pf.weights(), j, j + 1, t, info);
              for (int64_t c = 0; c < lay.nsum; ++c)
                tau_next[c * N + j] += wk[k] * psi[lay.sum_comp[c] * stride];
              for (int64_t c = 0; c < nper; ++c)
                step_q[2 * ns + c] += wk[k] * psi[lay.per_t_comp[c] * stride];
            }
          }
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
    if (opt.method != SmoothMethod::Online)
      from_weights.build(w_prev.data(), N);
  }

  // Estimates: sum_j W_{T-1}^j tau^j.
  std::vector<double> est(D, 0.0);
  if (T > 0) {
    const double W = std::accumulate(w_prev.begin(), w_prev.end(), 0.0);
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
  r.details = {{"backward_samples", opt.method == SmoothMethod::Online ? N : Nt},
               {"memory_statistics_per_particle", D}};
  if (opt.method == SmoothMethod::Paris) {
    r.details["backward"] = rejection ? "rejection" : mcmc ? "mcmc" : "exact";
    if (mcmc)
      r.details["mcmc_steps"] = opt.mcmc_steps;
    r.details["proposals"] = proposals;
    r.details["acceptance_rate"] = proposals > 0 ? double(accepts) / double(proposals) : 0.0;
    r.details["exact_draws"] = exact_draws;
    if (rejection)
      r.details["log_bound"] = bounds.json();
  }
  timer.finish(r, start);
  return r;
}

} // namespace ssm
