// A declared guide's compiled arguments as a LibTorch autograd function: see compiled_guide.h.
#include "nn/compiled_guide.h"
#include "core/error.h"
#include "core/frame.h"
#include "nn/item_batch.h"

#include <fmt/format.h>

namespace ssm::nn {

namespace {

struct GuideArgumentsFunction : torch::autograd::Function<GuideArgumentsFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& inputs,
                               const CompiledGuide* guide, const std::vector<int64_t>* items) {
    auto [values, jacobian] = guide->evaluate(inputs, *items, inputs.requires_grad());
    ctx->save_for_backward({jacobian, guide->rows(), guide->columns()});
    ctx->saved_data["inputs"] = inputs.size(1);
    return values;
  }

  // The gradient in input c of item i: sum over the Jacobian's entries (r, c) of J * grad[i, r].
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grad_out) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &jacobian = saved[0], &rows = saved[1], &columns = saved[2];
    if (!jacobian.defined())
      return {torch::Tensor(), torch::Tensor(), torch::Tensor()};
    const torch::Tensor g = grad_out[0].to(torch::kFloat64);
    const torch::Tensor grad =
        torch::zeros({g.size(0), ctx->saved_data["inputs"].toInt()}, torch::kFloat64)
            .index_add_(1, columns, g.index_select(1, rows) * jacobian);
    return {grad, torch::Tensor(), torch::Tensor()};
  }
};

} // namespace

CompiledGuide::CompiledGuide(const ssm_model& model, const ModelInfo& info, const ObsData& data,
                             std::vector<double> fixed)
    : model_(model), info_(info), data_(data), fixed_(std::move(fixed)) {
  if (!info.guide.empty() && !model.item_guide_args) // the item layout's, which vi calls
    throw Error(fmt::format("model '{}' declares a guide, but its arguments were not compiled "
                            "({})",
                            info.name, info.guide.why_not));
  std::vector<int64_t> rows, columns;
  for (const auto& [row, column] : info.guide.jacobian) {
    rows.push_back(row);
    columns.push_back(column);
  }
  rows_ = torch::tensor(rows, torch::kInt64);
  columns_ = torch::tensor(columns, torch::kInt64);
}

std::pair<torch::Tensor, torch::Tensor> CompiledGuide::evaluate(const torch::Tensor& inputs_in,
                                                                const std::vector<int64_t>& items,
                                                                bool want_jacobian) const {
  const GuideInfo& g = info_.guide;
  const int64_t I = static_cast<int64_t>(items.size()), A = g.n_arguments, In = g.n_inputs,
                D = info_.n_state, J = static_cast<int64_t>(g.jacobian.size());
  if (inputs_in.dim() != 2 || inputs_in.size(0) != I || inputs_in.size(1) != In)
    throw Error("internal error: guide inputs of the wrong shape");
  // The kernel reads the state structure-of-arrays, component c of item i at x[c * I + i], with
  // the inputs in their slots (the latents it does not read stay 0).
  const torch::Tensor x = torch::zeros({std::max<int64_t>(1, D), I}, torch::kFloat64);
  const torch::Tensor inputs = inputs_in.detach().to(torch::kFloat64).t(); // [In, I]
  int64_t column = 0;
  for (const GuideInfo::Input& input : g.inputs) {
    x.narrow(0, input.offset, input.size).copy_(inputs.narrow(0, column, input.size));
    column += input.size;
  }
  // out[k * I + i]: the A arguments, then the J entries of the Jacobian.
  const torch::Tensor out = torch::empty({A + J, I}, torch::kFloat64);
  const double* xs = x.data_ptr<double>();
  double* o = out.data_ptr<double>();
  // One call over the batch, vectorised across its items (the item layout).
  const ItemBatch batch = item_batch(data_, items, 1, false);
  const Frame frame(info_, fixed_); // its inputs are not read in the item layout
  const double* u = batch.inputs.empty() ? nullptr : batch.inputs.data();
  for_item_blocks(I, [&](int64_t begin, int64_t end) {
    model_.item_guide_args(frame.values(), batch.steps.data(), begin, end, I, xs, batch.obs.data(),
                           u, o);
  });
  torch::Tensor jacobian;
  if (want_jacobian)
    jacobian = out.narrow(0, A, J).t(); // [I, J]
  return {out.narrow(0, 0, A).t(), jacobian};
}

torch::Tensor CompiledGuide::arguments(const torch::Tensor& inputs,
                                       const std::vector<int64_t>& items) const {
  return GuideArgumentsFunction::apply(inputs, this, &items);
}

} // namespace ssm::nn
