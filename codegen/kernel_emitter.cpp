// The shared base of the kernel emitters: see kernel_emitter.h. The relations' draws and densities
// are in kernel_relations.cpp.
#include "kernel_emitter.h"

#include <fmt/format.h>
#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Metadata.h>
#include <llvm/IR/Module.h>

#include <cmath>
#include <limits>
#include <numbers>

namespace ssm::codegen {

using llvm::Value;

KernelEmitter::KernelEmitter(const ir::Model& model, llvm::Module& module, ir::BlockKind block)
    : KernelEmitter(model, module, model.block(block), model.block(block).outputs) {}

KernelEmitter::KernelEmitter(const ir::Model& model, llvm::Module& module, const ir::Block& block,
                             std::vector<int> outputs)
    : model_(model), module_(module), ctx_(module.getContext()), block_(block),
      outputs_(std::move(outputs)), b_(ctx_) {}

llvm::Function* KernelEmitter::emit(const char* name, bool items) {
  items_ = items;
  create_function(name);
  compute_varying();
  compute_needed();
  ode_rate_ = ir::ode_rate_nodes(block_);
  // Preamble: everything that does not change from particle to particle (an ode's rate has a
  // value only inside its integration).
  cache_ = std::vector<Values>(block_.nodes.size());
  for (size_t i = 0; i < block_.nodes.size(); ++i)
    if (!varying_[i] && needed_[i] && !ode_rate_[i])
      get(static_cast<int>(i));
  for (const ir::Relation& rel : block_.relations)
    if (rel.dist == ir::Dist::MvNormal && !varying_[rel.args[1]])
      cholesky(rel.args[1]);
  preamble_cache_ = cache_;
  preamble_cholesky_ = cholesky_;
  if (items_)
    emit_loop(false); // no ancestors: x_prev is x
  else
    emit_body();
  return fn_;
}

// ---- the function and its loop ----

std::vector<KernelParam> KernelEmitter::particle_parameters(std::vector<KernelParam> rest) {
  std::vector<KernelParam> params;
  params.emplace_back("theta", f64_ptr());
  if (samples())
    params.emplace_back("seed", i64());
  if (block_.kind != ir::BlockKind::Initial)
    params.emplace_back("t", i64());
  params.insert(params.end(), {{"begin", i64()}, {"end", i64()}, {"stride", i64()}});
  params.insert(params.end(), rest.begin(), rest.end());
  return params;
}

std::vector<KernelParam> KernelEmitter::item_parameters() {
  return {{"theta", f64_ptr()}, {"items", i64_ptr()},  {"begin", i64()},
          {"end", i64()},       {"stride", i64()},     {"x", f64_ptr()},
          {"y", f64_ptr()},     {"inputs", f64_ptr()}, {"out", f64_ptr()}};
}

void KernelEmitter::create_function(const char* name) {
  const std::vector<KernelParam> params = items_ ? item_parameters() : parameters();
  std::vector<llvm::Type*> types;
  for (auto& p : params)
    types.push_back(p.second);
  auto* type = llvm::FunctionType::get(b_.getVoidTy(), types, false);
  fn_ = llvm::Function::Create(type, llvm::Function::ExternalLinkage, name, module_);
  fn_->addFnAttr(llvm::Attribute::NoUnwind);
  for (size_t i = 0; i < params.size(); ++i) {
    llvm::Argument* a = fn_->getArg(i);
    a->setName(params[i].first);
    args_[params[i].first] = a;
    if (params[i].second->isPointerTy())
      a->addAttr(llvm::Attribute::NoAlias); // the runtime never passes overlapping buffers
  }
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn_));
  if (args_.count("t"))
    t32_ = b_.CreateTrunc(arg("t"), b_.getInt32Ty(), "t32");
  else
    t32_ = b_.getInt32(0);
}

Value* KernelEmitter::arg(const std::string& name) const {
  auto it = args_.find(name);
  if (it == args_.end())
    throw CodegenError(fmt::format("internal error: kernel has no argument '{}'", name));
  return it->second;
}

