// online, paris and bis: forward-only smoothing of additive functionals alongside the filter.
//
// Each particle j at t carries a statistic tau_t^j, the estimate of E[sum_{s<=t} psi_s | x_t = x^j]
// given y_{0:t}; the functionals' estimates at T-1 are sum_j W_{T-1}^j tau_{T-1}^j. The methods
// differ in how tau_t^j averages tau_{t-1}^i + psi_t(x_{t-1}^i, x_t^j) over the backward kernel
// B(j, i) proportional to W_{t-1}^i f(x_t^j | x_{t-1}^i):
//   online  exactly, over all N particles (Del Moral, Doucet & Singh 2010): O(N^2) per step;
//   paris   over Ñ indices drawn from B(j, .) (Olsson & Westerborn 2017), by rejection from the
//           filter weights with the density bound, by Metropolis-Hastings moves, or exactly;
//   bis     over Ñ indices drawn from the filter weights W_{t-1}, self-normalised with the
//           transition density (Martin, Le Corff et al. 2022); no bound needed.
// Each method is a file of its own (online_smoother.cpp, paris_smoother.cpp, bis_smoother.cpp);
// this file holds the statistics they share and the driver, smooth_online(). Memory is O(N)
// whatever T. With --marginals the statistic also carries, for every step s <= t, the state, its
// square and the per-t functionals at s, which costs O(N T) memory.
#include "smoothing/online_stats.h"

#include "core/error.h"
#include "kernel/rng.h"

#include <fmt/format.h>

#include <chrono>
#include <numeric>

