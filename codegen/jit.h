// In-memory execution of an optimised kernel module (`ssmc run`): the module is compiled by ORC
// LLJIT for the host, with the CPU, features and options of the TargetMachine that `ssmc build`
// writes objects with, so the JIT-compiled kernels compute bit-identical results to the compiled
// executable's. External symbols (libm, glibc's libmvec `_ZGV...` vector functions) are resolved
// in the ssmc process, which loads libmvec for them.
#pragma once

#include <memory>
#include <string>

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
namespace orc {
class LLJIT;
}
} // namespace llvm

namespace ssm::codegen {

class Jit {
public:
  // `module` has been optimised for `target` (optimize_module); `ctx` is its context. Throws
  // CodegenError when the JIT cannot be set up.
  Jit(std::unique_ptr<llvm::LLVMContext> ctx, std::unique_ptr<llvm::Module> module,
      const llvm::TargetMachine& target);
  ~Jit();
  Jit(const Jit&) = delete;
  Jit& operator=(const Jit&) = delete;

  // The address of a symbol defined by the module, compiling it on first use. Valid while the Jit
  // lives. Throws CodegenError when the symbol is missing or an external symbol cannot be resolved.
  void* lookup(const std::string& name);

private:
  std::unique_ptr<llvm::orc::LLJIT> jit_;
};

} // namespace ssm::codegen
