// The compiled log joint density as a LibTorch autograd function: see compiled_density.h.
#include "nn/compiled_density.h"
#include "core/error.h"
#include "core/frame.h"
#include "nn/item_batch.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <algorithm>

namespace ssm::nn {

namespace {

// The autograd function: forward evaluates the kernels (and the gradients autograd will need),
// backward scales them by the incoming gradient.
struct LogJointFunction : torch::autograd::Function<LogJointFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& z,
                               const torch::Tensor& theta, const CompiledDensity* density,
                               const std::vector<int64_t>* items, bool prior_only) {
    const bool gz = z.requires_grad(), gt = theta.requires_grad();
    CompiledDensity::Evaluation e = density->evaluate(z, *items, theta, gz, gt, prior_only);
    ctx->save_for_backward({gz ? e.grad_z : torch::Tensor(), gt ? e.grad_theta : torch::Tensor()});
    return e.value;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grad_out) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor g = grad_out[0].unsqueeze(-1); // [I, S, 1]
    torch::Tensor grad_z, grad_theta;
    if (saved[0].defined())
      grad_z = saved[0] * g;
    if (saved[1].defined())
      grad_theta = (saved[1] * g).sum(std::vector<int64_t>{0, 1});
    return {grad_z, grad_theta, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

} // namespace

CompiledDensity::CompiledDensity(const ssm_model& model, const ModelInfo& info, const ObsData& data,
                                 std::vector<double> fixed)
    : model_(model), info_(info), data_(data), fixed_(std::move(fixed)) {}

CompiledDensity::Evaluation CompiledDensity::evaluate(const torch::Tensor& z_in,
                                                      const std::vector<int64_t>& items,
                                                      const torch::Tensor& theta_in,
                                                      bool want_grad_z, bool want_grad_theta,
                                                      bool prior_only) const {
  const int64_t I = z_in.size(0), S = z_in.size(1), D = z_in.size(2), P = info_.n_theta;
  if (D != info_.n_state || static_cast<int64_t>(items.size()) != I || theta_in.numel() != P)
    throw Error("internal error: latent values or parameters of the wrong shape for the model");
  if (want_grad_z && !model_.state_gradient)
    throw Error(fmt::format("internal error: model '{}' has no state gradient kernel ({})",
                            info_.name, info_.no_state_gradient_reason));
  if (want_grad_theta && P > 0 && !model_.score_terms)
    throw Error(fmt::format("internal error: model '{}' has no score terms kernel ({})", info_.name,
                            info_.no_score_reason));
  std::vector<double> fixed = fixed_;
  if (P > 0) { // (forward runs without autograd: no detach)
    const torch::Tensor theta = theta_in.to(torch::kFloat64).contiguous();
    std::copy(theta.data_ptr<double>(), theta.data_ptr<double>() + P, fixed.begin());
  }
  if (model_.item_prior_logpdf && model_.item_obs_logpdf &&
      (!want_grad_z || model_.item_state_gradient) && (!want_grad_theta || model_.item_score_terms))
    return evaluate_items(z_in, items, fixed, want_grad_z, want_grad_theta, prior_only);

  // The kernels read structure-of-arrays doubles: component c of value s at x[c * S + s].
  const torch::Tensor z = z_in.detach().to(torch::kFloat64).permute({0, 2, 1}).contiguous();

  Evaluation e;
  e.value = torch::empty({I, S}, torch::kFloat64);
  if (want_grad_z)
    e.grad_z = torch::empty({I, D, S}, torch::kFloat64);
  if (want_grad_theta)
    e.grad_theta = torch::empty({I, P, S}, torch::kFloat64);
  const double* zs = z.data_ptr<double>();
  double* value = e.value.data_ptr<double>();
  double* gz = want_grad_z ? e.grad_z.data_ptr<double>() : nullptr;
  double* gt = want_grad_theta ? e.grad_theta.data_ptr<double>() : nullptr;
  at::parallel_for(0, I, 1, [&](int64_t begin, int64_t end) {
    Frame frame(info_, fixed);
    std::vector<double> obs(S);
    // The prior alone: the gradient kernels skip a missing observation.
    const std::vector<double> missing(info_.n_obs, NAN);
    for (int64_t i = begin; i < end; ++i) {
      const int64_t t = items[i];
      const double* f = frame.step(data_.inputs_at(t), t > 0 ? data_.at(t - 1) : nullptr);
      const double* x = zs + i * D * S;
      const double* y = prior_only ? missing.data() : data_.at(t);
      double* out = value + i * S;
      // The transition of plate items ignores the previous state: x stands in for it.
      if (t == 0)
        model_.init_logpdf(f, 0, S, S, x, out);
      else
        model_.transition_logpdf(f, t, 0, S, S, x, nullptr, x, out);
      if (!prior_only) {
        model_.obs_logpdf(f, t, 0, S, S, x, y, obs.data());
        for (int64_t s = 0; s < S; ++s)
          out[s] += obs[s];
      }
      if (gz)
        model_.state_gradient(f, t, 0, S, S, x, nullptr, x, y, gz + i * D * S);
      if (gt && P > 0)
        model_.score_terms(f, t, 0, S, S, x, nullptr, x, y, gt + i * P * S);
    }
  });
  if (want_grad_z)
    e.grad_z = e.grad_z.permute({0, 2, 1});
  if (want_grad_theta)
    e.grad_theta = e.grad_theta.permute({0, 2, 1});
  return e;
}

CompiledDensity::Evaluation CompiledDensity::evaluate_items(const torch::Tensor& z_in,
                                                            const std::vector<int64_t>& items,
                                                            const std::vector<double>& fixed,
                                                            bool want_grad_z, bool want_grad_theta,
                                                            bool prior_only) const {
  const int64_t I = z_in.size(0), S = z_in.size(1), D = z_in.size(2), P = info_.n_theta, N = I * S;
  // One particle per (item, draw), p = i * S + s: states, observations and inputs all
  // structure-of-arrays over the N particles (component c of particle p at [c * N + p]).
  const torch::Tensor z = z_in.to(torch::kFloat64).reshape({N, D}).t().contiguous();
  const ItemBatch batch = item_batch(data_, items, S, prior_only);
  Evaluation e;
  const torch::Tensor prior = torch::empty({N}, torch::kFloat64);
  const torch::Tensor obs = torch::empty({N}, torch::kFloat64);
  if (want_grad_z)
    e.grad_z = torch::empty({D, N}, torch::kFloat64);
  if (want_grad_theta)
    e.grad_theta = torch::empty({P, N}, torch::kFloat64);
  const double* zs = z.data_ptr<double>();
  double* lp = prior.data_ptr<double>();
  double* lo = obs.data_ptr<double>();
  double* gz = want_grad_z ? e.grad_z.data_ptr<double>() : nullptr;
  double* gt = want_grad_theta && P > 0 ? e.grad_theta.data_ptr<double>() : nullptr;
  const Frame frame(info_, fixed); // its inputs and previous observation are not read here
  const double* f = frame.values();
  const int64_t* t = batch.steps.data();
  const double* y = batch.obs.data();
  const double* u = batch.inputs.empty() ? nullptr : batch.inputs.data();
  for_item_blocks(N, [&](int64_t begin, int64_t end) {
    model_.item_prior_logpdf(f, t, begin, end, N, zs, y, u, lp);
    if (!prior_only)
      model_.item_obs_logpdf(f, t, begin, end, N, zs, y, u, lo);
    if (gz)
      model_.item_state_gradient(f, t, begin, end, N, zs, y, u, gz);
    if (gt)
      model_.item_score_terms(f, t, begin, end, N, zs, y, u, gt);
  });
  e.value = (prior_only ? prior : prior + obs).view({I, S});
  if (want_grad_z)
    e.grad_z = e.grad_z.t().view({I, S, D});
  if (want_grad_theta)
    e.grad_theta = e.grad_theta.t().view({I, S, P});
  return e;
}

torch::Tensor CompiledDensity::log_joint(const torch::Tensor& z, const std::vector<int64_t>& items,
                                         const torch::Tensor& theta) const {
  return LogJointFunction::apply(z, theta, this, &items, false);
}

torch::Tensor CompiledDensity::log_prior(const torch::Tensor& z, const std::vector<int64_t>& items,
                                         const torch::Tensor& theta) const {
  return LogJointFunction::apply(z, theta, this, &items, true);
}

} // namespace ssm::nn
