// What EM's two E-steps share (em.cpp, exact; monte_carlo_em.cpp, particle trajectories): each
// series' steps as weighted points, the expected log joint Q over them with its gradient, and the
// M-step from them (closed form for the conjugate pieces, then L-BFGS over the rest).
#pragma once

#include "core/csv.h"
#include "core/method_registry.h"
#include "exact/weighted_points.h"
#include "learning/closed_form.h"
#include "learning/optimize.h"
#include "learning/score.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace ssm {

// The numerical M-step's own L-BFGS: tight, so that an exact EM iteration is the exact update to
// rounding.
inline constexpr double kEmStepTolerance = 1e-10;
inline constexpr int64_t kEmStepIterations = 100;
// ... but with an SDE's estimated Q (piecewise smooth in theta), a generalised step: a few
// iterations that raise Q, since the Monte Carlo E-step's noise dwarfs what more would gain (4
// climbed less per E-step on the hares and lynx: bench/README.md).
inline constexpr int64_t kSdeEmStepIterations = 10;

// An E-step's result: per series (core/series.h: independent series add), the points of each
// step, and the log-likelihood at the parameters it ran at (exact, or a filter's estimate).
struct EmPoints {
  std::vector<ObsData> series;
  std::vector<std::vector<StepPoints>> points;
  double log_likelihood = 0;
  // For a transition whose density is only estimated (an SDE): its term of Q is sde_q_term.h's,
  // `sde_estimates` estimates per pair from the draws of `sde_seed` (the E-step's), on `pool`.
  int64_t sde_estimates = 0;
  uint64_t sde_seed = 0;
  ThreadPool* pool = nullptr;

  explicit EmPoints(const ObsData& data);
  // Q at `theta` (parameters then data values) under the points, and with `gradient` its
  // gradient per theta component from the score model's terms.
  double q(const ScoreModel& sm, const std::vector<double>& theta,
           std::vector<double>* gradient) const;
  // The M-step from `theta`: the closed form, then L-BFGS over the parameters it leaves (`sm`
  // is there whenever closed.numeric() is not empty). A closed-form update on the boundary of a
  // support (a count of 0) is a degenerate maximum with exact points: it throws ssm::Error
  // naming `iteration` and `start` when `boundary_shrink` is 0. With sampled points it is a count
  // no sample reached: the update is then mixed with the previous value, (1 - boundary_shrink)
  // update + boundary_shrink previous, which is inside every (convex) support; returns whether
  // it was.
  bool m_step(const MethodRun& run, const std::optional<ScoreModel>& sm,
              const ParameterSpace& space, ClosedFormMStep& closed, const OptimizeOptions& options,
              std::vector<double>& theta, int64_t iteration, int64_t start,
              double boundary_shrink = 0) const;
};

// Refuses, naming the observation and the step, a missing observation that another relation
// reads: the E-step's points do not hold its posterior, so neither M-step would be exact.
void check_observations_read(const ModelInfo& info, const ObsData& data);

// What run_em and run_monte_carlo_em set up alike: the score model when there is one, the
// refusal of --map without a prior density or of a parameter left to a numerical M-step without
// a score, and Optimum::m_steps.
struct EmSetup {
  std::optional<ScoreModel> sm;
  ParameterSpace space;
  ClosedFormMStep closed;
  EmSetup(const MethodRun& run, const OptimizeOptions& options, const EmPoints& e);
  void describe(Optimum& out) const;
};

// The objective at theta: the E-step's log-likelihood, plus the log prior with --map; and its
// gradient on the unconstrained scale, from Q's gradient at the parameters the E-step ran at (the
// score there, by Fisher's identity; an estimate of it with a particle E-step), empty without a
// score.
struct EmObjective {
  double value = 0;
  std::vector<double> gradient;
  double gradient_norm() const; // NaN without a score
};
EmObjective em_objective(const MethodRun& run, const EmSetup& setup, const EmPoints& e,
                         const std::vector<double>& theta, bool map);

} // namespace ssm
