// The kernels that write a block's outputs per particle, laid out as the runtime lays out a state:
// the functional block's terms (the smoothers' additive functionals), the score terms (the
// parameter gradients that smoothed give the score), the look-ahead block's values (the
// auxiliary particle filter's) and an SDE's drift, Jacobian, coefficient and dt at points (the
// density estimators').
#include "kernel_emitter.h"
#include "kernels.h"
#include "passes/structure.h"

namespace ssm::codegen {

namespace {

class OutputEmitter : public KernelEmitter {
protected:
  using KernelEmitter::KernelEmitter;

  void emit_particle() override {
    int component = 0;
    for (int id : outputs_)
      for (Value* v : get(id))
        b_.CreateStore(v, element(arg("out"), b_.getInt64(component++), n_));
  }
};

// ssm_functional_terms(theta, t, begin, end, stride, x_prev, ancestors, x, y, out), of the
// functional block, or of arena nodes (the score terms) with the same arguments.
class FunctionalEmitter : public OutputEmitter {
public:
  FunctionalEmitter(const ir::Model& model, llvm::Module& module)
      : OutputEmitter(model, module, ir::BlockKind::Functional) {}
  FunctionalEmitter(const ir::Model& model, llvm::Module& module, const ir::Block& arena,
                    std::vector<int> outputs, size_t max_vectorized_body = SIZE_MAX)
      : OutputEmitter(model, module, arena, std::move(outputs)), arena_(true) {
    max_vectorized_body_ = max_vectorized_body;
  }

private:
  bool arena_ = false;
  bool over_arena() const override { return arena_; }
  std::vector<KernelParam> parameters() override {
    return particle_parameters({{"x_prev", f64_ptr()},
                                {"ancestors", i64_ptr()},
                                {"x", f64_ptr()},
                                {"y", f64_ptr()},
                                {"out", f64_ptr()}});
  }
  void emit_body() override { emit_loops_with_ancestors(); }
};

// ssm_lookahead(theta, t, begin, end, stride, x_prev, y, out)
class LookaheadEmitter : public OutputEmitter {
public:
  LookaheadEmitter(const ir::Model& model, llvm::Module& module)
      : OutputEmitter(model, module, ir::BlockKind::Lookahead) {}

private:
  std::vector<KernelParam> parameters() override {
    return particle_parameters({{"x_prev", f64_ptr()}, {"y", f64_ptr()}, {"out", f64_ptr()}});
  }
};

} // namespace

llvm::Function* emit_functional_terms(const ir::Model& model, llvm::Module& module) {
  return FunctionalEmitter(model, module).emit("ssm_functional_terms");
}

namespace {

// A functional-terms kernel over the derivatives' arena with `outputs` (-1: zero): the gradient
// kernels, whose longest bodies stay scalar (kMaxVectorizedTermsBody).
llvm::Function* emit_arena_terms(const ir::Model& model, const passes::Derivatives& derivs,
                                 std::vector<int> outputs, llvm::Module& module, const char* name,
                                 bool items = false) {
  ir::Block arena = derivs.arena; // plus a zero for the components without a term
  const int zero = static_cast<int>(arena.nodes.size());
  ir::Node z;
  z.values = {0.0};
  arena.nodes.push_back(z);
  for (int& id : outputs)
    id = id < 0 ? zero : id;
  return FunctionalEmitter(model, module, arena, std::move(outputs), kMaxVectorizedTermsBody)
      .emit(name, items);
}

} // namespace

llvm::Function* emit_score_terms(const ir::Model& model, const passes::Derivatives& derivs,
                                 llvm::Module& module) {
  return emit_arena_terms(model, derivs, derivs.score_terms, module, "ssm_score_terms");
}

llvm::Function* emit_state_gradient(const ir::Model& model, const passes::Derivatives& derivs,
                                    llvm::Module& module) {
  return emit_arena_terms(model, derivs, derivs.state_gradient, module, "ssm_state_gradient");
}

llvm::Function* emit_prev_state_gradient(const ir::Model& model, const passes::Derivatives& derivs,
                                         llvm::Module& module) {
  return emit_arena_terms(model, derivs, derivs.prev_state_gradient, module,
                          "ssm_prev_state_gradient");
}

llvm::Function* emit_guide_arguments(const ir::Model& model, const passes::Derivatives& derivs,
                                     llvm::Module& module) {
  return emit_arena_terms(model, derivs, derivs.guide_arguments, module, "ssm_guide_args");
}

llvm::Function* emit_item_score_terms(const ir::Model& model, const passes::Derivatives& derivs,
                                      llvm::Module& module) {
  return emit_arena_terms(model, derivs, derivs.score_terms, module, "ssm_item_score_terms", true);
}

llvm::Function* emit_item_state_gradient(const ir::Model& model, const passes::Derivatives& derivs,
                                         llvm::Module& module) {
  return emit_arena_terms(model, derivs, derivs.state_gradient, module, "ssm_item_state_gradient",
                          true);
}

llvm::Function* emit_item_guide_arguments(const ir::Model& model, const passes::Derivatives& derivs,
                                          llvm::Module& module) {
  return emit_arena_terms(model, derivs, derivs.guide_arguments, module, "ssm_item_guide_args",
                          true);
}

llvm::Function* emit_diffusion_terms(const ir::Model& model, const passes::SdeEstimators& sde,
                                     llvm::Module& module) {
  return FunctionalEmitter(model, module, sde.arena, sde.outputs).emit("ssm_diffusion_terms");
}

llvm::Function* emit_lookahead(const ir::Model& model, llvm::Module& module) {
  return LookaheadEmitter(model, module).emit("ssm_lookahead");
}

} // namespace ssm::codegen
