// The kernels of the Kalman filters: the linear-Gaussian model's matrices (the exact filter and
// smoother), and the Gaussian moments and Jacobians of each block given one state (the unscented
// and extended filters). None loops over particles: each is evaluated at one parameter vector
// (and state).
#include "kernel_emitter.h"
#include "kernels.h"

#include "passes/structure.h"

#include <fmt/format.h>
#include <llvm/IR/Module.h>

namespace ssm::codegen {

namespace {

// Arena nodes that read no state, written one after another to `out`: (theta, t, out).
class MatricesEmitter : public KernelEmitter {
public:
  MatricesEmitter(const ir::Model& model, llvm::Module& module, const ir::Block& arena,
                  std::vector<int> outputs)
      : KernelEmitter(model, module, arena, std::move(outputs)) {}

private:
  bool over_arena() const override { return true; }
  std::vector<KernelParam> parameters() override {
    return {{"theta", f64_ptr()}, {"t", i64()}, {"out", f64_ptr()}};
  }
  void emit_body() override { emit_output_stores(); }
};

// The mean and covariance of a Gaussian model block given one state: (theta, t, x_in, mean, cov).
class MomentsEmitter : public KernelEmitter {
public:
  MomentsEmitter(const ir::Model& model, llvm::Module& module, const ir::Block& block)
      : KernelEmitter(model, module, block, {}) {}

private:
  std::vector<KernelParam> parameters() override {
    return {{"theta", f64_ptr()},
            {"t", i64()},
            {"x_in", f64_ptr()},
            {"mean", f64_ptr()},
            {"cov", f64_ptr()}};
  }
  void emit_body() override { emit_moments(); }
  Values load_state(const ir::Node& node) override {
    if (node.lag != (block_.kind == ir::BlockKind::Observation ? 0 : 1))
      throw CodegenError("internal error: a Gaussian block reads a variable it samples");
    return load_state_at_x_in(node);
  }

  // mean[off + i] and cov[(off + i) * dim + off + j] of each relation's target (stacked as the
  // runtime lays out states, or observations); relations are independent given x_in.
  void emit_moments() {
    const bool obs = block_.kind == ir::BlockKind::Observation;
    const int dim = obs ? model_.obs_size() : model_.state_size();
    for (int k = 0; k < dim * dim; ++k)
      b_.CreateStore(constant(0), b_.CreateConstInBoundsGEP1_64(b_.getDoubleTy(), arg("cov"), k));
    for (const ir::Relation& rel : block_.relations) {
      const int size = model_.var_shape(rel.kind, rel.var).size();
      const int off = obs ? model_.obs_offset(rel.var) : model_.state_offset(rel.var);
      const Values& mu = get(rel.args[0]);
      auto store = [&](const char* name, int index, Value* v) {
        b_.CreateStore(v, b_.CreateConstInBoundsGEP1_64(b_.getDoubleTy(), arg(name), index));
      };
      for (int i = 0; i < size; ++i)
        store("mean", off + i, component(mu, i));
      if (rel.dist == ir::Dist::Dirac) // a copy: no variance
        continue;
      if (rel.dist == ir::Dist::Normal) {
        const Values& sd = get(rel.args[1]);
        for (int i = 0; i < size; ++i)
          store("cov", (off + i) * dim + off + i,
                b_.CreateFMul(component(sd, i), component(sd, i)));
        continue;
      }
      const Values& l = lower_factor(rel); // mvnormal: L L' is the covariance, row-major
      for (int i = 0; i < size; ++i)
        for (int j = 0; j < size; ++j) {
          Value* c = constant(0);
          for (int k = 0; k <= std::min(i, j); ++k)
            c = b_.CreateFAdd(c, b_.CreateFMul(l[i * size + k], l[j * size + k]));
          store("cov", (off + i) * dim + off + j, c);
        }
    }
    b_.CreateRetVoid();
  }
};

// Arena nodes (-1: zero) at one state x_in, written one after another: (theta, t, x_in, out).
class JacobianEmitter : public MatricesEmitter {
public:
  using MatricesEmitter::MatricesEmitter;

private:
  std::vector<KernelParam> parameters() override {
    return {{"theta", f64_ptr()}, {"t", i64()}, {"x_in", f64_ptr()}, {"out", f64_ptr()}};
  }
  Values load_state(const ir::Node& node) override { return load_state_at_x_in(node); }
};

// An exported kernel (theta, t, block, then `pointers` buffers) that calls the function of one
// block, chosen by `block`; each block's function is added by add_case.
class BlockSwitch {
public:
  BlockSwitch(llvm::Module& module, const char* name, int pointers, unsigned cases)
      : b_(module.getContext()) {
    auto& ctx = module.getContext();
    auto* ptr = llvm::PointerType::getUnqual(b_.getDoubleTy());
    std::vector<llvm::Type*> params{ptr, b_.getInt64Ty(), b_.getInt32Ty()};
    params.insert(params.end(), pointers, ptr);
    auto* type = llvm::FunctionType::get(b_.getVoidTy(), params, false);
    fn_ = llvm::Function::Create(type, llvm::Function::ExternalLinkage, name, module);
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    auto* entry = llvm::BasicBlock::Create(ctx, "entry", fn_);
    done_ = llvm::BasicBlock::Create(ctx, "done", fn_);
    b_.SetInsertPoint(done_);
    b_.CreateRetVoid();
    b_.SetInsertPoint(entry);
    switch_ = b_.CreateSwitch(fn_->getArg(2), done_, cases);
  }

