// Per distribution, the two formulas the analyses build as IR: its log-density (the derivatives
// analysis differentiates it, derivatives.cpp) and an upper bound of its density (the density
// analysis, for rejection sampling, density.cpp). distribution_formulas.cpp writes them side by
// side, one distribution after the other, and distribution_formulas() maps every ir::Dist to its
// pair in a switch without a default, so a new distribution without formulas does not compile
// quietly (-Wswitch) and tests/unit/test_structure.cpp checks each has both or says why not.
#pragma once

#include "affine.h"
#include "ir/ir.h"

#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace ssm::passes {

// What a log-density formula builds from: a relation's arguments (imported into the builder's
// arena) and its target x_node, of the relation variable's shape.
struct LogDensityTerms {
  ExprBuilder& b;
  std::vector<int> args;
  int x_node;
  const ir::Shape& shape;

  // Component i of argument k, broadcasting a scalar.
  int arg(int k, int i) { return b.element(args[k], b[args[k]].shape.is_scalar() ? 0 : i); }
  int c(double v) { return b.constant(v); }
  int log(int a) { return b.call("log", {a}); }
  int sq(int a) { return b.mul(a, a); }
  int log_gamma(int a) { return b.call("lgamma", {a}); }
  // log Gamma(s) of a shape s, NaN unless s > 0: lgamma is finite at negative non-integers,
  // where the density is undefined, as the kernels' NaN says. The NaN is s * NaN, so that the
  // derivatives in what s reads are NaN too (a constant's would be 0); a derivative in a
  // variable s does not read may stay finite, so consumers look at the value.
  int shape_log_gamma(int s) {
    return b.select(b.call("gt", {s, c(0)}), log_gamma(s),
                    b.mul(s, c(std::numeric_limits<double>::quiet_NaN())));
  }
};

// A density's upper bound (node), or why there is none (unbounded). exact: the bound is the
// density at its mode (not only an upper bound); condition: where the formula holds, as text.
struct ComponentBound {
  int node = -1;
  bool exact = true;
  std::string condition;
  std::string unbounded;
};

// What a bound formula builds with: the builder, and the model and arena its nodes print from
// (conditions are text).
class BoundTerms {
public:
  BoundTerms(ExprBuilder& b, const ir::Model& model, const ir::Block& arena)
      : b(b), model_(model), arena_(arena) {}
  ExprBuilder& b;

  std::string text(int node) const;
  std::optional<double> constant(int id) const; // the value of a scalar constant
  int one_over(int x) { return b.div(b.constant(1), x); }
  // sqrt(2 * pi) and the like, kept symbolic so the bound reads as a formula.
  int pi_times(double c);
  int call_raw(const char* fn, int x); // fn(x), not folded: sqrt(2 * pi), exp(1)
  int sqrt_raw(int x) { return call_raw("sqrt", x); }
  int sqrt_2pi() { return sqrt_raw(pi_times(2)); }
  // `bound` where every condition holds, NaN elsewhere: the runtime then draws exactly at that
  // step.
  int where(const std::vector<int>& conditions, int bound);
  int at_least_one(int a) { return b.call("ge", {a, b.constant(1)}); }
  // (s - 1) log((s - 1) / total), 0 for a shape s of 1 (x^0 = 1 at x = 0 on a face).
  int shape_term(int s, int total);

private:
  const ir::Model& model_;
  const ir::Block& arena_;
};

// The gradient of a joint log-density in its arguments and its target, in closed form, for
// densities where forward mode through the written-out formula would cost far more (mvnormal's
// factorisation: d^3 operations per entry of the covariance). Arena nodes, -1 for zero; per
// argument one entry per component (row-major; one for a scalar broadcast to the target).
struct LogDensityAdjoints {
  std::vector<std::vector<int>> args;
  std::vector<int> target;
};

// The formulas of one distribution. Most are componentwise: log_density(f, x, i) is component i's
// with x its target element, bound(f, a, size) component i's with a the arguments' elements i.
// A joint density (whole_target) takes the whole target instead: log_density(f, -1, -1), and
// bound(f, args, size) with the whole arguments and the target's size. log_density returns -1
// when no formula is written for the case; a null formula has `none` saying why.
struct DistFormulas {
  bool whole_target = false;
  int (*log_density)(LogDensityTerms& f, int x, int i) = nullptr;
  ComponentBound (*bound)(BoundTerms& f, const std::vector<int>& a, int size) = nullptr;
  const char* none = nullptr;
  // Built from the same LogDensityTerms as log_density; null: differentiate the formula.
  LogDensityAdjoints (*adjoints)(LogDensityTerms& f) = nullptr;
};

DistFormulas distribution_formulas(ir::Dist dist);

} // namespace ssm::passes
