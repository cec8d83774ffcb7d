// The likelihood-to-evidence ratio as a classifier (neural ratio estimation, NRE): what the
// executable and the LibTorch module exchange, and the loader of that module. Executables do not
// link LibTorch (docs/architecture.md): `nre` and `posterior --ratio FILE` open libssm_lfi.so
// (ratio_estimation.cpp, plugin.cpp) from the model's runtime directory when they run, as `vi`
// opens its module; the samplers themselves (ratio_samplers.h) stay Torch-free.
#pragma once

#include "core/metadata.h"
#include "lfi/simulator.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ssm::lfi {

struct RatioTrainingOptions {
  // "a": NRE-A, binary cross-entropy of joint pairs (label 1) against pairs whose parameters were
  // shuffled (label 0), Hermans et al. 2020; "b": NRE-B, the contrastive loss over `atoms`
  // parameters of which one is the pair's own, Durkan et al. 2020.
  std::string variant = "a";
  int64_t atoms = 10;
  std::vector<int64_t> hidden = {32, 32, 32}; // the thesis's classifier: 3 x 32, SiLU
  std::string activation = "silu";
  // sbi's defaults are batch 50, Adam 5e-4, 10% validation, patience 20 epochs. On 10^3 pairs an
  // epoch is 18 steps, and 20 of them stop training long before the classifier has converged
  // (two_moons: C2ST 0.91 there, 0.6-0.8 trained on; bench/README.md). So the patience is also at
  // least `patience_steps` Adam steps, and a plateau halves the step size `decays` times before
  // training stops. A batch of 50 costs this CPU 2.7 times per pair what one of 500 does (small
  // GEMMs), so the default batch (0: auto) grows beyond 50 to keep an epoch to `max_epoch_steps`
  // steps, that of 10^4 pairs: at 10^5 pairs, batches of 500 (sbibm's NRE used 10^4, capped).
  int64_t batch_size = 0;
  int64_t max_epoch_steps = 180;
  double learning_rate = 1e-3;
  double validation_fraction = 0.1;
  int64_t patience = 20;
  int64_t patience_steps = 2000;
  int64_t decays = 3;
  int64_t max_epochs = 5000;
  double clip = 5.0; // gradient norm
  uint64_t seed = 1;
  int threads = 1;
  std::function<void(int64_t epoch, int64_t max_epochs)> progress; // may be empty
};

// Simulated pairs, row-major, with the columns they stand for.
struct RatioTrainingData {
  const double* theta = nullptr;
  const double* x = nullptr;
  int64_t n = 0, n_params = 0, n_obs = 0;
  std::vector<std::string> param_columns, obs_columns;
  std::string simulator;
  std::vector<double> data_values; // the simulator's data items (--data-file), flat
};

struct RatioTrainingReport {
  int64_t epochs = 0, best_epoch = 0, train_rows = 0, validation_rows = 0;
  int64_t patience_epochs = 0, decays = 0, steps = 0; // the patience in epochs, decays made
  int64_t batch_size = 0;                             // the one used (after auto)
  double final_learning_rate = 0;
  double train_loss = 0, validation_loss = 0;
  // NRE-A: the mean of the accuracies on joint and on shuffled validation pairs; NRE-B: how
  // often the pair's own parameters get the largest ratio among the atoms.
  double validation_accuracy = 0;
  bool stopped_early = false;
  double elapsed_s = 0;
  std::string bytes; // the trained classifier, to be written to the --save file
};

// A trained ratio, loaded: log r(theta, x) = the classifier's logit.
class LoadedRatio {
public:
  virtual ~LoadedRatio() = default;
  // out[i] = log r(theta_i, x) for the rows of theta (n x n_params), x one observation.
  virtual void log_ratio(const double* theta, int64_t n, const double* x, double* out) = 0;
  // Warnings for an observation outside the range of the simulations the classifier saw.
  virtual std::vector<std::string> check_observation(const std::vector<double>& x) const = 0;
  virtual const std::vector<std::string>& param_columns() const = 0;
  virtual const std::vector<std::string>& obs_columns() const = 0;
  virtual std::string simulator() const = 0;
  // The data values of the simulator it was trained on.
  virtual const std::vector<double>& data_values() const = 0;
};

// Trains a classifier in the module. Throws ssm::Error when the module cannot be loaded or the
// training fails.
RatioTrainingReport train_ratio_loaded(const ModelInfo& info, const RatioTrainingData& data,
                                       const RatioTrainingOptions& options);
// The classifier saved in `path`, checked against the simulator: its name, columns and data
// values (a const changed in the source goes unnoticed).
std::unique_ptr<LoadedRatio> load_ratio(const ModelInfo& info, const std::string& path,
                                        const Simulator& sim, int threads);

// What the module exports (extern "C"): its build's layout, training, and loading from bytes.
inline constexpr const char* kRatioLayoutSymbol = "ssm_lfi_layout";
inline constexpr const char* kRatioTrainSymbol = "ssm_lfi_train";
inline constexpr const char* kRatioOpenSymbol = "ssm_lfi_open";
using RatioLayoutFn = const char* (*)();
// 0 and `out` filled, or 1 and the error's message.
using RatioTrainFn = int (*)(const RatioTrainingData* data, const RatioTrainingOptions* options,
                             RatioTrainingReport* out, std::string* error);
// The loaded ratio, or null and the error's message (`source` names the bytes' file).
using RatioOpenFn = LoadedRatio* (*)(const std::string* bytes, const std::string* source,
                                     std::string* error);
std::string ratio_layout();

} // namespace ssm::lfi
