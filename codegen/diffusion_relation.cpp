// An SDE's transition, x[t] ~ diffusion(from, drift, diffusion, dt, steps): the sampler simulates
// dX = drift(X) dt + diffusion(X) dW from X = from over dt by Euler-Maruyama, as a loop of `steps`
// substeps in the kernel (one particle's path per iteration of the particle loop); the drift and
// the diffusion coefficient, whose nodes read the target at lag 0 as the path's current value,
// are re-evaluated at each substep (emit_relation draws it through euler_maruyama and stores it as
// any draw; a kernel that scores it gets NaN, its density having no closed form). Part of
// KernelEmitter.
#include "kernel_emitter.h"

#include <llvm/IR/Constants.h>

#include <cmath>

namespace ssm::codegen {

using llvm::Value;

// The nodes of the block whose value depends on the path: the target at lag 0 and what reads it.
std::vector<bool> KernelEmitter::reading_path(const ir::Relation& rel) const {
  std::vector<bool> path(block_.nodes.size(), false);
  for (size_t i = 0; i < block_.nodes.size(); ++i) {
    const ir::Node& n = block_.nodes[i];
    bool p = n.op == ir::Op::State && n.var == rel.var && n.lag == 0;
    for (int a : n.args)
      p = p || path[a];
    path[i] = p;
  }
  return path;
}

// X_{k+1} = X_k + drift(X_k) h + diffusion(X_k) sqrt(h) Z_k, h = dt / steps, with Z_k the draws
// k*d .. k*d + d - 1 of the relation's sampling site: each particle's path is reproducible from
// (seed, t, particle) whatever the number of threads.
Values KernelEmitter::euler_maruyama(const ir::Relation& rel, size_t r) {
  const int d = model_.states[rel.var].shape.size();
  const int drift_id = rel.args[1], sigma_id = rel.args[2];
  const ir::Shape& sigma_shape = block_.nodes[sigma_id].shape;
  const int steps = static_cast<int>(block_.nodes[rel.args[4]].values.at(0));
  const Values from = get(rel.args[0]);
  Value* h = b_.CreateFDiv(get(rel.args[3])[0], constant(steps));
  Value* sqrt_h = intrinsic(llvm::Intrinsic::sqrt, {h});

  // Everything the drift and diffusion read that does not move with the path: before the loop.
  const std::vector<bool> path = reading_path(rel);
  const std::vector<bool> reached = ir::reached_from(block_, {drift_id, sigma_id});
  for (size_t i = 0; i < block_.nodes.size(); ++i)
    if (reached[i] && !path[i] && !ode_rate_[i])
      get(static_cast<int>(i));

  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* body = llvm::BasicBlock::Create(ctx_, "euler", fn_);
  auto* done = llvm::BasicBlock::Create(ctx_, "euler.done", fn_);
  b_.CreateBr(body);
  b_.SetInsertPoint(body);
  const LoopPhis loop = open_loop(pre, from, "substep", "path");
  Value* k = loop.counter;
  const Values now = loop.current();
  // The drift and diffusion at the path's current value (load_state reads it from current_).
  auto forget_path = [&] {
    for (size_t i = 0; i < path.size(); ++i)
      if (path[i])
        cache_[i].clear();
  };
  forget_path();
  current_[rel.var] = now;
  const Values drift = get(drift_id);
  const Values sigma = get(sigma_id);

  Values dw(d);
  Value* first = b_.CreateMul(k, b_.getInt32(d));
  const uint32_t site = site_id(block_.kind, r, 0);
  for (int i = 0; i < d; ++i) {
    Value* z = library_call("ssm_sample_std_normal_k", {arg("seed"), n32_, t32_, b_.getInt32(site),
                                                        b_.CreateAdd(first, b_.getInt32(i))});
    dw[i] = b_.CreateFMul(sqrt_h, z);
  }
  Values next(d);
  for (int i = 0; i < d; ++i) {
    Value* noise = nullptr;
    if (sigma_shape.rank() == 2) { // a matrix: sum_j sigma[i, j] dW_j
      for (int j = 0; j < d; ++j) {
        Value* term = b_.CreateFMul(sigma[i * d + j], dw[j]);
        noise = noise ? b_.CreateFAdd(noise, term) : term;
      }
    } else {
      noise = b_.CreateFMul(component(sigma, i), dw[i]);
    }
    Value* step = b_.CreateFAdd(b_.CreateFMul(component(drift, i), h), noise);
    next[i] = b_.CreateFAdd(now[i], step);
  }
  close_loop(loop, next, b_.getInt32(steps), body, done);
  b_.SetInsertPoint(done);
  forget_path(); // later relations read x[t] as drawn
  return next;
}

} // namespace ssm::codegen
