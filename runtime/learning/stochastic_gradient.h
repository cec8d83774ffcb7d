// Maximum likelihood for models whose likelihood is only estimated (particle filters): stochastic
// gradient ascent by Adam (Kingma & Ba 2015) on the unconstrained space of the learned
// parameters, each gradient the score at the current point estimated by a particle smoother over
// the compiler's score terms (Fisher's identity, score.h) with a fresh seed, and the estimate the
// average of the iterates over the second half of the run (Polyak & Juditsky 1992), which
// averages the gradient noise away where the last iterate would keep it.
#pragma once

#include "core/method_registry.h"
#include "learning/optimize.h"

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace ssm {

// The fewest steps: the average and the verdict need a few in the second half.
inline constexpr int64_t kAdamMinSteps = 4;

struct AdamOptions {
  double learning_rate = 0.05; // on the unconstrained scale
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
};

// A start of a method whose estimate averages the iterates of its second half (adam, Monte
// Carlo EM): the averaged point, what ranks it and what judges it.
struct AveragedStart {
  Optimum::Start start;
  std::vector<double> averaged; // n_theta values; empty when the start did not complete
  // The mean estimate of the objective over the averaged half: what ranks the starts.
  double window_objective = -std::numeric_limits<double>::infinity();
  double mean_gradient_norm = 0;
  bool stationary = false;
  std::string message;
  int64_t iterations = 0;
};

// Fills `best` from the completed start of highest window objective: its point, verdict and
// message; the log-likelihood there as the mean of the replicate estimates `final_runs` gives at
// the whole theta (its standard error beside it; NaN when it throws ssm::Error); the objective,
// plus the log prior with options.map. Throws ssm::Error, `none` and the starts' messages, when no
// start completed.
void finish_averaged_starts(
    Optimum& best, const std::vector<AveragedStart>& starts, const MethodRun& run,
    const OptimizeOptions& options, const std::string& none,
    const std::function<std::vector<double>(const std::vector<double>& fixed)>& final_runs);

// From the parameters in run.fixed (then options.inits - 1 random starts around them, as
// optimize's), options.max_iterations Adam steps along the score that `smoother` (a particle
// smoother applicable to the score model) estimates. The path has one evaluation per step: the
// filter's log-likelihood estimate and the norm of the estimated gradient at the iterate. The
// verdict: converged when, over the averaged half, the mean gradient of every coordinate is
// within 3 standard errors of 0 (the iterates hover around a stationary point rather than
// drift). With options.map the log prior density and its gradient are added. Throws ssm::Error
// when no start gives a finite estimate.
Optimum maximize_stochastic(const Method& smoother, const MethodRun& run,
                            const OptimizeOptions& options, const AdamOptions& adam);

} // namespace ssm
