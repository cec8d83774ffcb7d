// LLVM back end: see backend.h.
#include "backend.h"

#include "kernel_codegen.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <algorithm>
#include <tuple>

namespace ssm::codegen {

std::unique_ptr<llvm::Module> load_kernel_library(llvm::LLVMContext& ctx, const std::string& path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    throw CodegenError(fmt::format("cannot read the kernel library '{}': {} (is ssmc installed "
                                   "with its lib/ssmc directory?)",
                                   path, buffer.getError().message()));
  auto module = llvm::parseBitcodeFile(buffer.get()->getMemBufferRef(), ctx);
  if (!module)
    throw CodegenError(fmt::format("'{}' is not valid LLVM bitcode: {}", path,
                                   llvm::toString(module.takeError())));
  return std::move(module.get());
}

namespace {
struct HostTarget {
  std::string triple, cpu, features;
};

HostTarget host_target() {
  llvm::StringMap<bool> host_features;
  std::vector<std::string> features;
  if (llvm::sys::getHostCPUFeatures(host_features))
    for (auto& f : host_features)
      features.push_back(fmt::format("{}{}", f.second ? "+" : "-", f.first().str()));
  std::sort(features.begin(), features.end()); // StringMap order is unspecified
  return {llvm::sys::getProcessTriple(), llvm::sys::getHostCPUName().str(),
          fmt::format("{}", fmt::join(features, ","))};
}
} // namespace

std::string host_target_description() {
  HostTarget host = host_target();
  return fmt::format("{} {} {}", host.triple, host.cpu, host.features);
}

std::unique_ptr<llvm::TargetMachine> create_host_target_machine() {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  HostTarget host = host_target();
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(host.triple, error);
  if (!target)
    throw CodegenError(fmt::format("no LLVM target for {}: {}", host.triple, error));
  llvm::TargetOptions options;
  return std::unique_ptr<llvm::TargetMachine>(
      target->createTargetMachine(host.triple, host.cpu, host.features, options, llvm::Reloc::PIC_,
                                  llvm::None, llvm::CodeGenOpt::Aggressive));
}

namespace {
// LLVM 14 knows libmvec's 2- and 4-wide variants only. On AVX-512 the vectoriser picks 8 lanes and
// would scalarise every exp/log/cos back into libm calls; glibc (>= 2.35) has the 8-wide ones, and
// tanh and log1p, which LLVM 14 does not list at all.
std::vector<llvm::VecDesc> extra_libmvec_functions(const llvm::TargetMachine& target) {
  std::string features = target.getTargetFeatureString().str();
  bool avx2 = features.find("+avx2") != std::string::npos;
  bool avx512 = features.find("+avx512f") != std::string::npos;
  std::vector<llvm::VecDesc> fns;
  auto add = [&](llvm::StringRef scalar, llvm::StringRef vector, unsigned lanes) {
    fns.push_back({scalar, vector, llvm::ElementCount::getFixed(lanes)});
  };
  if (avx512) {
    for (auto [scalar, intrinsic, vector] : {std::tuple{"exp", "llvm.exp.f64", "_ZGVeN8v_exp"},
                                             {"log", "llvm.log.f64", "_ZGVeN8v_log"},
                                             {"sin", "llvm.sin.f64", "_ZGVeN8v_sin"},
                                             {"cos", "llvm.cos.f64", "_ZGVeN8v_cos"},
                                             {"pow", "llvm.pow.f64", "_ZGVeN8vv_pow"}}) {
      add(scalar, vector, 8);
      add(intrinsic, vector, 8);
    }
    add("tanh", "_ZGVeN8v_tanh", 8);
    add("log1p", "_ZGVeN8v_log1p", 8);
  }
  if (avx2) {
    add("tanh", "_ZGVdN4v_tanh", 4);
    add("log1p", "_ZGVdN4v_log1p", 4);
  }
  return fns;
}
} // namespace

void optimize_module(llvm::Module& module, llvm::TargetMachine& target) {
  module.setDataLayout(target.createDataLayout());
  module.setTargetTriple(target.getTargetTriple().str());
  for (llvm::Function& f : module)
    if (!f.isDeclaration()) {
      f.addFnAttr("target-cpu", target.getTargetCPU());
      f.addFnAttr("target-features", target.getTargetFeatureString());
    }

  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  llvm::PassBuilder builder(&target, tuning);
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  // Vectorised exp/log/sin/cos/pow come from glibc's libmvec; registered before the defaults.
  llvm::TargetLibraryInfoImpl library_info(target.getTargetTriple());
  library_info.addVectorizableFunctionsFromVecLib(llvm::TargetLibraryInfoImpl::LIBMVEC_X86);
  library_info.addVectorizableFunctions(extra_libmvec_functions(target));
  fam.registerPass([&] { return llvm::TargetLibraryAnalysis(library_info); });
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2).run(module, mam);
}

std::string module_to_text(const llvm::Module& module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os, nullptr);
  return os.str();
}

void write_object(llvm::Module& module, llvm::TargetMachine& target, const std::string& path) {
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    throw CodegenError(fmt::format("cannot write '{}': {}", path, ec.message()));
  llvm::legacy::PassManager pm;
  if (target.addPassesToEmitFile(pm, out, nullptr, llvm::CGFT_ObjectFile))
    throw CodegenError("the LLVM target cannot emit object files");
  pm.run(module);
  out.close();
  if (out.has_error()) {
    const std::string message = out.error().message();
    out.clear_error();
    throw CodegenError(fmt::format("cannot write '{}': {}", path, message));
  }
}

} // namespace ssm::codegen
