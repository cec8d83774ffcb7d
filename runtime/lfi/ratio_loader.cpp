// Loading the LibTorch part of the lfi room at run time: see ratio_loader.h.
#include "lfi/ratio_loader.h"
#include "core/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <mutex>
#include <sstream>

namespace ssm::lfi {

namespace {

struct Module {
  RatioTrainFn train = nullptr;
  RatioOpenFn open = nullptr;
};

// Opened once and never closed: loaded ratios' code lives in it.
const Module& module(const ModelInfo& info, int threads) {
  static std::mutex mutex;
  static Module m;
  std::lock_guard lock(mutex);
  if (m.train)
    return m;
  for (const char* var : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"}) // as vi/loader.cpp
    setenv(var, std::to_string(std::max(1, threads)).c_str(), 0);
  const char* env = std::getenv("SSMC_LFI_LIBRARY");
  const std::string path = env && *env                ? std::string(env)
                           : info.runtime_dir.empty() ? std::string("libssm_lfi.so")
                                                      : info.runtime_dir + "/libssm_lfi.so";
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    throw Error(fmt::format("cannot load the ratio estimation runtime (LibTorch): {}; it is "
                            "built with ssmc where libtorch-dev is installed (tools/setup.sh), "
                            "and SSMC_LFI_LIBRARY may name its file",
                            dlerror()));
  const auto layout = reinterpret_cast<RatioLayoutFn>(dlsym(handle, kRatioLayoutSymbol));
  if (!layout || ratio_layout() != layout())
    throw Error(fmt::format("the ratio estimation runtime {} was built by another ssmc than this "
                            "executable's: rebuild the model with the ssmc beside it",
                            path));
  m.train = reinterpret_cast<RatioTrainFn>(dlsym(handle, kRatioTrainSymbol));
  m.open = reinterpret_cast<RatioOpenFn>(dlsym(handle, kRatioOpenSymbol));
  if (!m.train || !m.open)
    throw Error(fmt::format("{} lacks the ratio estimation entry points", path));
  return m;
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
  if (module(info, options.threads).train(&data, &options, &report, &error) != 0)
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
  std::unique_ptr<LoadedRatio> ratio(module(info, threads).open(&text, &path, &error));
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
