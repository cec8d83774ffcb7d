// bis (Martin, Le Corff et al. 2022): tau_t^j averages tau_{t-1}^i + psi_t(i, j) over Ñ indices
// drawn from the filter weights W_{t-1}, self-normalised with the transition density; no bound
// needed. The density enters only through BackwardDensity, so a positive unbiased estimate of it
// can replace the exact one for models whose transition density is intractable. The indices
// may instead be drawn from the filter weights times an SDE's one-step Euler density
// (BackwardProposal::Euler), the weights then estimate / Euler density.
#include "smoothing/online_stats.h"

#include <cmath>
#include <optional>

namespace ssm {

namespace {

class Bis final : public OnlineMethod {
public:
  explicit Bis(const OnlineContext& ctx) : ctx_(ctx), euler_(ctx, true) {}

  void step(const OnlineStep& s) override {
    const EulerStep* euler = euler_.at(s, "bis (--backward-proposal euler)");
    ctx_.pool.parallel_for(ctx_.blocks(), [&](int64_t b) {
      const int64_t jb = b * kOnlineBlock, je = std::min(ctx_.N, jb + kOnlineBlock);
      // Kept per thread across blocks and steps (see paris' mcmc).
      static thread_local BackwardBlock block;
      std::vector<double> step_q(std::max<int64_t>(ctx_.lay.per_step, 1));
      block.propose(ctx_.density, s.back, jb, je, ctx_.Nt, 0, s.ancestors, euler);
      block.importance_weights(ctx_.Nt);
      update_from_block(ctx_, s, jb, je, block, step_q);
    });
  }

  void details(SmoothResult& r) const override {
    r.details["backward_proposal"] = euler_.used() ? "euler" : "filter";
    add_estimated_density_details(
        ctx_, "positive by Wald's identity within each particle's backward draws", r);
  }

private:
  const OnlineContext& ctx_;
  EulerLaws euler_; // with Euler proposals
};

} // namespace

std::unique_ptr<OnlineMethod> make_bis(const OnlineContext& ctx) {
  return std::make_unique<Bis>(ctx);
}

} // namespace ssm
