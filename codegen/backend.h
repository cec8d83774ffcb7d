// The LLVM back end of ssmc: loads the kernel library bitcode, optimises a kernel module for the
// host (O2 with loop vectorisation against glibc's vector math library) and writes an object file.
#pragma once

#include <memory>
#include <string>

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
} // namespace llvm

namespace ssm::codegen {

// Throws CodegenError when the file is missing or not valid bitcode.
std::unique_ptr<llvm::Module> load_kernel_library(llvm::LLVMContext& ctx, const std::string& path);

std::unique_ptr<llvm::TargetMachine> create_host_target_machine();

// "triple cpu features" of the host target the kernels are compiled for (part of cache keys).
std::string host_target_description();

void optimize_module(llvm::Module& module, llvm::TargetMachine& target);

std::string module_to_text(const llvm::Module& module);

// Writes `path` itself: the caller (ssmc) passes a temporary path, registered for the signal
// handlers and renamed into place (ssm::TemporaryPath), so a failed build leaves no partial object.
void write_object(llvm::Module& module, llvm::TargetMachine& target, const std::string& path);

} // namespace ssm::codegen
