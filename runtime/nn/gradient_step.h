// What a training loop does around LibTorch's optimiser step, in few Torch operations: a step of
// a small network costs about a millisecond and every operation a few microseconds of dispatch,
// so the per-tensor loops of Optimizer::zero_grad and nn::utils::clip_grad_norm_ (two or three
// operations per tensor) cost more than the arithmetic. The results are theirs.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace ssm::nn {

// Leaves the gradients of `params` undefined, so that the next backward writes them without a
// zeroing pass (an undefined gradient is a zero one to Adam, which skips it: every parameter
// here gets a gradient at every step).
inline void clear_gradients(const std::vector<torch::Tensor>& params) {
  for (const torch::Tensor& p : params)
    p.mutable_grad().reset();
}

// Scales the gradients so that their joint 2-norm is at most `max_norm`, as clip_grad_norm_ does
// (by max_norm / (norm + 1e-6) when that is below 1), with one norm over all of them and a scaling
// only when it clips. Returns the norm before clipping.
inline double clip_gradients(const std::vector<torch::Tensor>& params, double max_norm) {
  std::vector<torch::Tensor> grads;
  for (const torch::Tensor& p : params)
    if (p.grad().defined())
      grads.push_back(p.grad());
  if (grads.empty())
    return 0;
  torch::NoGradGuard no_grad;
  const double norm = torch::stack(at::_foreach_norm(grads, 2)).norm().item<double>();
  const double scale = max_norm / (norm + 1e-6);
  if (scale < 1)
    at::_foreach_mul_(grads, scale);
  return norm;
}

// A copy of tensors' values, taken and put back in two operations each way (a loop of copy_
// would take one per tensor): the weights of the last finite objective, for instance.
class Checkpoint {
public:
  explicit Checkpoint(std::vector<torch::Tensor> tensors) : tensors_(std::move(tensors)) {}

  void take() {
    torch::NoGradGuard no_grad; // in place on leaves that require a gradient, as Adam's steps
    if (copy_.empty()) {
      for (const torch::Tensor& t : tensors_)
        copy_.push_back(t.detach().clone());
      return;
    }
    at::_foreach_zero_(copy_);
    at::_foreach_add_(copy_, tensors_);
  }
  // Puts the values taken last back (nothing before the first take).
  void restore() {
    if (copy_.empty())
      return;
    torch::NoGradGuard no_grad;
    at::_foreach_zero_(tensors_);
    at::_foreach_add_(tensors_, copy_);
  }

private:
  std::vector<torch::Tensor> tensors_, copy_;
};

} // namespace ssm::nn
