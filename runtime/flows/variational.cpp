// Variational inference with a flow or a DIF as the family: see variational.h.
#include "flows/variational.h"
#include "core/error.h"

#include <fmt/format.h>

#include <cmath>

namespace ssm::flows {

torch::Tensor reverse_kl_terms(DensityImpl& density, const DensityImpl::Integrand& log_target,
                               int64_t n) {
  return density.expectation(
      n, [&](const torch::Tensor& x) { return density.log_prob(x) - log_target(x); });
}

ReverseKlReport fit_reverse_kl(DensityImpl& density, const DensityImpl::Integrand& log_target,
                               const ReverseKlOptions& options) {
  torch::manual_seed(options.seed);
  torch::optim::Adam adam(density.parameters(), torch::optim::AdamOptions(options.learning_rate));
  ReverseKlReport report;
  for (int64_t step = 1; step <= options.iterations; ++step) {
    auto loss = reverse_kl_terms(density, log_target, options.draws).mean();
    const double value = loss.item<double>();
    if (!std::isfinite(value))
      throw Error(fmt::format("variational fit: the KL estimate is not finite at step {} (try a "
                              "smaller learning rate)",
                              step));
    adam.zero_grad();
    loss.backward();
    torch::nn::utils::clip_grad_norm_(density.parameters(), options.clip);
    adam.step();
    report.trace.push_back(-value);
    if (options.progress)
      options.progress(step, options.iterations, -value);
  }
  torch::NoGradGuard no_grad;
  auto terms = reverse_kl_terms(density, log_target, options.eval_draws);
  report.elbo = -terms.mean().item<double>();
  report.elbo_se = terms.std().item<double>() / std::sqrt(double(terms.numel()));
  return report;
}

} // namespace ssm::flows
