// Normalising flows: MAF and RealNVP layers and the flow density. See flows.h.
#include "flows/flows.h"
#include "core/error.h"

#include <cmath>
#include <numeric>

namespace ssm::flows {

namespace {

// A layer's log-scales are kept in (-kMaxLogScale, kMaxLogScale) by a soft clamp, so that one
// bad step cannot overflow exp; the stack of layers still reaches any scale.
constexpr double kMaxLogScale = 3.0;

torch::Tensor soft_clamp(const torch::Tensor& a) {
  return kMaxLogScale * torch::tanh(a / kMaxLogScale);
}

} // namespace

MadeImpl::MadeImpl(int64_t dim, const std::vector<int64_t>& hidden,
                   const std::vector<int64_t>& order, int64_t context, bool single)
    : single_(single) {
  // Degrees: input coordinate order[j] has degree j + 1; hidden units cycle through 1..d-1; an
  // output of coordinate i sees the hidden units of degree below i's.
  std::vector<int64_t> input_degree(dim);
  for (int64_t j = 0; j < dim; ++j)
    input_degree[order[j]] = j + 1;
  std::vector<int64_t> previous = input_degree;
  previous.resize(size_t(dim + context), 0); // the context: degree 0, seen by every unit
  auto f64 = single ? torch::kFloat32 : torch::kFloat64;
  auto add_layer = [&](int64_t in, int64_t out, const torch::Tensor& mask) {
    const double bound = 1.0 / std::sqrt(double(in));
    auto index = std::to_string(weights_.size());
    weights_.push_back(
        register_parameter("weight" + index, torch::empty({out, in}, f64).uniform_(-bound, bound)));
    biases_.push_back(register_parameter("bias" + index, torch::zeros({out}, f64)));
    masks_.push_back(register_buffer("mask" + index, mask));
  };
  for (int64_t width : hidden) {
    std::vector<int64_t> degree(width);
    for (int64_t h = 0; h < width; ++h)
      degree[h] = h % std::max<int64_t>(1, dim - 1) + 1;
    auto mask = torch::zeros({width, int64_t(previous.size())}, f64);
    for (int64_t h = 0; h < width; ++h)
      for (size_t i = 0; i < previous.size(); ++i)
        mask[h][int64_t(i)] = degree[h] >= previous[i] ? 1.0 : 0.0;
    add_layer(int64_t(previous.size()), width, mask);
    previous = degree;
  }
  auto mask = torch::zeros({2 * dim, int64_t(previous.size())}, f64);
  for (int64_t i = 0; i < dim; ++i)
    for (size_t h = 0; h < previous.size(); ++h) {
      const double allowed = input_degree[i] > previous[h] ? 1.0 : 0.0;
      mask[i][int64_t(h)] = allowed;
      mask[dim + i][int64_t(h)] = allowed;
    }
  add_layer(int64_t(previous.size()), 2 * dim, mask);
  if (context > 0)
    context_out_ = register_parameter("context_out", torch::zeros({2 * dim, context}, f64));
  torch::NoGradGuard no_grad;
  weights_.back().zero_(); // the layer starts as the identity
}

std::pair<torch::Tensor, torch::Tensor> MadeImpl::forward(const torch::Tensor& x,
                                                          const torch::Tensor& context) {
  auto input = context.defined() ? torch::cat({x, context}, 1) : x;
  auto h = single_ ? input.to(torch::kFloat32) : input;
  const int64_t dim = x.size(1);
  for (size_t l = 0; l < weights_.size(); ++l) {
    h = torch::nn::functional::linear(h, weights_[l] * masks_[l], biases_[l]);
    if (l + 1 < weights_.size())
      h = torch::tanh(h);
  }
  if (context_out_.defined())
    h = h + torch::nn::functional::linear(input.slice(1, dim).to(h.scalar_type()), context_out_);
  auto parts = h.to(torch::kFloat64).chunk(2, 1);
  return {parts[0], soft_clamp(parts[1])};
}

MafLayerImpl::MafLayerImpl(int64_t dim, const std::vector<int64_t>& hidden, bool reversed,
                           int64_t context, bool single)
    : dim_(dim) {
  std::vector<int64_t> order(dim);
  std::iota(order.begin(), order.end(), 0);
  if (reversed)
    std::reverse(order.begin(), order.end());
  made_ = register_module("made", Made(dim, hidden, order, context, single));
}

std::pair<torch::Tensor, torch::Tensor> MafLayerImpl::forward(const torch::Tensor& x,
                                                              const torch::Tensor& context) {
  auto [shift, log_scale] = made_->forward(x, context);
  return {(x - shift) * torch::exp(-log_scale), -log_scale.sum(1)};
}

torch::Tensor MafLayerImpl::inverse(const torch::Tensor& z, const torch::Tensor& context) {
  // x = z ⊙ exp(α(x)) + μ(x) is a fixed point reached coordinate by coordinate in the
  // autoregressive order: after pass j the first j coordinates are exact.
  auto x = torch::zeros_like(z);
  for (int64_t pass = 0; pass < dim_; ++pass) {
    auto [shift, log_scale] = made_->forward(x, context);
    x = z * torch::exp(log_scale) + shift;
  }
  return x;
}

CouplingLayerImpl::CouplingLayerImpl(int64_t dim, const std::vector<int64_t>& hidden,
                                     int64_t parity, int64_t context, bool single) {
  if (dim < 2)
    throw Error("a coupling layer (realnvp) needs at least 2 dimensions");
  auto mask = torch::zeros({dim}, torch::kFloat64);
  for (int64_t i = 0; i < dim; ++i)
    mask[i] = (i + parity) % 2 == 0 ? 1.0 : 0.0;
  mask_ = register_buffer("mask", mask);
  scale_ = register_parameter("scale", torch::ones({dim}, torch::kFloat64));
  nn::MlpSpec net{dim + context, 2 * dim, hidden, "tanh", single};
  net_ = register_module("net", nn::Mlp(net));
  net_->start_at(std::vector<double>(size_t(2 * dim), 0.0)); // the identity
}

std::pair<torch::Tensor, torch::Tensor>
CouplingLayerImpl::shift_log_scale(const torch::Tensor& kept, const torch::Tensor& context) {
  auto parts = net_->forward(context.defined() ? torch::cat({kept, context}, 1) : kept).chunk(2, 1);
  auto free = 1.0 - mask_;
  return {parts[0] * free, soft_clamp(scale_ * torch::tanh(parts[1])) * free};
}

std::pair<torch::Tensor, torch::Tensor> CouplingLayerImpl::forward(const torch::Tensor& x,
                                                                   const torch::Tensor& context) {
  auto [shift, log_scale] = shift_log_scale(x * mask_, context);
  return {x * torch::exp(log_scale) + shift, log_scale.sum(1)};
}

torch::Tensor CouplingLayerImpl::inverse(const torch::Tensor& z, const torch::Tensor& context) {
  auto [shift, log_scale] = shift_log_scale(z * mask_, context);
  return (z - shift) * torch::exp(-log_scale);
}

std::vector<std::shared_ptr<FlowLayerImpl>> make_flow_layers(const std::string& kind, int64_t dim,
                                                             int64_t count,
                                                             const std::vector<int64_t>& hidden,
                                                             int64_t context, bool single) {
  if (kind != "maf" && kind != "realnvp")
    throw Error("unknown flow layers '" + kind + "' (expected maf or realnvp)");
  std::vector<std::shared_ptr<FlowLayerImpl>> layers;
  for (int64_t l = 0; l < count; ++l) {
    if (kind == "maf")
      layers.push_back(std::make_shared<MafLayerImpl>(dim, hidden, l % 2 == 1, context, single));
    else
      layers.push_back(std::make_shared<CouplingLayerImpl>(dim, hidden, l % 2, context, single));
  }
  return layers;
}

std::pair<torch::Tensor, torch::Tensor>
forward_layers(const std::vector<std::shared_ptr<FlowLayerImpl>>& layers, torch::Tensor x,
               const torch::Tensor& context) {
  auto log_det = torch::zeros({x.size(0)}, x.options());
  for (auto& layer : layers) {
    auto [next, ld] = layer->forward(x, context);
    x = next;
    log_det = log_det + ld;
  }
  return {x, log_det};
}

torch::Tensor inverse_layers(const std::vector<std::shared_ptr<FlowLayerImpl>>& layers,
                             torch::Tensor z, const torch::Tensor& context) {
  for (auto it = layers.rbegin(); it != layers.rend(); ++it)
    z = (*it)->inverse(z, context);
  return z;
}

FlowImpl::FlowImpl(const DensitySpec& spec, std::shared_ptr<DensityImpl> base)
    : DensityImpl(spec), base_(std::move(base)) {
  layers_ = make_flow_layers(spec.kind, spec.dim, spec.layers, spec.hidden, 0, spec.single);
  for (size_t l = 0; l < layers_.size(); ++l)
    register_module("layer" + std::to_string(l), layers_[l]);
  register_module("base", base_);
}

torch::Tensor FlowImpl::log_prob(const torch::Tensor& x, const torch::Tensor& context) {
  auto [z, log_det] = forward_layers(layers_, x, {});
  return base_->log_prob(z, context) + log_det;
}

torch::Tensor FlowImpl::sample(int64_t n, const torch::Tensor& context) {
  torch::NoGradGuard no_grad;
  return inverse_layers(layers_, base_->sample(n, context), {});
}

torch::Tensor FlowImpl::expectation(int64_t n, const Integrand& f) {
  return base_->expectation(
      n, [&](const torch::Tensor& z) { return f(inverse_layers(layers_, z, {})); });
}

} // namespace ssm::flows
