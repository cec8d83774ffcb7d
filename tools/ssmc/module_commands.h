// The driver's commands whose code lives in a LibTorch module beside the runtime, opened only when
// the command runs, so that ssmc neither links LibTorch nor pays its start-up for its other
// commands: `ssmc density` (density estimation on data, runtime/flows: libssm_flows.so) and `ssmc
// c2st` (the classifier two-sample test, runtime/lfi: libssm_lfi.so).
#pragma once

#include <string_view>

namespace ssm::tools {

struct ModuleCommand {
  std::string_view name;    // `ssmc NAME ...`
  std::string_view library; // the module's file in the runtime's directory
  std::string_view env;     // the environment variable that may name another file
  std::string_view entry;   // its entry point: int (int argc, char** argv)
  std::string_view what;    // for messages: "the density runtime"
};

// The command called `name`, or null.
const ModuleCommand* find_module_command(std::string_view name);

// Runs `ssmc NAME ARGS` (argv[0] is NAME); returns the exit status.
int run_module_command(const ModuleCommand& command, int argc, char** argv);

} // namespace ssm::tools