size_t KernelEmitter::emit_loop(bool gather) {
  auto* pre = b_.GetInsertBlock();
  auto* body = llvm::BasicBlock::Create(ctx_, gather ? "loop.gather" : "loop", fn_);
  auto* exit = llvm::BasicBlock::Create(ctx_, "exit", fn_);
  const size_t first_inner_block = fn_->size(); // blocks of the particle's work come after
  b_.CreateCondBr(b_.CreateICmpSLT(arg("begin"), arg("end")), body, exit);

  b_.SetInsertPoint(body);
  auto* n = b_.CreatePHI(b_.getInt64Ty(), 2, "n");
  n->addIncoming(arg("begin"), pre);
  n_ = n;
  n32_ = b_.CreateTrunc(n, b_.getInt32Ty(), "n32");
  if (items_) {
    item_ = b_.CreateLoad(b_.getInt64Ty(), b_.CreateInBoundsGEP(b_.getInt64Ty(), arg("items"), n),
                          "item");
    t32_ = b_.CreateTrunc(item_, b_.getInt32Ty(), "t32");
  }
  ancestor_branch_ = nullptr;
  ancestor_ = n;
  if (gather) {
    // ancestors[n], or n where ancestors is null: emit_loops_with_ancestors keeps the branch
    // when this loop serves both cases, and makes the load unconditional otherwise.
    auto* load = llvm::BasicBlock::Create(ctx_, "ancestor.load", fn_);
    auto* join = llvm::BasicBlock::Create(ctx_, "ancestor.join", fn_);
    llvm::BasicBlock* from = b_.GetInsertBlock();
    ancestor_branch_ = b_.CreateCondBr(b_.CreateIsNull(arg("ancestors")), join, load);
    b_.SetInsertPoint(load);
    Value* loaded =
        b_.CreateLoad(b_.getInt64Ty(), b_.CreateInBoundsGEP(b_.getInt64Ty(), arg("ancestors"), n));
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
    auto* ancestor = b_.CreatePHI(b_.getInt64Ty(), 2, "ancestor");
    ancestor->addIncoming(n, from);
    ancestor->addIncoming(loaded, load);
    ancestor_ = ancestor;
  }
  cache_ = preamble_cache_;
  cholesky_ = preamble_cholesky_;
  current_.clear();
  emit_particle();

  auto* next = b_.CreateAdd(n, b_.getInt64(1), "n.next", true, true);
  n->addIncoming(next, b_.GetInsertBlock());
  llvm::BranchInst* latch = b_.CreateCondBr(b_.CreateICmpSLT(next, arg("end")), body, exit);
  std::vector<llvm::BasicBlock*> blocks{body};
  size_t index = 0;
  for (llvm::BasicBlock& block : *fn_)
    if (index++ >= first_inner_block)
      blocks.push_back(&block);
  const size_t size = mark_parallel(blocks, latch);
  b_.SetInsertPoint(exit);
  b_.CreateRetVoid();
  return size;
}

