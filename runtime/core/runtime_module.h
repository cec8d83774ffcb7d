// Opening a runtime module: a shared library of ssmc's runtime that holds LibTorch (libssm_vi.so,
// libssm_lfi.so, libssm_vsmooth.so). Executables do not link LibTorch, whose start-up costs about
// 0.3 s and 160 MiB (docs/architecture.md): a method that needs it opens its room's module when it
// runs, from the directory of the runtime the model was compiled for (`runtime_dir` in its
// metadata), for a built executable and for `ssmc run` alike.
#pragma once

#include "core/metadata.h"

#include <string>

namespace ssm {

struct RuntimeModule {
  const char* file;   // "libssm_vi.so"
  const char* env;    // the variable that may name another file: "SSMC_VI_LIBRARY"
  const char* what;   // for messages: "the variational runtime"
  const char* layout; // the exported function returning the module's build layout
};

// The module's handle, opened on the first call for its file and never closed (objects made by
// its code live in it). Its layout must equal `expected_layout`, the executable's copy of the
// same text: a module built by another ssmc is refused. prepare_blas_environment(threads) runs
// before the first module loads. Throws ssm::Error naming the file and why.
void* open_runtime_module(const ModelInfo& info, int threads, const RuntimeModule& module,
                          const std::string& expected_layout);

// Before LibTorch loads: the BLAS its matrix products run in (the serial OpenBLAS tools/setup.sh
// installs, or a threaded one, which reads its thread count when it is loaded) gets `threads`
// threads, and OpenBLAS the kernels for the instructions this CPU has: Debian 12's OpenBLAS
// 0.3.21 does not know recent Xeons and falls back to its generic SSE3 kernels (Prescott). Only
// what the user has not set.
void prepare_blas_environment(int threads);

// The module's entry point `name`, or an ssm::Error naming it.
void* runtime_module_symbol(void* handle, const RuntimeModule& module, const char* name);

} // namespace ssm
