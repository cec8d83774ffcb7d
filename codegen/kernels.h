// The kernels of a model, one function each: every one builds its kind's emitter (a KernelEmitter)
// and emits the kernel into `module` under its ABI name (runtime/kernel/abi.h). Internal to
// codegen; kernel_codegen.cpp calls them in the order of the model table.
#pragma once

#include "ir/ir.h"

namespace llvm {
class Function;
class Module;
} // namespace llvm

namespace ssm::passes {
struct LinearGaussian;
struct Derivatives;
struct SdeEstimators;
} // namespace ssm::passes

namespace ssm::codegen {

// sampling_kernels.cpp: draw the block's relations.
llvm::Function* emit_init_sample(const ir::Model& model, llvm::Module& module);
llvm::Function* emit_transition_sample(const ir::Model& model, llvm::Module& module);
llvm::Function* emit_obs_sample(const ir::Model& model, llvm::Module& module);
llvm::Function* emit_proposal_sample(const ir::Model& model, llvm::Module& module);

// density_kernels.cpp: the log-density of the block's relations, and the transition's bound.
llvm::Function* emit_init_logpdf(const ir::Model& model, llvm::Module& module);
llvm::Function* emit_transition_logpdf(const ir::Model& model, llvm::Module& module);
llvm::Function* emit_obs_logpdf(const ir::Model& model, llvm::Module& module);
// A plate model's kernels in the item layout (abi.h, ssm_item_kernel_fn): the latents' prior (the
// transition block) and the observation's log-density.
llvm::Function* emit_item_prior_logpdf(const ir::Model& model, llvm::Module& module);
llvm::Function* emit_item_obs_logpdf(const ir::Model& model, llvm::Module& module);
// The log of node `bound` of the density analysis' `arena`, per particle at t-1.
llvm::Function* emit_transition_log_bound(const ir::Model& model, const ir::Block& arena, int bound,
                                          llvm::Module& module);

// output_kernels.cpp: the block's outputs per particle.
llvm::Function* emit_functional_terms(const ir::Model& model, llvm::Module& module);
llvm::Function* emit_lookahead(const ir::Model& model, llvm::Module& module);
// ssm_prior_logpdf(theta, out): the log prior density, then its gradient per theta component.
llvm::Function* emit_prior_logpdf(const passes::Derivatives& derivs, const ir::Model& model,
                                  llvm::Module& module);
// ssm_score_terms: as ssm_functional_terms, of the derivatives analysis's score terms.
llvm::Function* emit_score_terms(const ir::Model& model, const passes::Derivatives& derivs,
                                 llvm::Module& module);
// ssm_guide_args: as ssm_functional_terms, of the derivatives analysis's guide arguments.
llvm::Function* emit_guide_arguments(const ir::Model& model, const passes::Derivatives& derivs,
                                     llvm::Module& module);
// ssm_state_gradient: as ssm_functional_terms, of the derivatives analysis's state gradient.
llvm::Function* emit_state_gradient(const ir::Model& model, const passes::Derivatives& derivs,
                                    llvm::Module& module);
// ssm_prev_state_gradient: the same, of its gradient in x[t-1] (a model over time).
llvm::Function* emit_prev_state_gradient(const ir::Model& model, const passes::Derivatives& derivs,
                                         llvm::Module& module);
// The same three in the item layout (ssm_item_score_terms, ssm_item_state_gradient,
// ssm_item_guide_args).
llvm::Function* emit_item_score_terms(const ir::Model& model, const passes::Derivatives& derivs,
                                      llvm::Module& module);
llvm::Function* emit_item_state_gradient(const ir::Model& model, const passes::Derivatives& derivs,
                                         llvm::Module& module);
llvm::Function* emit_item_guide_arguments(const ir::Model& model, const passes::Derivatives& derivs,
                                          llvm::Module& module);

// ssm_diffusion_terms: as ssm_functional_terms, of an SDE transition's terms at the points x.
llvm::Function* emit_diffusion_terms(const ir::Model& model, const passes::SdeEstimators& sde,
                                     llvm::Module& module);

// gaussian_kernels.cpp: what the Kalman filters need.
llvm::Function* emit_linear_gaussian(const ir::Model& model, const passes::LinearGaussian& lg,
                                     llvm::Module& module);
llvm::Function* emit_gaussian_moments(const ir::Model& model, llvm::Module& module);
llvm::Function* emit_gaussian_jacobian(const ir::Model& model, const passes::Derivatives& derivs,
                                       llvm::Module& module);

} // namespace ssm::codegen
