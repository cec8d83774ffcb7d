// The ELBO of a backward guide (backward_guide.h) for a state-space model, the objective of
// `smooth --method variational`: in closed form for a linear-Gaussian model, by the
// score-function recursions of Chagneux (2023, 4.10-4.12) for any model with densities, and by
// trajectories of the guide differentiated through (pathwise) for a model with state gradients;
// and trajectories drawn from the guide, which estimate the ELBO and the model's functionals.
#pragma once

#include "core/csv.h"
#include "core/frame.h"
#include "core/metadata.h"
#include "kernel/abi.h"
#include "vsmooth/backward_guide.h"

#include <torch/torch.h>

#include <utility>
#include <vector>

namespace ssm::vsmooth {

// The model's compiled log-densities and functionals at batches of states given as tensors
// [K, p] (float64; no gradient flows through them). Each step's frame is made when it is asked
// for, so that memory does not grow with the series' length.
class ModelDensities {
public:
  ModelDensities(const ssm_model& model, const ModelInfo& info, const std::vector<double>& fixed,
                 const ObsData& data);
  // log p(x_0) + log p(y_0 | x_0): [K].
  torch::Tensor initial(const torch::Tensor& x) const;
  // log p(y_t | x_t): [K] (a missing component adds 0).
  torch::Tensor observation(int64_t t, const torch::Tensor& x) const;
  // log p(x_t = x[k] | x_{t-1} = prev[k]): [K]; or, with `pairs`, of every pair (x[i], prev[j]):
  // [I, J].
  torch::Tensor transition(int64_t t, const torch::Tensor& prev, const torch::Tensor& x,
                           bool pairs) const;
  // The gradient of the step's log-densities (log p(x_0) + log p(y_0 | x_0) at t = 0, log p(x_t |
  // x_{t-1}) + log p(y_t | x_t) after) at (prev[k], x[k]) in x_t and in x_{t-1} (zero at t = 0):
  // [K, p] each. Needs has_gradient().
  std::pair<torch::Tensor, torch::Tensor> gradient(int64_t t, const torch::Tensor& prev,
                                                   const torch::Tensor& x) const;
  bool has_gradient() const { return model_.state_gradient && model_.prev_state_gradient; }
  // The functionals' terms at (prev[k], x[k], y_t) (prev unread at t = 0): [K, n_functional].
  torch::Tensor functionals(int64_t t, const torch::Tensor& prev, const torch::Tensor& x) const;
  int64_t n_functional() const { return info_.n_functional; }
  // The gradient of the step's log-densities in the parameters (the score terms) at (prev[k],
  // x[k], y_t) (prev unread at t = 0): [K, n_theta]. Needs the score_terms kernel.
  torch::Tensor parameter_terms(int64_t t, const torch::Tensor& prev, const torch::Tensor& x) const;
  // The gradient of log p(x_{0:T-1}, y) in the parameters (the score terms summed over t),
  // averaged over trajectories x ([T, K, p]): n_theta values. Needs the score_terms kernel.
  std::vector<double> parameter_gradient(const torch::Tensor& x) const;
  // The parameters (n_theta values) of every later evaluation: joint learning moves them.
  void set_parameters(const std::vector<double>& theta) { frame_.set_parameters(theta.data()); }

private:
  // A kernel of functional_terms' signature at (prev[k], x[k], y_t): [K, width].
  torch::Tensor pair_terms(ssm_functional_terms_fn kernel, int64_t width, int64_t t,
                           const torch::Tensor& prev, const torch::Tensor& x) const;
  const double* frame(int64_t t) const {
    return frame_.step(data_.inputs_at(t), t > 0 ? data_.at(t - 1) : nullptr);
  }

