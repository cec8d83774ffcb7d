// The exact log posterior density of a model's learned parameters on their unconstrained space,
// with its gradient: log p(y | θ(u)) + log p(θ(u)) + log |det J(u)|, the likelihood and its score
// from the exact smoother of the score model (Kalman and RTS, or forward-backward: score.h), the
// prior from the compiler's prior_logpdf kernel. What variational inference of the parameters
// targets (vi/parameter_vi.h); sample's PMMH targets the same density with an estimated likelihood.
#pragma once

#include "core/method_registry.h"
#include "learning/parameter_space.h"
#include "learning/prior_density.h"

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ssm {

// Why the likelihood of the model and its score are not exact (neither linear-Gaussian nor
// finite-state, or no score terms), or nullopt.
Refusal exact_score_refusal(const ssm_model& model, const ModelInfo& info);

// The prior on the unconstrained space, log p(θ(u)) + log |det J(u)|, and its gradient in u, from
// the compiler's prior_logpdf kernel and the parameter space, or a --prior density π(u) in its
// place: one factor of ExactLogPosterior, of PMMH's and SMC²'s targets, of optimize --map's
// objective, and of the joint target of a plate model's parameters and latents (vi/variational.h).
class LogPrior {
public:
  // `fixed`: the parameters then the data values (the learned ones are overwritten per point).
  // `file`: a density of u that replaces the model's priors (run.prior); may be null.
  LogPrior(const ssm_model& model, const ParameterSpace& space, std::vector<double> fixed,
           const PriorDensity* file = nullptr)
      : model_(model), space_(space), fixed_(std::move(fixed)), file_(file) {}
  // The density of u at u; its gradient in u into `gradient` (space.dimension() values) when
  // not null. Throws ssm::Error when θ(u) overflows.
  double evaluate(std::span<const double> u, double* gradient) const;
  // The density of θ at θ(u), log p(θ(u)), with its gradient in u: what a posterior mode
  // maximises (no Jacobian, as Stan's optimize); with a file, log π(u) − log |det J(u)|. Throws
  // as evaluate.
  double theta_density(std::span<const double> u, double* gradient) const;
  // The same at θ itself (its learned components; the rest of `theta` is not read), for an
  // estimate that is a θ, not a u: -inf where a file's u does not exist (θ on its support's
  // edge).
  double theta_density_at(std::span<const double> theta) const;

private:
  double model_density(std::span<const double> u, double* gradient, bool with_jacobian) const;
  double file_density(std::span<const double> u, double* gradient) const;

  const ssm_model& model_;
  const ParameterSpace& space_;
  std::vector<double> fixed_;
  const PriorDensity* file_;
};

class ExactLogPosterior {
public:
  // The parameters learned are every one with a default or a prior minus `fixed`; each needs a
  // prior. Throws ssm::Error, prefixed by `who`, for a model without an exact likelihood, without
  // a prior density, or a learned parameter without a prior (naming it). run.data, run.fixed and
  // run.registry must be set. Without `with_prior`, the density is the likelihood alone, log p(y |
  // θ(u)) (the caller brings a prior on u: vi --prior), and no prior is needed.
  ExactLogPosterior(const MethodRun& run, const std::vector<std::string>& fixed,
                    const std::string& who, bool with_prior = true);
  ~ExactLogPosterior();
  ExactLogPosterior(const ExactLogPosterior&) = delete;
  ExactLogPosterior& operator=(const ExactLogPosterior&) = delete;

  const ParameterSpace& space() const { return space_; }
  const std::string& smoother() const; // "rts", "forward-backward"
  // The unconstrained point of the run's parameter values (where a fit may start).
  std::vector<double> start() const;
  // The density at n points (n x dimension, row-major) into values[n] and gradients (n x
  // dimension), on the run's pool. A point where the likelihood or the prior is not finite, or
  // whose parameters overflow, gets -inf and a zero gradient.
  void evaluate(int64_t n, const double* u, double* values, double* gradients) const;
  // The whole parameter vector (n_theta values) at the unconstrained point u.
  std::vector<double> theta(std::span<const double> u) const;

private:
  struct Impl;
  ParameterSpace space_;
  bool with_prior_;
  std::unique_ptr<Impl> impl_;
};

} // namespace ssm
