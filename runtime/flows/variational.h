// Variational inference with a density of the flows room as the family: KL(p_θ ‖ p) minimised for
// an unnormalised target log-density by the Rao-Blackwellised estimator of Argouarc'h (2024, 4.76
// and A.7), E_z[Σ_k w_k(z) log(p_θ / p̃)(T_k^{-1}(z))] (DensityImpl::expectation), whose gradient
// is the reparameterised one: the DIF's discrete index is summed, never drawn.
#pragma once

#include "flows/density.h"

namespace ssm::flows {

struct ReverseKlOptions {
  int64_t iterations = 2000;
  int64_t draws = 256; // base draws per step (each costs K^2 density terms for a DIF)
  int64_t eval_draws = 8192;
  double learning_rate = 1e-2;
  double clip = 10.0;
  uint64_t seed = 1;
  std::function<void(int64_t, int64_t, double)> progress; // (step, steps, the step's ELBO)
};

struct ReverseKlReport {
  // E_{p_θ}[log p̃ - log p_θ] = log Z - KL(p_θ ‖ p), at the end, on eval_draws fresh draws, with
  // its standard error; equal to -KL for a normalised target.
  double elbo = 0, elbo_se = 0;
  std::vector<double> trace; // each step's estimate
};

// The Rao-Blackwellised terms of log p_θ - log p̃ under p_θ, one per base draw: [n],
// differentiable in the density's weights; their mean estimates KL(p_θ ‖ p) - log Z without bias.
torch::Tensor reverse_kl_terms(DensityImpl& density, const DensityImpl::Integrand& log_target,
                               int64_t n);

// Fits `density` by Adam on the mean of reverse_kl_terms. Throws ssm::Error naming the step when
// the estimate is not finite.
ReverseKlReport fit_reverse_kl(DensityImpl& density, const DensityImpl::Integrand& log_target,
                               const ReverseKlOptions& options);

} // namespace ssm::flows