namespace ssm {

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

EulerLaws::EulerLaws(const OnlineContext& ctx, bool moves) : ctx_(ctx) {
  // auto: Euler proposals for an estimated density, where the method takes proposals from the
  // filter weights (bis; paris's Metropolis-Hastings moves, not its rejection sampling). Where
  // the estimator works in Lamperti's coordinate (sde/lamperti.h) the step is taken there.
  const BackwardProposal p = ctx.opt.backward_proposal;
  if (moves && (p == BackwardProposal::Euler ||
                (p == BackwardProposal::Automatic && ctx.density.estimated())))
    step_.emplace(ctx.model, ctx.info);
}

const EulerStep* EulerLaws::at(const OnlineStep& s, const char* who) {
  if (!step_)
    return nullptr;
  const int64_t N = ctx_.N, d = step_->dim(), off = ctx_.density.sde_offset();
  from_.resize(d * N);
  for (int64_t c = 0; c < d; ++c)
    for (int64_t i = 0; i < N; ++i)
      from_[c * N + i] = s.back.W[i] > 0 ? s.back.x_prev[(off + c) * ctx_.stride + i] : NAN;
  step_->evaluate(s.back.frame, s.back.t, from_.data(), N, who);
  if (step_->lamperti()) // the particles at t, whose densities bis asks for
    step_->targets(s.back.frame, s.back.t, s.back.x_cur + off * ctx_.stride, 1, N);
  return &*step_;
}

void add_estimated_density_details(const OnlineContext& ctx, std::string_view how,
                                   SmoothResult& r) {
  if (!ctx.density.estimated())
    return;
  r.details["transition_density"] =
      fmt::format("estimated: {} estimator, {}",
                  ctx.info.sde->estimator == "gpe" ? "General Poisson" : "parametrix", how);
  if (!ctx.opt.filter.random_weight) // the forward filter simulates by Euler-Maruyama
    r.details["euler_substeps"] = ctx.info.sde->steps;
}

void drawn_score_terms(const OnlineContext& ctx, const OnlineStep& s, int64_t jb,
                       const PairBatch& pairs, std::vector<double>& out) {
  ctx.density.drawn_score_terms(s.back.frame, s.back.t, pairs,
                                mix_seed(s.back.seed ^ kBackwardScoreKey),
                                static_cast<uint64_t>(jb * ctx.Nt), out);
  if (out.size() != static_cast<size_t>(ctx.nf * pairs.size()))
    throw Error("internal error: the SDE's score terms do not match the backward draws");
}

void update_from_block(const OnlineContext& ctx, const OnlineStep& s, int64_t jb, int64_t je,
                       BackwardBlock& block, std::vector<double>& step_q) {
  const int64_t nj = je - jb, Nt = ctx.Nt, nf = ctx.nf;
  const double* bterms = nullptr;
  if (nf > 0) {
    block.qj.resize(nj * Nt);
    for (int64_t j = jb; j < je; ++j)
      std::fill_n(&block.qj[(j - jb) * Nt], Nt, j);
    block.pairs.gather(ctx.ns, ctx.stride, s.back.x_prev, s.back.x_cur, block.idx.data(),
                       block.qj.data(), nj * Nt);
    double* terms = block.pairs.terms(ctx.model, s.back.frame, s.back.t, s.y, nf);
    if (ctx.density.adds_score_terms()) { // the SDE's term of the score, estimated per pair
      // bis keeps the proposals in order (idx = pi, per = Nt): rows k of the score line up.
      // paris's draws (a chain's states) get fresh exact-bridge estimates of their own.
      const bool drawn = block.starts > 0; // a chain's states (paris), not bis's proposals
      if (drawn)
        drawn_score_terms(ctx, s, jb, block.pairs, block.score);
      if ((!drawn && block.per != Nt) || block.score.size() != static_cast<size_t>(nf * nj * Nt))
        throw Error("internal error: the SDE's score terms do not match the backward draws");
      for (size_t k = 0; k < block.score.size(); ++k)
        terms[k] += block.score[k]; // row k of the score is theta component k
    }
    bterms = terms;
    // Every drawn pair of a particle of positive weight is used: a non-finite term is an error
    // (check_terms says which). A particle of weight 0 (its observation density 0, or a
    // relation's argument outside its domain) is never read again.
    bool finite = true;
    for (int64_t p = 0; p < nf * nj * Nt; ++p)
      finite &= std::isfinite(bterms[p]);
    if (!finite) {
      block.used.resize(nj * Nt);
      for (int64_t j = jb; j < je; ++j)
        std::fill_n(&block.used[(j - jb) * Nt], Nt, s.w_cur[j] > 0 ? 1.0 : 0.0);
      check_terms(bterms, nf, nj * Nt, block.used.data(), 0, nj * Nt, s.back.t, ctx.info);
    }
  }
  if (s.trace)
    s.trace->record(s.back.t, jb, je, block.idx.data(), block.w.data());
  add_backward_sample_block(ctx.lay, s.D, ctx.N, jb, je, Nt, block.idx.data(), block.w.data(),
                            bterms, s.back.x_cur, ctx.stride, s.slot, s.tau_next, s.tau, step_q);
}

void add_backward_sample(const OnlineContext& ctx, const OnlineStep& s, int64_t j,
                         const int64_t* idx, const double* wk, int64_t K, SampleScratch& scratch,
                         const double* sde, int64_t sde_stride) {
  const StatLayout& lay = ctx.lay;
  const int64_t N = ctx.N, ns = ctx.ns, stride = ctx.stride, nf = ctx.nf, nper = ctx.nper;
  const int64_t t = s.back.t;
  const double* tau = s.tau;
  double* tau_next = s.tau_next;
  std::vector<double>& step_q = scratch.step_q;
  std::fill(step_q.begin(), step_q.end(), 0.0);
  for (int64_t k = 0; k < K; ++k) {
    const int64_t i = idx[k];
    for (int64_t c = 0; c < s.D; ++c)
      tau_next[c * N + j] += wk[k] * tau[c * N + i];
    if (nf > 0) { // psi(i, j), component c at psi[c stride]
      scratch.anc[j] = i;
      ctx.model.functional_terms(s.back.frame, t, j, j + 1, stride, s.back.x_prev,
                                 scratch.anc.data(), s.back.x_cur, s.y, scratch.terms.data());
      double* psi = scratch.terms.data() + j;
      if (sde)
        for (int64_t c = 0; c < nf; ++c)
          psi[c * stride] += sde[c * sde_stride + k];
      for (int64_t c = 0; c < nf; ++c)
        if (!std::isfinite(psi[c * stride]))
          check_terms(scratch.terms.data(), nf, stride, s.w_cur, j, j + 1, t, ctx.info);
      for (int64_t c = 0; c < lay.nsum; ++c)
        tau_next[c * N + j] += wk[k] * psi[lay.sum_comp[c] * stride];
      for (int64_t c = 0; c < nper; ++c)
        step_q[2 * ns + c] += wk[k] * psi[lay.per_t_comp[c] * stride];
    }
  }
  lay.state_quantities(s.back.x_cur, j, stride, step_q.data());
  if (lay.marginals)
    for (int64_t k = 0; k < lay.per_step; ++k)
      tau_next[(s.slot + k) * N + j] = step_q[k];
}

namespace {

// tau_0^j = psi_0(x_0^j) (and with --marginals the quantities of step 0).
void start_statistics(const OnlineContext& ctx, const ParticleFilter& pf, std::vector<double>& tau,
                      int64_t D) {
  const StatLayout& lay = ctx.lay;
  const int64_t N = ctx.N, ns = ctx.ns, stride = ctx.stride, nf = ctx.nf;
  const double* x = pf.x();
  std::vector<double> terms0(std::max<int64_t>(nf, 1) * stride);
  const std::vector<double> nan_prev(ns * stride, NAN);
  tau.assign(D * N, 0.0);
  if (nf > 0) {
    ctx.model.functional_terms(pf.frame(), 0, 0, N, stride, nan_prev.data(), nullptr, x, pf.y(),
                               terms0.data());
    check_terms(terms0.data(), nf, stride, pf.weights(), 0, N, 0, ctx.info);
  }
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < lay.nsum; ++k)
      tau[k * N + n] = terms0[lay.sum_comp[k] * stride + n];
    lay.step_quantities(x, n, stride, terms0.data(), n, stride, tau.data() + lay.nsum * N + n, N);
  }
}

