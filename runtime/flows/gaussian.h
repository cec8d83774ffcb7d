// A Gaussian with a learned mean and Cholesky factor, full or diagonal: the family of ADVI
// (Kucukelbir et al. 2017) when `vi` fits a density to a model's parameters, and a baseline fitted
// by maximum likelihood in `ssmc density`. Its factor's diagonal is learned on the log scale, so
// that a gradient step never takes a scale to 0 or below and small scales are reached in few
// steps, as ADVI parameterises it.
#pragma once

#include "flows/density.h"

namespace ssm::flows {

class GaussianImpl : public DensityImpl {
public:
  // N(0, I) to start; spec.covariance is full or diagonal.
  explicit GaussianImpl(const DensitySpec& spec);
  using DensityImpl::log_prob;
  using DensityImpl::sample;
  // A Gaussian reads no context.
  torch::Tensor log_prob(const torch::Tensor& x, const torch::Tensor& context) override;
  torch::Tensor sample(int64_t n, const torch::Tensor& context) override;
  // Reparameterised: E[f(x)] over x = μ + L ε, ε ~ N(0, I).
  torch::Tensor expectation(int64_t n, const Integrand& f) override;
  // L: exp(log_diag) on the diagonal, the strict lower triangle of `lower` below it (full only).
  torch::Tensor cholesky() const;

  torch::Tensor mean;     // [d]
  torch::Tensor log_diag; // [d]
  torch::Tensor lower;    // [d, d]: only its strict lower triangle is read (full covariance)
};

} // namespace ssm::flows
