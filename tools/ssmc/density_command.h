// `ssmc density`: density estimation on data alone (runtime/flows). Its code and LibTorch live in
// the module libssm_flows.so beside the runtime, opened only when this command runs, so that ssmc
// neither links LibTorch nor pays its start-up for its other commands.
#pragma once

namespace ssm::tools {

// Runs `ssmc density ARGS` (argv[0] is "density"); returns the exit status.
int run_density_command(int argc, char** argv);

} // namespace ssm::tools