// sum_n w_n row_n / W over the particles of positive weight (W the weights' sum).
double weighted_mean(const std::vector<double>& w, double W, const double* row) {
  double a = 0;
  for (size_t n = 0; n < w.size(); ++n)
    if (w[n] > 0)
      a += w[n] * row[n];
  return a / W;
}

// Estimates: sum_j W_{T-1}^j tau^j.
void store_estimates(const OnlineContext& ctx, int64_t T, int64_t D, const std::vector<double>& w,
                     const std::vector<double>& tau, SmoothResult& r) {
  const StatLayout& lay = ctx.lay;
  const int64_t N = ctx.N;
  std::vector<double> est(D, 0.0);
  if (T > 0) {
    const double W = std::accumulate(w.begin(), w.end(), 0.0);
    for (int64_t k = 0; k < D; ++k)
      est[k] = weighted_mean(w, W, tau.data() + k * N);
  }
  lay.store_sums(est.data(), r, ctx.info);
  if (lay.marginals)
    for (int64_t t = 0; t < T; ++t)
      lay.store_estimates(t, est.data() + lay.nsum + t * lay.per_step, r, ctx.info);
}

// The observer's estimates at t: sum_j W_t^j tau_t^j of each `sum_t` component, in the
// functionals' layout (NaN elsewhere).
void running_sums(const OnlineContext& ctx, const std::vector<double>& w,
                  const std::vector<double>& tau, std::vector<double>& sums) {
  const StatLayout& lay = ctx.lay;
  const int64_t N = ctx.N;
  sums.assign(ctx.info.n_functional, NAN);
  const double W = std::accumulate(w.begin(), w.end(), 0.0);
  for (int64_t k = 0; k < lay.nsum; ++k)
    sums[lay.sum_comp[k]] = weighted_mean(w, W, tau.data() + k * N);
}

