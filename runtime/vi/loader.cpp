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

VariationalFitFn fit_function(const ModelInfo& info, int threads) {
  void* handle = open_runtime_module(info, threads, kVariationalModule, variational_layout());
  return reinterpret_cast<VariationalFitFn>(
      runtime_module_symbol(handle, kVariationalModule, kVariationalFitSymbol));
}

} // namespace

std::string variational_layout() {
  // The build time of this file, which the executable and the module each link, tells a module
  // rebuilt since the executable was linked even where the sizes agree.
  return fmt::format("abi {}; run {}; model info {}; options {}; fit {}; data {}; built {} {}",
                     SSM_ABI_VERSION, sizeof(MethodRun), sizeof(ModelInfo),
                     sizeof(VariationalOptions), sizeof(VariationalFit), sizeof(ObsData), __DATE__,
                     __TIME__);
}

VariationalFit fit_variational_loaded(const MethodRun& run, const VariationalOptions& options) {
  VariationalFit fit;
  std::string error;
  if (fit_function(run.info, run.threads)(&run, &options, &fit, &error) != 0)
    throw Error(error);
  return fit;
}

} // namespace ssm
