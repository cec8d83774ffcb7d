// The guided filter's proposal: at each t > 0 with y_t fully observed, particles are drawn from the
// model's `proposal` (proposal_sample kernel) and weighted by p(y_t | x_t) p(x_t | x_{t-1}) /
// q(x_t | x_{t-1}, y_t); a step with a missing observation draws from the transition.
#include "smc/filter.h"
#include "smc/proposal.h"

#include <cmath>
#include <limits>

namespace ssm {

namespace {

class GuidedProposal final : public Proposal {
public:
  explicit GuidedProposal(const ProposalContext& ctx)
      : model_(ctx.model), n_obs_(ctx.info.n_obs), seed_(ctx.opt.seed),
        bootstrap_(ctx.model, ctx.opt), logq_(ctx.stride, 0.0), logf_(ctx.stride, 0.0) {}

  Proposal& for_step(const ProposalStep& s) override {
    const bool observed = std::none_of(s.y, s.y + n_obs_, [](double v) { return std::isnan(v); });
    return observed ? static_cast<Proposal&>(*this) : bootstrap_;
  }

  void draw(const ProposalStep& s, int64_t begin, int64_t end) override {
    model_.proposal_sample(s.th, seed_, s.t, begin, end, s.stride, s.prev, s.ancestors, s.y, s.cur,
                           logq_.data());
  }

  void correct(const ProposalStep& s, int64_t begin, int64_t end, double* inc) override {
    double* logq = logq_.data();
    double* logf = logf_.data();
    model_.transition_logpdf(s.th, s.t, begin, end, s.stride, s.prev, s.ancestors, s.cur, logf);
    for (int64_t n = begin; n < end; ++n) // a draw q says is impossible gets weight 0
      inc[n] += std::isinf(logq[n]) && logq[n] < 0 ? -std::numeric_limits<double>::infinity()
                                                   : logf[n] - logq[n];
  }

  const char* drawn_by() const override { return "the proposal"; }

private:
  const ssm_model& model_;
  int64_t n_obs_;
  uint64_t seed_;
  BootstrapProposal bootstrap_;
  std::vector<double> logq_, logf_; // the proposal and transition log-densities
};

} // namespace

std::unique_ptr<Proposal> make_guided_proposal(const ProposalContext& ctx) {
  return std::make_unique<GuidedProposal>(ctx);
}

} // namespace ssm
