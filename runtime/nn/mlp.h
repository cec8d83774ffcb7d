// A multilayer perceptron on LibTorch, the first of the networks (an amortised guide's encoder
// today; `net` declarations' MLPs next): its inputs standardised by statistics of the training
// data, hidden layers of a chosen width and activation, a linear output layer that can start at
// a given output (zero weights, the output as its bias), and its saving to and loading from bytes
// in LibTorch's archive format.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ssm::nn {

struct MlpSpec {
  int64_t inputs = 0, outputs = 0;
  std::vector<int64_t> hidden = {64};
  std::string activation = "tanh"; // one of mlp_activations()
  // The weights and the layers' arithmetic in float32 rather than float64; inputs and outputs
  // stay float64 (the model's kernels compute in double), converted at the network's boundary.
  bool single = false;
};

// The activations an MLP may use, in the order --help lists them.
const std::vector<std::string>& mlp_activations();

class MlpImpl : public torch::nn::Module {
public:
  explicit MlpImpl(const MlpSpec& spec);
  // x: [B, inputs] (float64), standardised then passed through the layers: [B, outputs]
  // (float64, whatever the network's own precision).
  torch::Tensor forward(const torch::Tensor& x);
  // Inputs are standardised as (x - mean) / sd; an sd of 0 counts as 1.
  void set_standardisation(const torch::Tensor& mean, const torch::Tensor& sd);
  // The output layer's weights to 0 and its bias to `output`: the network starts constant.
  void start_at(const std::vector<double>& output);
  const MlpSpec& spec() const { return spec_; }
  // Converts the weights to the precision asked for (a network saved in the other one).
  void set_precision(bool single);

  // The network's spec, parameters and buffers as bytes (LibTorch's archive format).
  std::string save() const;
  // The same into an archive (one entry of a larger archive: vi/model_networks.h).
  void write(torch::serialize::OutputArchive& archive) const;

private:
  bool standardises() const; // mean or sd other than 0 and 1

  MlpSpec spec_;
  torch::nn::Sequential layers_;
  torch::Tensor mean_, sd_;
};
TORCH_MODULE(Mlp);

// A network saved by MlpImpl::save to the file `path`. Throws ssm::Error naming the file when it
// is not one.
Mlp load_mlp(const std::string& path);
// A network written by MlpImpl::write. Throws c10::Error or std::out_of_range when it is not one.
Mlp read_mlp(torch::serialize::InputArchive& archive);
// "mlp(inputs = 2, outputs = 3, hidden = [8], activation = tanh)", as the language writes it.
std::string describe(const MlpSpec& spec);

} // namespace ssm::nn
