// The exact log posterior density of the learned parameters: see log_posterior.h.
#include "learning/log_posterior.h"
#include "core/error.h"
#include "learning/pmmh.h"
#include "learning/score.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>

namespace ssm {

Refusal exact_score_refusal(const ssm_model& model, const ModelInfo& info) {
  if (Refusal why = score_refusal(model, info))
    return why;
  if (!(info.linear_gaussian && model.linear_gaussian) && !info.finite_state)
    return "the likelihood is not exact (the model is neither linear-Gaussian nor finite-state; "
           "see `info`)";
  return std::nullopt;
}

double LogPrior::model_density(std::span<const double> u, double* gradient,
                               bool with_jacobian) const {
  const int64_t n_theta = space_.n_theta();
  std::vector<double> fixed = fixed_;
  space_.constrain(u, {fixed.data(), static_cast<size_t>(n_theta)});
  std::vector<double> prior(1 + static_cast<size_t>(n_theta));
  model_.prior_logpdf(fixed.data(), prior.data());
  if (gradient) {
    const std::vector<double> g =
        space_.gradient(u, std::vector<double>(prior.begin() + 1, prior.end()), with_jacobian);
    std::copy(g.begin(), g.end(), gradient);
  }
  return prior[0] + (with_jacobian ? space_.log_jacobian(u) : 0.0);
}

double LogPrior::file_density(std::span<const double> u, double* gradient) const {
  std::vector<double> theta = fixed_; // θ(u) must exist, as for the model's priors
  space_.constrain(u, {theta.data(), static_cast<size_t>(space_.n_theta())});
  return file_->log_density(u, gradient);
}

double LogPrior::evaluate(std::span<const double> u, double* gradient) const {
  return file_ ? file_density(u, gradient) : model_density(u, gradient, true);
}

double LogPrior::theta_density(std::span<const double> u, double* gradient) const {
  if (!file_)
    return model_density(u, gradient, false);
  const double value = file_density(u, gradient);
  if (gradient) {
    const std::vector<double> jacobian =
        space_.gradient(u, std::vector<double>(static_cast<size_t>(space_.n_theta()), 0.0), true);
    for (size_t i = 0; i < jacobian.size(); ++i)
      gradient[i] -= jacobian[i];
  }
  return value - space_.log_jacobian(u);
}

double LogPrior::theta_density_at(std::span<const double> theta) const {
  const auto n_theta = static_cast<size_t>(space_.n_theta());
  if (!file_) {
    std::vector<double> prior(1 + n_theta);
    model_.prior_logpdf(theta.data(), prior.data());
    return prior[0];
  }
  try {
    return theta_density(space_.unconstrain(theta.first(n_theta)), nullptr);
  } catch (const Error&) {
    return -std::numeric_limits<double>::infinity();
  }
}

struct ExactLogPosterior::Impl {
  ScoreModel score;
  const Method* smoother = nullptr;
  OptionValues smooth_defaults;
  MethodRun run; // the caller's, for its data, parameter values and pool
  LogPrior prior;
  // One single-threaded pool per chunk of points: the smoother runs on a pool of its own, while
  // the run's pool spreads the chunks.
  std::vector<std::unique_ptr<ThreadPool>> pools;
};

namespace {

// The learned parameters, with their priors checked when the target includes them.
ParameterSpace learned_space(const MethodRun& run, const std::vector<std::string>& fixed,
                             const std::string& who, bool with_prior) {
  if (with_prior)
    return sampled_parameters(run, fixed, who);
  ParameterSpace space(run.info, fixed);
  space.require_some(who, "infer");
  return space;
}

} // namespace

ExactLogPosterior::ExactLogPosterior(const MethodRun& run, const std::vector<std::string>& fixed,
                                     const std::string& who, bool with_prior)
    : space_(learned_space(run, fixed, who, with_prior)), with_prior_(with_prior) {
  if (Refusal why = exact_score_refusal(run.model, run.info))
    throw Error(fmt::format("{}: {}", who, *why));
  impl_ = std::make_unique<Impl>(Impl{score_model(run.model, run.info),
                                      nullptr,
                                      {},
                                      run,
                                      LogPrior(run.model, space_, *run.fixed, run.prior),
                                      {}});
  impl_->smoother = &run.registry->choose(Task::Smooth, impl_->score.model, impl_->score.info);
  if (impl_->smoother->particles)
    throw Error(fmt::format("{}: no exact smoother applies to the score of model '{}'", who,
                            run.info.name));
  impl_->smooth_defaults = run.registry->default_options(Task::Smooth);
  const int chunks = run.pool ? run.pool->threads() : 1;
  for (int c = 0; c < chunks; ++c)
    impl_->pools.push_back(std::make_unique<ThreadPool>(1));
}

ExactLogPosterior::~ExactLogPosterior() = default;

const std::string& ExactLogPosterior::smoother() const {
  return impl_->smoother->name;
}

std::vector<double> ExactLogPosterior::start() const {
  const std::vector<double>& given = *impl_->run.fixed;
  return space_.unconstrain({given.data(), static_cast<size_t>(space_.n_theta())});
}

std::vector<double> ExactLogPosterior::theta(std::span<const double> u) const {
  std::vector<double> fixed = *impl_->run.fixed;
  space_.constrain(u, {fixed.data(), static_cast<size_t>(space_.n_theta())});
  fixed.resize(static_cast<size_t>(space_.n_theta()));
  return fixed;
}

void ExactLogPosterior::evaluate(int64_t n, const double* u, double* values,
                                 double* gradients) const {
  const Impl& p = *impl_;
  const int64_t d = space_.dimension(), n_theta = space_.n_theta();
  const auto one = [&](int64_t i, ThreadPool& pool) {
    const std::span<const double> ui(u + i * d, static_cast<size_t>(d));
    double* grad = gradients + i * d;
    values[i] = -std::numeric_limits<double>::infinity();
    std::fill(grad, grad + d, 0.0);
    std::vector<double> fixed = *p.run.fixed;
    try {
      space_.constrain(ui, {fixed.data(), static_cast<size_t>(n_theta)});
      MethodRun at{p.score.model, p.score.info, p.smooth_defaults, p.run.seed, false, 1};
      at.registry = p.run.registry;
      at.fixed = &fixed;
      at.data = p.run.data;
      at.pool = &pool;
      const ScoreResult s = estimate_score(*p.smoother, at, 1);
      std::vector<double> g = space_.gradient(ui, s.score, false);
      double value = s.log_likelihood;
      if (with_prior_) {
        std::vector<double> prior_gradient(static_cast<size_t>(d));
        value += p.prior.evaluate(ui, prior_gradient.data());
        for (int64_t k = 0; k < d; ++k)
          g[k] += prior_gradient[k];
      }
      if (!std::isfinite(value) ||
          !std::all_of(g.begin(), g.end(), [](double x) { return std::isfinite(x); }))
        return;
      values[i] = value;
      std::copy(g.begin(), g.end(), grad);
    } catch (const std::exception&) { // overflow far out, a non-finite likelihood or score: -inf
      // (std::exception: the smoother is the executable's code, and this may run in the vi
      // module, whose copy of ssm::Error is another type for a type_info compared by address)
    }
  };
  const auto chunks = static_cast<int64_t>(p.pools.size());
  const auto chunk = [&](int64_t c) {
    for (int64_t i = c; i < n; i += chunks)
      one(i, *p.pools[c]);
  };
  if (p.run.pool && chunks > 1)
    p.run.pool->parallel_for(chunks, chunk);
  else
    for (int64_t c = 0; c < chunks; ++c)
      chunk(c);
}

} // namespace ssm
