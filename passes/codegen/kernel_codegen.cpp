// Kernel code generation: see kernel_codegen.h.
//
// Every IR value is scalarised: a node of shape [r, c] becomes r*c LLVM doubles (shapes are
// static). Nodes that read no per-particle value (constants, parameters, t, and y in the
// observation density) are emitted once before the particle loop; the rest inside it. Each loop
// iteration is straight-line code with calls to the library's samplers and densities, which inline,
// so LLVM can vectorise it.
#include "kernel_codegen.h"

#include "ir/builtins.h"
#include "passes/structure.h"
#include "ssm/abi.h"

#include <fmt/format.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <cmath>
#include <limits>
#include <map>
#include <numbers>

namespace ssm::codegen {

namespace {

using llvm::Value;
using Values = std::vector<Value*>;

enum class Kernel {
  InitSample,
  InitLogpdf,
  TransitionSample,
  TransitionLogpdf,
  ObsLogpdf,
  ObsSample,
  Functional,
  ProposalSample,     // draws x_t from the proposal and writes log q(x_t | x_{t-1}, y_t)
  Lookahead,          // the look-ahead block's outputs per particle, laid out as a state
  TransitionLogBound, // log of an arena node, per particle at t-1
  Matrices,           // arena nodes that read no state, written one after another
  Moments,            // mean and covariance of a Gaussian block given one state (x_in)
  Jacobian            // arena nodes (-1: zero) at one state x_in, written one after another
};

bool is_sampler(Kernel k) {
  return k == Kernel::InitSample || k == Kernel::TransitionSample || k == Kernel::ObsSample ||
         k == Kernel::ProposalSample;
}

// Sampling sites: one per (block, relation, component), so no two draws share a Philox counter.
uint32_t site_id(ir::BlockKind block, size_t relation, int component) {
  return (static_cast<uint32_t>(block) << 24) | (static_cast<uint32_t>(relation) << 12) |
         static_cast<uint32_t>(component);
}

class KernelEmitter {
public:
  KernelEmitter(const ir::Model& model, llvm::Module& module, Kernel kind)
      : KernelEmitter(model, module, kind, model.block(block_kind(kind)),
                      model.block(block_kind(kind)).outputs) {}

  // A kernel over an analysis' arena (TransitionLogBound, Matrices): `outputs` are its nodes.
  KernelEmitter(const ir::Model& model, llvm::Module& module, Kernel kind, const ir::Block& block,
                std::vector<int> outputs)
      : model_(model), module_(module), ctx_(module.getContext()), kind_(kind), block_(block),
        outputs_(std::move(outputs)), b_(ctx_) {}

  llvm::Function* emit(const char* name) {
    create_function(name);
    compute_varying();
    compute_needed();
    // Preamble: everything that does not change from particle to particle.
    cache_ = std::vector<Values>(block_.nodes.size());
    for (size_t i = 0; i < block_.nodes.size(); ++i)
      if (!varying_[i] && needed_[i])
        get(static_cast<int>(i));
    for (const ir::Relation& rel : block_.relations)
      if (rel.dist == ir::Dist::MvNormal && !varying_[rel.args[1]])
        cholesky(rel.args[1]);
    preamble_cache_ = cache_;
    preamble_cholesky_ = cholesky_;

    if (kind_ == Kernel::Moments) {
      emit_moments();
    } else if (kind_ == Kernel::Matrices || kind_ == Kernel::Jacobian) {
      int64_t offset = 0;
      for (int id : outputs_) {
        const Values zero{constant(0)};
        for (Value* v : id < 0 ? zero : get(id))
          b_.CreateStore(v, b_.CreateConstInBoundsGEP1_64(b_.getDoubleTy(), arg("out"), offset++));
      }
      b_.CreateRetVoid();
    } else if (kind_ == Kernel::TransitionSample || kind_ == Kernel::TransitionLogpdf ||
               kind_ == Kernel::Functional || kind_ == Kernel::ProposalSample) {
      // Two copies of the loop, with and without the ancestor gather, so each is a simple loop.
      auto* gather = llvm::BasicBlock::Create(ctx_, "gather", fn_);
      auto* direct = llvm::BasicBlock::Create(ctx_, "direct", fn_);
      b_.CreateCondBr(b_.CreateIsNotNull(arg("ancestors")), gather, direct);
      b_.SetInsertPoint(gather);
      emit_loop(true);
      b_.SetInsertPoint(direct);
      emit_loop(false);
    } else {
      emit_loop(false);
    }
    return fn_;
  }

private:
  static ir::BlockKind block_kind(Kernel k) {
    switch (k) {
    case Kernel::InitSample:
    case Kernel::InitLogpdf:
      return ir::BlockKind::Initial;
    case Kernel::TransitionSample:
    case Kernel::TransitionLogpdf:
      return ir::BlockKind::Transition;
    case Kernel::Functional:
      return ir::BlockKind::Functional;
    case Kernel::ProposalSample:
      return ir::BlockKind::Proposal;
    case Kernel::Lookahead:
      return ir::BlockKind::Lookahead;
    case Kernel::TransitionLogBound:
    case Kernel::Matrices:
    case Kernel::Moments:
    case Kernel::Jacobian:
      throw CodegenError("internal error: this kernel's block is given explicitly");
    default:
      return ir::BlockKind::Observation;
    }
  }

