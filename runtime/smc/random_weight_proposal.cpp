// The random-weight filter's proposal (Fearnhead, Papaspiliopoulos, Roberts & Stuart 2010; Martin
// 2022, section 7.4.1) for an SDE transition, whose density has no closed form: particles are drawn
// from a law whose density is known -- the model's `proposal` when y_t is observed and the model
// has one, else one Euler-Maruyama step over the whole dt (in Lamperti's coordinate when the
// General Poisson estimator works there: a coefficient that reads the path, whose Gaussian step
// in x would reach where the path cannot and have lighter tails than the transition) -- and
// weighted by
// q^(x_{t-1}, x_t) g(y_t | x_t) / p(x_t | x_{t-1}), q^ an estimate of the transition density
// (sde/density_estimator.h). With General Poisson estimates positive by construction (psi bounded
// above) each weight is unbiased on its own: no discretisation error, and an unbiased likelihood
// estimate. Signed estimates (the parametrix estimator, psi unbounded above) are made positive by
// Wald's identity over all N particles of the step at once (the thesis's algorithm): the
// normalised weights keep no discretisation error, but the likelihood estimate is biased by the
// expected number of Wald rounds, which the result says.
#include "core/error.h"
#include "kernel/distributions.h"
#include "kernel/rng.h"
#include "sde/density_estimator.h"
#include "sde/euler_step.h"
#include "sde/lamperti.h"
#include "sde/path_quadrature.h"
#include "smc/filter.h"
#include "smc/proposal.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <numbers>

namespace ssm {

std::string random_weight_problem(const ssm_model& model, const ModelInfo& info) {
  if (!info.sde)
    return "the model has no SDE transition (its transition density is known: use bootstrap)";
  if (std::string why = density_estimator_problem(model, info); !why.empty())
    return fmt::format("no estimator of the density of the SDE {} applies: {}", info.sde->relation,
                       why);
  if (info.n_state != info.sde->dim)
    return fmt::format("the SDE {} is not the model's whole state", info.sde->relation);
  return {};
}

std::string random_weight_likelihood_caveat(const ModelInfo& info) {
  if (!info.sde || (info.sde->estimator == "gpe" && info.sde->gpe_positive))
    return {};
  return fmt::format("the {} estimates of the density of {} are made positive by Wald's identity "
                     "over each step's particles: the filtering weights are right, but the "
                     "log-likelihood is off by the log of the expected number of Wald rounds",
                     info.sde->estimator == "gpe" ? "General Poisson" : "parametrix",
                     info.sde->relation);
}

std::string random_weight_proposal_name(const ssm_model& model, const ModelInfo& info) {
  const std::string euler = in_lamperti_coordinate(info)
                                ? "one Euler-Maruyama step over dt in Lamperti's coordinate"
                                : "one Euler-Maruyama step over dt";
  return model.proposal_sample ? "the model's proposal (" + euler + " where y is missing)" : euler;
}

void add_random_weight_caveat(nlohmann::json& summary, const ModelInfo& info, bool random_weight) {
  if (!random_weight)
    return;
  if (std::string caveat = random_weight_likelihood_caveat(info); !caveat.empty())
    summary["log_likelihood_caveat"] = caveat;
}

namespace {

class RandomWeightProposal final : public Proposal {
public:
  explicit RandomWeightProposal(const ProposalContext& ctx)
      : model_(ctx.model), info_(ctx.info), n_obs_(ctx.info.n_obs), seed_(ctx.opt.seed),
        estimator_seed_(mix_seed(ctx.opt.seed ^ kRandomWeightSeedKey)), logp_(ctx.stride, 0.0),
        caveat_(random_weight_likelihood_caveat(ctx.info)),
        lamperti_(in_lamperti_coordinate(ctx.info)) {
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
    if (lamperti_) {
      draw_lamperti(s, begin, end);
      return;
    }
    // One Euler-Maruyama step over dt from each particle's ancestor: a Gaussian draw,
    // N(x + drift dt, dt sigma sigma^T).
    const int d = info_.sde->dim;
    const int64_t P = end - begin;
    std::vector<double> from = ancestors_of(s, begin, end);
    EulerStep euler(model_, info_); // per call: its buffers are the calling thread's
    euler.evaluate(s.th, s.t, from.data(), P, "filter --method random-weight");
    std::vector<double> z(d);
    for (int64_t k = 0; k < P; ++k) {
      const int64_t n = begin + k;
      if (!euler.finite(k)) { // a path that diverged (weight 0): it stays so
        for (int c = 0; c < d; ++c)
          s.cur[c * s.stride + n] = NAN;
        logp_[n] = -std::numeric_limits<double>::infinity();
        continue;
      }
      for (int c = 0; c < d; ++c)
        z[c] = sample_std_normal_k(seed_, static_cast<uint32_t>(n), static_cast<uint32_t>(s.t),
                                   kSiteEulerProposal, static_cast<uint32_t>(c));
      logp_[n] = euler.draw(k, z.data(), s.cur + n, s.stride);
    }
  }

