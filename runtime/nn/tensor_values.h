// A tensor's values as a std::vector<double>, for the Torch-free code (parameter spaces, the
// compiled kernels' frames, JSON) that takes plain arrays: one contiguous float64 copy.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace ssm::nn {

inline std::vector<double> to_vector(const torch::Tensor& t) {
  if (t.numel() == 0) // a model without parameters, at every step: no operations
    return {};
  const torch::Tensor c = t.detach().to(torch::kFloat64).contiguous();
  return {c.data_ptr<double>(), c.data_ptr<double>() + c.numel()};
}

} // namespace ssm::nn
