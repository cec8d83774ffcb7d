// Loading the LibTorch part of the lfi room at run time: see ratio_loader.h.
#include "lfi/ratio_loader.h"
#include "core/error.h"
#include "core/runtime_module.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ssm::lfi {

namespace {

constexpr RuntimeModule kRatioModule{"libssm_lfi.so", "SSMC_LFI_LIBRARY",
                                     "the ratio estimation runtime", kRatioLayoutSymbol};

template <class Fn> Fn entry(const ModelInfo& info, int threads, const char* name) {
  void* handle = open_runtime_module(info, threads, kRatioModule, ratio_layout());
  return reinterpret_cast<Fn>(runtime_module_symbol(handle, kRatioModule, name));
}

} // namespace

std::string ratio_layout() {
  return fmt::format("abi {}; info {}; options {}; data {}; report {}; built {} {}",
                     SSM_ABI_VERSION, sizeof(ModelInfo), sizeof(RatioTrainingOptions),
                     sizeof(RatioTrainingData), sizeof(RatioTrainingReport), __DATE__, __TIME__);
}

RatioTrainingReport train_ratio_loaded(const ModelInfo& info, const RatioTrainingData& data,
                                       const RatioTrainingOptions& options) {
  RatioTrainingReport report;
  std::string error;
  if (entry<RatioTrainFn>(info, options.threads, kRatioTrainSymbol)(&data, &options, &report,
                                                                    &error) != 0)
    throw Error(error);
  return report;
}

std::unique_ptr<LoadedRatio> load_ratio(const ModelInfo& info, const std::string& path,
                                        const Simulator& sim, int threads) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(fmt::format("cannot read the ratio '{}': {}", path, std::strerror(errno)));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  const std::string text = bytes.str();
  std::string error;
  std::unique_ptr<LoadedRatio> ratio(
      entry<RatioOpenFn>(info, threads, kRatioOpenSymbol)(&text, &path, &error));
  if (!ratio)
    throw Error(error);
  if (ratio->simulator() != info.name || ratio->param_columns() != sim.param_columns() ||
      ratio->obs_columns() != sim.obs_columns())
    throw Error(fmt::format("{}: the ratio was trained on simulator '{}' with parameters ({}) and "
                            "observations ({}), not on '{}' with ({}) and ({})",
                            path, ratio->simulator(), fmt::join(ratio->param_columns(), ", "),
                            fmt::join(ratio->obs_columns(), ", "), info.name,
                            fmt::join(sim.param_columns(), ", "),
                            fmt::join(sim.obs_columns(), ", ")));
  if (ratio->data_values() != sim.data_values())
    throw Error(fmt::format("{}: the ratio was trained with other values of the data items ({}) "
                            "than this run's ({}): train it again with this --data-file",
                            path, fmt::join(ratio->data_values(), ", "),
                            fmt::join(sim.data_values(), ", ")));
  return ratio;
}

} // namespace ssm::lfi
