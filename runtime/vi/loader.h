// Loading the LibTorch part of the vi room at run time. Executables do not link LibTorch, whose
// start-up costs about 0.6 s and 160 MiB: `vi`'s entry point loads the shared module
// libssm_vi.so (the vi and nn rooms with LibTorch, plugin.cpp) on its first call, from the
// directory of the runtime the model was compiled for, which ssmc writes into its metadata
// (`runtime_dir`), for a built executable and for `ssmc run` alike.
#pragma once

#include "core/method_registry.h"
#include "learning/prior_density.h"
#include "smc/simulate.h"
#include "vi/parameter_vi.h"
#include "vi/variational.h"

#include <memory>
#include <string>
#include <vector>

namespace ssm {

// fit_variational, run by the loaded module: SSMC_VI_LIBRARY if set, else libssm_vi.so in the
// model's runtime directory. Throws ssm::Error when the module cannot be loaded (naming the file
// and why) or was built by another ssmc.
VariationalFit fit_variational_loaded(const MethodRun& run, const VariationalOptions& options);

// fit_parameter_variational, run by the same module.
ParameterVariationalFit
fit_parameter_variational_loaded(const MethodRun& run, const ParameterVariationalOptions& options);

// A --prior density file (sample, optimize --map) read by the same module, over the learned
// parameters' unconstrained coordinates `coordinates` (its columns matched by name). Throws
// ssm::Error, prefixed by `who`, naming the file and why.
std::unique_ptr<PriorDensity> load_prior_density_loaded(const MethodRun& run,
                                                        const std::string& path,
                                                        const std::vector<std::string>& coordinates,
                                                        const std::string& who);

// `simulate` of a model whose relations call networks (vi/network_simulation.h).
struct NetworkSimulationOptions {
  int64_t items = 0;     // --T
  std::string load_nets; // --load-nets (empty: the networks' initialisation under the seed)
  // A language model's sequence ends after the token `end` (--end; -1: none) or at max_length
  // tokens (--length).
  int64_t max_length = 0, end = -1;
  const ObsData* inputs = nullptr; // --inputs: the items' covariates
};
struct NetworkSimulation {
  Simulation simulation;                     // one row per item (t: the item)
  std::vector<ObsData::Sequences> sequences; // the items' sequences, per such observation
};
NetworkSimulation simulate_networks_loaded(const MethodRun& run,
                                           const NetworkSimulationOptions& options);

// What the module exports (extern "C"): its build's layout, the fits and the prior's reading.
inline constexpr const char* kVariationalLayoutSymbol = "ssm_vi_layout";
inline constexpr const char* kVariationalFitSymbol = "ssm_vi_fit";
inline constexpr const char* kParameterFitSymbol = "ssm_vi_fit_parameters";
using VariationalLayoutFn = const char* (*)();
// Returns 0 and fills `out`, or 1 with the error's message in `error`.
using VariationalFitFn = int (*)(const MethodRun* run, const VariationalOptions* options,
                                 VariationalFit* out, std::string* error);
using ParameterFitFn = int (*)(const MethodRun* run, const ParameterVariationalOptions* options,
                               ParameterVariationalFit* out, std::string* error);
inline constexpr const char* kLoadPriorSymbol = "ssm_vi_load_prior";
// Returns 0 and sets *out to a density the caller owns, or 1 with the error's message.
using LoadPriorFn = int (*)(const std::string* path, const std::vector<std::string>* coordinates,
                            const std::string* who, PriorDensity** out, std::string* error);

inline constexpr const char* kSimulateSymbol = "ssm_vi_simulate";
using SimulateFn = int (*)(const MethodRun* run, const NetworkSimulationOptions* options,
                           NetworkSimulation* out, std::string* error);

// A text that differs between builds whose types the module and the executable could disagree
// on: the ABI version and the sizes of what crosses between them.
std::string variational_layout();

} // namespace ssm