// Particles are independent: iteration n writes only particle n's slots ([c * stride + n], the
// runtime's stride covers every particle) and reads the others' inputs only (x_prev, theta, y).
// The loop vectoriser cannot see that when a particle writes several components: the distance
// between out[c * stride + n] and out[d * stride + n] is symbolic, and checking every pair at run
// time exceeds its limit, so a kernel with many outputs (a state gradient) stayed scalar. The
// kernel's own accesses to its arguments are put in an access group that the loop declares
// parallel. Anything else that touches memory (an ODE's rows on the stack, what an inlined
// library function reads) stays outside the group, and then LLVM treats the loop as it would
// without the annotation.
size_t KernelEmitter::mark_parallel(const std::vector<llvm::BasicBlock*>& blocks,
                                    llvm::BranchInst* latch) {
  llvm::MDNode* group = llvm::MDNode::getDistinct(ctx_, {});
  for (llvm::BasicBlock* block : blocks)
    for (llvm::Instruction& inst : *block) {
      const Value* pointer = nullptr;
      if (auto* load = llvm::dyn_cast<llvm::LoadInst>(&inst))
        pointer = load->getPointerOperand();
      else if (auto* store = llvm::dyn_cast<llvm::StoreInst>(&inst))
        pointer = store->getPointerOperand();
      if (pointer && llvm::isa<llvm::Argument>(llvm::getUnderlyingObject(pointer)))
        inst.setMetadata(llvm::LLVMContext::MD_access_group, group);
    }
  llvm::Metadata* parallel[] = {llvm::MDString::get(ctx_, "llvm.loop.parallel_accesses"), group};
  llvm::TempMDTuple placeholder = llvm::MDNode::getTemporary(ctx_, {});
  std::vector<llvm::Metadata*> loop_id = {placeholder.get(), llvm::MDNode::get(ctx_, parallel)};
  size_t body = 0;
  for (llvm::BasicBlock* block : blocks)
    body += block->size();
  if (body > max_vectorized_body_) {
    llvm::Metadata* scalar[] = {llvm::MDString::get(ctx_, "llvm.loop.vectorize.enable"),
                                llvm::ConstantAsMetadata::get(b_.getFalse())};
    loop_id.push_back(llvm::MDNode::get(ctx_, scalar));
  }
  llvm::MDNode* loop = llvm::MDNode::getDistinct(ctx_, loop_id);
  loop->replaceOperandWith(0, loop);
  latch->setMetadata(llvm::LLVMContext::MD_loop, loop);
  return body;
}

void KernelEmitter::emit_particle() {
  Value* logpdf = llvm::ConstantFP::get(b_.getDoubleTy(), 0.0);
  for (size_t r = 0; r < block_.relations.size(); ++r)
    logpdf = emit_relation(r, logpdf);
  if (scores())
    b_.CreateStore(logpdf, element(arg("out"), b_.getInt64(0), n_));
}

// A loop that stays scalar (its body over max_vectorized_body_) serves both cases, reading
// ancestors[n] behind a branch: a second copy would double the code LLVM compiles for nothing
// (the 10-D linear-Gaussian example's score terms: two copies of 3,050 instructions).
void KernelEmitter::emit_loops_with_ancestors() {
  auto* gather = llvm::BasicBlock::Create(ctx_, "gather", fn_);
  auto* direct = llvm::BasicBlock::Create(ctx_, "direct", fn_);
  b_.CreateCondBr(b_.CreateIsNotNull(arg("ancestors")), gather, direct);
  b_.SetInsertPoint(gather);
  if (emit_loop(true) > max_vectorized_body_) {
    b_.SetInsertPoint(direct);
    b_.CreateBr(gather);
    return;
  }
  // Vectorised: this copy always gathers, so the load is unconditional and the loop simple.
  llvm::BasicBlock* from = ancestor_branch_->getParent();
  auto* load = ancestor_branch_->getSuccessor(1);
  llvm::cast<llvm::PHINode>(llvm::cast<llvm::Instruction>(ancestor_))->removeIncomingValue(from);
  ancestor_branch_->eraseFromParent();
  llvm::BranchInst::Create(load, from);
  b_.SetInsertPoint(direct);
  emit_loop(false);
}

void KernelEmitter::emit_output_stores() {
  int64_t offset = 0;
  for (int id : outputs_) {
    const Values zero{constant(0)};
    for (Value* v : id < 0 ? zero : get(id))
      b_.CreateStore(v, b_.CreateConstInBoundsGEP1_64(b_.getDoubleTy(), arg("out"), offset++));
  }
  b_.CreateRetVoid();
}

KernelEmitter::LoopPhis KernelEmitter::open_loop(llvm::BasicBlock* from, const Values& start,
                                                 const char* counter, const char* value) {
  LoopPhis loop;
  loop.counter = b_.CreatePHI(b_.getInt32Ty(), 2, counter);
  loop.counter->addIncoming(b_.getInt32(0), from);
  for (Value* v : start) {
    loop.values.push_back(b_.CreatePHI(b_.getDoubleTy(), 2, value));
    loop.values.back()->addIncoming(v, from);
  }
  return loop;
}

