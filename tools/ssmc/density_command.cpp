// `ssmc density`: opens libssm_flows.so and runs its entry point. See density_command.h.
#include "density_command.h"
#include "linker.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <cstdlib>
#include <dlfcn.h>
#include <iostream>
#include <string>
#include <thread>

namespace ssm::tools {

int run_density_command(int argc, char** argv) {
  // LibTorch's matrix products run in the system's BLAS, which reads its thread count when it is
  // loaded (as vi's loader does): the cores, unless the user set it.
  const std::string cores = std::to_string(std::max(1u, std::thread::hardware_concurrency()));
  for (const char* var : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"})
    setenv(var, cores.c_str(), 0);
  const char* env = std::getenv("SSMC_FLOWS_LIBRARY");
  const std::string path =
      env && *env ? std::string(env) : find_toolchain().libdir + "/libssm_flows.so";
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    fmt::print(std::cerr,
               "ssmc density: error: cannot load the density runtime (LibTorch): {}; it is built "
               "with ssmc where libtorch-dev is installed (tools/setup.sh), and "
               "SSMC_FLOWS_LIBRARY may name its file\n",
               dlerror());
    return 1;
  }
  using Entry = int (*)(int, char**);
  auto entry = reinterpret_cast<Entry>(dlsym(handle, "ssm_density_main"));
  if (!entry) {
    fmt::print(std::cerr, "ssmc density: error: {} has no entry point ssm_density_main\n", path);
    return 1;
  }
  std::string name = "ssmc density";
  argv[0] = name.data();
  return entry(argc, argv);
}

} // namespace ssm::tools
