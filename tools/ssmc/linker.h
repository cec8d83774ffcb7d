// Finds ssmc's runtime (relative to the ssmc binary, so the build tree and an installed prefix
// work alike) and links a kernel object with it into an executable using the system C++ driver.
#pragma once

#include <string>

namespace ssm::tools {

struct Toolchain {
  std::string libdir;         // <prefix>/lib/ssmc: libssm_runtime.a, libssm_main.a, kernel_lib.bc
  std::string kernel_library; // kernel_lib.bc
  std::string stdlib_dir;     // <prefix>/share/ssmc/stdlib: the modules `import` finds
  std::string cxx;            // $SSMC_CXX, else the compiler ssmc was built with
};

Toolchain find_toolchain();

// Links `object` into `output` (written atomically). Throws std::runtime_error with the command
// line when the linker fails.
void link_executable(const Toolchain& toolchain, const std::string& object,
                     const std::string& output);

} // namespace ssm::tools
