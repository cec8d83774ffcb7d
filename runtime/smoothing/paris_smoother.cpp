// paris (Olsson & Westerborn 2017): tau_t^j averages tau_{t-1}^i + psi_t(i, j) over Ñ indices
// drawn from the backward kernel B(j, .): by rejection from the filter weights with the density
// bound (exact fallback), by Metropolis-Hastings moves from j's ancestor (batched over a block),
// or exactly (O(N) per draw). For an SDE, by rejection with a fresh estimate of the density per
// proposal and the estimates' bound (pseudo-marginal PaRIS, Gloaguen, Le Corff & Olsson 2022;
// Martin 2022, 7.3.3), whose fallback self-normalises estimates over all N; or, where the
// estimates have no bound, by pseudo-marginal Metropolis-Hastings moves (Martin 2022, end of
// 7.3.3): each state keeps the estimate it was accepted with, so the moves leave the backward
// kernel invariant once a chain is at stationarity; their proposals come from the filter
// weights times the one-step Euler density by default (as bis's). The draws are
// backward_kernel.h's.
#include "smoothing/online_stats.h"

#include "core/error.h"
#include "kernel/rng.h"
#include "smc/filter_methods.h"

#include <fmt/format.h>

#include <optional>

namespace ssm {

namespace {

class Paris final : public OnlineMethod {
public:
  explicit Paris(const OnlineContext& ctx)
      : ctx_(ctx), rejection_(ctx.opt.backward == BackwardSampling::Rejection),
        mcmc_(ctx.opt.backward == BackwardSampling::Mcmc),
        // The bootstrap filter's ancestors are draws from the backward kernel; after another
        // filter an estimated density's chains start from proposals (smooth.cpp refuses the
        // others).
        start_at_ancestor_(!ctx.density.estimated() || is_bootstrap_filter(ctx.opt.filter)),
        max_trials_(ctx.opt.max_trials), euler_(ctx, mcmc_) {
    // Each particle's proposals are counted on one 32-bit Philox counter.
    if (rejection_ && max_trials_ >= (int64_t{1} << 32) / ctx.Nt - 1)
      throw Error(fmt::format("paris: {} backward samples of up to {} proposals each exceed a "
                              "particle's 2^32 random draws (lower --max-trials)",
                              ctx.Nt, max_trials_));
  }

  double log_bound(const double* frame, int64_t t, const double* x_prev) override {
    if (!rejection_)
      return NAN;
    // An SDE's estimates have a bound of their own (pseudo-marginal PaRIS).
    const double lb = ctx_.density.estimated()
                          ? ctx_.density.estimate_log_bound(frame, t)
                          : transition_log_bound(ctx_.model, frame, t, ctx_.N, ctx_.stride, x_prev,
                                                 bound_scratch_);
    if (ctx_.density.estimated() && !std::isfinite(lb))
      throw Error(fmt::format("smooth --method paris: at t={} the density estimates of {} have no "
                              "finite bound for these parameters",
                              t, ctx_.info.sde->relation));
    bounds_.add(lb);
    return lb;
  }

  void step(const OnlineStep& s) override {
    counts_.reset(ctx_.blocks());
    euler_step_ = euler_.at(s, "paris (--backward-proposal euler)");
    ctx_.pool.parallel_for(ctx_.blocks(), [&](int64_t b) {
      const int64_t jb = b * kOnlineBlock, je = std::min(ctx_.N, jb + kOnlineBlock);
      if (mcmc_)
        mcmc_block(s, b, jb, je);
      else
        one_at_a_time_block(s, b, jb, je);
    });
    counts_.collect();
  }

  void details(SmoothResult& r) const override {
    r.details["backward"] = rejection_ ? "rejection" : mcmc_ ? "mcmc" : "exact";
    if (mcmc_) {
      r.details["mcmc_steps"] = ctx_.opt.mcmc_steps;
      r.details["backward_proposal"] = euler_.used() ? "euler" : "filter";
    }
    if (mcmc_ && ctx_.density.estimated()) {
      r.details["start_estimates"] = ctx_.opt.start_estimates;
      r.details["chain_start"] = start_at_ancestor_ ? "ancestor" : "proposals";
    }
    r.details["proposals"] = counts_.total_tries;
    r.details["acceptance_rate"] = counts_.acceptance_rate();
    // With estimated densities the fallback is self-normalised over all N, not exact.
    r.details[ctx_.density.estimated() ? "fallback_draws" : "exact_draws"] = counts_.total_exact;
    if (rejection_)
      r.details["log_bound"] = bounds_.json();
    if (!ctx_.density.estimated())
      return;
    const ModelInfo::Sde& sde = *ctx_.info.sde;
    add_estimated_density_details(
        ctx_,
        rejection_ ? "positive and bounded: a fresh estimate per proposal, accepted with "
                     "probability estimate / bound"
        : sde.estimator == "gpe" && sde.gpe_positive
            ? "positive: a move is accepted with probability min(1, proposed estimate / "
              "current estimate)"
            : "positive by Wald's identity within each particle's start estimates and "
              "proposals together; a move is accepted with probability min(1, proposed "
              "estimate / current estimate)",
        r);
  }

private:
  // mcmc fixes its proposals before evaluating anything: the whole block's pairs go through one
  // kernel call each for the density and for the functionals' terms.
  void mcmc_block(const OnlineStep& s, int64_t b, int64_t jb, int64_t je) {
    // Kept per thread across blocks and steps: these grow with the block's pairs (64 Ñ S), and
    // allocating them afresh each time would dominate.
    static thread_local BackwardBlock block;
    std::vector<double> step_q(std::max<int64_t>(ctx_.lay.per_step, 1));
    const int64_t S = ctx_.opt.mcmc_steps;
    const int64_t starts = ctx_.density.estimated() ? ctx_.opt.start_estimates : 1;
    block.propose(ctx_.density, s.back, jb, je, ctx_.Nt * S, starts, s.ancestors, euler_step_,
                  start_at_ancestor_);
    block.mcmc(ctx_.Nt, S, counts_.tries[b], counts_.accepts[b]);
    update_from_block(ctx_, s, jb, je, block, step_q);
  }

