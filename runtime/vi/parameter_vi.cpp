// Variational inference of a model's parameters with a density of the flows room as q: see
// parameter_vi.h.
#include "vi/parameter_vi.h"
#include "core/error.h"
#include "flows/variational.h"
#include "learning/log_posterior.h"
#include "nn/adam_schedule.h"
#include "vi/parameter_guide.h"

#include "flows/gaussian.h"
#include "flows/scale_watch.h"

#include <Eigen/Dense>
#include <LBFGS.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>

namespace ssm {

namespace {

// The target: the exact log posterior, or (--prior) the exact likelihood and the prior's file.
struct Target {
  const ExactLogPosterior& posterior;
  const std::optional<ParameterPrior>& prior; // --prior: its density at u

  // At each row of u ([m, d]), differentiable in u.
  torch::Tensor operator()(const torch::Tensor& u) const {
    // The exact smoother computes the value and its gradient at once.
    const torch::Tensor value = value_and_gradient(
        u, [&](int64_t m, const double* points, double* values, double* gradients) {
          posterior.evaluate(m, points, values, gradients);
        });
    return prior ? value + (*prior)(u) : value;
  }
};

// The Rao-Blackwellised terms log q(u) - log p(y, θ(u)) |J(u)|, one per base draw: their mean
// is KL(q || posterior) - log p(y).
torch::Tensor kl_terms(const flows::DensityModel& q, const Target& target, int64_t n) {
  const torch::Tensor log_scale = torch::log(q.scale).sum();
  return flows::reverse_kl_terms(
      *q.density, [&](const torch::Tensor& v) { return target(v * q.scale + q.shift) + log_scale; },
      n);
}

// Trains q by Adam on the mean of kl_terms; fills the trace. Throws ssm::Error at a non-finite
// objective, naming the iteration.
void train(const flows::DensityModel& q, const Target& target, const ParameterVariationalOptions& o,
           const MethodRun& run, ParameterVariationalFit& fit) {
  auto [own, nets] = parameter_groups(*q.density);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  std::vector<double> rates;
  for (auto& [group, rate] : {std::pair{own, o.learning_rate}, {nets, o.net_learning_rate}})
    if (!group.empty()) {
      groups.emplace_back(group, std::make_unique<torch::optim::AdamOptions>(rate));
      rates.push_back(rate);
    }
  if (groups.empty())
    return;
  torch::optim::Adam adam(groups, torch::optim::AdamOptions(o.learning_rate));
  const std::vector<torch::Tensor> all = q.density->parameters();
  const int64_t every = std::max<int64_t>(1, o.iterations / 100);
  double sum = 0, last_finite = NAN;
  int64_t count = 0;
  flows::ScaleWatch watch(true);
  std::string last_collapse;
  for (int64_t step = 0; step < o.iterations; ++step) {
    const torch::Tensor loss = kl_terms(q, target, o.samples).mean();
    const double elbo = -loss.item<double>();
    if (!std::isfinite(elbo))
      throw Error(
          step == 0
              ? fmt::format("vi: the ELBO is {} at iteration 0: the log posterior is not finite "
                            "at q's first draws (check the starting values and the priors)",
                            elbo)
              : fmt::format("vi: the ELBO is {} at iteration {}; the last finite one was {}; try "
                            "a smaller --learning-rate{} or --clip{}",
                            elbo, step, last_finite,
                            nets.empty() ? "" : " (--net-learning-rate for the networks)",
                            // a collapse the failure would otherwise hide
                            last_collapse.empty() ? "" : "; before it, " + last_collapse));
    last_finite = elbo;
    adam.zero_grad();
    loss.backward();
    if (o.clip > 0)
      torch::nn::utils::clip_grad_norm_(all, o.clip);
    adam.step();
    for (const flows::Collapse& c : watch.check(*q.density)) {
      last_collapse =
          flows::collapse_warning("the parameters' q", c, fmt::format("iteration {}", step),
                                  "a spike in the posterior, or a degenerate fit: fewer "
                                  "--components, or a smaller --learning-rate");
      fit.warnings.push_back(last_collapse);
    }
    if (o.schedule == "cosine")
      nn::set_learning_rate(adam, rates, nn::cosine_factor(step + 1, o.iterations));
    sum += elbo;
    ++count;
    if ((step + 1) % every == 0 || step + 1 == o.iterations) {
      fit.trace.push_back({step + 1, sum / static_cast<double>(count)});
      sum = 0;
      count = 0;
    }
    if (run.progress)
      run.progress(step, o.iterations);
  }
}

// The target and its gradients at the rows of u ([m, d]): rows' values [m] and gradients [m, d].
std::pair<torch::Tensor, torch::Tensor> values_and_gradients(const Target& target,
                                                             const torch::Tensor& u) {
  torch::AutoGradMode enabled(true);
  const torch::Tensor points = u.detach().clone().set_requires_grad(true);
  const torch::Tensor values = target(points);
  values.sum().backward();
  return {values.detach(), points.grad().detach()};
}

// --laplace-start: the mode of the target on the unconstrained space by L-BFGS from `start`, and
// the inverse of the negative Hessian there (central differences of the exact gradient, one batch
// of 2d points). nullopt, with the reason in `why`, when the search fails or the Hessian is not
// negative definite.
struct Laplace {
  Eigen::VectorXd mode;
  Eigen::MatrixXd covariance, information; // Σ and Σ^{-1}
};
std::optional<Laplace> laplace(const Target& target, const std::vector<double>& start,
                               std::string& why) {
  const auto d = static_cast<Eigen::Index>(start.size());
  // The best point evaluated: where a line search that throws leaves the search.
  Eigen::VectorXd best = Eigen::Map<const Eigen::VectorXd>(start.data(), d), best_gradient(d);
  double best_value = std::numeric_limits<double>::infinity();
  auto negative = [&](const Eigen::VectorXd& u, Eigen::VectorXd& gradient) {
    const torch::Tensor point =
        torch::tensor(std::vector<double>(u.data(), u.data() + d), torch::kFloat64)
            .reshape({1, static_cast<int64_t>(d)});
    const auto [value, g] = values_and_gradients(target, point);
    const double v = value.item<double>();
    if (!std::isfinite(v)) { // the line search steps back from it
      gradient.setZero();
      return std::numeric_limits<double>::infinity();
    }
    for (Eigen::Index k = 0; k < d; ++k)
      gradient[k] = -g[0][k].item<double>();
    if (-v < best_value) {
      best_value = -v;
      best = u;
      best_gradient = gradient;
    }
    return -v;
  };
  {
    Eigen::VectorXd unused(d);
    if (!std::isfinite(negative(best, unused))) {
      why = "the log posterior is not finite at the parameters' values";
      return std::nullopt;
    }
  }
  // Strong Wolfe steps keep the curvature pairs positive (an Armijo step may not, and LBFGSpp then
  // throws at an uphill direction); after a throw the search restarts from the best point with a
  // fresh memory, as optimize's does, while that improves.
  LBFGSpp::LBFGSParam<double> param;
  param.max_iterations = 500;
  param.epsilon_rel = 1e-8;
  param.linesearch = LBFGSpp::LBFGS_LINESEARCH_BACKTRACKING_STRONG_WOLFE;
  std::string stopped;
  for (int restart = 0; restart < 5; ++restart) {
    LBFGSpp::LBFGSSolver<double> solver(param);
    Eigen::VectorXd u = best;
    double value = 0;
    const double before = best_value;
    try {
      if (solver.minimize(negative, u, value) < param.max_iterations) {
        stopped.clear();
        break;
      }
      stopped = fmt::format("no convergence in {} iterations", param.max_iterations);
    } catch (const std::exception& e) {
      stopped = e.what();
    }
    if (!(best_value < before))
      break;
  }
  // Converged, or stopped where the gradient is small all the same.
  const Eigen::VectorXd u = best;
  if (!stopped.empty() && best_gradient.norm() > 1e-3 * std::max(1.0, u.norm())) {
    why = fmt::format("the search for the mode stopped ({}) where the gradient's norm is {:.3g}",
                      stopped, best_gradient.norm());
    return std::nullopt;
  }
  // H[:, i] = (g(u + h e_i) - g(u - h e_i)) / 2h.
  torch::Tensor points = torch::empty({2 * d, d}, torch::kFloat64);
  std::vector<double> steps(d);
  for (Eigen::Index i = 0; i < d; ++i) {
    steps[i] = 1e-4 * std::max(1.0, std::abs(u[i]));
    for (int sign : {0, 1})
      for (Eigen::Index k = 0; k < d; ++k)
        points[2 * i + sign][k] = u[k] + (k == i ? (sign == 0 ? steps[i] : -steps[i]) : 0.0);
  }
  const auto [around, gradients] = values_and_gradients(target, points);
  if (!torch::isfinite(around).all().item<bool>()) {
    why = "the log posterior is not finite next to the mode";
    return std::nullopt;
  }
  const torch::Tensor g = gradients.contiguous();
  Eigen::MatrixXd hessian(d, d);
  for (Eigen::Index i = 0; i < d; ++i)
    for (Eigen::Index k = 0; k < d; ++k)
      hessian(k, i) =
          (g[2 * i][k].item<double>() - g[2 * i + 1][k].item<double>()) / (2 * steps[i]);
  const Eigen::MatrixXd information = -0.5 * (hessian + hessian.transpose());
  const Eigen::LLT<Eigen::MatrixXd> llt(information);
  if (llt.info() != Eigen::Success || !information.allFinite()) {
    why = "the Hessian at the mode is not negative definite";
    return std::nullopt;
  }
  return Laplace{u, llt.solve(Eigen::MatrixXd::Identity(d, d)), information};
}

// q centred at the mode with the Laplace approximation's marginal sds as its scales (every
// family then starts near N(mode, diag)), and a full-rank Gaussian with its correlations. A
// diagonal Gaussian takes 1 / sqrt(Σ^{-1}_ii) instead: the best diagonal Gaussian under the ELBO
// for a Gaussian target (the marginal sds are wider, by far when the correlations are strong).
void start_at(flows::DensityModel& q, const Laplace& l) {
  torch::NoGradGuard no_grad;
  const Eigen::Index d = l.mode.size();
  auto* gaussian = dynamic_cast<flows::GaussianImpl*>(q.density.get());
  const bool diagonal = gaussian && q.density->spec().covariance != "full";
  const Eigen::VectorXd sd =
      diagonal ? Eigen::VectorXd(l.information.diagonal().cwiseSqrt().cwiseInverse())
               : Eigen::VectorXd(l.covariance.diagonal().cwiseSqrt());
  q.shift = torch::tensor(std::vector<double>(l.mode.data(), l.mode.data() + d), torch::kFloat64);
  q.scale = torch::tensor(std::vector<double>(sd.data(), sd.data() + d), torch::kFloat64);
  if (!gaussian || diagonal)
    return;
  const Eigen::MatrixXd correlation =
      sd.cwiseInverse().asDiagonal() * l.covariance * sd.cwiseInverse().asDiagonal();
  const Eigen::MatrixXd factor = correlation.llt().matrixL();
  for (Eigen::Index i = 0; i < d; ++i) {
    gaussian->log_diag[i] = std::log(factor(i, i));
    for (Eigen::Index k = 0; k < i; ++k)
      gaussian->lower[i][k] = factor(i, k);
  }
}

} // namespace

ParameterVariationalFit fit_parameter_variational(const MethodRun& run,
                                                  const ParameterVariationalOptions& o) {
  if (Refusal why = parameter_variational_refusal(run.model, run.info))
    throw Error(fmt::format("vi: {}", *why));
  const ExactLogPosterior posterior(run, o.fixed, "vi", o.prior.empty());
  const ParameterSpace& space = posterior.space();
  torch::set_num_threads(1); // the smoother's evaluations take the run's threads
  torch::manual_seed(run.seed);
  ParameterVariationalFit fit;
  describe_parameters(fit, run.info, space, o.prior.empty());
  std::optional<ParameterPrior> prior;
  if (!o.prior.empty())
    prior.emplace(o.prior, fit.coordinates);
  const Target target{posterior, prior};
  fit.likelihood = posterior.smoother();
  flows::DensityModel q = make_parameter_guide(o, fit.coordinates, posterior.start());
  if (o.laplace_start) {
    if (run.progress_phase)
      run.progress_phase("the Laplace start");
    std::string why;
    if (const std::optional<Laplace> l = laplace(target, posterior.start(), why))
      start_at(q, *l);
    else
      fit.warnings.push_back(fmt::format("--laplace-start: {}; q starts at the parameters' "
                                         "values with unit scales",
                                         why));
  }
  fit.family = flows::describe(q.density->spec());
  fit.family_parameters = q.parameter_count();

  const auto start = std::chrono::steady_clock::now();
  train(q, target, o, run, fit);
  fit.iterations = o.iterations;
  fit.train_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (run.progress_phase)
    run.progress_phase("evaluating");

  torch::NoGradGuard no_grad;
  const torch::Tensor terms = kl_terms(q, target, o.eval_samples);
  fit.eval_samples = o.eval_samples;
  fit.elbo = -terms.mean().item<double>();
  fit.elbo_se =
      o.eval_samples > 1 ? terms.std().item<double>() / std::sqrt(double(o.eval_samples)) : NAN;
  const torch::Tensor u = q.sample(o.draws);
  record_parameter_draws(
      fit, u, q.log_prob(u), target(u),
      [&](std::span<const double> point) { return posterior.theta(point); }, space.n_theta());
  fit.guide_state = flows::density_model_bytes(q);
  return fit;
}

} // namespace ssm
