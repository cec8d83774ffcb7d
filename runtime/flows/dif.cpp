// The Discretely Indexed Flow: see dif.h.
#include "flows/dif.h"

namespace ssm::flows {

DifImpl::DifImpl(const DensitySpec& spec, std::shared_ptr<DensityImpl> base)
    : DensityImpl(spec), base_(std::move(base)) {
  const int64_t K = spec.components, d = spec.dim;
  means = register_parameter("means", torch::randn({K, d}, torch::kFloat64));
  log_scales = register_parameter("log_scales", torch::zeros({K, d}, torch::kFloat64));
  weights_ = register_module("weights", nn::Mlp(nn::MlpSpec{d, K, spec.hidden, "tanh", false}));
  weights_->start_at(std::vector<double>(size_t(K), 0.0));
  register_module("base", base_);
}

torch::Tensor DifImpl::component_terms(const torch::Tensor& x) {
  const int64_t n = x.size(0), K = spec().components, d = dim();
  auto z = (x.unsqueeze(1) - means.unsqueeze(0)) * torch::exp(-log_scales).unsqueeze(0);
  auto flat = z.reshape({n * K, d});
  // w(T_k(x)) for every k, of which only the k-th weight of the k-th image counts.
  auto log_w = torch::log_softmax(weights_->forward(flat), 1).reshape({n, K, K});
  auto own = torch::diagonal(log_w, 0, 1, 2); // [n, K]
  auto log_q = base_->log_prob(flat).reshape({n, K});
  return own + log_q - log_scales.sum(1).unsqueeze(0);
}

torch::Tensor DifImpl::log_prob(const torch::Tensor& x) {
  return torch::logsumexp(component_terms(x), 1);
}

torch::Tensor DifImpl::sample(int64_t n) {
  torch::NoGradGuard no_grad;
  auto z = base_->sample(n);
  auto k = torch::multinomial(torch::softmax(weights_->forward(z), 1), 1).squeeze(1);
  return means.index_select(0, k) + torch::exp(log_scales.index_select(0, k)) * z;
}

torch::Tensor DifImpl::expectation(int64_t n, const Integrand& f) {
  const int64_t K = spec().components, d = dim();
  return base_->expectation(n, [&](const torch::Tensor& z) {
    // Σ_k w_k(z) f(m_k + s_k ⊙ z): the index summed, not drawn.
    const int64_t m = z.size(0);
    auto x = means.unsqueeze(0) + torch::exp(log_scales).unsqueeze(0) * z.unsqueeze(1);
    auto values = f(x.reshape({m * K, d})).reshape({m, K});
    return (torch::softmax(weights_->forward(z), 1) * values).sum(1);
  });
}

void DifImpl::init_from_mixture(const GaussianMixtureImpl& mixture) {
  torch::NoGradGuard no_grad;
  means.copy_(mixture.means);
  // sqrt(diag Σ_k): the norms of the rows of L_k (Σ = L Lᵀ).
  log_scales.copy_(torch::log(torch::linalg_vector_norm(mixture.scale_tril, 2, {2}, false, {})));
  auto log_pi = torch::log_softmax(mixture.log_weights, 0);
  weights_->start_at(std::vector<double>(log_pi.data_ptr<double>(),
                                         log_pi.data_ptr<double>() + log_pi.numel()));
}

} // namespace ssm::flows
