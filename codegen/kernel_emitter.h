// The shared base of the kernel emitters (one derived emitter per kind of kernel, see kernels.h):
// the LLVM function and its loop over particles, expression emission, and the draws and densities
// of relations through the kernel library.
//
// Every IR value is scalarised: a node of shape [r, c] becomes r*c LLVM doubles (shapes are
// static). Nodes that read no per-particle value (constants, parameters, t, and y in the
// observation density) are emitted once before the particle loop; the rest inside it. Each loop
// iteration is straight-line code with calls to the library's samplers and densities, which inline,
// so LLVM can vectorise it.
#pragma once

#include "kernel_codegen.h"

#include "ir/builtins.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ssm::codegen {

using Values = std::vector<llvm::Value*>;

// A particle-invariant matrix product of more multiplications than this is emitted as a loop over
// memory rather than term by term: unrolled, a 30 x 30 product is 81,000 instructions, and LLVM's
// code generation time grows faster than the function (matrix_products.cpp, looped_product).
inline constexpr int64_t kUnrolledProducts = 512;

// A loop over particles whose body has more instructions than this is not vectorised, in the
// kernels over the derivatives' arena (score terms, state gradients, a guide's arguments): a
// vectorised copy of so long a body, with its scalar remainder, takes LLVM's register allocator
// seconds. The 10-D linear-Gaussian example's score terms (3,865 instructions): llc 0.6 s scalar
// against 1.8 to 2.6 s vectorised, and its paris score 1.45x slower; every other gradient kernel
// of the examples is under 2,500 instructions.
inline constexpr size_t kMaxVectorizedTermsBody = 3000;

// Sampling sites: one per (block, relation, component), so no two draws share a Philox counter.
inline uint32_t site_id(ir::BlockKind block, size_t relation, int component) {
  return (static_cast<uint32_t>(block) << 24) | (static_cast<uint32_t>(relation) << 12) |
         static_cast<uint32_t>(component);
}

// A kernel's parameter: the name the emitter finds it by, and its type.
using KernelParam = std::pair<std::string, llvm::Type*>;

class KernelEmitter {
public:
  virtual ~KernelEmitter() = default;

  // Creates the kernel `name` in the module and emits its body. `items`: the item layout of a
  // plate model's kernel (runtime/kernel/abi.h, ssm_item_kernel_fn): each particle is an item
  // with its own time (items[n]), observation and inputs, read per particle like the state, so
  // one call vectorises across a batch of items; x_prev is x (items are independent).
  llvm::Function* emit(const char* name, bool items = false);

protected:
  using Value = llvm::Value;

  // A kernel over one of the model's blocks, computing its outputs.
  KernelEmitter(const ir::Model& model, llvm::Module& module, ir::BlockKind block);
  // A kernel over `block` (a model block, or an analysis' arena) whose outputs are `outputs`.
  KernelEmitter(const ir::Model& model, llvm::Module& module, const ir::Block& block,
                std::vector<int> outputs);

  // ---- what each kind of kernel decides ----

  // The function's parameters, in order (see particle_parameters).
  virtual std::vector<KernelParam> parameters() = 0;
  // Everything after the preamble: by default one loop over the particles.
  virtual void emit_body() { emit_loop(false); }
  // One particle's work inside the loop: by default the block's relations, drawn (samples) and/or
  // scored (scores), with the log-density stored in `out` when scored.
  virtual void emit_particle();
  virtual bool samples() const { return false; } // draws the relations' targets (takes a seed)
  virtual bool scores() const { return true; }   // accumulates the relations' log-density
  // Computes only the nodes its outputs read (an analysis' arena), not the whole block.
  virtual bool over_arena() const { return false; }
  // A state node: by default read per particle from x (lag 0) or x_prev (lag 1, via ancestors).
  virtual Values load_state(const ir::Node& node);
  // A state node read at the one state x_in, the state a Gaussian kernel's block conditions on.
  Values load_state_at_x_in(const ir::Node& node);

  // ---- the function and its loop ----

  // theta, seed (a sampler's), t (past the initial block), begin, end, stride, then `rest`.
  std::vector<KernelParam> particle_parameters(std::vector<KernelParam> rest);
  // The item layout's: theta, items, begin, end, stride, x, y, inputs, out.
  std::vector<KernelParam> item_parameters();
  llvm::Type* f64_ptr() { return llvm::PointerType::getUnqual(b_.getDoubleTy()); }
  llvm::Type* i64() { return b_.getInt64Ty(); }
  llvm::Type* i64_ptr() { return llvm::PointerType::getUnqual(b_.getInt64Ty()); }
  Value* arg(const std::string& name) const;
  // Returns the number of instructions in the loop's body.
  size_t emit_loop(bool gather);
  // Declares the loop ending in `latch` free of dependences between particles (see the .cpp);
  // returns the number of instructions in `blocks`.
  size_t mark_parallel(const std::vector<llvm::BasicBlock*>& blocks, llvm::BranchInst* latch);
  // Two copies of the loop, with and without the ancestor gather, so each is a simple loop; one
  // loop for both if its body is too long to vectorise.
  void emit_loops_with_ancestors();
  // The outputs (-1: zero) stored one after another in `out`; no loop.
  void emit_output_stores();
  Value* element(Value* base, Value* component, Value* particle);
  // The observation sampler draws y[t]; every other kernel reads it.
  bool samples_observations() const {
    return samples() && block_.kind == ir::BlockKind::Observation;
  }

  // ---- expressions ----

