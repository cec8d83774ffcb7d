// ORC LLJIT for `ssmc run`: see jit.h.
#include "jit.h"

#include "kernel_codegen.h"

#include <fmt/format.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/DynamicLibrary.h>
#include <llvm/Target/TargetMachine.h>

namespace ssm::codegen {

namespace {
template <typename T> T check(llvm::Expected<T> value, const char* what) {
  if (!value)
    throw CodegenError(fmt::format("JIT: {}: {}", what, llvm::toString(value.takeError())));
  return std::move(*value);
}
void check(llvm::Error error, const char* what) {
  if (error)
    throw CodegenError(fmt::format("JIT: {}: {}", what, llvm::toString(std::move(error))));
}
} // namespace

Jit::Jit(std::unique_ptr<llvm::LLVMContext> ctx, std::unique_ptr<llvm::Module> module,
         const llvm::TargetMachine& target) {
  // The vectorised kernels call libmvec, which the ssmc binary itself does not need.
  std::string error;
  if (llvm::sys::DynamicLibrary::LoadLibraryPermanently("libmvec.so.1", &error))
    throw CodegenError(fmt::format("JIT: cannot load glibc's libmvec.so.1: {}", error));

  // The object path's target machine, field by field: same code for the same module.
  llvm::orc::JITTargetMachineBuilder jtmb(target.getTargetTriple());
  jtmb.setCPU(target.getTargetCPU().str());
  jtmb.setFeatures(target.getTargetFeatureString());
  jtmb.setOptions(target.Options);
  jtmb.setCodeGenOptLevel(target.getOptLevel());
  jtmb.setRelocationModel(target.getRelocationModel());

  jit_ = check(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(jtmb)).create(),
               "cannot create the JIT");
  auto& dylib = jit_->getMainJITDylib();
  dylib.addGenerator(check(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
                               jit_->getDataLayout().getGlobalPrefix()),
                           "cannot search the ssmc process for symbols"));
  check(jit_->addIRModule(llvm::orc::ThreadSafeModule(std::move(module), std::move(ctx))),
        "cannot add the kernel module");
}

Jit::~Jit() = default;

void* Jit::lookup(const std::string& name) {
  auto symbol = check(jit_->lookup(name), "cannot compile the model");
  return reinterpret_cast<void*>(static_cast<uintptr_t>(symbol.getAddress()));
}

} // namespace ssm::codegen
