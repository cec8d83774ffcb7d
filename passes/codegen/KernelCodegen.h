// Lowers a model's initial, transition and observation blocks to LLVM kernels over a batch of
// particles (the functions of runtime/include/ssm/abi.h) and the exported `ssm_model_table`.
#pragma once

#include "ir/IR.h"

#include <memory>
#include <stdexcept>
#include <string>

namespace llvm {
class LLVMContext;
class Module;
} // namespace llvm

namespace ssm::codegen {

class CodegenError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// `library` is the distribution and RNG library (kernel_lib.bc) parsed into the same context; the
// kernels are added to it, so the samplers and densities inline into the particle loops.
void generate_kernels(const ir::Model& model, const std::string& metadata_json,
                      llvm::Module& library);

} // namespace ssm::codegen
