// Variational inference for models over a plate (static latent-variable models, whose items are
// the steps of the compiled model: passes/plate_items.cpp): a guide q(z_n) per item is trained
// with the model's learned parameters by stochastic gradient ascent (LibTorch's Adam) on the ELBO
// or the IWAE bound, as in Kim, Wiseman & Rush (2018). The model's log-densities and their
// gradients come from the compiled kernels (nn/compiled_density.h); the guide, the objectives
// and their estimators are LibTorch code. This header is LibTorch-free. Executables do not link
// its implementation: they load it with LibTorch when `vi` runs (vi/loader.h).
#pragma once

#include "core/method_registry.h"
#include "vi/parameter_vi.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace ssm {

inline constexpr const char* kMeanFieldName = "meanfield";
inline constexpr const char* kFullRankName = "fullrank";
inline constexpr const char* kAmortizedName = "amortized";

// The gradient estimators of a latent variable's part of the objective.
inline constexpr const char* kReparamName = "reparam";     // z = mu + L eps (continuous)
inline constexpr const char* kScoreName = "score";         // REINFORCE with a baseline
inline constexpr const char* kEnumerateName = "enumerate"; // exact sum over a finite latent
// Gumbel-softmax (Jang, Gu & Poole 2017; Maddison, Mnih & Teh 2017): the model at each value of
// a discrete latent, weighted by a relaxed one-hot draw instead of q (biased, vanishing as the
// temperature goes to 0), or straight-through (the hard draw's value, the relaxed gradient).
inline constexpr const char* kGumbelName = "gumbel";

// Beyond this many joint values of the discrete latents, `auto` samples them (score function)
// rather than summing over them.
inline constexpr int64_t kMaxEnumeration = 256;

struct VariationalOptions {
  std::string family = kMeanFieldName; // meanfield | fullrank (continuous latents)
  std::string objective = "elbo";      // elbo | iwae
  int64_t samples = 1;                 // K: draws per item per step
  // `auto`, an estimator for every latent, or NAME=ESTIMATOR for one latent variable.
  std::vector<std::string> estimators = {"auto"};
  int64_t iterations = 2000;
  double learning_rate = 0.05;
  int64_t batch_size = 0;            // items per step; 0: all
  double clip = 100;                 // the gradient's norm is clipped to this (0: not clipped)
  std::string schedule = "constant"; // constant | cosine (the learning rate's decay to 0)
  std::string baseline = "average";  // score estimators: average | learned | none
  // gumbel: the temperature at iteration i is max(temperature_min, temperature * exp(-decay i)).
  double temperature = 1.0, temperature_decay = 0.0, temperature_min = 0.5;
  bool straight_through = false;
  // KL annealing: the ELBO's KL term weighs min(1, iteration / kl_warmup) (0: always 1).
  int64_t kl_warmup = 0;
  std::vector<std::string> fixed; // --fix: parameters kept at their values
  int64_t eval_samples = 1000;    // draws per item of the final bounds
  std::string test_file;          // --test: held-out items
  // amortized: the encoder's hidden layers and activation, and a saved encoder to start from.
  std::vector<int64_t> hidden = {64};
  std::string activation = "tanh";
  std::string load_guide;
  // The model's networks: their learning rate, and a file of trained ones to start from.
  double net_learning_rate = 1e-3;
  std::string load_nets;
  // --save-density: where the model's one learned density (a latent's `dif`, `maf`, `realnvp`)
  // goes after training, as a file of `ssmc density` (its columns the latent's).
  std::string save_density;
  // Every network (the model's, the encoder, a learned baseline) in float32 (else float64).
  bool single = false;
  // --param-guide: the learned parameters get a density q(θ) of this family (their posterior,
  // with their priors), trained jointly with the items' guides on the ELBO of p(x, z, θ), instead
  // of point estimates. Its iterations, learning rates, clip and schedule are the ones above.
  std::optional<ParameterVariationalOptions> parameter_guide;
  // --item-guide, with parameter_guide: whether each item's Gaussian is conditional on the
  // parameters' draw (linear: mean and log sd affine in its coordinates) or independent of it;
  // auto is linear where the items' guides have parameters of their own.
  std::string item_guide = "auto";
};

// Trains the guide (and the learned parameters) on run.data from run.fixed, then evaluates the
// bounds on the training items and, with options.test_file, on held-out ones. Throws ssm::Error
// for a model the family or an estimator cannot serve (naming the latent and the estimators that
// can), or a non-finite objective (naming the iteration and the last finite value).
VariationalFit fit_variational(const MethodRun& run, const VariationalOptions& options);

// Why variational inference does not apply to the model, or nullopt.
inline Refusal variational_refusal(const ssm_model&, const ModelInfo& info) {
  if (info.step != "n")
    return "the model is not over a plate (this family serves static latent-variable models; a "
           "state-space model's parameters take meanfield, fullrank, gmm, dif, maf or realnvp, "
           "and its states smooth --method variational)";
  return std::nullopt;
}

// The objective and its gradient as one stochastic estimate, for tests of the estimators: the
// guide's parameters of every item and the learned parameters' unconstrained coordinates laid end
// to end (`parameters`), and one estimate of the objective summed over the items with its
// gradient in them, from the draws of step `step`.
class VariationalProblem {
public:
  VariationalProblem(const MethodRun& run, const VariationalOptions& options);
  ~VariationalProblem();
  VariationalProblem(const VariationalProblem&) = delete;
  VariationalProblem& operator=(const VariationalProblem&) = delete;

  std::vector<double> parameters() const;
  void set_parameters(std::span<const double> values);
  // Names of the parameters, in order (`mu[n=0,z]`, `log_sd[n=0,z]`, `logits[n=0,k][1]`, `sigma`).
  std::vector<std::string> parameter_names() const;
  struct Estimate {
    double objective = 0;
    std::vector<double> gradient;
  };
  Estimate estimate(int64_t step);

  struct Impl;

private:
  std::unique_ptr<Impl> impl_;
};

} // namespace ssm
