// The backward kernel's draws (see backward_kernel.h): exact, rejection with the exact fallback,
// and the batched proposals and Metropolis-Hastings moves of a block of particles.
#include "smoothing/backward_kernel.h"

#include "core/error.h"
#include "kernel/rng.h"
#include "kernel/vectorised.h"
#include "sde/density_estimator.h"
#include "sde/poisson_estimator.h"

#include <fmt/format.h>

#include <limits>
#include <numeric>

namespace ssm {

void PairBatch::gather(int64_t ns, int64_t stride, const double* x_prev, const double* x_cur,
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

double* PairBatch::terms(const ssm_model& model, const double* frame, int64_t t, const double* y,
                         int64_t nf) {
  out_.resize(nf * size_);
  model.functional_terms(frame, t, 0, size_, size_, prev_.data(), nullptr, cur_.data(), y,
                         out_.data());
  return out_.data();
}

void BackwardDensity::some(const double* frame, int64_t t, const double* x_prev,
                           const double* x_cur, int64_t j, const int64_t* idx, int64_t count,
                           double* bc, int64_t* anc, double* out, uint64_t seed,
                           uint64_t first_id) const {
  if (info_) { // the SDE state's pairs, one estimate each (positive: bounded psi, checked)
    const int64_t d = info_->sde->dim;
    std::vector<double> from(d * count), to(d * count);
    for (int64_t c = 0; c < d; ++c)
      for (int64_t m = 0; m < count; ++m) {
        from[c * count + m] = x_prev[(sde_offset_ + c) * stride_ + idx[m]];
        to[c * count + m] = x_cur[(sde_offset_ + c) * stride_ + j];
      }
    std::unique_ptr<DensityEstimator> estimator = make_density_estimator(model_, *info_);
    EstimatorCounts counts;
    estimator->estimate(frame, t, from.data(), to.data(), count, 1, seed, first_id, out, &counts);
    if (counts.extra_rounds > 0 || !estimator->positive())
      throw Error(fmt::format("smooth: at t={} an estimate of the density of {} was not positive "
                              "(psi beyond the upper bound the compiler derived)",
                              t, info_->sde->relation));
    return;
  }
  for (int64_t c = 0; c < ns_; ++c)
    std::fill_n(bc + c * stride_, count, x_cur[c * stride_ + j]);
  std::copy_n(idx, count, anc);
  model_.transition_logpdf(frame, t, 0, count, stride_, x_prev, anc, bc, out);
}

void BackwardDensity::pairs(const double* frame, int64_t t, const PairBatch& batch,
                            std::vector<double>& out, uint64_t seed, uint64_t first_id, int64_t per,
                            std::vector<double>* score) const {
  const int64_t P = batch.size();
  out.resize(P);
  if (!info_) {
    model_.transition_logpdf(frame, t, 0, P, P, batch.prev(), nullptr, batch.cur(), out.data());
    return;
  }
  // Per call: the estimator's buffers are the caller thread's.
  std::unique_ptr<DensityEstimator> estimator = make_density_estimator(model_, *info_);
  const double* prev = batch.prev() + sde_offset_ * P;
  const double* cur = batch.cur() + sde_offset_ * P;
  if (!score || !adds_score_terms()) {
    estimator->estimate(frame, t, prev, cur, P, per, seed, first_id, out.data());
    return;
  }
  score->assign(static_cast<size_t>(estimator->gradient_size() * P), 0.0);
  auto* poisson = dynamic_cast<PoissonEstimator*>(estimator.get());
  if (poisson && poisson->exact_bridges(frame, t)) { // Martin (2022), appendix C.1
    estimator->estimate(frame, t, prev, cur, P, per, seed, first_id, out.data());
    poisson->gradient(frame, t, prev, cur, P, seed, first_id, score->data());
  } else {
    estimator->estimate(frame, t, prev, cur, P, per, seed, first_id, out.data(), nullptr,
                        score->data());
  }
}

void BackwardDensity::drawn_score_terms(const double* frame, int64_t t, const PairBatch& batch,
                                        uint64_t seed, uint64_t first_id,
                                        std::vector<double>& out) const {
  const int64_t P = batch.size();
  std::unique_ptr<DensityEstimator> estimator = make_density_estimator(model_, *info_);
  auto* poisson = dynamic_cast<PoissonEstimator*>(estimator.get());
  if (!poisson || !poisson->exact_bridges(frame, t))
    throw Error(
        fmt::format("paris: at t={} the score's term of the SDE {} needs exact diffusion "
                    "bridges (the General Poisson estimator with psi bounded above){}; "
                    "bis estimates it (--method bis)",
                    t, info_->sde->relation,
                    poisson ? ", which psi's bound at these parameters does not give" : ""));
  out.assign(static_cast<size_t>(estimator->gradient_size() * P), 0.0);
  poisson->gradient(frame, t, batch.prev() + sde_offset_ * P, batch.cur() + sde_offset_ * P, P,
                    seed, first_id, out.data());
}

double BackwardDensity::estimate_log_bound(const double* frame, int64_t t) const {
  if (!info_)
    return INFINITY;
  return make_density_estimator(model_, *info_)->log_bound(frame, t);
}

void BackwardDensity::use_estimator(const ModelInfo& info) {
  // Throws with the reason when it does not apply.
  const std::unique_ptr<DensityEstimator> estimator = make_density_estimator(model_, info);
  if (info.functionals_lack_sde_term && estimator->gradient_size() == 0) // the compiler refuses
    throw Error(fmt::format("the score's term of the SDE transition {} needs the gradient of the "
                            "log density, which the run's estimator cannot give: {}",
                            info.sde->relation, estimator->gradient_reason()));
  info_ = &info;
  sde_offset_ = info.state.at(info.sde->state).offset;
}

void throw_no_parent(int64_t t, int64_t j, bool support_hint) {
  throw Error(fmt::format("smooth: at t={} particle {} has zero transition density from every "
                          "particle at t={}{}",
                          t, j, t - 1,
                          support_hint ? ": the backward kernel is undefined (check the "
                                         "transition's support)"
                                       : ""));
}

void exact_backward_cumulative(const BackwardDensity& density, const double* frame, int64_t t,
                               int64_t N, const double* x_prev, const double* x_cur, int64_t j,
                               const double* W, double* bc, double* l, bool support_hint) {
  density.all(frame, t, N, x_prev, x_cur, j, bc, l);
  if (!(backward_weights(W, l, N) > 0))
    throw_no_parent(t, j, support_hint);
  for (int64_t i = 1; i < N; ++i)
    l[i] += l[i - 1];
}

void backward_term_sums(const ssm_model& model, const ModelInfo& info, const StatLayout& lay,
                        const double* frame, int64_t t, int64_t N, int64_t stride,
                        const double* x_prev, const double* bc, const double* y, const double* b,
                        double* terms, double* out) {
  model.functional_terms(frame, t, 0, N, stride, x_prev, nullptr, bc, y, terms);
  const auto nper = static_cast<int64_t>(lay.per_t_comp.size());
  for (int64_t k = 0; k < lay.nsum + nper; ++k) {
    const int64_t comp = k < lay.nsum ? lay.sum_comp[k] : lay.per_t_comp[k - lay.nsum];
    const double* row = terms + comp * stride;
    double a = 0;
    for (int64_t i = 0; i < N; ++i)
      if (b[i] > 0)
        a += b[i] * row[i];
    if (!std::isfinite(a))
      check_terms(terms, lay.nf, stride, b, 0, N, t, info);
    out[k] = a;
  }
}

RejectionSampler::RejectionSampler(const BackwardDensity& density, int64_t max_trials,
                                   bool support_hint)
    : density_(density), max_trials_(max_trials), support_hint_(support_hint),
      bc_(density.n_state() * density.stride()), l_(density.stride()), u_(density.stride()),
      cum_(density.stride()), idx_(density.stride()), anc_(density.stride()) {}

int64_t RejectionSampler::draw(const BackwardStep& s, uint32_t index, uint32_t draw_base, int64_t j,
                               int64_t& tries, int64_t& accepts, int64_t& exact) {
  const auto ut = static_cast<uint32_t>(s.t);
  const int64_t stride = density_.stride();
  // Estimated densities: a fresh estimate per proposal, on the particle's own streams.
  const uint64_t estimate_seed =
      mix_seed(mix_seed(s.seed ^ kBackwardEstimateKey) ^ mix_seed(index));
  if (!have_weights_ && std::isfinite(s.log_bound))
    for (int64_t trial = 0, batch = 4; trial < max_trials_; trial += batch, batch *= 2) {
      const int64_t count = std::min({batch, max_trials_ - trial, stride});
      for (int64_t m = 0; m < count; ++m) {
        double u0;
        philox_u01x2(s.seed, index, ut, kSiteBackward, draw_base + static_cast<uint32_t>(trial + m),
                     u0, u_[m]);
        idx_[m] = s.from_weights->draw(u0);
      }
      density_.some(s.frame, s.t, s.x_prev, s.x_cur, j, idx_.data(), count, bc_.data(), anc_.data(),
                    l_.data(), estimate_seed, draw_base + static_cast<uint64_t>(trial));
      for (int64_t m = 0; m < count; ++m) {
        ++tries;
        check_within_bound(l_[m], s.log_bound, s.t);
        if (accept(u_[m], l_[m] - s.log_bound)) {
          ++accepts;
          return idx_[m];
        }
      }
    }
  if (!have_weights_ && density_.estimated()) {
    // No exact draw from a kernel whose density is only estimated: W_i q^_i over all N with
    // fresh estimates, self-normalised (bis with K = N: a bias O(1/N), for the rare particle
    // whose proposals were all rejected).
    std::iota(idx_.begin(), idx_.begin() + s.N, int64_t{0});
    density_.some(s.frame, s.t, s.x_prev, s.x_cur, j, idx_.data(), s.N, bc_.data(), anc_.data(),
                  cum_.data(), mix_seed(estimate_seed + 1), 0);
    if (!(backward_weights(s.W, cum_.data(), s.N) > 0))
      throw_no_parent(s.t, j, support_hint_);
    for (int64_t i = 1; i < s.N; ++i)
      cum_[i] += cum_[i - 1];
    have_weights_ = true;
  }
  if (!have_weights_) {
    exact_backward_cumulative(density_, s.frame, s.t, s.N, s.x_prev, s.x_cur, j, s.W, bc_.data(),
                              cum_.data(), support_hint_);
    have_weights_ = true;
  }
  const double u =
      philox_u01(s.seed, index, ut, kSiteBackward, draw_base + static_cast<uint32_t>(max_trials_));
  ++exact;
  return draw_cumulative(cum_.data(), s.N, u);
}

void BackwardBlock::propose(const BackwardDensity& density, const BackwardStep& s, int64_t jb,
                            int64_t je, int64_t draws, int64_t starts, const int64_t* ancestors,
                            const EulerStep* euler, bool start_at_ancestor) {
  // Slots [0, starts) are the chains' start: j's ancestor (j itself without `ancestors`: no
  // resampling at this step), or proposals like the others; `first` slots hold the ancestor,
  // the `drawn` others are proposals.
  this->starts = starts;
  const int64_t first = start_at_ancestor ? starts : 0;
  first_drawn = first;
  nj = je - jb;
  per = starts + draws;
  const int64_t P = nj * per, drawn = per - first;
  pi.resize(P);
  pj.resize(P);
  index_u.resize(P);
  move_u.resize(P);
  const auto ut = static_cast<uint32_t>(s.t);
  for (int64_t d = 0; d < drawn; ++d)
    philox_u01x2_run(s.seed, static_cast<uint32_t>(jb), nj, ut, kSiteBackward,
                     static_cast<uint32_t>(d), &index_u[d * nj], &move_u[d * nj]);
  if (starts > 1) { // the uniforms that pick each particle's start, after the proposals'
    start_u.resize(nj);
    spare_u.resize(nj);
    philox_u01x2_run(s.seed, static_cast<uint32_t>(jb), nj, ut, kSiteBackward,
                     static_cast<uint32_t>(drawn), start_u.data(), spare_u.data());
  }
  if (euler)
    lm.assign(P, 0.0);
  else
    lm.clear();
  for (int64_t j = jb; j < je; ++j) {
    std::fill_n(&pj[(j - jb) * per], per, j);
    int64_t* row = &pi[(j - jb) * per];
    std::fill_n(row, first, ancestors ? ancestors[j] : j);
    if (euler && draw_by_euler(*euler, density, s, j, jb, first, drawn, row, &lm[(j - jb) * per]))
      continue;
    for (int64_t d = 0; d < drawn; ++d)
      row[first + d] = s.from_weights->draw(index_u[d * nj + (j - jb)]);
  }
  pairs.gather(density.n_state(), density.stride(), s.x_prev, s.x_cur, pi.data(), pj.data(), P);
  score.clear();
  density.pairs(s.frame, s.t, pairs, lp, s.seed, static_cast<uint64_t>(jb * per), per,
                density.adds_score_terms() && starts == 0 ? &score : nullptr);
}

bool BackwardBlock::draw_by_euler(const EulerStep& euler, const BackwardDensity& density,
                                  const BackwardStep& s, int64_t j, int64_t jb, int64_t starts,
                                  int64_t draws, int64_t* row, double* row_lm) {
  const int64_t N = s.N;
  euler_all.resize(N);
  cum.resize(N);
  euler.log_densities(s.x_cur + density.sde_offset() * density.stride() + j, density.stride(),
                      euler_all.data(), j);
  std::copy_n(euler_all.begin(), N, cum.begin());
  if (!(backward_weights(s.W, cum.data(), N) > 0)) // no particle with weight and an Euler law
    return false;                                  // (the caller draws from the filter weights)
  for (int64_t i = 1; i < N; ++i)
    cum[i] += cum[i - 1];
  for (int64_t c = 0; c < starts; ++c) // the chains' start, the ancestor
    row_lm[c] = euler_all[row[c]];
  for (int64_t d = 0; d < draws; ++d) {
    const int64_t i = draw_cumulative(cum.data(), N, index_u[d * nj + (j - jb)]);
    row[starts + d] = i;
    row_lm[starts + d] = euler_all[i];
  }
  return true;
}

void BackwardBlock::importance_weights(int64_t Nt) {
  idx.resize(nj * Nt);
  w.resize(nj * Nt);
  const double inv_Nt = 1.0 / static_cast<double>(Nt);
  for (int64_t jj = 0; jj < nj; ++jj) {
    const double* lj = lp.data() + jj * per;
    const double* mj = lm.empty() ? nullptr : lm.data() + jj * per;
    const int64_t* ij = &pi[jj * per];
    int64_t* out_i = &idx[jj * Nt];
    double* out_w = &w[jj * Nt];
    double top = -std::numeric_limits<double>::infinity();
    for (int64_t k = 0; k < Nt; ++k) { // the log weights, in out_w until normalised
      out_i[k] = ij[k];
      out_w[k] = mj ? lj[k] - mj[k] : lj[k];
      top = std::max(top, out_w[k]);
    }
    double total = 0;
    for (int64_t k = 0; k < Nt; ++k) {
      out_w[k] = std::isfinite(top) && !std::isnan(out_w[k]) ? std::exp(out_w[k] - top) : 0.0;
      total += out_w[k];
    }
    for (int64_t k = 0; k < Nt; ++k)
      out_w[k] = total > 0 ? out_w[k] / total : inv_Nt;
  }
}

void BackwardBlock::mcmc(int64_t Nt, int64_t S, int64_t& tries, int64_t& accepts) {
  const double inv_Nt = 1.0 / static_cast<double>(Nt);
  // Proposal slot m (after the starts) moves with the uniform of its draw, m - first_drawn.
  const int64_t M = nj * Nt, first = starts, uoff = first - first_drawn;
  idx.resize(M);
  w.resize(M);
  // The chains' log ratios are those of target over proposal: lp - lm with Euler proposals (an
  // independent Metropolis-Hastings step from W_i m to W_i f), lp with the filter weights'.
  if (!lm.empty())
    for (int64_t p = 0; p < nj * per; ++p)
      lp[p] -= lm[p];
  start.assign(nj, 0);
  if (starts > 1) { // slot c with probability proportional to exp(lp_c), the candidates even
    const std::vector<double> even(starts, 1.0);
    cum.resize(starts);
    for (int64_t jj = 0; jj < nj; ++jj) {
      std::copy_n(lp.begin() + jj * per, starts, cum.begin());
      if (!(backward_weights(even.data(), cum.data(), starts) > 0))
        continue; // no finite estimate among them: slot 0 (any finite proposal is accepted)
      for (int64_t c = 1; c < starts; ++c)
        cum[c] += cum[c - 1];
      start[jj] = draw_cumulative(cum.data(), starts, start_u[jj]);
    }
  }
  if (S == 1) {
    // Every chain makes one move from its start slot (j's ancestor) to slot first + k: the
    // ratios and decisions of the whole block in flat loops, draw k of particle j at k nj + j.
    log_ratio.resize(M);
    ratio.resize(M);
    for (int64_t k = 0; k < Nt; ++k)
      for (int64_t jj = 0; jj < nj; ++jj) // NaN stays NaN, and rejects
        log_ratio[k * nj + jj] = std::min(lp[jj * per + first + k] - lp[jj * per + start[jj]], 0.0);
    exp_run(log_ratio.data(), ratio.data(), M);
    // The outcome selects an index arithmetically: a branch on it (accepted about half the time)
    // would mispredict at every other move.
    int64_t moved = 0;
    const double *u = move_u.data() + uoff * nj, *r = ratio.data();
    const int64_t* from = pi.data();
    int64_t* to = idx.data();
    for (int64_t k = 0; k < Nt; ++k)
      for (int64_t jj = 0; jj < nj; ++jj) {
        const int64_t moves = u[k * nj + jj] < r[k * nj + jj], c = start[jj];
        moved += moves;
        to[jj * Nt + k] = from[jj * per + c + moves * (first + k - c)];
      }
    std::fill_n(w.begin(), M, inv_Nt);
    accepts += moved;
    tries += M;
    return;
  }
  for (int64_t jj = 0; jj < nj; ++jj) { // independent Metropolis-Hastings moves, S per draw
    const double* lj = lp.data() + jj * per;
    const int64_t* ij = &pi[jj * per];
    for (int64_t k = 0; k < Nt; ++k) {
      int64_t cur = start[jj];
      for (int64_t s = 0; s < S; ++s) {
        const int64_t m = first + k * S + s;
        const bool moves = accept_branch_free(move_u[(m - first_drawn) * nj + jj], lj[m] - lj[cur]);
        cur = moves ? m : cur;
        accepts += moves;
      }
      tries += S;
      idx[jj * Nt + k] = ij[cur];
      w[jj * Nt + k] = inv_Nt;
    }
  }
}

} // namespace ssm
