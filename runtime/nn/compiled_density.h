// The model's compiled log-densities as a LibTorch autograd function: where Torch code (a guide, a
// network) produces the values of a model's latent variables, the log joint density is evaluated
// by the compiled kernels, and its gradients come from the compiler too (the state_gradient and
// score_terms kernels), entering Torch's autograd in this function's backward. The model's
// densities are never re-implemented in Torch operations (docs/architecture.md says why).
#pragma once

#include "core/csv.h"
#include "core/metadata.h"
#include "kernel/abi.h"

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace ssm::nn {

// The log joint density of the items of a plate model (the steps of the compiled model, whose
// transition ignores the previous state: passes/plate_items.cpp) at values of their latents.
class CompiledDensity {
public:
  // `fixed`: the parameters, then the data values (the frame's fixed part); the parameters are
  // replaced by the `theta` tensor at each call.
  CompiledDensity(const ssm_model& model, const ModelInfo& info, const ObsData& data,
                  std::vector<double> fixed);

  // z: [I, S, D] (float64), S values of the D state components for each of the items `items`
  // (steps of `data`); theta: [n_theta] (float64). Returns [I, S]: log p(z) + log p(x_n | z). Its
  // gradient flows to z when z requires it (the model must have a state_gradient kernel) and to
  // theta when theta requires it (a score_terms kernel).
  torch::Tensor log_joint(const torch::Tensor& z, const std::vector<int64_t>& items,
                          const torch::Tensor& theta) const;
  // [I, S]: log p(z) alone (the KL term of a bound), its gradients as log_joint's (the gradient
  // kernels at a missing observation).
  torch::Tensor log_prior(const torch::Tensor& z, const std::vector<int64_t>& items,
                          const torch::Tensor& theta) const;

  const ModelInfo& info() const { return info_; }
  const ObsData& data() const { return data_; }

  // What the autograd function calls: values, and the gradients asked for ([I, S, D] and
  // [I, S, n_theta]; left undefined when not asked).
  struct Evaluation {
    torch::Tensor value, grad_z, grad_theta;
  };
  Evaluation evaluate(const torch::Tensor& z, const std::vector<int64_t>& items,
                      const torch::Tensor& theta, bool want_grad_z, bool want_grad_theta,
                      bool prior_only) const;

private:
  // evaluate with the item layout's kernels (kernel/abi.h): one call over the batch, vectorised
  // across its items, where the step layout's take a call per item. `fixed` holds theta.
  Evaluation evaluate_items(const torch::Tensor& z, const std::vector<int64_t>& items,
                            const std::vector<double>& fixed, bool want_grad_z,
                            bool want_grad_theta, bool prior_only) const;

  const ssm_model& model_;
  const ModelInfo& info_;
  const ObsData& data_;
  std::vector<double> fixed_;
};

} // namespace ssm::nn
