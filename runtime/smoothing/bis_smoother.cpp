// bis (Martin, Le Corff et al. 2022): tau_t^j averages tau_{t-1}^i + psi_t(i, j) over Ñ indices
// drawn from the filter weights W_{t-1}, self-normalised with the transition density; no bound
// needed. The density enters only through BackwardDensity, so a positive unbiased estimate of it
// can replace the exact one for models whose transition density is intractable. The indices
// may instead be drawn from the filter weights times an SDE's one-step Euler density
// (BackwardProposal::Euler), the weights then estimate / Euler density.
#include "smoothing/online_stats.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>

namespace ssm {

namespace {

class Bis final : public OnlineMethod {
public:
  explicit Bis(const OnlineContext& ctx) : ctx_(ctx) {
    const BackwardProposal p = ctx.opt.backward_proposal;
    if (p == BackwardProposal::Euler ||
        (p == BackwardProposal::Automatic && ctx.density.estimated()))
      euler_.emplace(ctx.model, ctx.info);
  }

  void step(const OnlineStep& s) override {
    if (euler_) { // the laws from every particle at t-1, shared by the blocks
      const int64_t N = ctx_.N, d = euler_->dim(), off = ctx_.density.sde_offset();
      from_.resize(d * N);
      for (int64_t c = 0; c < d; ++c)
        for (int64_t i = 0; i < N; ++i) // a particle of weight 0 is never a parent: no law
          from_[c * N + i] = s.back.W[i] > 0 ? s.back.x_prev[(off + c) * ctx_.stride + i] : NAN;
      euler_->evaluate(s.back.frame, s.back.t, from_.data(), N, "bis (--backward-proposal euler)");
    }
    const EulerStep* euler = euler_ ? &*euler_ : nullptr;
    ctx_.pool.parallel_for(ctx_.blocks(), [&](int64_t b) {
      const int64_t jb = b * kOnlineBlock, je = std::min(ctx_.N, jb + kOnlineBlock);
      // Kept per thread across blocks and steps (see paris' mcmc).
      static thread_local BackwardBlock block;
      std::vector<double> step_q(std::max<int64_t>(ctx_.lay.per_step, 1));
      block.propose(ctx_.density, s.back, jb, je, ctx_.Nt, false, s.ancestors, euler);
      block.importance_weights(ctx_.Nt);
      update_from_block(ctx_, s, jb, je, block, step_q);
    });
  }

  void details(SmoothResult& r) const override {
    r.details["backward_proposal"] = euler_ ? "euler" : "filter";
    if (!ctx_.density.estimated())
      return;
    r.details["transition_density"] = fmt::format(
        "estimated: {} estimator, positive by Wald's identity within each particle's backward "
        "draws",
        ctx_.info.sde->estimator == "gpe" ? "General Poisson" : "parametrix");
    if (!ctx_.opt.filter.random_weight) // the forward filter simulates by Euler-Maruyama
      r.details["euler_substeps"] = ctx_.info.sde->steps;
  }

private:
  const OnlineContext& ctx_;
  std::optional<EulerStep> euler_; // with Euler proposals
  std::vector<double> from_;       // the SDE state at t-1, component-major
};

} // namespace

std::unique_ptr<OnlineMethod> make_bis(const OnlineContext& ctx) {
  return std::make_unique<Bis>(ctx);
}

} // namespace ssm
