// The random-weight filter's proposal (Fearnhead, Papaspiliopoulos, Roberts & Stuart 2010; Martin
// 2022, section 7.4.1) for an SDE transition, whose density has no closed form: particles are drawn
// from a law whose density is known -- the model's `proposal` when y_t is observed and the model
// has one, else one Euler-Maruyama step over the whole dt -- and weighted by
// q^(x_{t-1}, x_t) g(y_t | x_t) / p(x_t | x_{t-1}), q^ a General Poisson estimate of the transition
// density. The estimates are positive and unbiased (psi bounded above), so the filter has no
// discretisation error and its likelihood estimate stays unbiased.
#include "core/error.h"
#include "kernel/distributions.h"
#include "kernel/rng.h"
#include "sde/density_estimator.h"
#include "sde/diffusion_terms.h"
#include "smc/filter.h"
#include "smc/proposal.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace ssm {

std::string random_weight_problem(const ssm_model& model, const ModelInfo& info) {
  if (!info.sde)
    return "the model has no SDE transition (its transition density is known: use bootstrap)";
  if (std::string why = density_estimator_problem(model, info); !why.empty())
    return fmt::format("no estimator of the density of the SDE {} applies: {}", info.sde->relation,
                       why);
  if (info.sde->estimator != "gpe")
    return fmt::format("the {} estimates of the density of the SDE {} are signed: made positive "
                       "by Wald's identity they would bias the filter's weights and likelihood "
                       "(bis weighs such estimates)",
                       info.sde->estimator, info.sde->relation);
  if (!info.sde->gpe_positive)
    return fmt::format("psi of the SDE {} has no upper bound the compiler could find, so the "
                       "General Poisson estimates are not positive by construction (bis weighs "
                       "such estimates, made positive by Wald's identity)",
                       info.sde->relation);
  if (info.n_state != info.sde->dim)
    return fmt::format("the SDE {} is not the model's whole state", info.sde->relation);
  return {};
}

namespace {

class RandomWeightProposal final : public Proposal {
public:
  explicit RandomWeightProposal(const ProposalContext& ctx)
      : model_(ctx.model), info_(ctx.info), n_obs_(ctx.info.n_obs), seed_(ctx.opt.seed),
        estimator_seed_(mix_seed(ctx.opt.seed ^ kRandomWeightSeedKey)), logp_(ctx.stride, 0.0) {
    if (std::string why = random_weight_problem(ctx.model, ctx.info); !why.empty())
      throw Error(fmt::format("filter --method random-weight: {}", why));
  }

  Proposal& for_step(const ProposalStep& s) override {
    guided_ = model_.proposal_sample &&
              std::none_of(s.y, s.y + n_obs_, [](double v) { return std::isnan(v); });
    return *this;
  }

  void draw(const ProposalStep& s, int64_t begin, int64_t end) override {
    if (guided_) {
      model_.proposal_sample(s.th, seed_, s.t, begin, end, s.stride, s.prev, s.ancestors, s.y,
                             s.cur, logp_.data());
      return;
    }
    // One Euler-Maruyama step over dt from each particle's ancestor: a Gaussian draw.
    std::vector<double> from = ancestors_of(s, begin, end);
    DiffusionTerms terms(model_, info_); // per call: its buffers are the calling thread's
    terms.evaluate(s.th, s.t, from.data(), end - begin);
    for (int64_t n = begin; n < end; ++n) {
      const int64_t k = n - begin;
      if (!std::isfinite(from[k])) { // a path that diverged (weight 0): it stays so
        s.cur[n] = NAN;
        logp_[n] = -std::numeric_limits<double>::infinity();
        continue;
      }
      const double dt = terms.dt(k);
      const double mean = from[k] + terms.drift(k) * dt;
      const double sd = std::fabs(terms.coefficient(k)) * std::sqrt(dt);
      if (!(std::isfinite(mean) && std::isfinite(sd) && sd > 0))
        throw Error(fmt::format("filter --method random-weight: at t={} the Euler step of {} from "
                                "{} has mean {} and standard deviation {}",
                                s.t, info_.sde->relation, from[k], mean, sd));
      const double x =
          mean + sd * sample_std_normal(seed_, static_cast<uint32_t>(n), static_cast<uint32_t>(s.t),
                                        kSiteEulerProposal);
      s.cur[n] = x;
      logp_[n] = lpdf_normal(x, mean, sd);
    }
  }

  void correct(const ProposalStep& s, int64_t begin, int64_t end, double* inc) override {
    std::vector<double> from = ancestors_of(s, begin, end), log_q(end - begin);
    std::unique_ptr<DensityEstimator> estimator = make_density_estimator(model_, info_);
    // One estimate per particle (sets of 1): positive by construction, checked below (a Wald
    // round would make it positive only up to a factor of its own: a biased weight).
    EstimatorCounts counts;
    estimator->estimate(s.th, s.t, from.data(), s.cur + begin, end - begin, 1, estimator_seed_,
                        static_cast<uint64_t>(begin), log_q.data(), &counts);
    if (!estimator->positive())
      throw Error(fmt::format("filter --method random-weight: at t={} psi of {} has no finite "
                              "upper bound for these parameters, so the General Poisson "
                              "estimates are not positive by construction",
                              s.t, info_.sde->relation));
    if (counts.extra_rounds > 0)
      throw Error(fmt::format("filter --method random-weight: at t={} a General Poisson estimate "
                              "of {} was not positive: psi exceeded the upper bound the compiler "
                              "derived (a wrong bound, or rounding at a tight one)",
                              s.t, info_.sde->relation));
    for (int64_t n = begin; n < end; ++n) // a draw the proposal says is impossible: weight 0
      inc[n] += std::isinf(logp_[n]) && logp_[n] < 0 ? -std::numeric_limits<double>::infinity()
                                                     : log_q[n - begin] - logp_[n];
  }

  const char* drawn_by() const override { return guided_ ? "the proposal" : "the Euler proposal"; }

private:
  // The SDE's values (the whole state) at the ancestors of particles [begin, end).
  static std::vector<double> ancestors_of(const ProposalStep& s, int64_t begin, int64_t end) {
    std::vector<double> out(end - begin);
    for (int64_t n = begin; n < end; ++n)
      out[n - begin] = s.prev[s.ancestors ? s.ancestors[n] : n];
    return out;
  }

  const ssm_model& model_;
  const ModelInfo& info_;
  int64_t n_obs_;
  uint64_t seed_, estimator_seed_;
  bool guided_ = false;      // this step draws from the model's proposal
  std::vector<double> logp_; // the proposal's log-density of each draw
};

} // namespace

std::unique_ptr<Proposal> make_random_weight_proposal(const ProposalContext& ctx) {
  return std::make_unique<RandomWeightProposal>(ctx);
}

} // namespace ssm
