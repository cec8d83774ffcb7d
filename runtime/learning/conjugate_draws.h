// Draws of a model's parameters from their full conditionals given complete data (every step's
// states and observations known), for Gibbs sampling (gibbs.h): the statistics are those of EM's
// closed-form M-step (closed_form.h, from the compiler's conjugate pieces), and each update draws
// where the M-step maximises. A Gaussian mean's coefficients, jointly: Gaussian; a noise's sd or
// variance: inverse-gamma in the variance; a categorical's probabilities: Dirichlet; a Bernoulli
// probability: beta; a Poisson rate: gamma.
//
// The priors are read from the compiled prior density rather than from a table of families: a
// block's conditional prior (given the other parameters) is of the conjugate form exactly when its
// log-density is quadratic in the coefficients, resp. -(a + 1) log v - b / v in a variance,
// sum (alpha_k - 1) log p_k in probabilities, and so on; its gradient (prior_logpdf's) then gives
// the hyperparameters from a few evaluations, and one more at another point checks the form.
// Hierarchical priors (`b ~ normal(0, sqrt(s2))`, which makes s2's conditional prior inverse-gamma
// with a larger shape) come out right, as conditionals must.
#pragma once

#include "core/metadata.h"
#include "kernel/abi.h"
#include "learning/closed_form.h"
#include "learning/parameter_space.h"

#include <Eigen/Core>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ssm {

class ConjugateDraws {
public:
  // Every learned parameter of `space` must have a conjugate piece and a prior of the matching
  // form at `theta` (parameters then data values): throws ssm::Error naming the first that does
  // not, with why. `series`: the data whose missing observations stay missing (a piece with
  // partly missing observations at some step has no conjugate conditional); empty when every
  // missing observation is drawn.
  ConjugateDraws(const ssm_model& model, const ModelInfo& info, const ParameterSpace& space,
                 const std::vector<double>& theta, const std::vector<ObsData>& series);

  // Statistics to fill (reset(), then add() every step's completed values, as for the M-step):
  // one per chain, since chains run in parallel.
  ClosedFormMStep statistics() const { return stats_; }

  // Replaces every learned component of theta by a draw from its full conditional given
  // `stats` and the other parameters: the noises given the coefficients, then the coefficients
  // given the noises, then probabilities and rates. Random numbers from (seed, chain,
  // iteration). Throws ssm::Error if a prior leaves its form at the current values.
  void draw(std::vector<double>& theta, const ClosedFormMStep& stats, uint64_t seed, uint32_t chain,
            uint32_t iteration) const;

  // Per learned parameter, its conditional ("normal, with b0 and b1", "inverse-gamma in the
  // variance", ...), for the JSON.
  const std::vector<std::pair<std::string, std::string>>& conditionals() const {
    return conditionals_;
  }

private:
  struct Noise {
    int64_t slot = 0;
    bool sd = false; // the sd itself (else the variance)
  };
  const ssm_model& model_;
  const ModelInfo& info_;
  ClosedFormMStep stats_; // the pieces' layout; draw() reads a chain's own statistics
  std::vector<Noise> noises_;
  std::vector<int64_t> normal_pieces_;            // the active pieces of the normal family
  std::vector<int64_t> coefficients_;             // the Gaussian block, theta components
  std::vector<std::vector<int64_t>> categorical_; // Dirichlet rows
  std::vector<int64_t> bernoulli_, poisson_;      // rate components
  std::vector<std::pair<std::string, std::string>> conditionals_;

  std::vector<double> prior_gradient(const std::vector<double>& theta) const;
  std::string component(int64_t c) const;
  // The measured hyperparameters at theta; throw when the form does not hold.
  std::pair<double, double> inverse_gamma(const std::vector<double>& theta,
                                          const Noise& noise) const;
  std::pair<double, double> beta_or_gamma(const std::vector<double>& theta, int64_t c,
                                          bool beta) const;
  std::vector<double> dirichlet(const std::vector<double>& theta,
                                const std::vector<int64_t>& row) const;
  void gaussian_prior(const std::vector<double>& theta, Eigen::MatrixXd& P,
                      Eigen::VectorXd& linear) const;
  void draw_coefficients(std::vector<double>& theta, const ClosedFormMStep& stats, uint64_t seed,
                         uint32_t chain, uint32_t iteration) const;
};

} // namespace ssm