  const ssm_model& model_;
  const ModelInfo& info_;
  const ObsData& data_;
  mutable Frame frame_; // each call's frame, rebuilt (the kernels read it before the next)
};

// The matrices of a linear-Gaussian model (docs/abi.md, linear_gaussian), read at every step.
struct LinearGaussian {
  torch::Tensor m0, P0;           // [p], [p, p]
  torch::Tensor F, c, Q, H, d, R; // [T, ...]
};
// Those of the first `steps` time steps (all by default).
LinearGaussian linear_gaussian(const ssm_model& model, const ModelInfo& info,
                               const std::vector<double>& fixed, const ObsData& data,
                               int64_t steps = -1);

// The ELBO's terms per step in closed form for a linear-Gaussian model, [T], differentiable in
// the guide: E_q log p(y_t | x_t), plus E_q log p(x_0) at t = 0 and E_q log p(x_t | x_{t-1})
// after, plus the entropy of q_{t-1|t} at t >= 1 and of q_{T-1} at T - 1. Their sum is the ELBO.
// `q` needs its smoothing marginals.
torch::Tensor closed_form_elbo(const GuidePass& q, const LinearGaussian& model,
                               const torch::Tensor& y);

// The entropy of the guide by steps, [T]: of q_{t-1|t} at t >= 1, plus that of q_{T-1} at T - 1.
// Their sum is H(q), in closed form and differentiable.
torch::Tensor entropy_terms(const GuidePass& q);

// One draw of the pathwise estimate (Chagneux 2023, 4.3.1, by backward trajectory sampling): K
// trajectories of the guide drawn by reparameterisation, x_{T-1} = m + L eps and x_{t-1} = gain
// x_t + offset + noise_chol eps, so that each is a differentiable function of the guide's
// parameters; the model's gradient of log p(x_{0:T-1}, y) in each x_t at them (the compiled
// state gradients) gives the surrogate (1/K) sum_k [sum_t <grad_t^k, x_t^k> - log q(x^k)], the
// guide's parameters held fixed in log q so that only the draws carry its gradient ("sticking the
// landing", Roeder et al. 2017): its gradient is an unbiased estimate of the ELBO's, and at the
// exact guide, where log p(x, y) - log q(x) does not depend on x, it is exactly 0.
struct PathwiseStep {
  torch::Tensor surrogate; // its gradient estimates the ELBO's
  torch::Tensor draws;     // the trajectories, detached: [T, K, p]
  // The ELBO's terms by steps, estimated by the K draws ([T]): the mean of each step's log p
  // minus log q_{t-1|t} (and log q_{T-1} at T - 1); their sum is the mean of log p(x, y) - log
  // q(x).
  torch::Tensor per_step;
};
PathwiseStep pathwise_step(const GuidePass& q, const ModelDensities& model, int64_t K,
                           torch::Generator& gen);

// One draw of the score-function estimate, offline: N draws xi_t^i from each q_t, the backward
// weights and the recursion (4.7) for H_t^i over them, then a surrogate whose gradient is (4.12),
// (1/N) sum_i [G_T^i + grad log q_T(xi_T^i) (H_T^i - mean_k H_T^k)] with G (4.11, its baseline
// H_t^i inside) unrolled: each pair's grad log q_{t-1|t} weighted by how much of G_t^i reaches
// the end times its baselined increment. The guide's dependence on its parameters through the
// whole recursion is kept (the thesis' code truncates it).
struct ScoreStep {
  torch::Tensor surrogate; // its gradient estimates the ELBO's
  torch::Tensor per_step;  // mean over i of H_t^i: the ELBO of y_{0:t}, L_t, estimated ([T])
};
ScoreStep score_step(const GuidePass& q, const ModelDensities& model, int64_t N,
                     torch::Generator& gen);

// K trajectories drawn from q by backward sampling, reparameterised (x_{T-1} = m + L eps, x_{t-1} =
// gain x_t + offset + noise_chol eps), so that in grad mode they carry the guide's gradient:
// [T, K, p].
torch::Tensor draw_trajectories(const GuidePass& q, int64_t K, torch::Generator& gen);

// What K trajectories drawn from q by backward sampling say, accumulated step by step (memory
// O(K p), not O(K T p)): log p(x, y) - log q(x) per draw ([K]; its mean estimates the ELBO), the
// sum over t of the functionals' terms per draw ([K, n_functional]), and each step's mean of the
// terms ([T, n_functional]).
struct TrajectoryEstimates {
  torch::Tensor log_weight, functional_sums, functional_means;
};
TrajectoryEstimates estimate_by_trajectories(const GuidePass& q, const ModelDensities& model,
                                             int64_t K, torch::Generator& gen);

} // namespace ssm::vsmooth
