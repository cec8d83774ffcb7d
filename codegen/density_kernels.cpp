// The log-density kernels: each writes, per particle, the summed log-density of its block's
// relations at the values in x (and y), with missing observations contributing 0; and the log of
// the transition density's upper bound, which the rejection-based backward samplers use.
#include "kernel_emitter.h"
#include "kernels.h"
#include "passes/structure.h"

namespace ssm::codegen {

namespace {

// ssm_init_logpdf(theta, begin, end, stride, x, out)
class InitLogpdfEmitter : public KernelEmitter {
public:
  InitLogpdfEmitter(const ir::Model& model, llvm::Module& module)
      : KernelEmitter(model, module, ir::BlockKind::Initial) {}

private:
  std::vector<KernelParam> parameters() override {
    return particle_parameters({{"x", f64_ptr()}, {"out", f64_ptr()}});
  }
};

// ssm_transition_logpdf(theta, t, begin, end, stride, x_prev, ancestors, x, out)
class TransitionLogpdfEmitter : public KernelEmitter {
public:
  TransitionLogpdfEmitter(const ir::Model& model, llvm::Module& module)
      : KernelEmitter(model, module, ir::BlockKind::Transition) {}

private:
  std::vector<KernelParam> parameters() override {
    return particle_parameters(
        {{"x_prev", f64_ptr()}, {"ancestors", i64_ptr()}, {"x", f64_ptr()}, {"out", f64_ptr()}});
  }
  void emit_body() override { emit_loops_with_ancestors(); }
};

// ssm_obs_logpdf(theta, t, begin, end, stride, x, y, out)
class ObsLogpdfEmitter : public KernelEmitter {
public:
  ObsLogpdfEmitter(const ir::Model& model, llvm::Module& module)
      : KernelEmitter(model, module, ir::BlockKind::Observation) {}

private:
  std::vector<KernelParam> parameters() override {
    return particle_parameters({{"x", f64_ptr()}, {"y", f64_ptr()}, {"out", f64_ptr()}});
  }
};

// ssm_prior_logpdf(theta, out): arena nodes that read only parameters, one after another.
class PriorEmitter : public KernelEmitter {
public:
  PriorEmitter(const ir::Model& model, llvm::Module& module, const ir::Block& arena,
               std::vector<int> outputs)
      : KernelEmitter(model, module, arena, std::move(outputs)) {}

private:
  bool over_arena() const override { return true; }
  std::vector<KernelParam> parameters() override {
    return {{"theta", f64_ptr()}, {"out", f64_ptr()}};
  }
  void emit_body() override { emit_output_stores(); }
};

// ssm_transition_log_bound(theta, t, begin, end, stride, x_prev, out): an arena node of the
// density analysis, per particle at t-1.
class TransitionLogBoundEmitter : public KernelEmitter {
public:
  TransitionLogBoundEmitter(const ir::Model& model, llvm::Module& module, const ir::Block& arena,
                            int bound)
      : KernelEmitter(model, module, arena, {bound}) {}

private:
  bool over_arena() const override { return true; }
  std::vector<KernelParam> parameters() override {
    return particle_parameters({{"x_prev", f64_ptr()}, {"out", f64_ptr()}});
  }
  void emit_particle() override {
    Value* bound = get(outputs_.at(0)).at(0);
    b_.CreateStore(intrinsic(llvm::Intrinsic::log, {bound}),
                   element(arg("out"), b_.getInt64(0), n_));
  }
};

} // namespace

llvm::Function* emit_init_logpdf(const ir::Model& model, llvm::Module& module) {
  return InitLogpdfEmitter(model, module).emit("ssm_init_logpdf");
}

llvm::Function* emit_transition_logpdf(const ir::Model& model, llvm::Module& module) {
  return TransitionLogpdfEmitter(model, module).emit("ssm_transition_logpdf");
}

llvm::Function* emit_obs_logpdf(const ir::Model& model, llvm::Module& module) {
  return ObsLogpdfEmitter(model, module).emit("ssm_obs_logpdf");
}

// A plate model's transition block is its latents' prior (passes/plate_items.cpp).
llvm::Function* emit_item_prior_logpdf(const ir::Model& model, llvm::Module& module) {
  return TransitionLogpdfEmitter(model, module).emit("ssm_item_prior_logpdf", true);
}

llvm::Function* emit_item_obs_logpdf(const ir::Model& model, llvm::Module& module) {
  return ObsLogpdfEmitter(model, module).emit("ssm_item_obs_logpdf", true);
}

llvm::Function* emit_transition_log_bound(const ir::Model& model, const ir::Block& arena, int bound,
                                          llvm::Module& module) {
  return TransitionLogBoundEmitter(model, module, arena, bound).emit("ssm_transition_log_bound");
}

llvm::Function* emit_prior_logpdf(const passes::Derivatives& derivs, const ir::Model& model,
                                  llvm::Module& module) {
  return PriorEmitter(model, module, derivs.arena, derivs.prior_terms).emit("ssm_prior_logpdf");
}

} // namespace ssm::codegen