  void correct(const ProposalStep& s, int64_t begin, int64_t end, double* inc) override {
    const int64_t P = end - begin;
    std::vector<double> from = ancestors_of(s, begin, end), to = particles(s, begin, end), log_q(P);
    std::unique_ptr<DensityEstimator> estimator = make_density_estimator(model_, info_);
    // One estimate per particle (sets of 1): positive by construction, checked below (a Wald
    // round would make it positive only up to a factor of its own: a biased weight).
    EstimatorCounts counts;
    estimator->estimate(s.th, s.t, from.data(), to.data(), P, 1, estimator_seed_,
                        static_cast<uint64_t>(begin), log_q.data(), &counts);
    if (!estimator->positive())
      throw Error(fmt::format("filter --method random-weight: at t={} psi of {} has no finite "
                              "upper bound for these parameters, so the General Poisson "
                              "estimates are not positive by construction",
                              s.t, info_.sde->relation));
    if (counts.extra_rounds > 0)
      throw Error(fmt::format("filter --method random-weight: at t={} a General Poisson estimate "
                              "of {} was not positive: psi exceeded its upper bound (a wrong "
                              "bound, or rounding at a tight one)",
                              s.t, info_.sde->relation));
    add(begin, end, log_q.data(), inc);
    outside_support(s, begin, end, log_q.data(), nullptr);
  }

  // Signed estimates: Wald's identity over all N particles at once.
  bool corrects_whole_step() const override { return !caveat_.empty(); }

  void correct_step(const ProposalStep& s, int64_t N, double* inc, ThreadPool& pool) override {
    std::vector<double> from = ancestors_of(s, 0, N), to = particles(s, 0, N), log_q(N);
    // A particle whose weight is 0 whatever its estimate (g(y | x) = 0, or a draw the proposal
    // says is impossible) takes no part in Wald's loop: it would only lengthen it.
    for (int64_t n = 0; n < N; ++n)
      if (inc[n] == -std::numeric_limits<double>::infinity() ||
          logp_[n] == -std::numeric_limits<double>::infinity())
        from[n] = NAN; // a non-finite pair: estimate 0

    DensityEstimator::estimate_one_set(model_, info_, pool, s.th, s.t, from.data(), to.data(), N,
                                       estimator_seed_, 0, log_q.data());
    add(0, N, log_q.data(), inc);
    outside_support(s, 0, N, log_q.data(), from.data());
  }

  std::string likelihood_caveat() const override { return caveat_; }

  const char* drawn_by() const override {
    return guided_     ? "the proposal"
           : lamperti_ ? "the Lamperti-Euler proposal"
                       : "the Euler proposal";
  }

private:
  // inc[n] += log q^ - log p for particles [begin, end); a draw the proposal says is impossible
  // gets weight 0.
  void add(int64_t begin, int64_t end, const double* log_q, double* inc) const {
    for (int64_t n = begin; n < end; ++n)
      inc[n] += std::isinf(logp_[n]) && logp_[n] < 0 ? -std::numeric_limits<double>::infinity()
                                                     : log_q[n - begin] - logp_[n];
  }

