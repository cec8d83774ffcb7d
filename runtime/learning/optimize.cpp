// Maximum likelihood by L-BFGS on the unconstrained parameter space: see optimize.h.
#include "learning/optimize.h"
#include "core/error.h"
#include "kernel/rng.h"
#include "learning/log_posterior.h"
#include "learning/parameter_space.h"
#include "learning/score.h"

#include <Eigen/Core>
#include <LBFGS.h>
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace ssm {

namespace {

// A gradient norm (log-likelihood per unit of the unconstrained coordinates) below which a point
// is stationary for any practical purpose, whatever stopped the solver.
constexpr double kStationary = 1e-4;
// An unconstrained coordinate beyond this (a scale under e^-15 times its bound's distance, a
// probability within 3e-7 of 0 or 1) is at the boundary for any practical purpose.
constexpr double kFarOut = 15;
// Restarts of L-BFGS from a start's best point after a failed line search.
constexpr int kMaxRestarts = 10;

// -f and its gradient at an unconstrained point, recording every evaluation.
class Objective {
public:
  // `prior`: with --map, the log prior density of θ added to the objective; else null.
  Objective(const ObjectiveFunction& f, const ParameterSpace& space, std::vector<double> theta,
            Optimum& out, int64_t start, const LogPrior* prior)
      : f_(f), space_(space), full_(std::move(theta)), out_(out), start_(start), prior_(prior) {}

  double operator()(const Eigen::VectorXd& u, Eigen::VectorXd& grad) {
    const int64_t n = space_.n_theta();
    std::vector<double> fixed = full_;
    try {
      space_.constrain({u.data(), static_cast<size_t>(u.size())},
                       {fixed.data(), static_cast<size_t>(n)});
    } catch (const Error&) { // overflow far out: an infinitely bad point, for the line search
      grad.setZero();
      return std::numeric_limits<double>::infinity();
    }
    ObjectiveValue v;
    try {
      v = f_(fixed);
    } catch (const Error&) { // a non-finite likelihood or score: reject the step
      grad.setZero();
      return std::numeric_limits<double>::infinity();
    }
    double objective = v.value;
    const std::span<const double> at{u.data(), static_cast<size_t>(u.size())};
    std::vector<double> g = space_.gradient(at, v.gradient, false);
    if (prior_) { // log p(θ) and its gradient in u
      std::vector<double> prior_gradient(g.size());
      objective += prior_->theta_density(at, prior_gradient.data());
      for (size_t i = 0; i < g.size(); ++i)
        g[i] += prior_gradient[i];
      if (!std::isfinite(objective)) {
        grad.setZero();
        return std::numeric_limits<double>::infinity();
      }
    }
    double norm2 = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      grad[static_cast<Eigen::Index>(i)] = -g[i];
      norm2 += g[i] * g[i];
    }
    out_.path.push_back({start_, v.log_likelihood, std::sqrt(norm2),
                         std::vector<double>(fixed.begin(), fixed.begin() + n), objective});
    return -objective;
  }

private:
  const ObjectiveFunction& f_;
  const ParameterSpace& space_;
  std::vector<double> full_; // parameters then data values
  Optimum& out_;
  int64_t start_;
  const LogPrior* prior_;
};

} // namespace

namespace {

// One start's outcome: its summary, its best evaluation (null if none was finite), why it stopped.
struct StartOutcome {
  Optimum::Start start;
  const Optimum::Evaluation* best = nullptr;
  std::string message;
  int64_t iterations = 0;
};

// The best evaluation of `path` from index `first` on (null if there is none).
const Optimum::Evaluation* best_since(const std::vector<Optimum::Evaluation>& path, size_t first) {
  const Optimum::Evaluation* at = nullptr;
  for (size_t i = first; i < path.size(); ++i)
    if (!at || path[i].objective > at->objective)
      at = &path[i];
  return at;
}

// L-BFGS from u. LBFGSpp throws when a line search fails (a step into a region of infinite
// objective, a curvature the memory misjudged): restart from the best point with a fresh memory
// while that keeps improving.
StartOutcome run_start(LBFGSpp::LBFGSSolver<double>& solver, Objective& f, Eigen::VectorXd u,
                       const ParameterSpace& space, const std::vector<double>& given,
                       Optimum& record, const OptimizeOptions& options) {
  StartOutcome out;
  Eigen::VectorXd grad(u.size());
  const size_t first = record.path.size();
  const double f0 = f(u, grad);
  out.start.initial_objective = -f0;
  double fx = f0;
  out.message = "not started";
  bool finished = false; // LBFGSpp's own test passed
  double best_so_far = -std::numeric_limits<double>::infinity();
  for (int restart = 0; restart <= kMaxRestarts && out.iterations < options.max_iterations;
       ++restart) {
    try {
      if (!std::isfinite(f0))
        throw std::runtime_error("the log-likelihood is not finite at the start");
      out.iterations += solver.minimize(f, u, fx);
      finished = out.iterations < options.max_iterations;
      out.message = finished ? "the gradient norm fell below the tolerance"
                             : fmt::format("stopped after {} iterations", out.iterations);
      break;
    } catch (const std::exception& e) {
      out.message = e.what();
    }
    const Optimum::Evaluation* top = best_since(record.path, first);
    if (!top || !(top->objective > best_so_far))
      break;
    best_so_far = top->objective;
    std::vector<double> theta(given.begin(), given.begin() + space.n_theta());
    std::copy(top->theta.begin(), top->theta.end(), theta.begin());
    const std::vector<double> ut = space.unconstrain(theta);
    u = Eigen::Map<const Eigen::VectorXd>(ut.data(), static_cast<Eigen::Index>(ut.size()));
    if (restart < kMaxRestarts)
      out.message += fmt::format(" (restart {})", restart + 1);
  }
  out.best = best_since(record.path, first);
  if (!out.best || !std::isfinite(out.best->objective)) {
    out.best = nullptr;
    return out;
  }
  // A line search that cannot improve at a stationary point has converged in all but name.
  out.start.converged = finished || out.best->gradient_norm <= kStationary;
  if (!finished && out.start.converged)
    out.message = fmt::format("stationary (gradient norm {:.2g}); the line search then stopped: {}",
                              out.best->gradient_norm, out.message);
  out.start.log_likelihood = out.best->log_likelihood;
  out.start.objective = out.best->objective;
  return out;
}

// "; r heads to the boundary of its support: ..." for the bounded coordinates of u far out, or "".
std::string boundary_note(const ParameterSpace& space, const std::vector<double>& theta, bool map) {
  const std::vector<double> u = space.unconstrain(theta);
  const std::vector<std::string> names = space.coordinate_names();
  std::vector<std::string> far;
  for (const LearnedParam& p : space.learned())
    if (p.transform.kind() != TransformKind::Identity) // an unbounded one has no boundary
      for (int64_t i = p.offset; i < p.offset + p.transform.size(); ++i)
        if (std::abs(u[i]) > kFarOut)
          far.push_back(names[i]);
  if (far.empty())
    return "";
  return fmt::format("; {} head{} to the boundary of {} support: the {} may not exist{}",
                     fmt::join(far, ", "), far.size() == 1 ? "s" : "",
                     far.size() == 1 ? "its" : "their",
                     map ? "posterior mode" : "maximum likelihood estimate",
                     map ? "" : " (a prior, with --map, keeps it inside)");
}

} // namespace