  // `part`, made internal, is called with every argument but `block` when `block` is `value`.
  void add_case(int value, llvm::Function* part, std::string_view label) {
    part->setLinkage(llvm::GlobalValue::InternalLinkage);
    auto* bb = llvm::BasicBlock::Create(b_.getContext(), label, fn_, done_);
    switch_->addCase(b_.getInt32(value), bb);
    b_.SetInsertPoint(bb);
    std::vector<llvm::Value*> args;
    for (unsigned i = 0; i < fn_->arg_size(); ++i)
      if (i != 2)
        args.push_back(fn_->getArg(i));
    b_.CreateCall(part, args);
    b_.CreateBr(done_);
  }

  llvm::Function* function() const { return fn_; }

private:
  llvm::IRBuilder<> b_;
  llvm::Function* fn_;
  llvm::BasicBlock* done_;
  llvm::SwitchInst* switch_;
};

} // namespace

// ssm_linear_gaussian(theta, t, out): m0, P0, F, c, Q, H, d, R written one after another, one
// arena function per model block, inlined into the exported one.
llvm::Function* emit_linear_gaussian(const ir::Model& model, const passes::LinearGaussian& lg,
                                     llvm::Module& module) {
  const int64_t n = model.state_size(), m = model.obs_size();
  const std::vector<int64_t> sizes = {n, n * n, n * n, n, n * n, m * n, m, m * m};
  if (lg.matrices.size() != sizes.size())
    throw CodegenError("internal error: a linear-Gaussian model without its eight matrices");
  auto& ctx = module.getContext();
  llvm::IRBuilder<> b(ctx);
  auto* ptr = llvm::PointerType::getUnqual(b.getDoubleTy());
  auto* type = llvm::FunctionType::get(b.getVoidTy(), {ptr, b.getInt64Ty(), ptr}, false);
  auto* fn =
      llvm::Function::Create(type, llvm::Function::ExternalLinkage, "ssm_linear_gaussian", module);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", fn));
  int64_t offset = 0;
  for (size_t i = 0; i < lg.matrices.size();) {
    const ir::BlockKind block = lg.matrices[i].block;
    const int64_t begin = offset;
    std::vector<int> nodes;
    for (; i < lg.matrices.size() && lg.matrices[i].block == block; ++i) {
      const passes::SymbolicValue& v = lg.matrices[i];
      if (v.shape.size() != sizes[i])
        throw CodegenError(fmt::format("internal error: {} has {} elements, not {}", v.name,
                                       v.shape.size(), sizes[i]));
      nodes.push_back(v.node);
      offset += sizes[i];
    }
    const ir::Block& arena = block == ir::BlockKind::Initial      ? lg.initial
                             : block == ir::BlockKind::Transition ? lg.transition
                                                                  : lg.observation;
    llvm::Function* part =
        MatricesEmitter(model, module, arena, nodes)
            .emit(fmt::format("ssm_linear_gaussian.{}", ir::block_name(block)).c_str());
    part->setLinkage(llvm::GlobalValue::InternalLinkage);
    part->addFnAttr(llvm::Attribute::AlwaysInline);
    b.CreateCall(part, {fn->getArg(0), fn->getArg(1),
                        b.CreateConstInBoundsGEP1_64(b.getDoubleTy(), fn->getArg(2), begin)});
  }
  b.CreateRetVoid();
  return fn;
}

// ssm_gaussian_moments(theta, t, block, x_in, mean, cov): one Moments function per model block,
// chosen by `block` (0 initial, 1 transition, 2 observation).
llvm::Function* emit_gaussian_moments(const ir::Model& model, llvm::Module& module) {
  BlockSwitch dispatch(module, "ssm_gaussian_moments", 3, 3);
  const ir::BlockKind kinds[] = {ir::BlockKind::Initial, ir::BlockKind::Transition,
                                 ir::BlockKind::Observation};
  for (int k = 0; k < 3; ++k) {
    llvm::Function* part =
        MomentsEmitter(model, module, model.block(kinds[k]))
            .emit(fmt::format("ssm_gaussian_moments.{}", ir::block_name(kinds[k])).c_str());
    dispatch.add_case(k, part, ir::block_name(kinds[k]));
  }
  return dispatch.function();
}

// ssm_gaussian_jacobian(theta, t, block, x_in, jac): the Jacobian (dim x n, row-major) of block
// `block`'s stacked relation locations with respect to the state it conditions on, at x_in (1
// transition, 2 observation), from the derivatives analysis.
llvm::Function* emit_gaussian_jacobian(const ir::Model& model, const passes::Derivatives& derivs,
                                       llvm::Module& module) {
  BlockSwitch dispatch(module, "ssm_gaussian_jacobian", 2, 2);
  const int n = model.state_size();
  for (ir::BlockKind kind : {ir::BlockKind::Transition, ir::BlockKind::Observation}) {
    const bool obs = kind == ir::BlockKind::Observation;
    const int dim = obs ? model.obs_size() : n;
    std::vector<int> grid(static_cast<size_t>(dim) * n, -1);
    const ir::Block& block = model.block(kind);
    size_t r = 0;
    for (const passes::RelationDerivatives& rd : derivs.relations) {
      if (rd.block != kind)
        continue;
      const ir::Relation& rel = block.relations.at(r++);
      const int off = obs ? model.obs_offset(rel.var) : model.state_offset(rel.var);
      const int rows = model.var_shape(rel.kind, rel.var).size();
      if (rd.location_jacobian.size() != static_cast<size_t>(rows) * n)
        throw CodegenError("internal error: a Gaussian relation without its location Jacobian");
      for (int i = 0; i < rows; ++i)
        for (int j = 0; j < n; ++j)
          grid[static_cast<size_t>(off + i) * n + j] =
              rd.location_jacobian[static_cast<size_t>(i) * n + j];
    }
    llvm::Function* part =
        JacobianEmitter(model, module, derivs.arena, grid)
            .emit(fmt::format("ssm_gaussian_jacobian.{}", ir::block_name(kind)).c_str());
    dispatch.add_case(obs ? 2 : 1, part, ir::block_name(kind));
  }
  return dispatch.function();
}

std::string gaussian_moments_unsupported(const ir::Model& model) {
  for (const ir::Block* block : {&model.initial, &model.transition, &model.observation}) {
    const ir::VarKind sampled =
        block->kind == ir::BlockKind::Observation ? ir::VarKind::Obs : ir::VarKind::State;
    for (const ir::Relation& rel : block->relations) {
      if (const auto lagged = ir::parse_lagged_state_name(model.var_name(rel.kind, rel.var)))
        return fmt::format("the model reads {}[t-{}], which the state carries in a hidden copy; "
                           "the unscented and extended filters do not support that yet",
                           lagged->first, lagged->second + 1);
      const std::string target = fmt::format("{}[{}]", model.var_name(rel.kind, rel.var),
                                             block->kind == ir::BlockKind::Initial ? "0" : "t");
      if (rel.dist != ir::Dist::Normal && rel.dist != ir::Dist::MvNormal &&
          rel.dist != ir::Dist::MvNormalChol && rel.dist != ir::Dist::Dirac)
        return fmt::format("{} ~ {} is not Gaussian (at {}:{})", target,
                           ir::dist_info(rel.dist).name, rel.loc.line, rel.loc.col);
      // Independent given the conditioning state: no argument reads a variable of this step.
      std::vector<int> pending(rel.args.begin(), rel.args.end());
      while (!pending.empty()) {
        const ir::Node& n = block->nodes[pending.back()];
        pending.pop_back();
        const bool same_step =
            (n.op == ir::Op::State && sampled == ir::VarKind::State && n.lag == 0) ||
            (n.op == ir::Op::Obs && n.lag == 0);
        if (same_step)
          return fmt::format("the parameters of {} read a variable of the same step (at {}:{})",
                             target, rel.loc.line, rel.loc.col);
        pending.insert(pending.end(), n.args.begin(), n.args.end());
      }
    }
  }
  return {};
}

} // namespace ssm::codegen
