// The arguments of a plate model's declared guide (`guide z[n] ~ normal(m, s);`) as a LibTorch
// autograd function: the compiler evaluates the argument expressions and their Jacobian in the
// network outputs they read (the guide_args kernel); backward multiplies the incoming gradient
// by that Jacobian, so the gradient reaches the guide's networks (an encoder) through Torch's
// autograd while the expressions themselves stay compiled, as the model's densities do.
#pragma once

#include "core/csv.h"
#include "core/metadata.h"
#include "kernel/abi.h"

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace ssm::nn {

class CompiledGuide {
public:
  // `fixed`: the parameters, then the data values (the frame's fixed part). Throws ssm::Error
  // when the model has a guide but no guide_args kernel (in the item layout).
  CompiledGuide(const ssm_model& model, const ModelInfo& info, const ObsData& data,
                std::vector<double> fixed);

  // inputs: [I, n_inputs] (float64), the network outputs the guide reads (GuideInfo::inputs, in
  // order) for the items `items`. Returns [I, n_arguments]: every relation's arguments, laid out
  // as GuideInfo says; differentiable in `inputs`.
  torch::Tensor arguments(const torch::Tensor& inputs, const std::vector<int64_t>& items) const;

  // What the autograd function calls: the arguments and the entries of their Jacobian that are
  // not identically zero, [I, GuideInfo::jacobian.size()] (undefined unless asked for), at rows()
  // (argument components) and columns() (inputs).
  std::pair<torch::Tensor, torch::Tensor> evaluate(const torch::Tensor& inputs,
                                                   const std::vector<int64_t>& items,
                                                   bool want_jacobian) const;
  const torch::Tensor& rows() const { return rows_; }
  const torch::Tensor& columns() const { return columns_; }

private:
  const ssm_model& model_;
  const ModelInfo& info_;
  const ObsData& data_;
  std::vector<double> fixed_;
  torch::Tensor rows_, columns_; // of the Jacobian's entries
};

} // namespace ssm::nn
