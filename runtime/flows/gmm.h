// The Gaussian mixture with full or diagonal covariances, fitted by EM: a baseline for density
// estimation and the initialisation of a DIF (dif.h), whose location-scale maps with constant
// weights are exactly a diagonal mixture.
#pragma once

#include "flows/density.h"

namespace ssm::flows {

class GaussianMixtureImpl : public DensityImpl {
public:
  explicit GaussianMixtureImpl(const DensitySpec& spec);
  using DensityImpl::log_prob;
  using DensityImpl::sample;
  // A mixture reads no context.
  torch::Tensor log_prob(const torch::Tensor& x, const torch::Tensor& context) override;
  torch::Tensor sample(int64_t n, const torch::Tensor& context) override;
  // Rao-Blackwellised over the components, as a DIF's (4.76 with constant weights): each base
  // draw ε is carried by every component, x_k = μ_k + L_k ε, and weighted by π_k; differentiable
  // in the weights, means and scales (a Gaussian or a mixture as a variational family).
  torch::Tensor expectation(int64_t n, const Integrand& f) override;
  // L_k as the density reads it: the lower triangle of scale_tril (its diagonal for a diagonal
  // mixture), so that a gradient step cannot give a diagonal mixture a full covariance.
  torch::Tensor cholesky() const;
  // log π_k + log N(x; μ_k, Σ_k): [n, K].
  torch::Tensor component_log_prob(const torch::Tensor& x);
  // Free parameters: K - 1 weights, K·d means and K·d(d+1)/2 (full) or K·d (diagonal) covariance
  // entries, as a GMM's parameters are counted.
  int64_t free_parameter_count() const;

  torch::Tensor log_weights; // [K]
  torch::Tensor means;       // [K, d]
  torch::Tensor scale_tril;  // [K, d, d]: Σ_k = L_k L_kᵀ (diagonal L_k for a diagonal mixture)
};

struct EmReport {
  int64_t iterations = 0;
  double mean_log_likelihood = 0;
  std::vector<double> trace; // the mean log-likelihood after each iteration
  bool converged = false;
};

// Fits `gmm` to the rows of x ([n, d], float64) by EM from k-means++ seeds drawn with torch's
// default generator: at most `iterations` iterations, stopping when the mean log-likelihood gains
// less than `tolerance` (nats per row, as scikit-learn's 1e-3 but tighter). Covariances are
// regularised by 1e-6 times the mean variance; components that lose all their points restart at
// the worst-explained points, one each.
EmReport fit_gmm_em(GaussianMixtureImpl& gmm, const torch::Tensor& x, int64_t iterations = 500,
                    double tolerance = 1e-5);

} // namespace ssm::flows