void KernelEmitter::close_loop(const LoopPhis& loop, const Values& next, Value* count,
                               llvm::BasicBlock* head, llvm::BasicBlock* exit) {
  llvm::BasicBlock* latch = b_.GetInsertBlock();
  Value* counter_next = b_.CreateAdd(loop.counter, b_.getInt32(1), "", true, true);
  loop.counter->addIncoming(counter_next, latch);
  for (size_t c = 0; c < loop.values.size(); ++c)
    loop.values[c]->addIncoming(next[c], latch);
  b_.CreateCondBr(b_.CreateICmpSLT(counter_next, count), head, exit);
}

// &base[component * stride + particle]
Value* KernelEmitter::element(Value* base, Value* component, Value* particle) {
  Value* index = b_.CreateAdd(b_.CreateMul(component, arg("stride")), particle);
  return b_.CreateInBoundsGEP(b_.getDoubleTy(), base, index);
}

// ---- which nodes vary across particles ----

void KernelEmitter::compute_varying() {
  varying_.assign(block_.nodes.size(), false);
  for (size_t i = 0; i < block_.nodes.size(); ++i) {
    const ir::Node& node = block_.nodes[i];
    // y[t] varies in the observation sampler only; y[t-1], data and inputs are in the frame.
    // In the item layout, each particle has its own t, y and inputs.
    bool v = node.op == ir::Op::State ||
             (node.op == ir::Op::Obs && node.lag == 0 && samples_observations()) ||
             (items_ && (node.op == ir::Op::Time || node.op == ir::Op::Input ||
                         (node.op == ir::Op::Obs && node.lag == 0)));
    for (int a : node.args)
      v = v || varying_[a];
    varying_[i] = v;
  }
}

// Nodes the kernel computes: all of a model block; of an arena, what its outputs read.
void KernelEmitter::compute_needed() {
  bool arena = over_arena();
  needed_.assign(block_.nodes.size(), !arena);
  std::vector<int> pending;
  if (arena)
    for (int id : outputs_)
      if (id >= 0)
        pending.push_back(id);
  while (!pending.empty()) {
    int id = pending.back();
    pending.pop_back();
    if (needed_[id])
      continue;
    needed_[id] = true;
    for (int a : block_.nodes[id].args)
      pending.push_back(a);
  }
}

// ---- expressions ----

const Values& KernelEmitter::get(int id) {
  if (!cache_[id].empty())
    return cache_[id];
  const ir::Node& node = block_.nodes[id];
  if (node.op == ir::Op::Ode) { // its rate is evaluated inside the integration, not before
    Values solution = runge_kutta(id);
    cache_[id] = std::move(solution);
    return cache_[id];
  }
  std::vector<const Values*> args;
  for (int a : node.args)
    args.push_back(&get(a));
  cache_[id] = compute(node, args);
  return cache_[id];
}

Value* KernelEmitter::library_call(const std::string& name, std::vector<Value*> operands) {
  llvm::Function* f = module_.getFunction(name);
  if (!f)
    throw CodegenError(fmt::format("the kernel library has no function '{}'", name));
  for (size_t i = 0; i < operands.size(); ++i) // library integer arguments are 32 or 64 bit
    if (operands[i]->getType() != f->getArg(i)->getType())
      operands[i] = b_.CreateZExtOrTrunc(operands[i], f->getArg(i)->getType());
  return b_.CreateCall(f, operands);
}

