// The relations of a kernel's block: draws through the kernel library's samplers (with a Philox
// counter per sampling site) and log-densities, including the multivariate distributions written
// out here (mvnormal, categorical, Dirichlet, multinomial). Part of KernelEmitter.
#include "kernel_emitter.h"

#include <fmt/format.h>
#include <llvm/IR/Constants.h>

#include <cmath>

namespace ssm::codegen {

using llvm::Value;

Value* KernelEmitter::emit_relation(size_t r, Value* logpdf) {
  const ir::Relation& rel = block_.relations[r];
  const ir::Shape& shape = model_.var_shape(rel.kind, rel.var);
  int size = shape.size();
  std::vector<const Values*> args;
  if (rel.dist != ir::Dist::Diffusion) // its drift and coefficient read the path: in its loop
    for (int a : rel.args)
      args.push_back(&get(a));

  if (samples()) {
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
    case ir::Dist::Diffusion:
      drawn = euler_maruyama(rel, r);
      break;
    case ir::Dist::Density: // a learned density: its base N(0, I), which a guide's start reads
      for (int i = 0; i < size; ++i)
        drawn.push_back(library_call(
            "ssm_sample_std_normal_k",
            {arg("seed"), n32_, t32_, b_.getInt32(site_id(block_.kind, r, 0)), b_.getInt32(i)}));
      break;
    default:
      drawn = sample_independent(rel, r, args, size);
    }
    current_[rel.var] = drawn;
    bool obs = rel.kind == ir::VarKind::Obs;
    int offset = obs ? model_.obs_offset(rel.var) : model_.state_offset(rel.var);
    for (int i = 0; i < size; ++i)
      b_.CreateStore(drawn[i], element(arg(obs ? "y" : "x"), b_.getInt64(offset + i), n_));
    if (!scores())
      return logpdf;
    // The proposal's sampler also accumulates the log-density of what it drew.
  }

  if (rel.dist == ir::Dist::Diffusion) // no density: the methods that need one refuse it first
    return b_.CreateFAdd(logpdf, constant(NAN));
  Values x;
  if (samples()) {
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
  if (rel.dist == ir::Dist::Dirac) {
    // A real deterministic state adds nothing: it is a function of the others, and no method
    // weighs a value of it against another (the density-based smoothers refuse it); EM's
    // cubature points hold it only to the rounding of the smoothing covariance's square root.
    // An integer copy (augment-lags) is enumerated by the finite-state methods: there a value
    // other than the copied one is impossible, -inf; so is data that breaks an observation's
    // value (`obs x = ...`).
    if (rel.kind == ir::VarKind::State && !model_.states[rel.var].integer)
      return logpdf;
    for (int i = 0; i < size; ++i) {
      Value* v = component(*args[0], i);
      Value* gap = intrinsic(llvm::Intrinsic::fabs, {b_.CreateFSub(x[i], v)});
      Value* scale =
          intrinsic(llvm::Intrinsic::maxnum, {constant(1), intrinsic(llvm::Intrinsic::fabs, {v})});
      Value* equal = b_.CreateFCmpOLE(gap, b_.CreateFMul(constant(1e-9), scale));
      logpdf = b_.CreateFAdd(logpdf, b_.CreateSelect(equal, constant(0), constant(-INFINITY)));
    }
    return logpdf;
  }
  if (rel.dist == ir::Dist::Density) // the network's log p of the target (vi computes it)
    return b_.CreateFAdd(logpdf, component(*args[0], 0));
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

Value* KernelEmitter::unless_missing(Value* observed, Value* lp) {
  return b_.CreateSelect(b_.CreateFCmpUNO(observed, observed), constant(0), lp);
}

Value* KernelEmitter::draw(size_t r, int i, const std::string& fn, std::vector<Value*> dist_args) {
  std::vector<Value*> operands{arg("seed"), n32_, t32_, b_.getInt32(site_id(block_.kind, r, i))};
  operands.insert(operands.end(), dist_args.begin(), dist_args.end());
  return library_call(fn, operands);
}

Values KernelEmitter::sample_independent(const ir::Relation& rel, size_t r,
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

Values KernelEmitter::sample_mvnormal(const ir::Relation& rel, size_t r,
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
const Values& KernelEmitter::lower_factor(const ir::Relation& rel) {
  return rel.dist == ir::Dist::MvNormalChol ? get(rel.args[1]) : cholesky(rel.args[1]);
}

Value* KernelEmitter::all_of(const std::vector<Value*>& bits) {
  Value* all = b_.getTrue();
  for (Value* bit : bits)
    all = b_.CreateAnd(all, bit);
  return all;
}

// Independent gammas (one site per component), normalised.
Values KernelEmitter::sample_dirichlet(size_t r, const Values& alpha, int k) {
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
Value* KernelEmitter::dirichlet_logpdf(const Values& x, const Values& alpha) {
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
Values KernelEmitter::sample_multinomial(size_t r, Value* n, const Values& p) {
  int k = static_cast<int>(p.size());
  Values x(k);
  Value* remaining = n;
  Value* mass = sum(p);
  for (int i = 0; i + 1 < k; ++i) {
    Value* q = b_.CreateSelect(
        b_.CreateFCmpOGT(mass, constant(0)),
        intrinsic(llvm::Intrinsic::minnum, {b_.CreateFDiv(p[i], mass), constant(1)}), constant(0));
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
Value* KernelEmitter::multinomial_logpdf(const Values& x, Value* n, const Values& p) {
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

Value* KernelEmitter::sum(const Values& v) {
  Value* s = v[0];
  for (size_t i = 1; i < v.size(); ++i)
    s = b_.CreateFAdd(s, v[i]);
  return s;
}

// The number of cumulative weights at or below u * sum(p): straight-line, so it vectorises.
Values KernelEmitter::sample_categorical(size_t r, const Values& p) {
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
Value* KernelEmitter::categorical_logpdf(Value* x, const Values& p) {
  Value* px = constant(0);
  for (size_t j = 0; j < p.size(); ++j)
    px = b_.CreateSelect(b_.CreateFCmpOEQ(x, constant(static_cast<double>(j))), p[j], px);
  Value* lp = b_.CreateFSub(intrinsic(llvm::Intrinsic::log, {px}),
                            intrinsic(llvm::Intrinsic::log, {sum(p)}));
  return b_.CreateSelect(b_.CreateFCmpUNO(x, x), x, lp); // NaN stays NaN
}

// log N(x; mu, L L^T) = -|L^{-1}(x - mu)|^2 / 2 - sum log L_ii - d log(2 pi) / 2
Value* KernelEmitter::mvnormal_logpdf(const ir::Relation& rel, const Values& x,
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

} // namespace ssm::codegen
