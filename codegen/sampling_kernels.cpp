// The sampling kernels: each draws its block's relations for every particle and writes the draws
// (x or y); the proposal's also writes the log-density of what it drew.
#include "kernel_emitter.h"
#include "kernels.h"

namespace ssm::codegen {

namespace {

// Draws and writes the relations' targets; no log-density.
class SamplerEmitter : public KernelEmitter {
protected:
  using KernelEmitter::KernelEmitter;

  bool samples() const override { return true; }
  bool scores() const override { return false; }
};

// ssm_init_sample(theta, seed, begin, end, stride, x)
class InitSampleEmitter : public SamplerEmitter {
public:
  InitSampleEmitter(const ir::Model& model, llvm::Module& module)
      : SamplerEmitter(model, module, ir::BlockKind::Initial) {}

private:
  std::vector<KernelParam> parameters() override { return particle_parameters({{"x", f64_ptr()}}); }
};

// ssm_transition_sample(theta, seed, t, begin, end, stride, x_prev, ancestors, x)
class TransitionSampleEmitter : public SamplerEmitter {
public:
  TransitionSampleEmitter(const ir::Model& model, llvm::Module& module)
      : SamplerEmitter(model, module, ir::BlockKind::Transition) {}

private:
  std::vector<KernelParam> parameters() override {
    return particle_parameters({{"x_prev", f64_ptr()}, {"ancestors", i64_ptr()}, {"x", f64_ptr()}});
  }
  void emit_body() override { emit_loops_with_ancestors(); }
};

// ssm_obs_sample(theta, seed, t, begin, end, stride, x, y)
class ObsSampleEmitter : public SamplerEmitter {
public:
  ObsSampleEmitter(const ir::Model& model, llvm::Module& module)
      : SamplerEmitter(model, module, ir::BlockKind::Observation) {}

private:
  std::vector<KernelParam> parameters() override {
    return particle_parameters({{"x", f64_ptr()}, {"y", f64_ptr()}});
  }
};

// ssm_proposal_sample(theta, seed, t, begin, end, stride, x_prev, ancestors, y, x, out): draws
// x_t from the proposal and writes log q(x_t | x_{t-1}, y_t).
class ProposalSampleEmitter : public KernelEmitter {
public:
  ProposalSampleEmitter(const ir::Model& model, llvm::Module& module)
      : KernelEmitter(model, module, ir::BlockKind::Proposal) {}

private:
  bool samples() const override { return true; }
  bool scores() const override { return true; }
  std::vector<KernelParam> parameters() override {
    return particle_parameters({{"x_prev", f64_ptr()},
                                {"ancestors", i64_ptr()},
                                {"y", f64_ptr()},
                                {"x", f64_ptr()},
                                {"out", f64_ptr()}});
  }
  void emit_body() override { emit_loops_with_ancestors(); }
};

} // namespace

llvm::Function* emit_init_sample(const ir::Model& model, llvm::Module& module) {
  return InitSampleEmitter(model, module).emit("ssm_init_sample");
}

llvm::Function* emit_transition_sample(const ir::Model& model, llvm::Module& module) {
  return TransitionSampleEmitter(model, module).emit("ssm_transition_sample");
}

llvm::Function* emit_obs_sample(const ir::Model& model, llvm::Module& module) {
  return ObsSampleEmitter(model, module).emit("ssm_obs_sample");
}

llvm::Function* emit_proposal_sample(const ir::Model& model, llvm::Module& module) {
  return ProposalSampleEmitter(model, module).emit("ssm_proposal_sample");
}

} // namespace ssm::codegen
