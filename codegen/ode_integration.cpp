// ode_rk4 (ir::Op::Ode): the solution of dy/dt = rate(t, y) at the output times t_1 < ... < t_m by
// classical Runge-Kutta, as two nested loops in the kernel: over the intervals [t_{i-1}, t_i]
// (their start, step and number of steps read from constant tables) and over each interval's
// steps, so the code holds four copies of the rate however many times are asked for. The rate's
// nodes read the current t and y (OdeTime, OdeState): they are evaluated afresh at each stage,
// and what the rate reads that does not move with the integration is computed once before it.
// Each interval's end is stored in a row of a stack array, read back once the loops are done.
// Part of KernelEmitter.
#include "kernel_emitter.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/GlobalVariable.h>

namespace ssm::codegen {

using llvm::Value;

Values KernelEmitter::runge_kutta(int id) {
  const ir::Node& node = block_.nodes[id];
  const int m = node.shape.dims[0], n = node.shape.dims[1];
  const int rate_id = node.args[1];
  const Values start = get(node.args[0]);

  // Everything the rate reads that does not depend on the integration: before the loops.
  const std::vector<bool> reached = ir::reached_from(block_, {rate_id});
  for (size_t i = 0; i < block_.nodes.size(); ++i)
    if (reached[i] && !ode_rate_[i])
      get(static_cast<int>(i));
  auto rate_at = [&](Value* t, const Values& y) {
    for (size_t i = 0; i < block_.nodes.size(); ++i) {
      if (!reached[i] || !ode_rate_[i])
        continue;
      const ir::Op op = block_.nodes[i].op;
      cache_[i] = op == ir::Op::OdeTime ? Values{t} : op == ir::Op::OdeState ? y : Values{};
    }
    return Values(get(rate_id));
  };

  // The intervals: start time, step length and number of steps of each.
  std::vector<double> from(m), step(m);
  std::vector<int32_t> count(m);
  for (int i = 0; i < m; ++i) {
    from[i] = node.values[i];
    count[i] = node.index[i];
    step[i] = (node.values[i + 1] - node.values[i]) / node.index[i];
  }
  auto table = [&](llvm::Constant* data, const char* name) {
    return new llvm::GlobalVariable(module_, data->getType(), true,
                                    llvm::GlobalValue::PrivateLinkage, data, name);
  };
  llvm::GlobalVariable* from_table = table(llvm::ConstantDataArray::get(ctx_, from), "ode.from");
  llvm::GlobalVariable* step_table = table(llvm::ConstantDataArray::get(ctx_, step), "ode.step");
  llvm::GlobalVariable* count_table = table(llvm::ConstantDataArray::get(ctx_, count), "ode.count");
  auto load = [&](llvm::GlobalVariable* g, llvm::Type* type, Value* i) {
    Value* at = b_.CreateInBoundsGEP(g->getValueType(), g, {b_.getInt32(0), i});
    return b_.CreateLoad(type, at);
  };
  // The solution's rows, on the stack.
  llvm::AllocaInst* rows = stack_array(int64_t{m} * n, "ode.rows");

  llvm::BasicBlock* before = b_.GetInsertBlock();
  auto* interval = llvm::BasicBlock::Create(ctx_, "ode.interval", fn_);
  auto* steps = llvm::BasicBlock::Create(ctx_, "ode.step", fn_);
  auto* interval_end = llvm::BasicBlock::Create(ctx_, "ode.interval.end", fn_);
  auto* done = llvm::BasicBlock::Create(ctx_, "ode.done", fn_);
  b_.CreateBr(interval);

  // Over the intervals: i, and y at the interval's start.
  b_.SetInsertPoint(interval);
  const LoopPhis over_intervals = open_loop(before, start, "ode.i", "ode.y0");
  Value* i = over_intervals.counter;
  Value* t_from = load(from_table, b_.getDoubleTy(), i);
  Value* h = load(step_table, b_.getDoubleTy(), i);
  Value* k = load(count_table, b_.getInt32Ty(), i);
  Value* half_h = b_.CreateFMul(h, constant(0.5));
  Value* sixth_h = b_.CreateFDiv(h, constant(6.0));
  b_.CreateBr(steps);

  // Over the interval's steps: j, and y at t_from + j h.
  b_.SetInsertPoint(steps);
  const LoopPhis over_steps = open_loop(interval, over_intervals.current(), "ode.j", "ode.y");
  Value* j = over_steps.counter;
  const Values y = over_steps.current();
  Value* t = b_.CreateFAdd(t_from, b_.CreateFMul(b_.CreateSIToFP(j, b_.getDoubleTy()), h));
  Value* t_half = b_.CreateFAdd(t, half_h);
  Value* t_full = b_.CreateFAdd(t, h);
  auto shifted = [&](const Values& slope, Value* by) {
    Values out(n);
    for (int c = 0; c < n; ++c)
      out[c] = b_.CreateFAdd(y[c], b_.CreateFMul(by, component(slope, c)));
    return out;
  };
  const Values k1 = rate_at(t, y);
  const Values k2 = rate_at(t_half, shifted(k1, half_h));
  const Values k3 = rate_at(t_half, shifted(k2, half_h));
  const Values k4 = rate_at(t_full, shifted(k3, h));
  Values next(n);
  for (int c = 0; c < n; ++c) {
    Value* mid = b_.CreateFAdd(component(k2, c), component(k3, c));
    Value* sum =
        b_.CreateFAdd(b_.CreateFAdd(component(k1, c), b_.CreateFAdd(mid, mid)), component(k4, c));
    next[c] = b_.CreateFAdd(y[c], b_.CreateFMul(sixth_h, sum));
  }
  close_loop(over_steps, next, k, steps, interval_end);

  // The interval's end: row i of the solution, and the next interval's start.
  b_.SetInsertPoint(interval_end);
  Value* row = b_.CreateMul(i, b_.getInt32(n));
  for (int c = 0; c < n; ++c)
    b_.CreateStore(next[c],
                   b_.CreateInBoundsGEP(b_.getDoubleTy(), rows, b_.CreateAdd(row, b_.getInt32(c))));
  close_loop(over_intervals, next, b_.getInt32(m), interval, done);

  b_.SetInsertPoint(done);
  for (size_t r = 0; r < reached.size(); ++r) // the rate has no value outside the loops
    if (reached[r] && ode_rate_[r])
      cache_[r].clear();
  Values solution(static_cast<size_t>(m) * n);
  for (int e = 0; e < m * n; ++e)
    solution[e] =
        b_.CreateLoad(b_.getDoubleTy(), b_.CreateConstInBoundsGEP1_32(b_.getDoubleTy(), rows, e));
  return solution;
}

} // namespace ssm::codegen
