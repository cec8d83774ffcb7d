// The Gaussian mixture and its EM: see gmm.h.
#include "flows/gmm.h"
#include "core/error.h"
#include "kernel/special_functions.h"

#include <cmath>

namespace ssm::flows {

GaussianMixtureImpl::GaussianMixtureImpl(const DensitySpec& spec) : DensityImpl(spec) {
  const int64_t K = spec.components, d = spec.dim;
  auto f64 = torch::kFloat64;
  log_weights = register_parameter("log_weights", torch::full({K}, -std::log(double(K)), f64));
  means = register_parameter("means", torch::randn({K, d}, f64));
  scale_tril = register_parameter("scale_tril", torch::eye(d, f64).repeat({K, 1, 1}));
}

torch::Tensor GaussianMixtureImpl::cholesky() const {
  return spec().covariance == "diagonal" ? torch::diag_embed(torch::diagonal(scale_tril, 0, 1, 2))
                                         : scale_tril.tril();
}

torch::Tensor GaussianMixtureImpl::component_log_prob(const torch::Tensor& x) {
  const int64_t d = dim();
  const torch::Tensor L = cholesky();
  // y = L_k^{-1} (x - μ_k) for every k: [K, d, n].
  auto diff = (x.unsqueeze(0) - means.unsqueeze(1)).transpose(1, 2);
  auto y = torch::linalg_solve_triangular(L, diff, /*upper=*/false);
  auto log_det = torch::log(torch::diagonal(L, 0, 1, 2).abs()).sum(1);                 // [K]
  auto lp = -0.5 * y.pow(2).sum(1) - log_det.unsqueeze(1) - double(d) * kLogSqrtTwoPi; // [K, n]
  return (lp + torch::log_softmax(log_weights, 0).unsqueeze(1)).transpose(0, 1);
}

torch::Tensor GaussianMixtureImpl::log_prob(const torch::Tensor& x, const torch::Tensor&) {
  return torch::logsumexp(component_log_prob(x), 1);
}

torch::Tensor GaussianMixtureImpl::sample(int64_t n, const torch::Tensor&) {
  torch::NoGradGuard no_grad;
  auto k = torch::multinomial(torch::softmax(log_weights, 0), n, /*replacement=*/true);
  auto z = torch::randn({n, dim(), 1}, torch::kFloat64);
  return means.index_select(0, k) + torch::matmul(cholesky().index_select(0, k), z).squeeze(2);
}

torch::Tensor GaussianMixtureImpl::expectation(int64_t n, const Integrand& f) {
  const int64_t K = spec().components, d = dim();
  auto eps = torch::randn({n, d}, torch::kFloat64);
  // x[i, k] = μ_k + L_k ε_i: [n, K, d].
  auto x = means.unsqueeze(0) + torch::einsum("kij,nj->nki", {cholesky(), eps});
  auto values = f(x.reshape({n * K, d})).reshape({n, K});
  return (torch::softmax(log_weights, 0).unsqueeze(0) * values).sum(1);
}

int64_t GaussianMixtureImpl::free_parameter_count() const {
  const int64_t K = spec().components, d = dim();
  const int64_t cov = spec().covariance == "diagonal" ? d : d * (d + 1) / 2;
  return K - 1 + K * d + K * cov;
}

EmReport fit_gmm_em(GaussianMixtureImpl& gmm, const torch::Tensor& x, int64_t iterations,
                    double tolerance) {
  torch::NoGradGuard no_grad;
  const int64_t n = x.size(0), d = x.size(1), K = gmm.spec().components;
  const bool diagonal = gmm.spec().covariance == "diagonal";
  if (n < K)
    throw Error("a mixture of " + std::to_string(K) + " components needs at least as many rows, " +
                "and the data has " + std::to_string(n));
  auto variance = x.var(0, /*unbiased=*/false);
  const double ridge = 1e-6 * variance.mean().item<double>();
  auto eye = torch::eye(d, torch::kFloat64);

  // k-means++ seeds: each next centre a row drawn with probability proportional to its squared
  // distance to the nearest centre so far.
  auto centres = torch::empty({K, d}, torch::kFloat64);
  centres[0] = x[torch::randint(n, {1}, torch::kInt64).item<int64_t>()];
  auto nearest = (x - centres[0]).pow(2).sum(1);
  for (int64_t k = 1; k < K; ++k) {
    auto total = nearest.sum().item<double>();
    auto probs = total > 0 ? nearest / total : torch::full({n}, 1.0 / double(n), torch::kFloat64);
    centres[k] = x[torch::multinomial(probs, 1).item<int64_t>()];
    nearest = torch::minimum(nearest, (x - centres[k]).pow(2).sum(1));
  }
  gmm.means.copy_(centres);
  gmm.log_weights.fill_(-std::log(double(K)));
  gmm.scale_tril.copy_(torch::diag(variance.sqrt()).repeat({K, 1, 1}));

  EmReport report;
  double previous = -INFINITY;
  bool restarted = false;
  for (int64_t it = 0; it < iterations; ++it) {
    auto lp = gmm.component_log_prob(x); // [n, K]
    auto ll = torch::logsumexp(lp, 1);
    const double mean_ll = ll.mean().item<double>();
    if (!std::isfinite(mean_ll))
      throw Error("EM for the mixture: the log-likelihood is not finite at iteration " +
                  std::to_string(it + 1));
    report.trace.push_back(mean_ll);
    report.iterations = it + 1;
    report.mean_log_likelihood = mean_ll;
    // A restart may lower the likelihood once: that is not convergence.
    if (!restarted && mean_ll - previous < tolerance) {
      report.converged = true;
      break;
    }
    previous = mean_ll;
    // The M-step in closed form, every component at once.
    auto r = torch::exp(lp - ll.unsqueeze(1)); // [n, K]
    auto count = r.sum(0);                     // [K]
    auto safe = count.clamp_min(1e-300).unsqueeze(1);
    auto means = torch::matmul(r.transpose(0, 1), x) / safe;  // [K, d]
    auto centred = x.unsqueeze(0) - means.unsqueeze(1);       // [K, n, d]
    auto weighted = r.transpose(0, 1).unsqueeze(2) * centred; // [K, n, d]
    torch::Tensor cov;
    if (diagonal)
      cov = torch::diag_embed((weighted * centred).sum(1) / safe + ridge);
    else
      cov = torch::matmul(weighted.transpose(1, 2), centred) / safe.unsqueeze(2) + ridge * eye;
    // An empty component restarts at one of the worst-explained points (a different one each),
    // with the data's variance.
    auto empty = count < 1e-8 * double(n);
    restarted = empty.any().item<bool>();
    if (restarted) {
      // The j-th empty component takes the j-th worst row.
      auto worst = std::get<1>(ll.topk(K, 0, /*largest=*/false));
      auto slot = (empty.to(torch::kInt64).cumsum(0) - 1).clamp_min(0);
      means =
          torch::where(empty.unsqueeze(1), x.index_select(0, worst.index_select(0, slot)), means);
      cov =
          torch::where(empty.view({K, 1, 1}), torch::diag(variance + ridge).expand({K, d, d}), cov);
      count = torch::where(empty, torch::ones_like(count), count);
    }
    gmm.means.copy_(means);
    gmm.scale_tril.copy_(torch::linalg_cholesky(cov));
    gmm.log_weights.copy_(torch::log(count / count.sum()));
  }
  return report;
}

} // namespace ssm::flows