  // Rejection (where the step has a finite bound) or exact draws, one particle at a time; then
  // the statistics, after the score's SDE terms of the block's drawn pairs (one estimator call).
  void one_at_a_time_block(const OnlineStep& s, int64_t b, int64_t jb, int64_t je) {
    const int64_t N = ctx_.N, Nt = ctx_.Nt, stride = ctx_.stride, nj = je - jb;
    const bool reject_here = std::isfinite(s.back.log_bound);
    static thread_local BlockDraws draws; // grows with the block's draws, kept across steps
    draws.idx.resize(nj * Nt);
    SampleScratch scratch(ctx_);
    const std::vector<double> wk(Nt, ctx_.inv_Nt);
    std::vector<double> bc(reject_here ? 0 : ctx_.ns * stride), l(reject_here ? 0 : stride);
    std::optional<RejectionSampler> sampler;
    if (reject_here)
      sampler.emplace(ctx_.density, max_trials_, false);
    const auto ut = static_cast<uint32_t>(s.back.t);
    const uint64_t seed = s.back.seed;
    for (int64_t j = jb; j < je; ++j) {
      const auto uj = static_cast<uint32_t>(j);
      int64_t* idx = &draws.idx[(j - jb) * Nt];
      if (reject_here) {
        sampler->next_particle();
        for (int64_t k = 0; k < Nt; ++k)
          idx[k] = sampler->draw(s.back, uj, static_cast<uint32_t>(k * (max_trials_ + 1)), j,
                                 counts_.tries[b], counts_.accepts[b], counts_.exact[b]);
      } else {
        exact_backward_cumulative(ctx_.density, s.back.frame, s.back.t, N, s.back.x_prev,
                                  s.back.x_cur, j, s.back.W, bc.data(), l.data(), false);
        for (int64_t k = 0; k < Nt; ++k)
          idx[k] = draw_cumulative(
              l.data(), N, philox_u01(seed, uj, ut, kSiteBackward, static_cast<uint32_t>(k)));
        counts_.exact[b] += Nt;
      }
    }
    const double* sde = nullptr;
    if (ctx_.nf > 0 && ctx_.density.adds_score_terms()) {
      draws.qj.resize(nj * Nt);
      for (int64_t j = jb; j < je; ++j)
        std::fill_n(&draws.qj[(j - jb) * Nt], Nt, j);
      draws.pairs.gather(ctx_.ns, stride, s.back.x_prev, s.back.x_cur, draws.idx.data(),
                         draws.qj.data(), nj * Nt);
      drawn_score_terms(ctx_, s, jb, draws.pairs, draws.sde);
      sde = draws.sde.data();
    }
    if (s.trace)
      s.trace->record(s.back.t, jb, je, draws.idx.data(), nullptr);
    for (int64_t j = jb; j < je; ++j)
      add_backward_sample(ctx_, s, j, &draws.idx[(j - jb) * Nt], wk.data(), Nt, scratch,
                          sde ? sde + (j - jb) * Nt : nullptr, nj * Nt);
  }

  // The one-at-a-time path's draws of a block, and the score's SDE terms of its pairs.
  struct BlockDraws {
    std::vector<int64_t> idx, qj;
    std::vector<double> sde;
    PairBatch pairs;
  };

  const OnlineContext& ctx_;
  const bool rejection_, mcmc_, start_at_ancestor_;
  const int64_t max_trials_;
  EulerLaws euler_; // the moves' proposals from W_i times the Euler density, when used
  const EulerStep* euler_step_ = nullptr; // this step's laws
  std::vector<double> bound_scratch_;
  BoundRange bounds_;
  BackwardCounts counts_;
};

} // namespace

std::unique_ptr<OnlineMethod> make_paris(const OnlineContext& ctx) {
  return std::make_unique<Paris>(ctx);
}

} // namespace ssm