  const Values& get(int id);
  Value* constant(double v) { return llvm::ConstantFP::get(b_.getDoubleTy(), v); }
  static Value* component(const Values& v, size_t i) { return v.size() == 1 ? v[0] : v[i]; }
  Value* intrinsic(llvm::Intrinsic::ID id, std::vector<Value*> operands) {
    return b_.CreateIntrinsic(id, {b_.getDoubleTy()}, operands);
  }
  Value* library_call(const std::string& name, std::vector<Value*> operands);
  // Built-in functions, as their rows in ir/builtins.h say: one component of an elementwise
  // one, or a whole-vector one (dot, softmax, log_sum_exp, det).
  Value* apply(const ir::Builtin& f, Value* a, Value* c);
  Values apply_whole(const ir::Builtin& f, const ir::Node& node,
                     const std::vector<const Values*>& args);
  Value* digamma(Value* x);
  std::pair<Value*, Value*> sum_exp(const Values& x);
  Value* truth(Value* bit) { return b_.CreateUIToFP(bit, b_.getDoubleTy()); }
  Value* is_true(Value* v) { return b_.CreateFCmpUNE(v, constant(0)); }
  Value* frame_load(int offset);
  Values frame_values(int offset, size_t size);
  Value* power(Value* a, Value* e);
  // Large particle-invariant products and the memory they read (matrix_products.cpp).
  bool looped_product(int id) const;
  Values matmul_loop(const ir::Node& node, const std::vector<const Values*>& args);
  Value* in_memory(int id, const Values& values, const char* name);
  // A stack array of `count` doubles, allocated in the entry block: once per call of the kernel,
  // however many loops or particles then use it.
  llvm::AllocaInst* stack_array(int64_t count, const char* name);
  Values compute(const ir::Node& node, const std::vector<const Values*>& args);
  Values load_obs(const ir::Node& node);
  const Values& cholesky(int id);

  // ---- relations (kernel_relations.cpp) ----

  Value* emit_relation(size_t r, Value* logpdf);
  Value* unless_missing(Value* observed, Value* lp);
  Value* draw(size_t r, int i, const std::string& fn, std::vector<Value*> dist_args);
  Values sample_independent(const ir::Relation& rel, size_t r,
                            const std::vector<const Values*>& args, int size);
  Values sample_mvnormal(const ir::Relation& rel, size_t r, const std::vector<const Values*>& args);
  const Values& lower_factor(const ir::Relation& rel);
  Value* log_gamma(Value* x) { return library_call("ssm_log_gamma", {x}); }
  Value* all_of(const std::vector<Value*>& bits);
  Values sample_dirichlet(size_t r, const Values& alpha, int k);
  Value* dirichlet_logpdf(const Values& x, const Values& alpha);
  Values sample_multinomial(size_t r, Value* n, const Values& p);
  Value* multinomial_logpdf(const Values& x, Value* n, const Values& p);
  Value* sum(const Values& v);
  Values sample_categorical(size_t r, const Values& p);
  Value* categorical_logpdf(Value* x, const Values& p);
  Value* mvnormal_logpdf(const ir::Relation& rel, const Values& x,
                         const std::vector<const Values*>& args);

  // ---- loops inside a particle's work (Euler substeps, Runge-Kutta steps) ----

  // The phis at the head of a loop: an i32 counter from 0, and a double per start value, each
  // entered from `from`; the back edges are added when the body is done (close_loop).
  struct LoopPhis {
    llvm::PHINode* counter = nullptr;
    std::vector<llvm::PHINode*> values;
    Values current() const { return Values(values.begin(), values.end()); }
  };
  LoopPhis open_loop(llvm::BasicBlock* from, const Values& start, const char* counter,
                     const char* value);
  // The back edges from the current block with the next values; branches back while the
  // counter's next value is below `count`, else to `exit`.
  void close_loop(const LoopPhis& loop, const Values& next, Value* count, llvm::BasicBlock* head,
                  llvm::BasicBlock* exit);

  // ---- ODE integration (ode_integration.cpp) ----

  Values runge_kutta(int id);

  // ---- an SDE's transition (diffusion_relation.cpp) ----

  Values euler_maruyama(const ir::Relation& rel, size_t r);
  std::vector<bool> reading_path(const ir::Relation& rel) const;

  const ir::Model& model_;
  llvm::Module& module_;
  llvm::LLVMContext& ctx_;
  const ir::Block& block_;
  std::vector<int> outputs_;
  llvm::IRBuilder<> b_;
  llvm::Function* fn_ = nullptr;
  std::map<std::string, llvm::Argument*> args_;
  bool items_ = false;                    // the item layout (emit)
  size_t max_vectorized_body_ = SIZE_MAX; // kMaxVectorizedTermsBody in the arena kernels
  Value* t32_ = nullptr;
  Value* item_ = nullptr; // the item layout's t of the current particle (i64)
  Value* n_ = nullptr;
  Value* n32_ = nullptr;
  Value* ancestor_ = nullptr;
  llvm::BranchInst* ancestor_branch_ = nullptr; // emit_loop(true)'s test of a null `ancestors`
  std::vector<bool> varying_, needed_;
  std::vector<bool> ode_rate_; // nodes that read an ode's current time or value
  std::vector<Values> cache_, preamble_cache_;
  std::map<int, Values> cholesky_, preamble_cholesky_;
  std::map<int, Values> current_; // lag-0 values of the variables this block samples or reads

private:
  void create_function(const char* name);
  void compute_varying();
  void compute_needed();
};

} // namespace ssm::codegen
