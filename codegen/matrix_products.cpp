// Matrix products too large to write out term by term, as loops over memory, and the memory they
// read (kernel_emitter.h, kUnrolledProducts); part of KernelEmitter.
#include "kernel_emitter.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/Module.h>

namespace ssm::codegen {

using llvm::Value;

// A product of particle-invariant values (computed once per call, before the particle loop, or
// in a kernel without one) over the limit. Inside the particle loop, products stay unrolled: an
// inner loop there keeps LLVM from vectorising the particle loop, and the whole particle's work,
// draws and library calls included, then runs scalar (sbibm's Bernoulli GLM, its 100 x 10 data
// matrix times the parameters looped: 4 s to compile instead of 11, but simulation 70% slower).
bool KernelEmitter::looped_product(int id) const {
  const ir::Node& node = block_.nodes[id];
  if (node.op != ir::Op::MatMul || varying_[id])
    return false;
  const ir::Shape& lhs = block_.nodes[node.args[0]].shape;
  const int64_t cols = node.shape.rank() == 2 ? node.shape.dims[1] : 1;
  return int64_t{lhs.dims[0]} * lhs.dims[1] * cols > kUnrolledProducts;
}

// out[i, j] = sum_k a[i, k] b[k, j] as two loops: over (i, j), and over k inside, with the same
// order of additions as the unrolled product, so both give the same bits. The operands are read
// from memory (in_memory); the result goes through a stack array and comes back as values.
Values KernelEmitter::matmul_loop(const ir::Node& node, const std::vector<const Values*>& args) {
  const ir::Shape& lhs = block_.nodes[node.args[0]].shape;
  const int rows = lhs.dims[0], inner = lhs.dims[1];
  const int cols = node.shape.rank() == 2 ? node.shape.dims[1] : 1;
  Value* a = in_memory(node.args[0], *args[0], "matmul.lhs");
  Value* c = in_memory(node.args[1], *args[1], "matmul.rhs");
  Value* result = stack_array(int64_t{rows} * cols, "matmul.out");
  auto at = [&](Value* base, Value* index) {
    return b_.CreateInBoundsGEP(b_.getDoubleTy(), base, index);
  };

  llvm::BasicBlock* before = b_.GetInsertBlock();
  auto* over_entries = llvm::BasicBlock::Create(ctx_, "matmul.ij", fn_);
  auto* over_terms = llvm::BasicBlock::Create(ctx_, "matmul.k", fn_);
  auto* entry_done = llvm::BasicBlock::Create(ctx_, "matmul.ij.end", fn_);
  auto* done = llvm::BasicBlock::Create(ctx_, "matmul.done", fn_);
  b_.CreateBr(over_entries);

  b_.SetInsertPoint(over_entries);
  const LoopPhis ij = open_loop(before, {}, "matmul.ij", "");
  Value* i = b_.CreateUDiv(ij.counter, b_.getInt32(cols));
  Value* j = b_.CreateURem(ij.counter, b_.getInt32(cols));
  Value* row = b_.CreateMul(i, b_.getInt32(inner), "", true, true);
  b_.CreateBr(over_terms);

  b_.SetInsertPoint(over_terms);
  const LoopPhis k = open_loop(over_entries, {constant(0)}, "matmul.k", "matmul.sum");
  Value* x = b_.CreateLoad(b_.getDoubleTy(), at(a, b_.CreateAdd(row, k.counter, "", true, true)));
  Value* y = b_.CreateLoad(
      b_.getDoubleTy(),
      at(c, b_.CreateAdd(b_.CreateMul(k.counter, b_.getInt32(cols), "", true, true), j)));
  Value* sum = b_.CreateFAdd(k.values[0], b_.CreateFMul(x, y));
  close_loop(k, {sum}, b_.getInt32(inner), over_terms, entry_done);

  b_.SetInsertPoint(entry_done);
  b_.CreateStore(sum, at(result, ij.counter));
  close_loop(ij, {}, b_.getInt32(rows * cols), over_entries, done);

  b_.SetInsertPoint(done);
  Values out(static_cast<size_t>(rows) * cols);
  for (size_t e = 0; e < out.size(); ++e)
    out[e] =
        b_.CreateLoad(b_.getDoubleTy(), b_.CreateConstInBoundsGEP1_64(b_.getDoubleTy(), result, e));
  return out;
}

// Where a node's components can be read by index: a parameter's or data item's place in the
// frame, a constant table for a constant, else a stack array (allocated once, in the entry block)
// that the values are stored to here.
Value* KernelEmitter::in_memory(int id, const Values& values, const char* name) {
  const ir::Node& node = block_.nodes[id];
  if (node.op == ir::Op::Param || node.op == ir::Op::Data) {
    const int offset =
        node.op == ir::Op::Param ? model_.param_offset(node.var) : model_.data_offset(node.var);
    return b_.CreateConstInBoundsGEP1_64(b_.getDoubleTy(), arg("theta"), offset);
  }
  std::vector<double> constants;
  for (Value* v : values)
    if (auto* c = llvm::dyn_cast<llvm::ConstantFP>(v))
      constants.push_back(c->getValueAPF().convertToDouble());
  if (constants.size() == values.size())
    return new llvm::GlobalVariable(module_, llvm::ArrayType::get(b_.getDoubleTy(), values.size()),
                                    true, llvm::GlobalValue::PrivateLinkage,
                                    llvm::ConstantDataArray::get(ctx_, constants), name);
  Value* copy = stack_array(static_cast<int64_t>(values.size()), name);
  for (size_t e = 0; e < values.size(); ++e)
    b_.CreateStore(values[e], b_.CreateConstInBoundsGEP1_64(b_.getDoubleTy(), copy, e));
  return copy;
}

llvm::AllocaInst* KernelEmitter::stack_array(int64_t count, const char* name) {
  llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
  return entry.CreateAlloca(b_.getDoubleTy(), b_.getInt32(static_cast<uint32_t>(count)), name);
}

} // namespace ssm::codegen