// One component of an elementwise built-in function, as its row in ir/builtins.h says.
Value* KernelEmitter::apply(const ir::Builtin& f, Value* a, Value* c) {
  std::vector<Value*> operands{a};
  if (f.arity == 2)
    operands.push_back(c);
  switch (f.emit) {
  case ir::Emit::Intrinsic:
    return intrinsic(llvm::Function::lookupIntrinsicID(f.symbol), operands);
  case ir::Emit::Libm: {
    std::vector<llvm::Type*> params(operands.size(), b_.getDoubleTy());
    auto* type = llvm::FunctionType::get(b_.getDoubleTy(), params, false);
    return b_.CreateCall(module_.getOrInsertFunction(f.symbol, type), operands);
  }
  case ir::Emit::KernelLib:
    return library_call(std::string(f.symbol), operands);
  case ir::Emit::Inline:
    break;
  }
  switch (f.fn) {
  case ir::Fn::Logistic:
    return b_.CreateFDiv(constant(1), b_.CreateFAdd(constant(1), intrinsic(llvm::Intrinsic::exp,
                                                                           {b_.CreateFNeg(a)})));
  case ir::Fn::Phi: { // 0.5 erfc(-x / sqrt 2), as the evaluator computes it
    auto* type = llvm::FunctionType::get(b_.getDoubleTy(), {b_.getDoubleTy()}, false);
    Value* z = b_.CreateFDiv(b_.CreateFNeg(a), constant(std::numbers::sqrt2));
    return b_.CreateFMul(constant(0.5),
                         b_.CreateCall(module_.getOrInsertFunction("erfc", type), {z}));
  }
  case ir::Fn::Pow:
    return power(a, c);
  case ir::Fn::Digamma:
    return digamma(a);
  case ir::Fn::Mod:
    return b_.CreateFSub(
        a, b_.CreateFMul(c, intrinsic(llvm::Intrinsic::floor, {b_.CreateFDiv(a, c)})));
  // Comparisons are false on NaN, except !=, as in C.
  case ir::Fn::Lt:
    return truth(b_.CreateFCmpOLT(a, c));
  case ir::Fn::Le:
    return truth(b_.CreateFCmpOLE(a, c));
  case ir::Fn::Gt:
    return truth(b_.CreateFCmpOGT(a, c));
  case ir::Fn::Ge:
    return truth(b_.CreateFCmpOGE(a, c));
  case ir::Fn::Eq:
    return truth(b_.CreateFCmpOEQ(a, c));
  case ir::Fn::Ne:
    return truth(b_.CreateFCmpUNE(a, c));
  case ir::Fn::And:
    return truth(b_.CreateAnd(is_true(a), is_true(c)));
  case ir::Fn::Or:
    return truth(b_.CreateOr(is_true(a), is_true(c)));
  case ir::Fn::Not:
    return truth(b_.CreateNot(is_true(a)));
  default:
    throw CodegenError(fmt::format("internal error: no code for function '{}'", f.name));
  }
}

// A built-in function on whole vectors or matrices (dot, softmax, log_sum_exp, det).
Values KernelEmitter::apply_whole(const ir::Builtin& f, const ir::Node& node,
                                  const std::vector<const Values*>& args) {
  switch (f.fn) {
  case ir::Fn::Dot: {
    Value* s = nullptr;
    for (size_t i = 0; i < args[0]->size(); ++i) {
      Value* p = b_.CreateFMul((*args[0])[i], (*args[1])[i]);
      s = s ? b_.CreateFAdd(s, p) : p;
    }
    return {s ? s : llvm::ConstantFP::get(b_.getDoubleTy(), 0.0)}; // empty vectors: 0
  }
  case ir::Fn::LogSumExp: {
    auto [shift, sum] = sum_exp(*args[0]);
    return {b_.CreateFAdd(shift, intrinsic(llvm::Intrinsic::log, {sum}))};
  }
  case ir::Fn::Softmax: {
    auto [shift, sum] = sum_exp(*args[0]);
    Values out;
    for (Value* x : *args[0])
      out.push_back(b_.CreateFDiv(intrinsic(llvm::Intrinsic::exp, {b_.CreateFSub(x, shift)}), sum));
    return out;
  }
  case ir::Fn::Det: { // of a covariance (density bounds): the squared Cholesky diagonal
    const Values& l = cholesky(node.args[0]);
    int d = block_.nodes[node.args[0]].shape.dims[0];
    Value* det = constant(1);
    for (int i = 0; i < d; ++i)
      det = b_.CreateFMul(det, b_.CreateFMul(l[i * d + i], l[i * d + i]));
    return {det};
  }
  default:
    throw CodegenError(fmt::format("internal error: no code for function '{}'", f.name));
  }
}

