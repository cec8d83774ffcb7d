// The learned Gaussian: see gaussian.h.
#include "flows/gaussian.h"
#include "kernel/special_functions.h"

namespace ssm::flows {

GaussianImpl::GaussianImpl(const DensitySpec& spec) : DensityImpl(spec) {
  const int64_t d = spec.dim;
  mean = register_parameter("mean", torch::zeros({d}, torch::kFloat64));
  log_diag = register_parameter("log_diag", torch::zeros({d}, torch::kFloat64));
  lower = register_parameter("lower", torch::zeros({d, d}, torch::kFloat64),
                             /*requires_grad=*/spec.covariance == "full");
}

torch::Tensor GaussianImpl::cholesky() const {
  auto diagonal = torch::diag(torch::exp(log_diag));
  return spec().covariance == "full" ? diagonal + lower.tril(-1) : diagonal;
}

torch::Tensor GaussianImpl::log_prob(const torch::Tensor& x, const torch::Tensor&) {
  // y = L^{-1} (x - μ) for every row: [d, n].
  auto y = torch::linalg_solve_triangular(cholesky(), (x - mean).transpose(0, 1),
                                          /*upper=*/false);
  return -0.5 * y.pow(2).sum(0) - log_diag.sum() - double(dim()) * kLogSqrtTwoPi;
}

torch::Tensor GaussianImpl::sample(int64_t n, const torch::Tensor&) {
  torch::NoGradGuard no_grad;
  return mean +
         torch::matmul(torch::randn({n, dim()}, torch::kFloat64), cholesky().transpose(0, 1));
}

torch::Tensor GaussianImpl::expectation(int64_t n, const Integrand& f) {
  return f(mean +
           torch::matmul(torch::randn({n, dim()}, torch::kFloat64), cholesky().transpose(0, 1)));
}

} // namespace ssm::flows
