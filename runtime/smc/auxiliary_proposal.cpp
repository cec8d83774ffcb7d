// The auxiliary particle filter (Pitt & Shephard 1999): at each t > 0, resample with the weights
// times p(y_t | a prediction of x_t from each particle), then draw (from the transition, or the
// guided proposal) and correct the weights by that factor.
#include "smc/filter.h"
#include "smc/proposal.h"

#include <cmath>
#include <limits>

namespace ssm {

namespace {

class AuxiliaryProposal final : public Proposal {
public:
  AuxiliaryProposal(const ProposalContext& ctx, std::unique_ptr<Proposal> draws)
      : ctx_(ctx), draws_(std::move(draws)), kind_(lookahead_for(ctx.model)),
        pred_(ctx.info.n_state * ctx.stride), loglam_(ctx.stride, 0.0), aux_w_(ctx.N, 0.0) {}

  // First stage: resample with w_i lambda_i; the new particles start from log-weight
  // log(sum w lambda / sum w) - log lambda_{a_n}, and the increment is taken against log N.
  bool first_stage(const ProposalStep& s, const FirstStage& fs) override {
    const double log_mean_lambda = lookahead(s);
    for (int64_t i = 0; i < ctx_.N; ++i)
      aux_w_[i] = s.w[i] * std::exp(loglam_[i]);
    resample(ctx_.opt.resampling, aux_w_.data(), ctx_.N, ctx_.opt.seed, static_cast<uint32_t>(s.t),
             kSiteResample, fs.anc);
    for (int64_t n = 0; n < ctx_.N; ++n)
      fs.lw[n] = log_mean_lambda - loglam_[fs.anc[n]];
    return true;
  }
  Proposal& for_step(const ProposalStep& s) override { return draws_->for_step(s); }
  void draw(const ProposalStep& s, int64_t begin, int64_t end) override {
    draws_->draw(s, begin, end);
  }

private:
  // Fills loglam_ with log(lambda_i / max lambda) and returns log(sum_i w_i lambda_i / sum_i w_i)
  // on the same scale.
  double lookahead(const ProposalStep& s) {
    const int64_t N = ctx_.N, nb = ctx_.nb, stride = ctx_.stride, ns = ctx_.info.n_state;
    const double* prev = s.prev;
    const double *th = s.th, *y = s.y;
    const int64_t t = s.t;
    double* pred = pred_.data();
    double* loglam = loglam_.data();
    if (kind_ == Lookahead::User) {
      ctx_.pool.parallel_for(nb, [&](int64_t b) {
        const int64_t begin = b * kParticleBlock, end = std::min(N, begin + kParticleBlock);
        ctx_.model.lookahead(th, t, begin, end, stride, prev, y, pred);
        ctx_.model.obs_logpdf(th, t, begin, end, stride, pred, y, loglam);
      });
    } else if (kind_ == Lookahead::Mean) {
      ctx_.pool.parallel_for(nb, [&](int64_t b) {
        const int64_t begin = b * kParticleBlock, end = std::min(N, begin + kParticleBlock);
        std::vector<double> x(ns), mean(ns), cov(ns * ns);
        for (int64_t n = begin; n < end; ++n) {
          for (int64_t c = 0; c < ns; ++c)
            x[c] = prev[c * stride + n];
          ctx_.model.gaussian_moments(th, t, 1, x.data(), mean.data(), cov.data());
          for (int64_t c = 0; c < ns; ++c)
            pred[c * stride + n] = mean[c];
        }
      });
      ctx_.pool.parallel_for(nb, [&](int64_t b) {
        const int64_t begin = b * kParticleBlock, end = std::min(N, begin + kParticleBlock);
        ctx_.model.obs_logpdf(th, t, begin, end, stride, pred, y, loglam);
      });
    } else {
      // lambda_i = the average of p(y_t | x~) over kLookaheadDraws draws x~ from the transition: an
      // unbiased estimate of the predictive density p(y_t | x_{t-1}^i), less noisy than one draw.
      ctx_.pool.parallel_for(nb, [&](int64_t b) {
        const int64_t begin = b * kParticleBlock, end = std::min(N, begin + kParticleBlock);
        std::vector<double> one(stride);
        for (int64_t k = 0; k < kLookaheadDraws; ++k) {
          ctx_.model.transition_sample(
              th, ctx_.opt.seed ^ (kLookaheadSeedKey + static_cast<uint64_t>(k)), t, begin, end,
              stride, prev, nullptr, pred);
          ctx_.ranges.find_outside(b, pred, begin, end);
          ctx_.model.obs_logpdf(th, t, begin, end, stride, pred, y, k == 0 ? loglam : one.data());
          if (k > 0) // log(exp(a) + exp(b)), then the mean at the end
            for (int64_t n = begin; n < end; ++n) {
              const double hi = std::max(loglam[n], one[n]), lo = std::min(loglam[n], one[n]);
              loglam[n] = std::isinf(hi) ? hi : hi + std::log1p(std::exp(lo - hi));
            }
        }
        for (int64_t n = begin; n < end; ++n)
          loglam[n] -= std::log(static_cast<double>(kLookaheadDraws));
      });
      ctx_.ranges.check(t, "the look-ahead draw from the transition");
    }
    // Floor the first-stage factors at 10^-3 of the largest among particles of positive weight, so
    // no particle is excluded because its prediction explains y_t badly (any positive factor keeps
    // the filter consistent and its likelihood unbiased; a zero one would not).
    double top = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < N; ++i)
      if (s.w[i] > 0 && loglam[i] > top)
        top = loglam[i];
    if (!std::isfinite(top))
      top = 0; // no prediction explains y_t (or it is missing): plain resampling
    const double floor = std::log(1e-3);
    double sw = 0, swl = 0;
    for (int64_t i = 0; i < N; ++i) { // log(lambda_i / max lambda), in [log 1e-3, 0]
      loglam[i] = std::isnan(loglam[i]) ? floor : std::clamp(loglam[i] - top, floor, 0.0);
      sw += s.w[i];
      swl += s.w[i] * std::exp(loglam[i]);
    }
    return std::log(swl / sw); // the scale max lambda cancels between the two stages
  }

  const ProposalContext ctx_;
  std::unique_ptr<Proposal> draws_;
  Lookahead kind_;
  AlignedArray<double> pred_; // the predictions
  std::vector<double> loglam_, aux_w_;
};

} // namespace

std::unique_ptr<Proposal> make_auxiliary_proposal(const ProposalContext& ctx,
                                                  std::unique_ptr<Proposal> draws) {
  return std::make_unique<AuxiliaryProposal>(ctx, std::move(draws));
}

Lookahead lookahead_for(const ssm_model& model) {
  return model.lookahead          ? Lookahead::User
         : model.gaussian_moments ? Lookahead::Mean
                                  : Lookahead::Simulated;
}

const char* lookahead_name(Lookahead kind) {
  switch (kind) {
  case Lookahead::User:
    return "user";
  case Lookahead::Mean:
    return "mean";
  case Lookahead::Simulated:
    return "simulated";
  }
  return "?";
}

} // namespace ssm