std::vector<double> start_point(std::vector<double> u0, uint64_t seed, int64_t k) {
  if (k > 0) // random starts: uniform(-2, 2) around the given point, as Stan draws its inits
    for (size_t i = 0; i < u0.size(); ++i)
      u0[i] +=
          4 * philox_u01(seed, static_cast<uint32_t>(i), static_cast<uint32_t>(k), 0x5157, 0) - 2;
  return u0;
}

uint64_t iteration_seed(uint64_t seed, int64_t k, int64_t it, int64_t iterations) {
  return mix_seed(seed ^ mix_seed(static_cast<uint64_t>(1 + k * (iterations + 1) + it)));
}

Optimum maximize_likelihood(const Method& smoother, const MethodRun& run,
                            const OptimizeOptions& options) {
  return maximize(
      [&](const std::vector<double>& fixed) {
        MethodRun at = run;
        at.fixed = &fixed;
        const ScoreResult s = estimate_score(smoother, at, 1);
        return ObjectiveValue{s.log_likelihood, s.score, s.log_likelihood};
      },
      run, options);
}

ParameterSpace optimized_parameters(const MethodRun& run, const OptimizeOptions& options) {
  ParameterSpace space(run.info, options.fixed);
  space.require_some("optimize");
  if (run.prior && !options.map) // the command line says so before reading the file
    throw Error("optimize: a --prior density is the prior of --map");
  if (options.map && !run.model.prior_logpdf && !run.prior)
    throw Error(fmt::format("optimize --map: the compiler derived no prior density for model "
                            "'{}': {}",
                            run.info.name, run.info.no_prior_reason));
  return space;
}

Optimum maximize(const ObjectiveFunction& objective, const MethodRun& run,
                 const OptimizeOptions& options) {
  const ParameterSpace space = optimized_parameters(run, options);
  const int64_t n = space.n_theta();
  const std::vector<double>& given = *run.fixed;
  const std::vector<double> u0 = space.unconstrain(
      {given.data(), static_cast<size_t>(n)}); // names a value outside its support

  LBFGSpp::LBFGSParam<double> param;
  param.epsilon = 1e-10; // absolute gradient norm: rarely reached on log-likelihoods in the 1000s
  param.epsilon_rel = options.tolerance;
  param.max_iterations = static_cast<int>(options.max_iterations);
  param.max_linesearch = 40;
  LBFGSpp::LBFGSSolver<double> solver(param);

  Optimum best;
  best.map = options.map;
  best.objective = -std::numeric_limits<double>::infinity();
  for (const LearnedParam& p : space.learned())
    best.learned.push_back(run.info.params[p.index].name);
  Optimum record; // the path of every start
  const LogPrior prior(run.model, space, given, run.prior);
  for (int64_t k = 0; k < std::max<int64_t>(options.inits, 1); ++k) {
    const std::vector<double> uk = start_point(u0, run.seed, k);
    Eigen::VectorXd u =
        Eigen::Map<const Eigen::VectorXd>(uk.data(), static_cast<Eigen::Index>(uk.size()));
    Objective f(objective, space, given, record, k, options.map ? &prior : nullptr);
    const StartOutcome o = run_start(solver, f, u, space, given, record, options);
    best.starts.push_back(o.start);
    if (o.best && o.best->objective > best.objective) {
      best.log_likelihood = o.best->log_likelihood;
      best.objective = o.best->objective;
      best.converged = o.start.converged;
      best.message = o.message;
      best.iterations = o.iterations;
      best.theta.assign(given.begin(), given.begin() + n);
      std::copy(o.best->theta.begin(), o.best->theta.end(), best.theta.begin());
      best.gradient_norm = o.best->gradient_norm;
    }
  }
  if (best.theta.empty())
    throw Error("optimize: no start gave a finite log-likelihood (check the data and the "
                "starting values)");
  if (!best.converged) // a coordinate far out: the optimum may be on the support's boundary
    best.message += boundary_note(space, best.theta, options.map);
  best.path = std::move(record.path);
  best.evaluations = static_cast<int64_t>(best.path.size());
  return best;
}

} // namespace ssm