  // One Euler step in Lamperti's coordinate from each ancestor x: w ~ N(b(x) dt, dt), the draw
  // eta^-1(eta(x) + w), whose density is N(w; b dt, dt) / |s(draw)|.
  void draw_lamperti(const ProposalStep& s, int64_t begin, int64_t end) {
    const int64_t P = end - begin;
    const std::vector<double> from = ancestors_of(s, begin, end);
    DiffusionTerms terms(model_, info_); // per call: its buffers are the calling thread's
    terms.evaluate(s.th, s.t, from.data(), P);
    std::vector<double> start, w, mean, dt, sign;
    std::vector<int64_t> group, index;
    for (int64_t k = 0; k < P; ++k) {
      const int64_t n = begin + k;
      const double sigma = terms.coefficient(k);
      if (!std::isfinite(from[k])) { // a path that diverged (weight 0): it stays so
        s.cur[n] = NAN;
        logp_[n] = -std::numeric_limits<double>::infinity();
        continue;
      }
      if (!std::isfinite(sigma) || sigma == 0)
        throw Error(fmt::format("filter --method random-weight: at t={} the diffusion coefficient "
                                "of {} is {} at {}: a step in Lamperti's coordinate needs it "
                                "finite and not 0",
                                s.t, info_.sde->relation, sigma, from[k]));
      const double h = terms.dt(k), b = lamperti_drift(terms, k).b;
      if (!(std::isfinite(h) && h > 0 && std::isfinite(b)))
        throw Error(fmt::format("filter --method random-weight: at t={} dt of {} is {} and its "
                                "drift in Lamperti's coordinate {} at {}",
                                s.t, info_.sde->relation, h, b, from[k]));
      const double z = sample_std_normal_k(seed_, static_cast<uint32_t>(n),
                                           static_cast<uint32_t>(s.t), kSiteEulerProposal, 0);
      group.push_back(static_cast<int64_t>(start.size()));
      start.push_back(from[k]);
      sign.push_back(sigma > 0 ? 1.0 : -1.0);
      index.push_back(n);
      mean.push_back(b * h);
      dt.push_back(h);
      w.push_back(b * h + std::sqrt(h) * z);
    }
    std::vector<double> to(w.size());
    lamperti_inverse(terms, s.th, s.t, start, group, w.data(), static_cast<int64_t>(w.size()),
                     to.data(), [&](int64_t g, double x, double sigma) {
                       if (!keeps_sign(sigma, sign[g]))
                         throw Error(fmt::format(
                             "filter --method random-weight: at t={} the diffusion coefficient "
                             "of {} is {} at {}, on the way from {} in Lamperti's coordinate: it "
                             "must keep its sign, and 1 / |coefficient| must not be integrable "
                             "up to its zeros (the coordinate spans the real line)",
                             s.t, info_.sde->relation, sigma, x, start[g]));
                       return std::fabs(sigma);
                     });
    terms.evaluate(s.th, s.t, to.data(), static_cast<int64_t>(to.size()));
    for (size_t i = 0; i < to.size(); ++i) {
      const double e = w[i] - mean[i];
      s.cur[index[i]] = to[i];
      logp_[index[i]] = -e * e / (2 * dt[i]) - 0.5 * std::log(2 * std::numbers::pi * dt[i]) -
                        std::log(std::fabs(terms.coefficient(static_cast<int64_t>(i))));
    }
  }

  // A draw whose density estimate is 0 although its ancestor is finite lies outside the SDE's
  // support (across a zero of a coefficient that reads the path: the Euler proposal's Gaussian
  // reaches where the path cannot): it becomes NaN, a diverged path, which later steps carry
  // with weight 0 instead of evaluating the drift where it may not be defined. `from`: the
  // ancestors as estimated (NaN: left out), or null for every ancestor finite.
  void outside_support(const ProposalStep& s, int64_t begin, int64_t end, const double* log_q,
                       const double* from) const {
    const int d = info_.sde->dim;
    for (int64_t n = begin; n < end; ++n)
      if (log_q[n - begin] == -std::numeric_limits<double>::infinity() &&
          !(from && std::isnan(from[n - begin])) && !std::isinf(logp_[n]))
        for (int c = 0; c < d; ++c)
          s.cur[c * s.stride + n] = NAN;
  }

  // The SDE's values (the whole state) at the ancestors of particles [begin, end), and at the
  // particles, component-major with stride end - begin.
  std::vector<double> ancestors_of(const ProposalStep& s, int64_t begin, int64_t end) const {
    const int d = info_.sde->dim;
    const int64_t P = end - begin;
    std::vector<double> out(d * P);
    for (int c = 0; c < d; ++c)
      for (int64_t n = begin; n < end; ++n)
        out[c * P + n - begin] = s.prev[c * s.stride + (s.ancestors ? s.ancestors[n] : n)];
    return out;
  }
  std::vector<double> particles(const ProposalStep& s, int64_t begin, int64_t end) const {
    const int d = info_.sde->dim;
    const int64_t P = end - begin;
    std::vector<double> out(d * P);
    for (int c = 0; c < d; ++c)
      std::copy(s.cur + c * s.stride + begin, s.cur + c * s.stride + end, out.begin() + c * P);
    return out;
  }

  const ssm_model& model_;
  const ModelInfo& info_;
  int64_t n_obs_;
  uint64_t seed_, estimator_seed_;
  bool guided_ = false;      // this step draws from the model's proposal
  std::vector<double> logp_; // the proposal's log-density of each draw
  std::string caveat_;       // non-empty: Wald's identity over the step (why the likelihood is off)
  bool lamperti_;            // Euler steps in Lamperti's coordinate (sde/lamperti.h)
};

} // namespace

std::unique_ptr<Proposal> make_random_weight_proposal(const ProposalContext& ctx) {
  return std::make_unique<RandomWeightProposal>(ctx);
}

} // namespace ssm
