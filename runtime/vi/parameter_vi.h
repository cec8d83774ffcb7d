// Variational inference of a model's parameters (`vi` on a state-space model whose likelihood is
// exact: linear-Gaussian or finite-state): a density q(u) of the flows room fitted to the
// posterior of the learned parameters on their unconstrained space by maximising the ELBO
// E_q[log p(y, θ(u)) + log |J(u)| - log q(u)] with reparameterised gradients, as Stan's ADVI
// (Kucukelbir et al. 2017) for the Gaussian families; for a mixture or a Discretely Indexed Flow
// the expectation is Rao-Blackwellised over the components (Argouarc'h 2024, 4.76), so that a
// posterior with several modes is within reach. The log posterior and its gradient come from the
// exact smoother (learning/log_posterior.h), the training from LibTorch in the vi module.
// Torch-free: the executable's side includes it.
#pragma once

#include "core/method_registry.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ssm {

// The families of q (`vi --method` on a model that is not over a plate).
inline constexpr const char* kParameterFamilies[] = {"meanfield", "fullrank", "gmm",
                                                     "dif",       "maf",      "realnvp"};

struct ParameterVariationalOptions {
  std::string family = "meanfield";
  int64_t components = 8;      // gmm, dif: K
  int64_t layers = 5;          // maf, realnvp; a dif's flow maps
  std::string maps = "affine"; // dif: location-scale maps, or maf or realnvp layers first
  // dif, maf, realnvp: the density they transport onto, a cascade's next stage (Argouarc'h 2024,
  // 4.3.10): none (N(0, I)), or a maf or realnvp of `layers`, or a dif of `components`.
  std::string base = "none";
  std::vector<int64_t> hidden = {64}; // the networks' hidden layers (dif's weights, maf, realnvp)
  int64_t samples = 1;                // base draws per iteration
  int64_t iterations = 2000;
  double learning_rate = 0.05;       // the Gaussians', the mixture's and the DIF maps' parameters
  double net_learning_rate = 1e-3;   // the networks' weights
  double clip = 100;                 // the gradient's norm (0: not clipped)
  std::string schedule = "constant"; // constant | cosine
  int64_t eval_samples = 1000;       // base draws of the reported ELBO
  int64_t draws = 1000;              // draws written
  std::vector<std::string> fixed;    // --fix
  std::string load_guide;            // a q saved by --save-guide to start from
  // --prior: a density over the learned parameters' unconstrained coordinates (saved by
  // --save-guide or `ssmc density fit`) that replaces their priors in the model: yesterday's
  // posterior as today's prior.
  std::string prior;
  // --laplace-start: q starts at the mode of the log posterior (L-BFGS) with the Laplace
  // approximation's scales, instead of at the parameters' values with unit scales.
  bool laplace_start = false;
  bool single = false; // the networks in float32
};

// Why variational inference of the parameters does not apply to the model, or nullopt
// (methods.cpp: the executable's side asks it).
Refusal parameter_variational_refusal(const ssm_model& model, const ModelInfo& info);

// Fits q from the run's parameter values (q's centre starts there, at unit scale on the
// unconstrained space, as ADVI starts) on run.data, then evaluates the ELBO and draws. Throws
// ssm::Error, prefixed by "vi", for a parameter without a prior, a model the refusal names, or a
// non-finite objective (naming the iteration).
ParameterVariationalFit fit_parameter_variational(const MethodRun& run,
                                                  const ParameterVariationalOptions& options);

} // namespace ssm
