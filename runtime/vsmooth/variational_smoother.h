// Variational smoothing of state-space models (Chagneux 2023, ch. 4): what the executable and the
// LibTorch module exchange, and the loader of that module. `smooth --method variational` fits a
// backward-factorised Gaussian guide q(x_{0:T-1}) = q_{T-1}(x_{T-1}) prod_t q_{t-1|t}(x_{t-1} |
// x_t) whose marginals follow Kalman-like recursions (backward_guide.h), by maximising the ELBO,
// and reports the guide's smoothing marginals and functionals. Executables do not link LibTorch:
// the method opens libssm_vsmooth.so from the model's runtime directory when it runs.
#pragma once

#include "core/method_registry.h"
#include "core/results.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ssm {

struct VariationalSmoothOptions {
  // "analytic": the ELBO in closed form (linear-Gaussian models) and its exact gradient by
  // automatic differentiation; "pathwise": trajectories of the guide drawn by reparameterisation
  // and differentiated through, with the model's compiled state gradients at them; "score": the
  // score-function recursions of the chapter (4.10-4.12), which need only the model's
  // log-densities; "auto": the first of the three that applies (score with --online).
  std::string gradient = "auto";
  // How the observations enter q_t's natural parameters, eta_t = eta_{t|t-1} + e(y_t):
  // "linear" (e(y) = (B' R^-1 (y - d), -B' R^-1 B / 2), a Kalman update: the family holds the
  // exact smoothing law of a linear-Gaussian model) or "mlp" (tanh hidden layers; a diagonal
  // precision 2 softplus(.) as in the thesis).
  std::string encoder = "auto"; // auto: linear for a linear-Gaussian model, else mlp
  std::vector<int64_t> hidden = {100};
  bool hidden_given = false; // --hidden other than auto
  // A model that declares its guide (`guide x[t] ~ backward(...)`, ModelInfo::backward_guide)
  // takes its encoder from there, and refuses --encoder and --hidden.
  // "full": a dense A and Cholesky factors of Q, R and the prior's covariance; "diagonal": all
  // four diagonal (the thesis code's family; fewer parameters, faster to fit when it suffices);
  // "auto": full for a new guide, the loaded guide's own with --load-guide.
  std::string family = "auto";
  // "model": a linear-Gaussian model's guide starts at the model's own recursion (its exact
  // smoothing law when the model is time-invariant, the family full and the encoder linear);
  // another model's at its linear-Gaussian fit by simulation (the network encoder fitted to
  // it); "random": the generic start (the thesis's experiments).
  std::string init = "model";
  // "lbfgs" for the deterministic closed-form ELBO, "adam" for a noisy one; "auto" picks so.
  std::string optimizer = "auto";
  int64_t iterations = -1;  // -1: 200 for lbfgs, 2000 for adam
  double learning_rate = 0; // 0: 1 for lbfgs, 1e-2 for adam
  int64_t samples = 16;     // score: draws from q_t per time step (N); pathwise: trajectories
  int64_t draws = 1000;     // trajectories from q for the functionals and the ELBO's error
  double tolerance = 1e-12; // lbfgs: stops when the ELBO per step changes less than this
  std::string load_guide;   // start from this guide (and train --iterations more)
  // Online training (the score recursions forward, one update per observation: 4.13, and with
  // several epochs 4.15) instead of whole-series gradient steps; its per-step estimates
  // (filtering and one-step smoothing moments, the ELBO so far) streamed to online_out.
  bool online = false;
  int64_t epochs = 1;
  // --optimizer sgd (online): the step gamma_k = learning_rate for the first step_hold updates,
  // then learning_rate (k - step_hold)^-step_decay, each coordinate's move clipped to `clip`.
  int64_t step_hold = 100;
  double step_decay = 0.6, clip = 1;
  std::string online_out;
  // Learn the model's parameters with the guide (Chagneux 2023, 4.2: the ELBO as a surrogate of
  // the log-likelihood; variational EM): every parameter with a default or a prior but those in
  // `fixed`, on the unconstrained space of the learning methods, by Adam at
  // param_learning_rate (0: learning_rate); the gradient in them is the score terms' mean over
  // --samples trajectories of the guide. Online, by rml's Robbins-Monro steps from
  // param_learning_rate (0: 0.05) with step_hold, step_decay and clip, on the recursion's
  // estimate (OnlineParameters).
  bool learn_params = false;
  std::vector<std::string> fixed;
  double param_learning_rate = 0;
  // The guide's smoothing marginals (and per-t functionals) over the whole series after
  // training: always offline; with --online only when asked (--marginals), as their memory
  // grows with T.
  bool marginals = true;
  uint64_t seed = 1;
  int threads = 1;
  // (iteration, iterations), or online (step, steps over all passes); may be empty.
  std::function<void(int64_t, int64_t)> progress;
};

struct VariationalSmoothFit {
  SmoothResult result; // the guide's marginals and the functionals under it; details: the fit
  std::string guide;   // the trained guide, for --save-guide (LibTorch's archive format)
  std::string failure; // non-empty when training stopped on a non-finite ELBO
  // With learn_params: the parameters learned (n_theta values; the fixed ones as given), those
  // of the last finite iteration after a failure.
  std::vector<double> theta;
};

// The fit, run by the module: SSMC_VSMOOTH_LIBRARY if set, else libssm_vsmooth.so in the model's
// runtime directory. Throws ssm::Error when the module cannot be loaded or the fit fails.
VariationalSmoothFit variational_smooth_loaded(const MethodRun& run,
                                               const VariationalSmoothOptions& options);

// What the module exports (extern "C"): its build's layout, and the fit.
inline constexpr const char* kVsmoothLayoutSymbol = "ssm_vsmooth_layout";
inline constexpr const char* kVsmoothFitSymbol = "ssm_vsmooth_fit";
// 0 and `out` filled, or 1 and the error's message.
using VsmoothFitFn = int (*)(const MethodRun* run, const VariationalSmoothOptions* options,
                             VariationalSmoothFit* out, std::string* error);
std::string vsmooth_layout();

// Registers `smooth --method variational` and its options.
void register_variational_smoother(MethodRegistry& registry);

} // namespace ssm
