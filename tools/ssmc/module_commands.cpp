// The commands that run in a LibTorch module: see module_commands.h.
#include "module_commands.h"
#include "linker.h"

#include "core/runtime_module.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <cstdlib>
#include <dlfcn.h>
#include <iostream>
#include <string>
#include <thread>

namespace ssm::tools {

namespace {

constexpr ModuleCommand kCommands[] = {
    {"density", "libssm_flows.so", "SSMC_FLOWS_LIBRARY", "ssm_density_main", "the density runtime"},
    {"c2st", "libssm_lfi.so", "SSMC_LFI_LIBRARY", "ssm_c2st_main", "the likelihood-free runtime"},
};

} // namespace

const ModuleCommand* find_module_command(std::string_view name) {
  for (const ModuleCommand& c : kCommands)
    if (c.name == name)
      return &c;
  return nullptr;
}

int run_module_command(const ModuleCommand& command, int argc, char** argv) {
  // As vi's loader does, with the cores as the thread count.
  prepare_blas_environment(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  const std::string env_name(command.env);
  const char* env = std::getenv(env_name.c_str());
  const std::string path =
      env && *env ? std::string(env) : find_toolchain().libdir + "/" + std::string(command.library);
  const std::string name = fmt::format("ssmc {}", command.name);
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    fmt::print(std::cerr,
               "{}: error: cannot load {} (LibTorch): {}; it is built with ssmc where "
               "libtorch-dev is installed (tools/setup.sh), and {} may name its file\n",
               name, command.what, dlerror(), command.env);
    return 1;
  }
  using Entry = int (*)(int, char**);
  auto entry = reinterpret_cast<Entry>(dlsym(handle, std::string(command.entry).c_str()));
  if (!entry) {
    fmt::print(std::cerr, "{}: error: {} has no entry point {}\n", name, path, command.entry);
    return 1;
  }
  std::string program = name;
  argv[0] = program.data();
  return entry(argc, argv);
}

} // namespace ssm::tools
