// Lowers a model's initial, transition and observation blocks to LLVM kernels over a batch of
// particles (the functions of runtime/kernel/abi.h) and the exported `ssm_model_table`, plus
// the kernels that the structure analyses make possible (density bound, linear-Gaussian matrices).
#pragma once

#include "ir/ir.h"

#include <memory>
#include <stdexcept>
#include <string>

namespace llvm {
class LLVMContext;
class Module;
} // namespace llvm

namespace ssm::passes {
struct LinearGaussian;
struct TransitionDensity;
struct Derivatives;
struct SdeEstimators;
} // namespace ssm::passes

namespace ssm::codegen {

class CodegenError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// The structure analyses whose symbolic results become kernels of their own: the density bound
// (transition_log_bound) and the linear-Gaussian matrices (linear_gaussian). Either may be null;
// the kernel is then absent (a null pointer in the model table).
struct StructureKernels {
  const passes::LinearGaussian* linear_gaussian = nullptr;
  const passes::TransitionDensity* density = nullptr;
  // The Gaussian Jacobians (the EKF's, for a Gaussian model) and the score terms.
  const passes::Derivatives* derivatives = nullptr;
  // An SDE transition's terms for the density estimators (ssm_diffusion_terms).
  const passes::SdeEstimators* sde = nullptr;
};

// Why the model has no gaussian_moments kernel (the unscented Kalman filter's): a relation that is
// not normal/mvnormal, or whose parameters read a variable of the same step; empty when it has one.
std::string gaussian_moments_unsupported(const ir::Model& model);

// `library` is the distribution and RNG library (kernel_lib.bc) parsed into the same context; the
// kernels are added to it, so the samplers and densities inline into the particle loops.
void generate_kernels(const ir::Model& model, const std::string& metadata_json,
                      const StructureKernels& structure, llvm::Module& library);

} // namespace ssm::codegen