// digamma(x) = digamma(x + 10) - sum_{k<10} 1 / (x + k), and the asymptotic series at x + 10
// (error below 1e-14 for x > 0): straight-line code, for the derivatives of lgamma.
Value* KernelEmitter::digamma(Value* x) {
  Value* shifted = x;
  Value* sum = constant(0);
  for (int k = 0; k < 10; ++k) {
    sum = b_.CreateFAdd(sum, b_.CreateFDiv(constant(1), shifted));
    shifted = b_.CreateFAdd(shifted, constant(1));
  }
  Value* r = b_.CreateFDiv(constant(1), b_.CreateFMul(shifted, shifted));
  // 1/12 - r/120 + r^2/252 - r^3/240 + r^4/132, by Horner
  Value* series = constant(1.0 / 132);
  for (double coef : {-1.0 / 240, 1.0 / 252, -1.0 / 120, 1.0 / 12})
    series = b_.CreateFAdd(constant(coef), b_.CreateFMul(r, series));
  Value* value = b_.CreateFSub(intrinsic(llvm::Intrinsic::log, {shifted}),
                               b_.CreateFDiv(constant(0.5), shifted));
  return b_.CreateFSub(b_.CreateFSub(value, b_.CreateFMul(r, series)), sum);
}

// {shift, sum_i exp(x_i - shift)} with the shift of ir/builtins.cpp: the largest x_i, or 0
// when that is not finite, so no term overflows.
std::pair<Value*, Value*> KernelEmitter::sum_exp(const Values& x) {
  Value* m = x[0];
  for (Value* v : x)
    m = intrinsic(llvm::Intrinsic::maxnum, {m, v});
  Value* finite = b_.CreateFCmpOLT(intrinsic(llvm::Intrinsic::fabs, {m}),
                                   constant(std::numeric_limits<double>::infinity()));
  Value* shift = b_.CreateSelect(finite, m, constant(0));
  Value* sum = constant(0);
  for (Value* v : x)
    sum = b_.CreateFAdd(sum, intrinsic(llvm::Intrinsic::exp, {b_.CreateFSub(v, shift)}));
  return {shift, sum};
}

Value* KernelEmitter::frame_load(int offset) {
  return b_.CreateLoad(b_.getDoubleTy(),
                       b_.CreateConstInBoundsGEP1_64(b_.getDoubleTy(), arg("theta"), offset));
}

Values KernelEmitter::frame_values(int offset, size_t size) {
  Values out(size);
  for (size_t i = 0; i < size; ++i)
    out[i] = frame_load(offset + static_cast<int>(i));
  return out;
}

Value* KernelEmitter::power(Value* a, Value* e) {
  if (auto* c = llvm::dyn_cast<llvm::ConstantFP>(e)) {
    double v = c->getValueAPF().convertToDouble();
    if (v == 2)
      return b_.CreateFMul(a, a);
    if (v == 0.5)
      return intrinsic(llvm::Intrinsic::sqrt, {a});
    if (v == -1)
      return b_.CreateFDiv(constant(1), a);
    // Small integer powers by squaring: a libm pow call costs more than the whole density.
    if (v == std::floor(v) && std::abs(v) <= 16) {
      auto n = static_cast<int>(std::abs(v));
      Value* result = nullptr;
      for (Value* square = a; n > 0; n >>= 1) {
        if (n & 1)
          result = result ? b_.CreateFMul(result, square) : square;
        if (n > 1)
          square = b_.CreateFMul(square, square);
      }
      if (!result)
        return constant(1);
      return v < 0 ? b_.CreateFDiv(constant(1), result) : result;
    }
  }
  return intrinsic(llvm::Intrinsic::pow, {a, e});
}