  // ---- the function and its loop ----

  void create_function(const char* name) {
    auto* f64 = b_.getDoubleTy();
    auto* i64 = b_.getInt64Ty();
    auto* ptr = llvm::PointerType::getUnqual(f64);
    auto* iptr = llvm::PointerType::getUnqual(i64);
    std::vector<std::pair<std::string, llvm::Type*>> params;
    params.emplace_back("theta", ptr);
    if (is_sampler(kind_))
      params.emplace_back("seed", i64);
    if (block_.kind != ir::BlockKind::Initial)
      params.emplace_back("t", i64);
    params.insert(params.end(), {{"begin", i64}, {"end", i64}, {"stride", i64}});
    switch (kind_) {
    case Kernel::InitSample:
      params.emplace_back("x", ptr);
      break;
    case Kernel::InitLogpdf:
      params.insert(params.end(), {{"x", ptr}, {"out", ptr}});
      break;
    case Kernel::TransitionSample:
      params.insert(params.end(), {{"x_prev", ptr}, {"ancestors", iptr}, {"x", ptr}});
      break;
    case Kernel::TransitionLogpdf:
      params.insert(params.end(), {{"x_prev", ptr}, {"ancestors", iptr}, {"x", ptr}, {"out", ptr}});
      break;
    case Kernel::ObsLogpdf:
      params.insert(params.end(), {{"x", ptr}, {"y", ptr}, {"out", ptr}});
      break;
    case Kernel::ObsSample:
      params.insert(params.end(), {{"x", ptr}, {"y", ptr}});
      break;
    case Kernel::Functional:
      params.insert(params.end(),
                    {{"x_prev", ptr}, {"ancestors", iptr}, {"x", ptr}, {"y", ptr}, {"out", ptr}});
      break;
    case Kernel::ProposalSample:
      params.insert(params.end(),
                    {{"x_prev", ptr}, {"ancestors", iptr}, {"y", ptr}, {"x", ptr}, {"out", ptr}});
      break;
    case Kernel::Lookahead:
      params.insert(params.end(), {{"x_prev", ptr}, {"y", ptr}, {"out", ptr}});
      break;
    case Kernel::TransitionLogBound:
      params.insert(params.end(), {{"x_prev", ptr}, {"out", ptr}});
      break;
    case Kernel::Matrices:
      params = {{"theta", ptr}, {"t", i64}, {"out", ptr}};
      break;
    case Kernel::Moments:
      params = {{"theta", ptr}, {"t", i64}, {"x_in", ptr}, {"mean", ptr}, {"cov", ptr}};
      break;
    case Kernel::Jacobian:
      params = {{"theta", ptr}, {"t", i64}, {"x_in", ptr}, {"out", ptr}};
      break;
    }
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

  Value* arg(const std::string& name) const {
    auto it = args_.find(name);
    if (it == args_.end())
      throw CodegenError(fmt::format("internal error: kernel has no argument '{}'", name));
    return it->second;
  }

  void emit_loop(bool gather) {
    auto* pre = b_.GetInsertBlock();
    auto* body = llvm::BasicBlock::Create(ctx_, gather ? "loop.gather" : "loop", fn_);
    auto* exit = llvm::BasicBlock::Create(ctx_, "exit", fn_);
    b_.CreateCondBr(b_.CreateICmpSLT(arg("begin"), arg("end")), body, exit);

    b_.SetInsertPoint(body);
    auto* n = b_.CreatePHI(b_.getInt64Ty(), 2, "n");
    n->addIncoming(arg("begin"), pre);
    n_ = n;
    n32_ = b_.CreateTrunc(n, b_.getInt32Ty(), "n32");
    ancestor_ =
        gather ? static_cast<Value*>(b_.CreateLoad(
                     b_.getInt64Ty(), b_.CreateInBoundsGEP(b_.getInt64Ty(), arg("ancestors"), n)))
               : n;
    cache_ = preamble_cache_;
    cholesky_ = preamble_cholesky_;
    current_.clear();
    if (kind_ == Kernel::Functional || kind_ == Kernel::Lookahead) {
      int component = 0;
      for (int id : outputs_)
        for (Value* v : get(id))
          b_.CreateStore(v, element(arg("out"), b_.getInt64(component++), n));
    } else if (kind_ == Kernel::TransitionLogBound) {
      Value* bound = get(outputs_.at(0)).at(0);
      b_.CreateStore(intrinsic(llvm::Intrinsic::log, {bound}),
                     element(arg("out"), b_.getInt64(0), n));
    } else {
      Value* logpdf = llvm::ConstantFP::get(b_.getDoubleTy(), 0.0);
      for (size_t r = 0; r < block_.relations.size(); ++r)
        logpdf = emit_relation(r, logpdf);
      if (!is_sampler(kind_) || kind_ == Kernel::ProposalSample)
        b_.CreateStore(logpdf, element(arg("out"), b_.getInt64(0), n));
    }

    auto* next = b_.CreateAdd(n, b_.getInt64(1), "n.next", true, true);
    n->addIncoming(next, b_.GetInsertBlock());
    b_.CreateCondBr(b_.CreateICmpSLT(next, arg("end")), body, exit);
    b_.SetInsertPoint(exit);
    b_.CreateRetVoid();
  }

  // &base[component * stride + particle]
  Value* element(Value* base, Value* component, Value* particle) {
    Value* index = b_.CreateAdd(b_.CreateMul(component, arg("stride")), particle);
    return b_.CreateInBoundsGEP(b_.getDoubleTy(), base, index);
  }

  // ---- which nodes vary across particles ----

  void compute_varying() {
    varying_.assign(block_.nodes.size(), false);
    for (size_t i = 0; i < block_.nodes.size(); ++i) {
      const ir::Node& node = block_.nodes[i];
      // y[t] varies in the observation sampler only; y[t-1], data and inputs are in the frame.
      bool v = node.op == ir::Op::State ||
               (node.op == ir::Op::Obs && node.lag == 0 && kind_ == Kernel::ObsSample);
      for (int a : node.args)
        v = v || varying_[a];
      varying_[i] = v;
    }
  }

  // Nodes the kernel computes: all of a model block; of an arena, what its outputs read.
  void compute_needed() {
    bool arena = kind_ == Kernel::TransitionLogBound || kind_ == Kernel::Matrices ||
                 kind_ == Kernel::Jacobian;
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

  const Values& get(int id) {
    if (!cache_[id].empty())
      return cache_[id];
    const ir::Node& node = block_.nodes[id];
    std::vector<const Values*> args;
    for (int a : node.args)
      args.push_back(&get(a));
    cache_[id] = compute(node, args);
    return cache_[id];
  }

  Value* constant(double v) { return llvm::ConstantFP::get(b_.getDoubleTy(), v); }

  static Value* component(const Values& v, size_t i) { return v.size() == 1 ? v[0] : v[i]; }

  Value* intrinsic(llvm::Intrinsic::ID id, std::vector<Value*> operands) {
    return b_.CreateIntrinsic(id, {b_.getDoubleTy()}, operands);
  }

  Value* library_call(const std::string& name, std::vector<Value*> operands) {
    llvm::Function* f = module_.getFunction(name);
    if (!f)
      throw CodegenError(fmt::format("the kernel library has no function '{}'", name));
    for (size_t i = 0; i < operands.size(); ++i) // library integer arguments are 32 or 64 bit
      if (operands[i]->getType() != f->getArg(i)->getType())
        operands[i] = b_.CreateZExtOrTrunc(operands[i], f->getArg(i)->getType());
    return b_.CreateCall(f, operands);
  }

  // One component of an elementwise built-in function, as its row in ir/builtins.h says.
  Value* apply(const ir::Builtin& f, Value* a, Value* c) {
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
  Values apply_whole(const ir::Builtin& f, const ir::Node& node,
                     const std::vector<const Values*>& args) {
    switch (f.fn) {
    case ir::Fn::Dot: {
      Value* s = nullptr;
      for (size_t i = 0; i < args[0]->size(); ++i) {
        Value* p = b_.CreateFMul((*args[0])[i], (*args[1])[i]);
        s = s ? b_.CreateFAdd(s, p) : p;
      }
      return {s};
    }
    case ir::Fn::LogSumExp: {
      auto [shift, sum] = sum_exp(*args[0]);
      return {b_.CreateFAdd(shift, intrinsic(llvm::Intrinsic::log, {sum}))};
    }
    case ir::Fn::Softmax: {
      auto [shift, sum] = sum_exp(*args[0]);
      Values out;
      for (Value* x : *args[0])
        out.push_back(
            b_.CreateFDiv(intrinsic(llvm::Intrinsic::exp, {b_.CreateFSub(x, shift)}), sum));
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
  Value* digamma(Value* x) {
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
  std::pair<Value*, Value*> sum_exp(const Values& x) {
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

  Value* truth(Value* bit) { return b_.CreateUIToFP(bit, b_.getDoubleTy()); }
  Value* is_true(Value* v) { return b_.CreateFCmpUNE(v, constant(0)); }

  Value* frame_load(int offset) {
    return b_.CreateLoad(b_.getDoubleTy(),
                         b_.CreateConstInBoundsGEP1_64(b_.getDoubleTy(), arg("theta"), offset));
  }

  Values frame_values(int offset, size_t size) {
    Values out(size);
    for (size_t i = 0; i < size; ++i)
      out[i] = frame_load(offset + static_cast<int>(i));
    return out;
  }

  Value* power(Value* a, Value* e) {
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

  Values compute(const ir::Node& node, const std::vector<const Values*>& args) {
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
      return {b_.CreateSIToFP(arg("t"), b_.getDoubleTy())};
    case ir::Op::State:
      return load_state(node);
    case ir::Op::Obs:
      return load_obs(node);
    case ir::Op::Latent: // the driver refuses models without time before code generation
      throw CodegenError("internal error: no kernels for latent variables yet");
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
          out[i * cols + j] = s;
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
        out[i] =
            apply(f, component(*args[0], i), args.size() > 1 ? component(*args[1], i) : nullptr);
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

  Values load_state(const ir::Node& node) {
    if (kind_ == Kernel::Moments || kind_ == Kernel::Jacobian) { // the conditioning state
      if (kind_ == Kernel::Moments &&
          node.lag != (block_.kind == ir::BlockKind::Observation ? 0 : 1))
        throw CodegenError("internal error: a Gaussian block reads a variable it samples");
      Values out(node.shape.size());
      for (size_t i = 0; i < out.size(); ++i)
        out[i] = b_.CreateLoad(
            b_.getDoubleTy(),
            b_.CreateConstInBoundsGEP1_64(b_.getDoubleTy(), arg("x_in"),
                                          model_.state_offset(node.var) + static_cast<int>(i)));
      return out;
    }
    if (node.lag > 1 || (node.lag > 0 && block_.kind == ir::BlockKind::Observation))
      throw CodegenError("internal error: a past state the kernel cannot read reached code "
                         "generation (the augment-lags transform carries it in the state)");
    bool sampled_here = is_sampler(kind_) && block_.kind != ir::BlockKind::Observation;
    if (node.lag == 0 && sampled_here)
      return current_.at(node.var); // the verifier guarantees it was sampled earlier
    Value* base = arg(node.lag == 0 ? "x" : "x_prev");
    Value* particle = node.lag == 0 ? n_ : ancestor_;
    int offset = model_.state_offset(node.var);
    Values out(node.shape.size());
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = b_.CreateLoad(b_.getDoubleTy(), element(base, b_.getInt64(offset + i), particle));
    return out;
  }

  Values load_obs(const ir::Node& node) {
    if (node.lag == 1)
      return frame_values(model_.previous_obs_offset(node.var), node.shape.size());
    if (kind_ == Kernel::ObsSample)
      return current_.at(node.var);
    int offset = model_.obs_offset(node.var);
    Values out(node.shape.size());
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = b_.CreateLoad(b_.getDoubleTy(),
                             b_.CreateConstInBoundsGEP1_64(b_.getDoubleTy(), arg("y"), offset + i));
    return out;
  }

  // Lower-triangular Cholesky factor of a covariance node, row-major, computed once per node.
  const Values& cholesky(int id) {
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

  // ---- relations ----

  Value* emit_relation(size_t r, Value* logpdf) {
    const ir::Relation& rel = block_.relations[r];
    const ir::Shape& shape = model_.var_shape(rel.kind, rel.var);
    int size = shape.size();
    std::vector<const Values*> args;
    for (int a : rel.args)
      args.push_back(&get(a));

    if (is_sampler(kind_)) {
      Values drawn;
      switch (rel.dist) {
      case ir::Dist::Dirac: // a copy: no draw
        for (int i = 0; i < size; ++i)
          drawn.push_back(component(*args[0], i));
        break;
      case ir::Dist::MvNormal:
      case ir::Dist::MvNormalChol:
        drawn = sample_mvnormal(rel, r, args);
        break;
      case ir::Dist::Categorical:
        drawn = sample_categorical(r, *args[0]);
        break;
      case ir::Dist::Dirichlet:
        drawn = sample_dirichlet(r, *args[0], size);
        break;
      case ir::Dist::Multinomial:
        drawn = sample_multinomial(r, (*args[0])[0], *args[1]);
        break;
      default:
        drawn = sample_independent(rel, r, args, size);
      }
      current_[rel.var] = drawn;
      bool obs = rel.kind == ir::VarKind::Obs;
      int offset = obs ? model_.obs_offset(rel.var) : model_.state_offset(rel.var);
      for (int i = 0; i < size; ++i)
        b_.CreateStore(drawn[i], element(arg(obs ? "y" : "x"), b_.getInt64(offset + i), n_));
      if (kind_ != Kernel::ProposalSample)
        return logpdf;
      // The proposal's sampler also accumulates the log-density of what it drew.
    }

    Values x;
    if (kind_ == Kernel::ProposalSample) {
      x = current_.at(rel.var);
    } else {
      ir::Node target;
      target.op = rel.kind == ir::VarKind::Obs ? ir::Op::Obs : ir::Op::State;
      target.var = rel.var;
      target.shape = shape;
      x = rel.kind == ir::VarKind::Obs ? load_obs(target) : load_state(target);
      current_[rel.var] = x;
    }
    bool skip_missing = rel.kind == ir::VarKind::Obs;
    if (rel.dist == ir::Dist::Dirac) { // 0 where the target equals the value, else -inf
      for (int i = 0; i < size; ++i)
        logpdf =
            b_.CreateFAdd(logpdf, b_.CreateSelect(b_.CreateFCmpOEQ(x[i], component(*args[0], i)),
                                                  constant(0), constant(-INFINITY)));
      return logpdf;
    }
    if (rel.dist == ir::Dist::Categorical) {
      Value* lp = categorical_logpdf(x[0], *args[0]);
      return b_.CreateFAdd(logpdf, skip_missing ? unless_missing(x[0], lp) : lp);
    }
    if (rel.dist == ir::Dist::Dirichlet || rel.dist == ir::Dist::Multinomial) {
      Value* lp = rel.dist == ir::Dist::Dirichlet ? dirichlet_logpdf(x, *args[0])
                                                  : multinomial_logpdf(x, (*args[0])[0], *args[1]);
      return b_.CreateFAdd(logpdf, skip_missing ? unless_missing(x[0], lp) : lp);
    }
    if (rel.dist == ir::Dist::MvNormal || rel.dist == ir::Dist::MvNormalChol) {
      Value* lp = mvnormal_logpdf(rel, x, args);
      // The runtime rejects partially missing rows of a joint observation; one NaN means all.
      return b_.CreateFAdd(logpdf, skip_missing ? unless_missing(x[0], lp) : lp);
    }
    std::string fn = fmt::format("ssm_lpdf_{}", ir::dist_info(rel.dist).name);
    for (int i = 0; i < size; ++i) {
      std::vector<Value*> operands{x[i]};
      for (const Values* a : args)
        operands.push_back(component(*a, i));
      Value* lp = library_call(fn, operands);
      logpdf = b_.CreateFAdd(logpdf, skip_missing ? unless_missing(x[i], lp) : lp);
    }
    return logpdf;
  }

  Value* unless_missing(Value* observed, Value* lp) {
    return b_.CreateSelect(b_.CreateFCmpUNO(observed, observed), constant(0), lp);
  }

  Value* draw(size_t r, int i, const std::string& fn, std::vector<Value*> dist_args) {
    std::vector<Value*> operands{arg("seed"), n32_, t32_, b_.getInt32(site_id(block_.kind, r, i))};
    operands.insert(operands.end(), dist_args.begin(), dist_args.end());
    return library_call(fn, operands);
  }

  Values sample_independent(const ir::Relation& rel, size_t r,
                            const std::vector<const Values*>& args, int size) {
    std::string fn = fmt::format("ssm_sample_{}", ir::dist_info(rel.dist).name);
    Values out(size);
    for (int i = 0; i < size; ++i) {
      std::vector<Value*> dist_args;
      for (const Values* a : args)
        dist_args.push_back(component(*a, i));
      out[i] = draw(r, i, fn, dist_args);
    }
    return out;
  }

  Values sample_mvnormal(const ir::Relation& rel, size_t r,
                         const std::vector<const Values*>& args) {
    const Values& mu = *args[0];
    const Values& l = lower_factor(rel);
    int d = static_cast<int>(mu.size());
    // Independent standard normals of one site, two per Philox block.
    Values z(d);
    for (int i = 0; i < d; ++i)
      z[i] = library_call(
          "ssm_sample_std_normal_k",
          {arg("seed"), n32_, t32_, b_.getInt32(site_id(block_.kind, r, 0)), b_.getInt32(i)});
    Values out(d);
    for (int i = 0; i < d; ++i) {
      Value* v = mu[i];
      for (int j = 0; j <= i; ++j)
        v = b_.CreateFAdd(v, b_.CreateFMul(l[i * d + j], z[j]));
      out[i] = v;
    }
    return out;
  }

  // The lower-triangular factor of a Gaussian relation: given (mvnormal_chol) or computed.
  const Values& lower_factor(const ir::Relation& rel) {
    return rel.dist == ir::Dist::MvNormalChol ? get(rel.args[1]) : cholesky(rel.args[1]);
  }

  Value* log_gamma(Value* x) { return library_call("ssm_log_gamma", {x}); }
  Value* all_of(const std::vector<Value*>& bits) {
    Value* all = b_.getTrue();
    for (Value* bit : bits)
      all = b_.CreateAnd(all, bit);
    return all;
  }

  // Independent gammas (one site per component), normalised.
  Values sample_dirichlet(size_t r, const Values& alpha, int k) {
    Values g(k);
    for (int i = 0; i < k; ++i)
      g[i] = library_call(
          "ssm_sample_std_gamma",
          {arg("seed"), n32_, t32_, b_.getInt32(site_id(block_.kind, r, i)), component(alpha, i)});
    Value* total = sum(g);
    for (Value*& v : g)
      v = b_.CreateFDiv(v, total);
    return g;
  }

  // log Gamma(sum alpha) - sum log Gamma(alpha_i) + sum (alpha_i - 1) log x_i on the simplex.
  Value* dirichlet_logpdf(const Values& x, const Values& alpha) {
    int k = static_cast<int>(x.size());
    Value* alpha_sum = constant(0);
    Value* lp = constant(0);
    std::vector<Value*> valid;
    for (int i = 0; i < k; ++i) {
      Value* a = component(alpha, i);
      alpha_sum = b_.CreateFAdd(alpha_sum, a);
      Value* am1 = b_.CreateFSub(a, constant(1));
      Value* term = b_.CreateSelect(b_.CreateFCmpOEQ(am1, constant(0)), constant(0),
                                    b_.CreateFMul(am1, intrinsic(llvm::Intrinsic::log, {x[i]})));
      lp = b_.CreateFSub(b_.CreateFAdd(lp, term), log_gamma(a));
      valid.push_back(b_.CreateFCmpOGE(x[i], constant(0)));
    }
    lp = b_.CreateFAdd(lp, log_gamma(alpha_sum));
    Value* off = intrinsic(llvm::Intrinsic::fabs, {b_.CreateFSub(sum(x), constant(1))});
    valid.push_back(b_.CreateFCmpOLE(off, constant(1e-9 * k)));
    return b_.CreateSelect(all_of(valid), lp, constant(-INFINITY));
  }

  // Sequential binomials: x_i ~ Binomial(n - x_0 - ... - x_{i-1}, p_i / (p_i + ... + p_{K-1})).
  Values sample_multinomial(size_t r, Value* n, const Values& p) {
    int k = static_cast<int>(p.size());
    Values x(k);
    Value* remaining = n;
    Value* mass = sum(p);
    for (int i = 0; i + 1 < k; ++i) {
      Value* q = b_.CreateSelect(
          b_.CreateFCmpOGT(mass, constant(0)),
          intrinsic(llvm::Intrinsic::minnum, {b_.CreateFDiv(p[i], mass), constant(1)}),
          constant(0));
      x[i] = library_call(
          "ssm_sample_binomial",
          {arg("seed"), n32_, t32_, b_.getInt32(site_id(block_.kind, r, i)), remaining, q});
      remaining = b_.CreateFSub(remaining, x[i]);
      mass = b_.CreateFSub(mass, p[i]);
    }
    x[k - 1] = remaining;
    return x;
  }

  // log n! - sum log x_i! + sum x_i log(p_i / sum p), for counts that sum to n.
  Value* multinomial_logpdf(const Values& x, Value* n, const Values& p) {
    Value* log_total = intrinsic(llvm::Intrinsic::log, {sum(p)});
    Value* lp = log_gamma(b_.CreateFAdd(n, constant(1)));
    std::vector<Value*> valid;
    for (size_t i = 0; i < x.size(); ++i) {
      Value* term =
          b_.CreateFMul(x[i], b_.CreateFSub(intrinsic(llvm::Intrinsic::log, {p[i]}), log_total));
      term = b_.CreateSelect(b_.CreateFCmpOEQ(x[i], constant(0)), constant(0), term);
      lp = b_.CreateFSub(b_.CreateFAdd(lp, term), log_gamma(b_.CreateFAdd(x[i], constant(1))));
      valid.push_back(b_.CreateFCmpOGE(x[i], constant(0)));
      valid.push_back(b_.CreateFCmpOEQ(intrinsic(llvm::Intrinsic::floor, {x[i]}), x[i]));
    }
    valid.push_back(b_.CreateFCmpOEQ(sum(x), n));
    return b_.CreateSelect(all_of(valid), lp, constant(-INFINITY));
  }

  Value* sum(const Values& v) {
    Value* s = v[0];
    for (size_t i = 1; i < v.size(); ++i)
      s = b_.CreateFAdd(s, v[i]);
    return s;
  }

  // The number of cumulative weights at or below u * sum(p): straight-line, so it vectorises.
  Values sample_categorical(size_t r, const Values& p) {
    Value* u =
        b_.CreateFMul(library_call("ssm_rng_uniform", {arg("seed"), n32_, t32_,
                                                       b_.getInt32(site_id(block_.kind, r, 0))}),
                      sum(p));
    Value* k = constant(0);
    Value* cum = constant(0);
    for (size_t j = 0; j + 1 < p.size(); ++j) {
      cum = b_.CreateFAdd(cum, p[j]);
      k = b_.CreateFAdd(k, truth(b_.CreateFCmpOLE(cum, u)));
    }
    return {k};
  }

  // log(p[x] / sum(p)); -inf for an x that is not one of 0..K-1.
  Value* categorical_logpdf(Value* x, const Values& p) {
    Value* px = constant(0);
    for (size_t j = 0; j < p.size(); ++j)
      px = b_.CreateSelect(b_.CreateFCmpOEQ(x, constant(static_cast<double>(j))), p[j], px);
    Value* lp = b_.CreateFSub(intrinsic(llvm::Intrinsic::log, {px}),
                              intrinsic(llvm::Intrinsic::log, {sum(p)}));
    return b_.CreateSelect(b_.CreateFCmpUNO(x, x), x, lp); // NaN stays NaN
  }

  // log N(x; mu, L L^T) = -|L^{-1}(x - mu)|^2 / 2 - sum log L_ii - d log(2 pi) / 2
  Value* mvnormal_logpdf(const ir::Relation& rel, const Values& x,
                         const std::vector<const Values*>& args) {
    const Values& mu = *args[0];
    const Values& l = lower_factor(rel);
    int d = static_cast<int>(mu.size());
    Values w(d);
    Value* quad = constant(0);
    Value* log_det = constant(0);
    for (int i = 0; i < d; ++i) {
      Value* v = b_.CreateFSub(x[i], mu[i]);
      for (int j = 0; j < i; ++j)
        v = b_.CreateFSub(v, b_.CreateFMul(l[i * d + j], w[j]));
      w[i] = b_.CreateFDiv(v, l[i * d + i]);
      quad = b_.CreateFAdd(quad, b_.CreateFMul(w[i], w[i]));
      log_det = b_.CreateFAdd(log_det, intrinsic(llvm::Intrinsic::log, {l[i * d + i]}));
    }
    Value* lp = b_.CreateFMul(constant(-0.5), quad);
    lp = b_.CreateFSub(lp, log_det);
    return b_.CreateFSub(lp, constant(0.5 * d * std::log(2 * M_PI)));
  }

  const ir::Model& model_;
  llvm::Module& module_;
  llvm::LLVMContext& ctx_;
  Kernel kind_;
  const ir::Block& block_;
  std::vector<int> outputs_;
  llvm::IRBuilder<> b_;
  llvm::Function* fn_ = nullptr;
  std::map<std::string, llvm::Argument*> args_;
  Value* t32_ = nullptr;
  Value* n_ = nullptr;
  Value* n32_ = nullptr;
  Value* ancestor_ = nullptr;
  std::vector<bool> varying_, needed_;
  std::vector<Values> cache_, preamble_cache_;
  std::map<int, Values> cholesky_, preamble_cholesky_;
  std::map<int, Values> current_; // lag-0 values of the variables this block samples or reads
};

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
        KernelEmitter(model, module, Kernel::Matrices, arena, nodes)
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
  auto& ctx = module.getContext();
  llvm::IRBuilder<> b(ctx);
  auto* ptr = llvm::PointerType::getUnqual(b.getDoubleTy());
  auto* type = llvm::FunctionType::get(b.getVoidTy(),
                                       {ptr, b.getInt64Ty(), b.getInt32Ty(), ptr, ptr, ptr}, false);
  auto* fn =
      llvm::Function::Create(type, llvm::Function::ExternalLinkage, "ssm_gaussian_moments", module);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  auto* entry = llvm::BasicBlock::Create(ctx, "entry", fn);
  auto* done = llvm::BasicBlock::Create(ctx, "done", fn);
  b.SetInsertPoint(done);
  b.CreateRetVoid();
  b.SetInsertPoint(entry);
  auto* sw = b.CreateSwitch(fn->getArg(2), done, 3);
  const ir::BlockKind kinds[] = {ir::BlockKind::Initial, ir::BlockKind::Transition,
                                 ir::BlockKind::Observation};
  for (int k = 0; k < 3; ++k) {
    llvm::Function* part =
        KernelEmitter(model, module, Kernel::Moments, model.block(kinds[k]), {})
            .emit(fmt::format("ssm_gaussian_moments.{}", ir::block_name(kinds[k])).c_str());
    part->setLinkage(llvm::GlobalValue::InternalLinkage);
    auto* bb = llvm::BasicBlock::Create(ctx, ir::block_name(kinds[k]), fn, done);
    sw->addCase(b.getInt32(k), bb);
    b.SetInsertPoint(bb);
    b.CreateCall(part, {fn->getArg(0), fn->getArg(1), fn->getArg(3), fn->getArg(4), fn->getArg(5)});
    b.CreateBr(done);
  }
  return fn;
}

// ssm_gaussian_jacobian(theta, t, block, x_in, jac): the Jacobian (dim x n, row-major) of block
// `block`'s stacked relation locations with respect to the state it conditions on, at x_in (1
// transition, 2 observation), from the derivatives analysis.
llvm::Function* emit_gaussian_jacobian(const ir::Model& model, const passes::Derivatives& derivs,
                                       llvm::Module& module) {
  auto& ctx = module.getContext();
  llvm::IRBuilder<> b(ctx);
  auto* ptr = llvm::PointerType::getUnqual(b.getDoubleTy());
  auto* type = llvm::FunctionType::get(b.getVoidTy(),
                                       {ptr, b.getInt64Ty(), b.getInt32Ty(), ptr, ptr}, false);
  auto* fn = llvm::Function::Create(type, llvm::Function::ExternalLinkage, "ssm_gaussian_jacobian",
                                    module);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  auto* entry = llvm::BasicBlock::Create(ctx, "entry", fn);
  auto* done = llvm::BasicBlock::Create(ctx, "done", fn);
  b.SetInsertPoint(done);
  b.CreateRetVoid();
  b.SetInsertPoint(entry);
  auto* sw = b.CreateSwitch(fn->getArg(2), done, 2);
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
        KernelEmitter(model, module, Kernel::Jacobian, derivs.arena, grid)
            .emit(fmt::format("ssm_gaussian_jacobian.{}", ir::block_name(kind)).c_str());
    part->setLinkage(llvm::GlobalValue::InternalLinkage);
    auto* bb = llvm::BasicBlock::Create(ctx, ir::block_name(kind), fn, done);
    sw->addCase(b.getInt32(obs ? 2 : 1), bb);
    b.SetInsertPoint(bb);
    b.CreateCall(part, {fn->getArg(0), fn->getArg(1), fn->getArg(3), fn->getArg(4)});
    b.CreateBr(done);
  }
  return fn;
}

void emit_model_table(const std::string& metadata_json, llvm::Module& module,
                      llvm::Function* log_bound, llvm::Function* linear_gaussian,
                      llvm::Function* gaussian_moments, llvm::Function* gaussian_jacobian,
                      llvm::Function* proposal_sample, llvm::Function* lookahead) {
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
          b.getVoidTy(), {f64, i64, i64, i64, i64, f64, f64, f64}, false))}; // lookahead
  llvm::Function* given[] = {log_bound,         linear_gaussian, gaussian_moments,
                             gaussian_jacobian, proposal_sample, lookahead};
  for (int k = 0; k < 6; ++k) {
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

void generate_kernels(const ir::Model& model, const std::string& metadata_json,
                      const StructureKernels& structure, llvm::Module& library) {
  // The library's functions are only for inlining into the kernels.
  for (llvm::Function& f : library)
    if (!f.isDeclaration()) {
      f.setLinkage(llvm::GlobalValue::InternalLinkage);
      f.addFnAttr(llvm::Attribute::AlwaysInline);
    }
  KernelEmitter(model, library, Kernel::InitSample).emit("ssm_init_sample");
  KernelEmitter(model, library, Kernel::InitLogpdf).emit("ssm_init_logpdf");
  KernelEmitter(model, library, Kernel::TransitionSample).emit("ssm_transition_sample");
  KernelEmitter(model, library, Kernel::TransitionLogpdf).emit("ssm_transition_logpdf");
  KernelEmitter(model, library, Kernel::ObsLogpdf).emit("ssm_obs_logpdf");
  KernelEmitter(model, library, Kernel::ObsSample).emit("ssm_obs_sample");
  KernelEmitter(model, library, Kernel::Functional).emit("ssm_functional_terms");
  llvm::Function* log_bound = nullptr;
  if (structure.density && structure.density->bound && !structure.density->bound->reads_next_state)
    log_bound = KernelEmitter(model, library, Kernel::TransitionLogBound, structure.density->arena,
                              {structure.density->bound->node})
                    .emit("ssm_transition_log_bound");
  llvm::Function* linear_gaussian = nullptr;
  if (structure.linear_gaussian && structure.linear_gaussian->is_linear_gaussian)
    linear_gaussian = emit_linear_gaussian(model, *structure.linear_gaussian, library);
  const bool gaussian = gaussian_moments_unsupported(model).empty();
  llvm::Function* moments = gaussian ? emit_gaussian_moments(model, library) : nullptr;
  llvm::Function* jacobian = gaussian && structure.derivatives
                                 ? emit_gaussian_jacobian(model, *structure.derivatives, library)
                                 : nullptr;
  llvm::Function* proposal =
      model.proposal.relations.empty()
          ? nullptr
          : KernelEmitter(model, library, Kernel::ProposalSample).emit("ssm_proposal_sample");
  llvm::Function* lookahead =
      model.lookahead.outputs.empty()
          ? nullptr
          : KernelEmitter(model, library, Kernel::Lookahead).emit("ssm_lookahead");
  emit_model_table(metadata_json, library, log_bound, linear_gaussian, moments, jacobian, proposal,
                   lookahead);

  std::string problems;
  llvm::raw_string_ostream os(problems);
  if (llvm::verifyModule(library, &os))
    throw CodegenError("internal error: generated LLVM IR is invalid:\n" + os.str());
}

} // namespace ssm::codegen
