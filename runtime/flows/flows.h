// Normalising flows: a stack of invertible layers that maps the data x to z, and a base density of
// z (the standard normal, or a DIF or another flow: a cascade). The layers: masked autoregressive
// (MAF: an affine map whose shift and log-scale for coordinate i are a MADE network of the
// coordinates before it) and affine coupling (RealNVP: half of the coordinates, alternating, are
// shifted and scaled by a network of the other half). Every layer starts as the identity, so a
// fresh flow is its base density. A layer may read a context (conditional layers): the MADE's and
// the coupling network's extra inputs, as a DIF's flow maps read their component's index.
#pragma once

#include "flows/density.h"
#include "nn/mlp.h"

namespace ssm::flows {

// One invertible layer x -> z with log |det ∂z/∂x|, given a context per row ([n, c], undefined
// for a layer without one).
class FlowLayerImpl : public torch::nn::Module {
public:
  // x: [n, d] -> (z, log |det J|: [n]).
  virtual std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x,
                                                          const torch::Tensor& context) = 0;
  virtual torch::Tensor inverse(const torch::Tensor& z, const torch::Tensor& context) = 0;
};

// `count` layers of `kind` (maf or realnvp) over R^dim reading a context of `context` columns,
// the MAF's order and the coupling's parity alternating, their networks in float32 when
// `single`; and their composition.
std::vector<std::shared_ptr<FlowLayerImpl>>
make_flow_layers(const std::string& kind, int64_t dim, int64_t count,
                 const std::vector<int64_t>& hidden, int64_t context = 0, bool single = false);
std::pair<torch::Tensor, torch::Tensor>
forward_layers(const std::vector<std::shared_ptr<FlowLayerImpl>>& layers, torch::Tensor x,
               const torch::Tensor& context);
torch::Tensor inverse_layers(const std::vector<std::shared_ptr<FlowLayerImpl>>& layers,
                             torch::Tensor z, const torch::Tensor& context);

// MADE (Germain et al. 2015) with outputs (shift, log-scale) per coordinate, in the order
// `order` (order[j] is the j-th coordinate in the autoregressive order); the context's inputs
// reach every hidden unit and, directly, every output (the first coordinate's too, which sees
// no hidden unit).
class MadeImpl : public torch::nn::Module {
public:
  // single: the weights and arithmetic in float32 (inputs and outputs float64).
  MadeImpl(int64_t dim, const std::vector<int64_t>& hidden, const std::vector<int64_t>& order,
           int64_t context = 0, bool single = false);
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x,
                                                  const torch::Tensor& context); // [n, d] each

private:
  std::vector<torch::Tensor> weights_, biases_, masks_;
  torch::Tensor context_out_; // [2 d, c]: the context's direct term in the outputs
  bool single_;
};
TORCH_MODULE(Made);

class MafLayerImpl : public FlowLayerImpl {
public:
  MafLayerImpl(int64_t dim, const std::vector<int64_t>& hidden, bool reversed, int64_t context = 0,
               bool single = false);
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x,
                                                  const torch::Tensor& context) override;
  // d passes of the network.
  torch::Tensor inverse(const torch::Tensor& z, const torch::Tensor& context) override;

private:
  int64_t dim_;
  Made made_{nullptr};
};

class CouplingLayerImpl : public FlowLayerImpl {
public:
  CouplingLayerImpl(int64_t dim, const std::vector<int64_t>& hidden, int64_t parity,
                    int64_t context = 0, bool single = false);
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x,
                                                  const torch::Tensor& context) override;
  torch::Tensor inverse(const torch::Tensor& z, const torch::Tensor& context) override;

private:
  std::pair<torch::Tensor, torch::Tensor> shift_log_scale(const torch::Tensor& kept,
                                                          const torch::Tensor& context);
  torch::Tensor mask_;  // 1 on the coordinates that condition, 0 on those transformed
  torch::Tensor scale_; // log-scale = soft_clamp(scale_ ⊙ tanh(network)), in (-3, 3)
  nn::Mlp net_{nullptr};
};

class FlowImpl : public DensityImpl {
public:
  FlowImpl(const DensitySpec& spec, std::shared_ptr<DensityImpl> base);
  using DensityImpl::log_prob;
  using DensityImpl::sample;
  // The layers read no context; the base does (a conditional DIF below the flow).
  torch::Tensor log_prob(const torch::Tensor& x, const torch::Tensor& context) override;
  torch::Tensor sample(int64_t n, const torch::Tensor& context) override;
  torch::Tensor expectation(int64_t n, const Integrand& f) override;
  DensityImpl& base() { return *base_; }
  const DensityImpl& base() const { return *base_; }

private:
  std::vector<std::shared_ptr<FlowLayerImpl>> layers_;
  std::shared_ptr<DensityImpl> base_;
};

} // namespace ssm::flows