Values KernelEmitter::compute(const ir::Node& node, const std::vector<const Values*>& args) {
  size_t size = node.shape.size();
  Values out(size);
  auto binary = [&](auto f) {
    for (size_t i = 0; i < size; ++i)
      out[i] = f(component(*args[0], i), component(*args[1], i));
    return out;
  };
  switch (node.op) {
  case ir::Op::Const:
    for (size_t i = 0; i < size; ++i)
      out[i] = constant(node.values[i]);
    return out;
  case ir::Op::Param:
    return frame_values(model_.param_offset(node.var), size);
  case ir::Op::Data:
    return frame_values(model_.data_offset(node.var), size);
  case ir::Op::Input:
    if (items_) {
      const int offset = model_.input_offset(node.var) - model_.input_offset(0);
      for (size_t i = 0; i < size; ++i)
        out[i] =
            b_.CreateLoad(b_.getDoubleTy(), element(arg("inputs"), b_.getInt64(offset + i), n_));
      return out;
    }
    return frame_values(model_.input_offset(node.var), size);
  case ir::Op::Select:
    for (size_t i = 0; i < size; ++i)
      out[i] = b_.CreateSelect(is_true(component(*args[0], i)), component(*args[1], i),
                               component(*args[2], i));
    return out;
  case ir::Op::DynIndex: {
    // A select per row: rows are few (discrete states), and selects keep the loop vectorisable.
    Value* index = (*args[1])[0];
    int rows = block_.nodes[node.args[0]].shape.dims[0];
    for (size_t i = 0; i < size; ++i) {
      Value* v = constant(NAN);
      for (int r = rows - 1; r >= 0; --r)
        v = b_.CreateSelect(b_.CreateFCmpOEQ(index, constant(r)), (*args[0])[r * size + i], v);
      out[i] = v;
    }
    return out;
  }
  case ir::Op::Time:
    return {b_.CreateSIToFP(items_ ? item_ : arg("t"), b_.getDoubleTy())};
  case ir::Op::State:
    return load_state(node);
  case ir::Op::Obs:
    return load_obs(node);
  case ir::Op::Latent: // the driver refuses models without time before code generation
    throw CodegenError("internal error: no kernels for latent variables yet");
  case ir::Op::Net: // passes/net_outputs.cpp makes every call a state
    throw CodegenError("internal error: a network call reached code generation");
  case ir::Op::Ode: // get() integrates it (ode_integration.cpp)
  case ir::Op::OdeTime:
  case ir::Op::OdeState:
    throw CodegenError("internal error: an ode's current time or value outside its rate");
  case ir::Op::Neg:
    for (size_t i = 0; i < size; ++i)
      out[i] = b_.CreateFNeg((*args[0])[i]);
    return out;
  case ir::Op::Add:
    return binary([&](Value* a, Value* c) { return b_.CreateFAdd(a, c); });
  case ir::Op::Sub:
    return binary([&](Value* a, Value* c) { return b_.CreateFSub(a, c); });
  case ir::Op::Mul:
    return binary([&](Value* a, Value* c) { return b_.CreateFMul(a, c); });
  case ir::Op::Div:
    return binary([&](Value* a, Value* c) { return b_.CreateFDiv(a, c); });
  case ir::Op::Pow:
    return binary([&](Value* a, Value* c) { return power(a, c); });
  case ir::Op::MatMul: {
    if (looped_product(static_cast<int>(&node - block_.nodes.data())))
      return matmul_loop(node, args);
    const ir::Shape& lhs = block_.nodes[node.args[0]].shape;
    int rows = lhs.dims[0], inner = lhs.dims[1];
    int cols = node.shape.rank() == 2 ? node.shape.dims[1] : 1;
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) {
        Value* s = nullptr;
        for (int k = 0; k < inner; ++k) {
          Value* p = b_.CreateFMul((*args[0])[i * inner + k], (*args[1])[k * cols + j]);
          s = s ? b_.CreateFAdd(s, p) : p;
        }
        out[i * cols + j] = s ? s : llvm::ConstantFP::get(b_.getDoubleTy(), 0.0); // no inner terms
      }
    return out;
  }
  case ir::Op::Call: {
    const ir::Builtin* known = ir::find_builtin(node.fn);
    if (!known)
      throw CodegenError(fmt::format("internal error: unknown function '{}'", node.fn));
    const ir::Builtin& f = *known;
    if (f.shape != ir::FnShape::Elementwise)
      return apply_whole(f, node, args);
    for (size_t i = 0; i < size; ++i)
      out[i] = apply(f, component(*args[0], i), args.size() > 1 ? component(*args[1], i) : nullptr);
    return out;
  }
  case ir::Op::Build:
    for (size_t i = 0; i < size; ++i)
      out[i] = (*args[i])[0];
    return out;
  case ir::Op::Index: {
    size_t offset = ir::index_offset(block_.nodes[node.args[0]].shape, node.index);
    return Values(args[0]->begin() + offset, args[0]->begin() + offset + size);
  }
  }
  throw CodegenError("internal error: unknown IR op");
}

