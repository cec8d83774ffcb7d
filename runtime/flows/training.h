// Fitting a density to data (density estimation): a mixture by EM; a flow or a DIF by maximum
// likelihood with Adam on minibatches, a validation split and early stopping; an energy model by
// training its classifier (data against instrumental draws); or a DIF by the
// GEM surrogate (Argouarc'h 2024, 4.79: the responsibilities frozen at θ_t, gradient steps on
// Σ_i Σ_k v_k(x_i) log h_k(x_i), each M-step accepted only where it raises the surrogate, so the
// likelihood never decreases). A DIF starts from a diagonal mixture fitted by EM (4.3.8).
#pragma once

#include "flows/density.h"

#include <functional>

namespace ssm::flows {

struct FitOptions {
  std::string method = "ml"; // ml, gem (dif), em (gmm), classify (energy)
  int64_t epochs = 200;
  int64_t batch_size = 512;
  double learning_rate = 1e-3;
  double validation = 0.1; // fraction of rows held out for early stopping
  int64_t patience = 20;   // epochs without a better validation score before stopping
  double clip = 10.0;      // gradient norm clipping
  int64_t gem_steps = 5;   // gem: gradient steps per E-step (on the whole data)
  bool init_from_mixture = true;
  int64_t em_iterations = 500;
  uint64_t seed = 1;
  // Called after each epoch with (epoch, epochs, training and validation mean log p).
  std::function<void(int64_t, int64_t, double, double)> progress;
  // Called with warnings (a component's scale collapsing).
  std::function<void(const std::string&)> warn;
};

struct FitReport {
  int64_t epochs = 0, best_epoch = 0;
  double train_mean_logpdf = 0, validation_mean_logpdf = 0; // at the kept weights
  int64_t train_rows = 0, validation_rows = 0;
  std::vector<double> train_trace, validation_trace; // per epoch (per iteration for EM and GEM)
  bool stopped_early = false;
};

// Fits model.density to the rows of x ([n, d], float64, in the data's units), given the rows of
// the context ([n, c]; undefined for an unconditional density); sets the model's standardisation
// from the training rows. Throws ssm::Error on a constant column, too few rows or a non-finite
// loss (naming the epoch and the batch).
FitReport fit_density(DensityModel& model, const torch::Tensor& x, const torch::Tensor& context,
                      const FitOptions& options);

// Rows per evaluation block: bounds the memory of a DIF's n·K (or n·K_0·K_1) points.
int64_t evaluation_rows(const DensityImpl& density);

// The mean log p over the rows of x (given the context's rows), in batches, without gradients.
double mean_log_prob(const DensityModel& model, const torch::Tensor& x,
                     const torch::Tensor& context = {});

} // namespace ssm::flows
