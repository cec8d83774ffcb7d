// Kernel code generation: see kernel_codegen.h. Each kernel has its emitter (kernels.h, on the
// shared base in kernel_emitter.h); this file emits them in order and the model table that points
// at them.
#include "kernel_codegen.h"

#include "kernel/abi.h"
#include "kernels.h"
#include "passes/structure.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <iterator>

namespace ssm::codegen {

namespace {

// The item layout's kernels of a plate model (abi.h), null where there is none.
struct ItemKernels {
  llvm::Function *prior_logpdf = nullptr, *obs_logpdf = nullptr, *state_gradient = nullptr,
                 *score_terms = nullptr, *guide_args = nullptr;
};

void emit_model_table(const std::string& metadata_json, llvm::Module& module,
                      llvm::Function* log_bound, llvm::Function* linear_gaussian,
                      llvm::Function* gaussian_moments, llvm::Function* gaussian_jacobian,
                      llvm::Function* proposal_sample, llvm::Function* lookahead,
                      llvm::Function* score_terms, llvm::Function* prior_logpdf,
                      llvm::Function* state_gradient, llvm::Function* guide_args,
                      llvm::Function* diffusion_terms, const ItemKernels& items,
                      llvm::Function* prev_state_gradient) {
  auto& ctx = module.getContext();
  llvm::IRBuilder<> b(ctx);
  auto* metadata = b.CreateGlobalString(metadata_json, "ssm_metadata_json", 0, &module);
  std::vector<llvm::Constant*> fields{
      b.getInt32(SSM_ABI_VERSION), llvm::ConstantExpr::getPointerCast(metadata, b.getInt8PtrTy())};
  std::vector<llvm::Type*> types{b.getInt32Ty(), b.getInt8PtrTy()};
  for (const char* name :
       {"ssm_init_sample", "ssm_init_logpdf", "ssm_transition_sample", "ssm_transition_logpdf",
        "ssm_obs_logpdf", "ssm_obs_sample", "ssm_functional_terms"}) {
    llvm::Function* f = module.getFunction(name);
    fields.push_back(f);
    types.push_back(f->getType());
  }
  // Optional kernels: a null pointer when the model's structure does not provide them.
  auto* f64 = llvm::PointerType::getUnqual(b.getDoubleTy());
  auto* i64 = b.getInt64Ty();
  auto* item_kernel = llvm::PointerType::getUnqual(llvm::FunctionType::get(
      b.getVoidTy(), {f64, llvm::PointerType::getUnqual(i64), i64, i64, i64, f64, f64, f64, f64},
      false));
  llvm::Type* optional[] = {
      llvm::PointerType::getUnqual(llvm::FunctionType::get(
          b.getVoidTy(), {f64, i64, i64, i64, i64, f64, f64}, false)), // transition_log_bound
      llvm::PointerType::getUnqual(
          llvm::FunctionType::get(b.getVoidTy(), {f64, i64, f64}, false)), // linear_gaussian
      llvm::PointerType::getUnqual(llvm::FunctionType::get(
          b.getVoidTy(), {f64, i64, b.getInt32Ty(), f64, f64, f64}, false)), // gaussian_moments
      llvm::PointerType::getUnqual(llvm::FunctionType::get(
          b.getVoidTy(), {f64, i64, b.getInt32Ty(), f64, f64}, false)), // gaussian_jacobian
      llvm::PointerType::getUnqual(llvm::FunctionType::get(
          b.getVoidTy(),
          {f64, i64, i64, i64, i64, i64, f64, llvm::PointerType::getUnqual(i64), f64, f64, f64},
          false)), // proposal_sample
      llvm::PointerType::getUnqual(llvm::FunctionType::get(
          b.getVoidTy(), {f64, i64, i64, i64, i64, f64, f64, f64}, false)), // lookahead
      module.getFunction("ssm_functional_terms")->getType(),                // score_terms
      llvm::PointerType::getUnqual(
          llvm::FunctionType::get(b.getVoidTy(), {f64, f64}, false)), // prior_logpdf
      module.getFunction("ssm_functional_terms")->getType(),          // state_gradient
      module.getFunction("ssm_functional_terms")->getType(),          // guide_args
      module.getFunction("ssm_functional_terms")->getType(),          // diffusion_terms
      item_kernel,
      item_kernel,
      item_kernel,
      item_kernel,
      item_kernel,
      module.getFunction("ssm_functional_terms")->getType()}; // prev_state_gradient
  llvm::Function* given[] = {log_bound,         linear_gaussian,      gaussian_moments,
                             gaussian_jacobian, proposal_sample,      lookahead,
                             score_terms,       prior_logpdf,         state_gradient,
                             guide_args,        diffusion_terms,      items.prior_logpdf,
                             items.obs_logpdf,  items.state_gradient, items.score_terms,
                             items.guide_args,  prev_state_gradient};
  static_assert(std::size(given) == std::size(optional));
  for (size_t k = 0; k < std::size(given); ++k) {
    auto* type = llvm::cast<llvm::PointerType>(optional[k]);
    fields.push_back(given[k] ? static_cast<llvm::Constant*>(given[k])
                              : llvm::ConstantPointerNull::get(type));
    types.push_back(type);
  }
  auto* type = llvm::StructType::create(ctx, types, "ssm_model");
  new llvm::GlobalVariable(module, type, true, llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantStruct::get(type, fields), "ssm_model_table");
}

} // namespace

void generate_kernels(const ir::Model& model, const std::string& metadata_json,
                      const StructureKernels& structure, llvm::Module& library) {
  // The library's functions are only for inlining into the kernels.
  for (llvm::Function& f : library)
    if (!f.isDeclaration()) {
      f.setLinkage(llvm::GlobalValue::InternalLinkage);
      f.addFnAttr(llvm::Attribute::AlwaysInline);
    }
  emit_init_sample(model, library);
  emit_init_logpdf(model, library);
  emit_transition_sample(model, library);
  emit_transition_logpdf(model, library);
  emit_obs_logpdf(model, library);
  emit_obs_sample(model, library);
  emit_functional_terms(model, library);
  llvm::Function* log_bound = nullptr;
  if (structure.density && structure.density->bound && !structure.density->bound->reads_next_state)
    log_bound = emit_transition_log_bound(model, structure.density->arena,
                                          structure.density->bound->node, library);
  llvm::Function* linear_gaussian = nullptr;
  if (structure.linear_gaussian && structure.linear_gaussian->is_linear_gaussian)
    linear_gaussian = emit_linear_gaussian(model, *structure.linear_gaussian, library);
  const bool gaussian = gaussian_moments_unsupported(model).empty();
  llvm::Function* moments = gaussian ? emit_gaussian_moments(model, library) : nullptr;
  llvm::Function* jacobian = gaussian && structure.derivatives
                                 ? emit_gaussian_jacobian(model, *structure.derivatives, library)
                                 : nullptr;
  llvm::Function* proposal =
      model.proposal.relations.empty() ? nullptr : emit_proposal_sample(model, library);
  llvm::Function* lookahead =
      model.lookahead.outputs.empty() ? nullptr : emit_lookahead(model, library);
  llvm::Function* score = structure.derivatives && !structure.derivatives->score_terms.empty()
                              ? emit_score_terms(model, *structure.derivatives, library)
                              : nullptr;
  llvm::Function* prior = structure.derivatives && structure.derivatives->prior_why_not.empty() &&
                                  !structure.derivatives->prior_terms.empty()
                              ? emit_prior_logpdf(*structure.derivatives, model, library)
                              : nullptr;
  llvm::Function* state_gradient =
      structure.derivatives && !structure.derivatives->state_gradient.empty()
          ? emit_state_gradient(model, *structure.derivatives, library)
          : nullptr;
  llvm::Function* prev_state_gradient =
      state_gradient && !structure.derivatives->prev_state_gradient.empty()
          ? emit_prev_state_gradient(model, *structure.derivatives, library)
          : nullptr;
  llvm::Function* guide_args =
      structure.derivatives && !structure.derivatives->guide_arguments.empty()
          ? emit_guide_arguments(model, *structure.derivatives, library)
          : nullptr;
  llvm::Function* diffusion = structure.sde && structure.sde->why_not.empty()
                                  ? emit_diffusion_terms(model, *structure.sde, library)
                                  : nullptr;
  // A plate model's kernels again in the item layout, one call over a batch of items (vi).
  ItemKernels items;
  if (model.items) {
    items.prior_logpdf = emit_item_prior_logpdf(model, library);
    items.obs_logpdf = emit_item_obs_logpdf(model, library);
    if (state_gradient)
      items.state_gradient = emit_item_state_gradient(model, *structure.derivatives, library);
    if (score)
      items.score_terms = emit_item_score_terms(model, *structure.derivatives, library);
    if (guide_args)
      items.guide_args = emit_item_guide_arguments(model, *structure.derivatives, library);
  }
  emit_model_table(metadata_json, library, log_bound, linear_gaussian, moments, jacobian, proposal,
                   lookahead, score, prior, state_gradient, guide_args, diffusion, items,
                   prev_state_gradient);

  std::string problems;
  llvm::raw_string_ostream os(problems);
  if (llvm::verifyModule(library, &os))
    throw ir::InternalError("the generated LLVM IR is invalid:\n" + os.str());
}

} // namespace ssm::codegen
