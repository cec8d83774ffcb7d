// Opening the LibTorch modules of the runtime: see runtime_module.h.
#include "core/runtime_module.h"
#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <dlfcn.h>
#include <map>
#include <mutex>

namespace ssm {

namespace {

std::string module_path(const ModelInfo& info, const RuntimeModule& module) {
  const char* env = std::getenv(module.env);
  if (env && *env)
    return env;
  // An explicit path, not a run path: under a sanitizer dlopen's interceptor is the caller, and
  // the executable's run path is not searched.
  return info.runtime_dir.empty() ? std::string(module.file) : info.runtime_dir + "/" + module.file;
}

} // namespace

void prepare_blas_environment(int threads) {
  // LibTorch's set_num_threads does not govern a threaded BLAS.
  for (const char* var : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"})
    setenv(var, std::to_string(std::max(1, threads)).c_str(), 0);
  // On a Sapphire Rapids VM, OpenBLAS picked Prescott: an RNN's training in vi ran 19% faster
  // with SkylakeX's kernels, 11% with Haswell's (bench/README.md).
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f"))
    setenv("OPENBLAS_CORETYPE", "SkylakeX", 0);
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    setenv("OPENBLAS_CORETYPE", "Haswell", 0);
}

void* open_runtime_module(const ModelInfo& info, int threads, const RuntimeModule& module,
                          const std::string& expected_layout) {
  static std::mutex mutex;
  static std::map<std::string, void*> opened; // by file
  std::lock_guard lock(mutex);
  if (auto it = opened.find(module.file); it != opened.end())
    return it->second;
  prepare_blas_environment(threads);
  const std::string path = module_path(info, module);
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    throw Error(fmt::format("cannot load {} (LibTorch): {}; it is built with ssmc where "
                            "libtorch-dev is installed (tools/setup.sh), and {} may name its file",
                            module.what, dlerror(), module.env));
  using LayoutFn = const char* (*)();
  const auto layout = reinterpret_cast<LayoutFn>(dlsym(handle, module.layout));
  if (!layout || expected_layout != layout())
    throw Error(fmt::format("{} ({}) was built by another ssmc than this executable's: rebuild "
                            "the model with the ssmc beside it",
                            module.what, path));
  opened.emplace(module.file, handle);
  return handle;
}

void* runtime_module_symbol(void* handle, const RuntimeModule& module, const char* name) {
  void* symbol = dlsym(handle, name);
  if (!symbol)
    throw Error(fmt::format("{} ({}) has no entry point {}", module.what, module.file, name));
  return symbol;
}

} // namespace ssm
