// The proposal interface's shared pieces: the integer-range check of drawn particles, the
// bootstrap proposal (the transition) and the choice of proposal from the filter options.
#include "smc/proposal.h"

#include "core/error.h"
#include "smc/filter.h"

#include <fmt/format.h>

namespace ssm {

RangeCheck::RangeCheck(const ModelInfo& info, int64_t blocks, int64_t stride)
    : stride_(stride), ranges_(integer_ranges(info.state)), outside_(blocks) {}

void RangeCheck::find_outside(int64_t block, const double* x, int64_t begin, int64_t end) {
  if (ranges_.empty() || outside_[block].particle >= 0)
    return;
  const auto [n, r] = first_outside(ranges_, x, begin, end, stride_);
  if (n >= 0)
    outside_[block] = {n, r, x[ranges_[r].component * stride_ + n]};
}

void RangeCheck::check(int64_t t, const char* drawn_by) const {
  for (const Outside& o : outside_) // blocks in particle order: the first particle overall
    if (o.particle >= 0)
      throw Error(out_of_range_message("filter", ranges_[o.range], o.value, t,
                                       fmt::format("{} of particle {}", drawn_by, o.particle)));
}

BootstrapProposal::BootstrapProposal(const ssm_model& model, const FilterOptions& opt)
    : model_(model), seed_(opt.seed) {}

void BootstrapProposal::draw(const ProposalStep& s, int64_t begin, int64_t end) {
  model_.transition_sample(s.th, seed_, s.t, begin, end, s.stride, s.prev, s.ancestors, s.cur);
}

std::unique_ptr<Proposal> make_proposal(const ProposalContext& ctx) {
  if (ctx.opt.random_weight)
    return make_random_weight_proposal(ctx);
  std::unique_ptr<Proposal> draws = ctx.opt.guided
                                        ? make_guided_proposal(ctx)
                                        : std::make_unique<BootstrapProposal>(ctx.model, ctx.opt);
  return ctx.opt.auxiliary ? make_auxiliary_proposal(ctx, std::move(draws)) : std::move(draws);
}

} // namespace ssm
