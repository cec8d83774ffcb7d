// Loading the LibTorch part of the vi room at run time: see loader.h.
#include "vi/loader.h"
#include "core/error.h"
#include "core/runtime_module.h"

#include <fmt/format.h>

#include <string>

namespace ssm {

namespace {

constexpr RuntimeModule kVariationalModule{"libssm_vi.so", "SSMC_VI_LIBRARY",
                                           "the variational runtime", kVariationalLayoutSymbol};

template <class Fn> Fn fit_function(const ModelInfo& info, int threads, const char* symbol) {
  void* handle = open_runtime_module(info, threads, kVariationalModule, variational_layout());
  return reinterpret_cast<Fn>(runtime_module_symbol(handle, kVariationalModule, symbol));
}

} // namespace

std::string variational_layout() {
  // The build time of this file, which the executable and the module each link, tells a module
  // rebuilt since the executable was linked even where the sizes agree.
  return fmt::format("abi {}; run {}; model info {}; options {}; fit {}; parameter options {}; "
                     "parameter fit {}; data {}; simulation {} {}; built {} {}",
                     SSM_ABI_VERSION, sizeof(MethodRun), sizeof(ModelInfo),
                     sizeof(VariationalOptions), sizeof(VariationalFit),
                     sizeof(ParameterVariationalOptions), sizeof(ParameterVariationalFit),
                     sizeof(ObsData), sizeof(NetworkSimulationOptions), sizeof(NetworkSimulation),
                     __DATE__, __TIME__);
}

VariationalFit fit_variational_loaded(const MethodRun& run, const VariationalOptions& options) {
  VariationalFit fit;
  std::string error;
  if (fit_function<VariationalFitFn>(run.info, run.threads,
                                     kVariationalFitSymbol)(&run, &options, &fit, &error) != 0)
    throw Error(error);
  return fit;
}

ParameterVariationalFit
fit_parameter_variational_loaded(const MethodRun& run, const ParameterVariationalOptions& options) {
  ParameterVariationalFit fit;
  std::string error;
  if (fit_function<ParameterFitFn>(run.info, run.threads, kParameterFitSymbol)(&run, &options, &fit,
                                                                               &error) != 0)
    throw Error(error);
  return fit;
}

NetworkSimulation simulate_networks_loaded(const MethodRun& run,
                                           const NetworkSimulationOptions& options) {
  NetworkSimulation out;
  std::string error;
  if (fit_function<SimulateFn>(run.info, run.threads, kSimulateSymbol)(&run, &options, &out,
                                                                       &error) != 0)
    throw Error(error);
  return out;
}

std::unique_ptr<PriorDensity> load_prior_density_loaded(const MethodRun& run,
                                                        const std::string& path,
                                                        const std::vector<std::string>& coordinates,
                                                        const std::string& who) {
  PriorDensity* density = nullptr;
  std::string error;
  if (fit_function<LoadPriorFn>(run.info, run.threads, kLoadPriorSymbol)(&path, &coordinates, &who,
                                                                         &density, &error) != 0)
    throw Error(error.starts_with(who + ":") // the flows room's own do not name the option
                    ? error
                    : fmt::format("{}: --prior {}: {}", who, path, error));
  return std::unique_ptr<PriorDensity>(density);
}

} // namespace ssm
