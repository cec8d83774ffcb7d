// The Discretely Indexed Flow: see dif.h.
#include "flows/dif.h"
#include "core/error.h"

namespace ssm::flows {

DifImpl::DifImpl(const DensitySpec& spec, std::shared_ptr<DensityImpl> base)
    : DensityImpl(spec), base_(std::move(base)) {
  const int64_t K = spec.components, d = spec.dim, c = spec.context;
  means = register_parameter("means", torch::randn({K, d}, torch::kFloat64));
  log_scales = register_parameter("log_scales", torch::zeros({K, d}, torch::kFloat64));
  weights_ =
      register_module("weights", nn::Mlp(nn::MlpSpec{d + c, K, spec.hidden, "tanh", spec.single}));
  weights_->start_at(std::vector<double>(size_t(K), 0.0));
  if (c > 0) {
    context_maps_ = register_module(
        "context_maps", nn::Mlp(nn::MlpSpec{c, 2 * K * d, spec.hidden, "tanh", spec.single}));
    context_maps_->start_at(std::vector<double>(size_t(2 * K * d), 0.0));
  }
  if (spec.maps != "affine") {
    map_layers_ = make_flow_layers(spec.maps, d, spec.layers, spec.hidden, K + c, spec.single);
    for (size_t l = 0; l < map_layers_.size(); ++l)
      register_module("map" + std::to_string(l), map_layers_[l]);
  }
  register_module("base", base_);
}

torch::Tensor DifImpl::map_context(const torch::Tensor& component, const torch::Tensor& context) {
  auto one_hot = torch::one_hot(component, spec().components).to(torch::kFloat64);
  return context.defined() ? torch::cat({one_hot, context}, 1) : one_hot;
}

torch::Tensor DifImpl::unmap(const torch::Tensor& y, const torch::Tensor& component,
                             const torch::Tensor& context) {
  return map_layers_.empty() ? y : inverse_layers(map_layers_, y, map_context(component, context));
}

std::pair<torch::Tensor, torch::Tensor> DifImpl::maps(const torch::Tensor& context) {
  if (!context_maps_)
    return {means.unsqueeze(0), log_scales.unsqueeze(0)};
  const int64_t K = spec().components, d = dim();
  auto offsets = context_maps_->forward(context).reshape({-1, 2, K, d});
  return {means.unsqueeze(0) + offsets.select(1, 0),
          log_scales.unsqueeze(0) + offsets.select(1, 1)};
}

torch::Tensor DifImpl::log_weights(const torch::Tensor& z, const torch::Tensor& context) {
  return torch::log_softmax(weights_->forward(context_maps_ ? torch::cat({z, context}, 1) : z), 1);
}

torch::Tensor DifImpl::component_terms(const torch::Tensor& x, const torch::Tensor& context) {
  const int64_t n = x.size(0), K = spec().components, d = dim();
  if (bool(context_maps_) != context.defined())
    throw Error(context.defined() ? "a context given to an unconditional DIF"
                                  : "a conditional DIF evaluated without its context");
  auto [m, log_s] = maps(context); // [n or 1, K, d]
  // The context of each of the n·K images, row i's repeated K times.
  auto repeated = context.defined() ? context.repeat_interleave(K, 0) : torch::Tensor();
  auto y = x.unsqueeze(1); // F(x; k): x itself for affine maps
  torch::Tensor map_log_det;
  if (!map_layers_.empty()) {
    auto component = torch::arange(K, torch::kInt64).repeat({n});
    auto [mapped, ld] =
        forward_layers(map_layers_, x.repeat_interleave(K, 0), map_context(component, repeated));
    y = mapped.reshape({n, K, d});
    map_log_det = ld.reshape({n, K});
  }
  auto z = (y - m) * torch::exp(-log_s);
  auto flat = z.reshape({n * K, d});
  // w(T_k(x)) for every k, of which only the k-th weight of the k-th image counts.
  auto own = torch::diagonal(log_weights(flat, repeated).reshape({n, K, K}), 0, 1, 2); // [n, K]
  auto log_q = base_->log_prob(flat, repeated).reshape({n, K});
  auto terms = own + log_q - log_s.sum(2).expand({n, K});
  return map_log_det.defined() ? terms + map_log_det : terms;
}

torch::Tensor DifImpl::log_prob(const torch::Tensor& x, const torch::Tensor& context) {
  return torch::logsumexp(component_terms(x, context), 1);
}

torch::Tensor DifImpl::sample(int64_t n, const torch::Tensor& context) {
  torch::NoGradGuard no_grad;
  auto z = base_->sample(n, context);
  auto k = torch::multinomial(torch::exp(log_weights(z, context)), 1); // [n, 1]
  auto [m, log_s] = maps(context);
  auto pick = [&](const torch::Tensor& t) { // row i's k_i-th component: [n, d]
    auto rows = t.expand({n, t.size(1), t.size(2)});
    return rows.gather(1, k.unsqueeze(2).expand({n, 1, dim()})).squeeze(1);
  };
  return unmap(pick(m) + torch::exp(pick(log_s)) * z, k.squeeze(1), context);
}

std::pair<torch::Tensor, torch::Tensor> DifImpl::transport(const torch::Tensor& z,
                                                           const torch::Tensor& context) {
  const int64_t m = z.size(0), K = spec().components, d = dim();
  auto [loc, log_s] = maps(context); // [m or 1, K, d]
  auto y = loc + torch::exp(log_s) * z.unsqueeze(1);
  auto component = torch::arange(K, torch::kInt64).repeat({m});
  auto repeated = context.defined() ? context.repeat_interleave(K, 0) : torch::Tensor();
  auto x = unmap(y.reshape({m * K, d}), component, repeated).reshape({m, K, d});
  return {x, log_weights(z, context)};
}

torch::Tensor DifImpl::expectation(int64_t n, const Integrand& f) {
  if (context_maps_)
    throw Error("the expectation of a conditional DIF needs its context");
  const int64_t K = spec().components, d = dim();
  return base_->expectation(n, [&](const torch::Tensor& z) {
    // Σ_k w_k(z) f(T_k^{-1}(z)): the index summed, not drawn.
    const int64_t m = z.size(0);
    auto [x, log_w] = transport(z, {});
    auto values = f(x.reshape({m * K, d})).reshape({m, K});
    return (torch::exp(log_w) * values).sum(1);
  });
}

void DifImpl::init_from_mixture(const GaussianMixtureImpl& mixture) {
  torch::NoGradGuard no_grad;
  means.copy_(mixture.means);
  // sqrt(diag Σ_k): the norms of the rows of L_k (Σ = L Lᵀ).
  log_scales.copy_(torch::log(torch::linalg_vector_norm(mixture.scale_tril, 2, {2}, false, {})));
  auto log_pi = torch::log_softmax(mixture.log_weights, 0);
  weights_->start_at(
      std::vector<double>(log_pi.data_ptr<double>(), log_pi.data_ptr<double>() + log_pi.numel()));
}

} // namespace ssm::flows