std::unique_ptr<OnlineMethod> make_method(const OnlineContext& ctx) {
  switch (ctx.opt.method) {
  case SmoothMethod::Online:
    return make_online_exact(ctx);
  case SmoothMethod::Paris:
    return make_paris(ctx);
  case SmoothMethod::Bis:
    return make_bis(ctx);
  default:
    throw Error("internal error: no backward sampler for this method");
  }
}

} // namespace

SmoothResult smooth_online(const ssm_model& model, const ModelInfo& info,
                           const std::vector<double>& fixed, const ObsData& data,
                           const SmoothOptions& opt, ThreadPool& pool,
                           const OnlineObserver& observer, BackwardTrace* trace) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t T = data.T, N = opt.filter.particles, ns = info.n_state;
  const StatLayout lay(info, opt.marginals);
  SmoothResult r = make_result(info, opt.method, T, N, opt.marginals);
  FilterOptions filter_options = opt.filter;
  filter_options.history = false; // only the log-likelihood is used: memory stays O(N)
  filter_options.moments = false;
  ParticleFilter pf(model, info, fixed, data, filter_options, pool);
  const int64_t stride = pf.stride();
  BackwardDensity density(model, ns, stride);
  if (!info.transition_tractable && info.sde) // bis or paris, by their checks: an SDE's estimate
    density.use_estimator(info);
  const OnlineContext ctx{model,
                          info,
                          opt,
                          pool,
                          lay,
                          density,
                          N,
                          ns,
                          stride,
                          lay.nf,
                          static_cast<int64_t>(lay.per_t_comp.size()),
                          opt.backward_samples,
                          1.0 / static_cast<double>(opt.backward_samples)};
  const std::unique_ptr<OnlineMethod> method = make_method(ctx);

  // Statistics, SoA: component k of particle n at [k * N + n].
  std::vector<double> tau, tau_next;
  std::vector<double> w_prev(N);
  AliasTable from_weights;  // proposals of paris' rejection sampling and bis' indices
  std::vector<double> sums; // the observer's estimates
  int64_t D = 0;
  StepTimer timer;
  while (timer.step(pf)) {
    const int64_t t = pf.t();
    if (t == 0) {
      D = lay.nsum + lay.per_step;
      start_statistics(ctx, pf, tau, D);
    } else {
      const int64_t D_next = D + lay.per_step;
      tau_next.assign(D_next * N, 0.0);
      OnlineStep s{{pf.frame(), t, N, pf.x_prev(), pf.x(), w_prev.data(), &from_weights, NAN,
                    opt.filter.seed},
                   pf.y(),
                   pf.weights(),
                   pf.ancestors(),
                   D,
                   lay.nsum + t * lay.per_step, // where step t's quantities go
                   tau.data(),
                   tau_next.data(),
                   trace};
      if (trace)
        trace->keep_particles(t - 1, s.back.x_prev, stride);
      s.back.log_bound = method->log_bound(s.back.frame, t, s.back.x_prev);
      method->step(s);
      std::swap(tau, tau_next);
      D = D_next;
    }
    // The filter weights at t, for the next step's backward kernel.
    std::copy(pf.weights(), pf.weights() + N, w_prev.begin());
    if (method->draws_from_weights())
      from_weights.build(w_prev.data(), N);
    if (observer) {
      running_sums(ctx, w_prev, tau, sums);
      observer(pf, sums.data());
    }
  }
  if (trace && T > 0) {
    trace->keep_particles(T - 1, pf.x(), stride);
    trace->last_weights = w_prev;
  }
  store_estimates(ctx, T, D, w_prev, tau, r);
  r.log_likelihood = pf.result().log_likelihood;
  r.details = {{"backward_samples", opt.method == SmoothMethod::Online ? N : ctx.Nt},
               {"memory_statistics_per_particle", D}};
  method->details(r);
  timer.finish(r, start);
  return r;
}

} // namespace ssm
