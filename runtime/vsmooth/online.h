// Online variational smoothing (Chagneux 2023, Algorithm 2 and 4.13, 4.15): the score-function
// recursions (4.7, 4.10-4.12) run forward one observation at a time, with the guide's parameters
// updated at every step by the difference of successive gradient estimates, in memory that does
// not grow with the series' length; and what the recursion estimates on the way: the ELBO of
// y_{0:t}, the model's sum_t functionals under the guide, and the filtering and one-step smoothing
// moments of q.
#pragma once

#include "learning/parameter_space.h"
#include "vsmooth/backward_guide.h"
#include "vsmooth/elbo.h"
#include "vsmooth/variational_smoother.h"

#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ssm::vsmooth {

// The recursion's state after step t: N draws xi_t^i from q_t with log q_t(xi_t^i), H_t^i (4.7),
// G_t^i (4.10-4.11), the sum_t functionals' statistics per draw, q_t, and the Jacobian of q_t's
// mean and covariance in the guide's parameters, carried forward as in real-time recurrent
// learning: the gradient then keeps the guide's dependence on its parameters through the whole
// filter recursion (the thesis's code truncates it to the current step, which moves the fixed
// point of the updates away from the ELBO's maximum). Each step's Jacobian and derivatives are
// taken at the parameters current at that step, as in recursive maximum likelihood.
class OnlineRecursion {
public:
  // `parameter_score`: also carry the model's score terms per draw, for parameter_gradient.
  OnlineRecursion(BackwardGuide guide, const ModelDensities& model, int64_t samples,
                  std::vector<int64_t> sum_components, bool parameter_score = false);

  // Step t (0 first) with y_t ([m]): the gradient estimate of L_t = ELBO(y_{0:t}) at the current
  // parameters, one tensor per guide parameter (4.12). Throws NonFinite when the ELBO's
  // increment or a functional's term is not finite, c10::LinAlgError when a covariance is not
  // positive definite.
  std::vector<torch::Tensor> advance(int64_t t, const torch::Tensor& y_t, torch::Generator& gen);

  double elbo() const { return H_.mean().item<double>(); }     // mean_i H_t^i, estimating L_t
  torch::Tensor functional_sums() const { return F_.mean(0); } // [components]
  // E_q[grad_theta log p(x_{0:t}, y_{0:t})], the gradient of L_t in the model's parameters (q
  // does not depend on them), from the per-draw sums of the score terms: [n_theta].
  torch::Tensor parameter_gradient() const { return S_.mean(0); }
  // q_t's mean and covariance, and E_q[x_{t-1} | y_{0:t}] and its covariance (undefined at t=0).
  const torch::Tensor& filter_mean() const { return mean_; }
  const torch::Tensor& filter_cov() const { return cov_; }
  const torch::Tensor& one_step_mean() const { return one_step_mean_; }
  const torch::Tensor& one_step_cov() const { return one_step_cov_; }
  // d(mean_t, cov_t) / d(parameters): [p + p^2, P], the parameters flattened in order.
  const torch::Tensor& jacobian() const { return jacobian_; }

  struct NonFinite {
    std::string what;
    bool elbo = true;       // the ELBO's increment, rather than a functional's term
    int64_t component = -1; // the functional terms' column at fault
  };

private:
  BackwardGuide guide_;
  const ModelDensities& model_;
  int64_t N_;
  std::vector<int64_t> sum_components_; // the functional terms' columns that are sum_t ones
  torch::Tensor sum_index_;
  std::vector<int64_t> offsets_; // of each parameter in the flattened parameter vector
  int64_t n_parameters_ = 0;
  bool parameter_score_ = false;
  torch::Tensor mean_, cov_, jacobian_, xi_, log_q_, H_, G_, F_, S_;
  torch::Tensor one_step_mean_, one_step_cov_;
};

// What online training did, and the last pass's estimates.
struct OnlineTraining {
  int64_t updates = 0; // parameter updates, one per step and pass
  // With parameters learned: the steps whose move in them --clip bounded in some coordinate.
  int64_t clipped_parameter_steps = 0;
  // Each pass's mean_i H_T^i added over the series: the ELBO accumulated while the guide moved
  // (with --epochs 0, an estimate of the guide's own ELBO, biased by O(1/N)).
  std::vector<double> epoch_elbo;
  double elbo = NAN; // the last pass's, added over the series
  // The last pass's estimates of the sum_t functionals (accumulated while the guide moved), added
  // over the series.
  torch::Tensor functional_sums;
  // With parameters learned: the last pass's estimate of E_q[grad_theta log p(x, y)], the
  // gradient in them of the ELBO of every series (each series' parameter_gradient at its last
  // step, added): [n_theta]. With --epochs 0, at the starting parameters and guide.
  torch::Tensor parameter_gradient;
  // Non-empty when training stopped; the guide is then the one under which the last step that
  // succeeded ran.
  std::string failure;
};

// --online-out's layout (offline too, without the ELBO): the step, then q_t's mean and variance
// per state column, then those of the one-step smoothing law of x_{t-1}; and one row of it, the
// one-step cells empty where its mean is undefined (t = 0).
std::string step_moments_header(const ModelInfo& info);
std::string step_moments_row(int64_t t, size_t columns, const torch::Tensor& filter_mean,
                             const torch::Tensor& filter_cov, const torch::Tensor& one_step_mean,
                             const torch::Tensor& one_step_cov);

// One series of the stream: the model's densities at its frames, its observations ([T, m]), its
// data (for messages) and its name ("" when it is the only one).
struct OnlineStream {
  const ModelDensities* model = nullptr;
  torch::Tensor y;
  const ObsData* data = nullptr;
  std::string name;
};

// --learn-params online: the model's parameters follow the difference of successive estimates of
// E_q[grad_theta log p(x_{0:t}, y_{0:t})] (the recursion's parameter_gradient), as the guide
// follows its own (4.13), in the parameter space's unconstrained coordinates u, with Adam.
struct OnlineParameters {
  const ParameterSpace* space = nullptr;
  torch::Tensor u; // [dimension], a leaf the optimiser moves
  double learning_rate = 0;
  // Sets the model's parameters to u's wherever the model is read; throws Error when u leaves
  // the space.
  std::function<void()> move;
};

// Trains the guide by --epochs passes over the series, one after another, one Adam or SGD step
// per observation on the difference of successive gradient estimates (4.13; with several passes,
// the recursive updates of 4.15, the recursion restarted at each pass). Each series restarts the
// recursion, its first step's update its own L_0's gradient: the objective is the sum of the
// series' ELBOs, as offline. Streams the last pass's per-step estimates to --online-out (one
// series); the sum_t functionals estimated only when `functionals` is set, added over the series.
// Memory O(N P + p^2 P + N^2 p) for P guide parameters, whatever the series' lengths.
// With `parameters`, the model's parameters learn beside the guide (OnlineParameters).
OnlineTraining train_online(BackwardGuide& guide, const std::vector<OnlineStream>& streams,
                            const MethodRun& run, const VariationalSmoothOptions& options,
                            bool functionals, torch::Generator& gen,
                            OnlineParameters* parameters = nullptr);

} // namespace ssm::vsmooth
