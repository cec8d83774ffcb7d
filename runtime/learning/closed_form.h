// EM's closed-form M-step (Cappe, Moulines & Ryden 2005, ch. 10-11; Shumway & Stoffer 1982) from
// the compiler's conjugate pieces (ModelInfo::em_steps, passes/em_m_steps.cpp): the expected
// sufficient statistics of each piece accumulated over the E-step's weighted points, then ratios
// of expected counts (categorical rows, Poisson rates, Bernoulli probabilities) and least-squares
// solutions (the coefficients of a Gaussian mean, then its sd, variance or covariance, pooled
// over the pieces that share it).
//
// Which parameters it updates: those the compiler found closed-form that are learned and, with
// --map, have no prior, together with every other learned parameter of their pieces. The other
// learned parameters are left to the numerical M-step: the expected log joint separates between
// the two sets, so maximising it over the rest alone is the same problem.
#pragma once

#include "core/csv.h"
#include "core/metadata.h"
#include "exact/weighted_points.h"
#include "learning/parameter_space.h"

#include <Eigen/Core>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ssm {

class ClosedFormMStep {
public:
  // `series` are the data the E-step runs on: an observation piece whose observations are partly
  // missing at some step is left to the numerical M-step (its closed form would not be exact).
  ClosedFormMStep(const ModelInfo& info, const ParameterSpace& space, bool map,
                  const std::vector<ObsData>& series);

  // The learned parameters it updates, each with the relations it reads them from; the other
  // learned parameters, each with why it does not.
  const std::vector<std::pair<std::string, std::string>>& closed() const { return closed_; }
  const std::vector<std::pair<std::string, std::string>>& numeric() const { return numeric_; }

  // One M-step: reset(), add() the points of every step of every series, then solve() writes
  // the update of the parameters it updates into theta (the others are read from it).
  void reset();
  // y: the observations at t; u: the inputs at t (null without inputs).
  void add(int64_t t, const StepPoints& points, const double* y, const double* u);
  void solve(std::vector<double>& theta) const;

  // The statistics add() accumulated, for a sampler of the full conditionals (gibbs.cpp) rather
  // than a maximiser: the pieces that update something; per normal or mvnormal piece, its
  // moments; per theta component, a categorical's counts and a rate's numerator (sum w y) and
  // denominator (sum w exposure).
  struct Gaussian { // least-squares statistics: sum w psi psi' and sum w, per noise group; psi =
                    // (features at the coefficients' slots, target - offset) for normal pieces,
                    // (features, target - offset) for mvnormal ones
    std::vector<int64_t> coefficients;    // the theta components of the mean's coefficients
    std::vector<Eigen::MatrixXd> moments; // lower triangles
    std::vector<double> weight;
  };
  const std::vector<int64_t>& active() const { return active_; }
  const Gaussian& gaussian(int64_t piece) const { return normals_[piece]; }
  double count(int64_t c) const { return counts_[c]; }
  double numerator(int64_t c) const { return numerator_[c]; }
  double denominator(int64_t c) const { return denominator_[c]; }
  bool updated(int64_t c) const { return updated_[c]; }
  // What heads add()'s errors ("optimize (em)" by default).
  void set_context(std::string context) { context_ = std::move(context); }

private:
  const ModelInfo& info_;
  std::string context_ = "optimize (em)";
  std::vector<int64_t> active_;                         // the pieces that update something
  std::vector<bool> updated_;                           // per theta component
  std::vector<Gaussian> normals_;                       // per piece (empty for other families)
  std::vector<std::vector<int64_t>> observations_read_; // per piece: the components it reads
  std::vector<double> counts_, numerator_, denominator_;
  std::vector<std::pair<std::string, std::string>> closed_, numeric_;

  void solve_normal(int64_t k, std::vector<double>& theta, std::vector<double>& ssr,
                    std::vector<double>& n) const;
  void solve_mvnormal(int64_t k, std::vector<double>& theta, std::vector<Eigen::MatrixXd>& ssr,
                      std::vector<double>& n) const;
};

} // namespace ssm
