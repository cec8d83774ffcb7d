// Finds ssmc's runtime (relative to the ssmc binary, so the build tree and an installed prefix
// work alike) and links a kernel object with it into an executable using the system C++ driver.
#pragma once

#include <string>
#include <vector>

namespace ssm::tools {

struct Toolchain {
  std::string libdir;         // <prefix>/lib/ssmc: the runtime libraries, kernel_lib.bc
  std::string kernel_library; // kernel_lib.bc
  std::string stdlib_dir;     // <prefix>/share/ssmc/stdlib: the modules `import` finds
  std::string cxx;            // $SSMC_CXX, else the compiler ssmc was built with
};

Toolchain find_toolchain();

// The runtime's static libraries in link order, dependants first (ssm_main, ssm_cli, ...,
// ssm_kernel): one per room of runtime/, as runtime/CMakeLists.txt lists them.
const std::vector<std::string>& runtime_libraries();

// Links `object` into `output` (written atomically), with LLVM's lld when it is on the PATH.
// Throws std::runtime_error with the command line when the linker fails.
void link_executable(const Toolchain& toolchain, const std::string& object,
                     const std::string& output);

} // namespace ssm::tools
