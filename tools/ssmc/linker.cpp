// Toolchain discovery and linking: see linker.h.
#include "linker.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <filesystem>
#include <spawn.h>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char** environ;

namespace fs = std::filesystem;

namespace ssm::tools {

Toolchain find_toolchain() {
  fs::path self = fs::read_symlink("/proc/self/exe");
  fs::path libdir = self.parent_path().parent_path() / "lib" / "ssmc";
  Toolchain tc;
  tc.libdir = libdir.string();
  tc.kernel_library = (libdir / "kernel_lib.bc").string();
  tc.stdlib_dir = (self.parent_path().parent_path() / "share" / "ssmc" / "stdlib").string();
  const char* cxx = std::getenv("SSMC_CXX");
  tc.cxx = cxx && *cxx ? cxx : SSMC_DEFAULT_CXX;
  return tc;
}

void link_executable(const Toolchain& tc, const std::string& object, const std::string& output) {
  std::string tmp = fmt::format("{}.tmp.{}", output, getpid());
  std::vector<std::string> args = {tc.cxx,       object,          "-o",     tmp,   "-L" + tc.libdir,
                                   "-lssm_main", "-lssm_runtime", "-lmvec", "-lm", "-pthread"};
  if (*SSMC_EXTRA_LINK_FLAG)
    args.emplace_back(SSMC_EXTRA_LINK_FLAG);
  std::vector<char*> argv;
  for (std::string& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  int status = 0;
  if (posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0 ||
      waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fs::remove(tmp);
    throw std::runtime_error(fmt::format(
        "linking failed (set SSMC_CXX to choose the C++ driver): {}", fmt::join(args, " ")));
  }
  fs::rename(tmp, output);
}

} // namespace ssm::tools
