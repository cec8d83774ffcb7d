// Loading the LibTorch part of the vi room at run time: see loader.h.
#include "vi/loader.h"
#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <dlfcn.h>
#include <mutex>
#include <string>

namespace ssm {

namespace {

struct Module {
  void* handle = nullptr;
  VariationalFitFn fit = nullptr;
};

const Module& module(const ModelInfo& info, int threads) {
  static std::mutex mutex;
  static Module m;
  std::lock_guard lock(mutex);
  if (m.fit)
    return m;
  // LibTorch's matrix products run in the system's BLAS (tools/setup.sh installs the serial
  // OpenBLAS); a threaded one, which LibTorch's set_num_threads does not govern, reads its thread
  // count when it is loaded: --threads, unless the user set it.
  for (const char* var : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"})
    setenv(var, std::to_string(std::max(1, threads)).c_str(), 0);
  // An explicit path, not a run path: under a sanitizer dlopen's interceptor is the caller, and
  // the executable's run path is not searched.
  const char* env = std::getenv("SSMC_VI_LIBRARY");
  const std::string path = env && *env                ? std::string(env)
                           : info.runtime_dir.empty() ? std::string("libssm_vi.so")
                                                      : info.runtime_dir + "/libssm_vi.so";
  m.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!m.handle)
    throw Error(fmt::format("vi: cannot load the variational runtime (LibTorch): {}; it is "
                            "built with ssmc where libtorch-dev is installed (tools/setup.sh), "
                            "and SSMC_VI_LIBRARY may name its file",
                            dlerror()));
  const auto layout =
      reinterpret_cast<VariationalLayoutFn>(dlsym(m.handle, kVariationalLayoutSymbol));
  if (!layout || variational_layout() != layout())
    throw Error(fmt::format("vi: the variational runtime {} was built by another ssmc than this "
                            "executable's: rebuild the model with the ssmc beside it",
                            path));
  m.fit = reinterpret_cast<VariationalFitFn>(dlsym(m.handle, kVariationalFitSymbol));
  if (!m.fit)
    throw Error(fmt::format("vi: {} has no {}", path, kVariationalFitSymbol));
  return m;
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
  if (module(run.info, run.threads).fit(&run, &options, &fit, &error) != 0)
    throw Error(error);
  return fit;
}

} // namespace ssm