Values KernelEmitter::load_state(const ir::Node& node) {
  if (node.lag > 1 || (node.lag > 0 && block_.kind == ir::BlockKind::Observation))
    throw CodegenError("internal error: a past state the kernel cannot read reached code "
                       "generation (the augment-lags transform carries it in the state)");
  // A network's output is no block's draw: every kernel reads it from the state, where the
  // runtime writes it (vi/model_networks.h; before a sampling kernel, vi's guide start computes
  // it, at zeros for arguments that are states drawn by the same kernel).
  bool sampled_here =
      samples() && block_.kind != ir::BlockKind::Observation && !model_.net_call_of(node.var);
  if (node.lag == 0 && sampled_here)
    return current_.at(node.var); // the verifier guarantees it was sampled earlier
  Value* base = arg(node.lag == 0 || items_ ? "x" : "x_prev");
  Value* particle = node.lag == 0 ? n_ : ancestor_;
  int offset = model_.state_offset(node.var);
  Values out(node.shape.size());
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = b_.CreateLoad(b_.getDoubleTy(), element(base, b_.getInt64(offset + i), particle));
  return out;
}

Values KernelEmitter::load_state_at_x_in(const ir::Node& node) {
  Values out(node.shape.size());
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = b_.CreateLoad(
        b_.getDoubleTy(),
        b_.CreateConstInBoundsGEP1_64(b_.getDoubleTy(), arg("x_in"),
                                      model_.state_offset(node.var) + static_cast<int>(i)));
  return out;
}

Values KernelEmitter::load_obs(const ir::Node& node) {
  if (node.lag == 1 && items_)
    throw CodegenError("internal error: an item kernel reads a previous observation");
  if (node.lag == 1)
    return frame_values(model_.previous_obs_offset(node.var), node.shape.size());
  if (samples_observations())
    return current_.at(node.var);
  int offset = model_.obs_offset(node.var);
  Values out(node.shape.size());
  if (items_) {
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = b_.CreateLoad(b_.getDoubleTy(), element(arg("y"), b_.getInt64(offset + i), n_));
    return out;
  }
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = b_.CreateLoad(b_.getDoubleTy(),
                           b_.CreateConstInBoundsGEP1_64(b_.getDoubleTy(), arg("y"), offset + i));
  return out;
}

// Lower-triangular Cholesky factor of a covariance node, row-major, computed once per node.
const Values& KernelEmitter::cholesky(int id) {
  auto it = cholesky_.find(id);
  if (it != cholesky_.end())
    return it->second;
  const Values& s = get(id);
  int d = block_.nodes[id].shape.dims[0];
  Values l(d * d, constant(0));
  for (int j = 0; j < d; ++j) {
    Value* diag = s[j * d + j];
    for (int k = 0; k < j; ++k)
      diag = b_.CreateFSub(diag, b_.CreateFMul(l[j * d + k], l[j * d + k]));
    l[j * d + j] = intrinsic(llvm::Intrinsic::sqrt, {diag});
    for (int i = j + 1; i < d; ++i) {
      Value* v = s[i * d + j];
      for (int k = 0; k < j; ++k)
        v = b_.CreateFSub(v, b_.CreateFMul(l[i * d + k], l[j * d + k]));
      l[i * d + j] = b_.CreateFDiv(v, l[j * d + j]);
    }
  }
  return cholesky_[id] = std::move(l);
}

} // namespace ssm::codegen
