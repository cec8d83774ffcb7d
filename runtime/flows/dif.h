// The Discretely Indexed Flow (Argouarc'h 2024, 4.3.5 and 4.3.8): K location-scale maps
// T_k(x) = (x - m_k) / s_k of the data onto a base density q, and weights w(z) = softmax(MLP(z))
// read at each map's image:
//   p(x) = Σ_k w_k(T_k(x)) q(T_k(x)) |det J_{T_k}(x)|,  |det J_{T_k}| = Π_j 1 / s_kj.
// Sampling: z ~ q, k ~ Cat(w(z)), x = m_k + s_k ⊙ z. The base may be a flow or another DIF (a
// cascade, K_0 · K_1 components). With constant weights it is a diagonal Gaussian mixture, which
// is how it is initialised (init_from_mixture).
// A DIF's maps may be flow layers before the location-scale: T_k(x) = (F(x; k) - m_k) / s_k with
// F a stack of MAF or coupling layers that read the component's index (one-hot) as a context and
// start as the identity.
// The conditional DIF (4.3.11) reads a context ω: the weight network takes [z, ω], and the maps'
// locations and log-scales are offsets of m_k and log s_k by a network of ω (as a mixture density
// network's), which starts at zero so that a fresh conditional DIF is the unconditional one.
#pragma once

#include "flows/density.h"
#include "flows/flows.h"
#include "flows/gmm.h"
#include "nn/mlp.h"

namespace ssm::flows {

class DifImpl : public DensityImpl {
public:
  DifImpl(const DensitySpec& spec, std::shared_ptr<DensityImpl> base);
  using DensityImpl::log_prob;
  using DensityImpl::sample;
  torch::Tensor log_prob(const torch::Tensor& x, const torch::Tensor& context) override;
  torch::Tensor sample(int64_t n, const torch::Tensor& context) override;
  // Unconditional only.
  torch::Tensor expectation(int64_t n, const Integrand& f) override;
  // Each base point z ([m, d]) carried by every map, given the context ([m, c], undefined
  // without one): the points T_k^{-1}(z) ([m, K, d]) and log w_k(z) ([m, K]), differentiable in
  // the weights and z. E_p[f] = E_z[Σ_k w_k(z) f(T_k^{-1}(z))]: the Rao-Blackwellised draws of
  // expectation() and of a variational guide (vi/guide.h).
  std::pair<torch::Tensor, torch::Tensor> transport(const torch::Tensor& z,
                                                    const torch::Tensor& context);
  // log[w_k(T_k(x)) q(T_k(x)) |det J_{T_k}(x)|]: [n, K]; their logsumexp is log p(x) and their
  // softmax the responsibilities v_k(x) (4.70).
  torch::Tensor component_terms(const torch::Tensor& x, const torch::Tensor& context = {});
  // m_k = μ_k, log s_k = log sqrt(diag Σ_k), the weight network's last layer zero with biases
  // log π_k: with a standard normal base (or a fresh flow, the identity over one), p is then
  // exactly the mixture's density when the mixture is diagonal.
  void init_from_mixture(const GaussianMixtureImpl& mixture);
  DensityImpl& base() { return *base_; }
  const DensityImpl& base() const { return *base_; }

  torch::Tensor means;      // [K, d]
  torch::Tensor log_scales; // [K, d]

private:
  // m_k and log s_k for each row of the context: [n, K, d] each (broadcastable [1, K, d] without).
  std::pair<torch::Tensor, torch::Tensor> maps(const torch::Tensor& context);
  // log w(z) given the context: [m, K].
  torch::Tensor log_weights(const torch::Tensor& z, const torch::Tensor& context);
  // The flow maps' context for rows whose component is `component` ([m] indices): the one-hot
  // index, then the DIF's own context (undefined without one).
  torch::Tensor map_context(const torch::Tensor& component, const torch::Tensor& context);
  // F^{-1}(y; k) with k = component: the identity without flow maps.
  torch::Tensor unmap(const torch::Tensor& y, const torch::Tensor& component,
                      const torch::Tensor& context);

  nn::Mlp weights_{nullptr};
  nn::Mlp context_maps_{nullptr}; // ω -> offsets of (m, log s): [n, 2 K d]; only with a context
  std::vector<std::shared_ptr<FlowLayerImpl>> map_layers_; // F; empty for affine maps
  std::shared_ptr<DensityImpl> base_;
};

} // namespace ssm::flows
