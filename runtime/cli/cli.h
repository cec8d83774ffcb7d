// The command line of a generated executable (simulate, filter, info), with its streams passed in
// so tests can run it in-process. ssm_main() (abi.h) calls it with stdout and stderr.
#pragma once

#include "kernel/abi.h"

#include <cstdio>

namespace ssm {

// Exit codes: 0 success, 1 runtime error, 2 usage error.
int run_cli(const ssm_model* model, int argc, char** argv, std::FILE* out, std::FILE* err);

} // namespace ssm
