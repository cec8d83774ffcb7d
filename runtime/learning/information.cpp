// The observed information by central differences of the exact score: see information.h.
#include "learning/information.h"
#include "learning/log_posterior.h"
#include "learning/score.h"

#include <Eigen/Cholesky>

#include <cmath>

namespace ssm {

namespace {

constexpr double kRelativeStep = 1e-5; // central differences: error ~ step^2

// The exact score at `fixed`: n_theta values.
std::vector<double> gradient_at(const Method& smoother, const MethodRun& run,
                                const std::vector<double>& fixed) {
  MethodRun at = run;
  at.fixed = &fixed;
  return estimate_score(smoother, at, 1).score;
}

} // namespace

Eigen::MatrixXd observed_information(const Method& smoother, const MethodRun& run,
                                     const std::vector<int64_t>& components) {
  const auto n = static_cast<Eigen::Index>(components.size());
  Eigen::MatrixXd info(n, n);
  for (Eigen::Index j = 0; j < n; ++j) {
    const int64_t c = components[j];
    std::vector<double> plus = *run.fixed, minus = *run.fixed;
    const double h = kRelativeStep * std::max(1.0, std::abs(plus[c]));
    plus[c] += h;
    minus[c] -= h;
    const std::vector<double> gp = gradient_at(smoother, run, plus);
    const std::vector<double> gm = gradient_at(smoother, run, minus);
    for (Eigen::Index i = 0; i < n; ++i)
      info(i, j) = -(gp[components[i]] - gm[components[i]]) / (2 * h);
  }
  return (info + info.transpose()) / 2;
}

std::vector<double> standard_errors(const Method& smoother, const MethodRun& run,
                                    const ParameterSpace& space, bool map) {
  const int64_t n = space.n_theta(), d = space.dimension();
  const auto nt = static_cast<size_t>(n);
  const std::vector<double> u0 = space.unconstrain({run.fixed->data(), nt});
  // The gradient in u of the log-likelihood, plus with `map` the log prior density of θ.
  const LogPrior prior(run.model, space, *run.fixed, run.prior);
  const bool with_prior = map && (run.prior || run.model.prior_logpdf);
  const auto gradient_in_u = [&](const std::vector<double>& u, const std::vector<double>& theta) {
    std::vector<double> g = space.gradient(u, gradient_at(smoother, run, theta), false);
    if (with_prior) {
      std::vector<double> prior_gradient(g.size());
      prior.theta_density(u, prior_gradient.data());
      for (size_t i = 0; i < g.size(); ++i)
        g[i] += prior_gradient[i];
    }
    return g;
  };
  // The Hessian on the unconstrained scale, and d theta / d u, by central differences in u.
  Eigen::MatrixXd hessian(d, d), jacobian(n, d);
  for (int64_t j = 0; j < d; ++j) {
    const double h = kRelativeStep * std::max(1.0, std::abs(u0[j]));
    std::vector<double> up = u0, um = u0;
    up[j] += h;
    um[j] -= h;
    std::vector<double> plus = *run.fixed, minus = *run.fixed;
    space.constrain(up, {plus.data(), nt});
    space.constrain(um, {minus.data(), nt});
    const std::vector<double> gp = gradient_in_u(up, plus), gm = gradient_in_u(um, minus);
    for (int64_t i = 0; i < d; ++i)
      hessian(i, j) = (gp[i] - gm[i]) / (2 * h);
    for (int64_t c = 0; c < n; ++c)
      jacobian(c, j) = (plus[c] - minus[c]) / (2 * h);
  }
  const Eigen::MatrixXd information = -(hessian + hessian.transpose()) / 2;
  const Eigen::LLT<Eigen::MatrixXd> llt(information);
  if (llt.info() != Eigen::Success)
    return {};
  const Eigen::MatrixXd cov_u = llt.solve(Eigen::MatrixXd::Identity(d, d));
  const Eigen::MatrixXd cov = jacobian * cov_u * jacobian.transpose();
  std::vector<double> se(nt, NAN);
  for (const LearnedParam& p : space.learned()) {
    const ParamInfo& info = run.info.params[p.index];
    for (int64_t c = info.offset; c < info.offset + info.size; ++c)
      se[c] = std::sqrt(std::max(0.0, cov(c, c)));
  }
  return se;
}

} // namespace ssm
