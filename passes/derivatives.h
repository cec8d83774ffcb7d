// Forward-mode differentiation of IR expressions. The derivative of a node with respect to one
// scalar input (a component of a state at a lag, of an observation, or of a parameter) is built
// as new nodes in an arena (ExprBuilder), so derivatives fold, print and evaluate like any IR and
// code generation can compile them. On top of it: the log-density of a relation as an IR
// expression, so its gradients come from the same rules; and the `derivatives` analysis, which
// records the Jacobians of the transition and observation means with respect to the state and
// the gradients of every relation's log-density (what extended Kalman filters and
// gradient-based methods need).
#pragma once

#include "affine.h"
#include "distribution_formulas.h"
#include "ir/ir.h"
#include "pass.h"

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace ssm::passes {

// One scalar input: component `component` of state/observation/parameter `var` (op State, Obs
// or Param); `lag` for states and observations (1 = x[t-1]). OdeState: a component of an ODE's
// current value, inside its rate (ode_sensitivity's Jacobian).
struct Wrt {
  ir::Op op = ir::Op::State;
  int var = 0;
  int lag = 0;
  int component = 0;
  std::string str(const ir::Model& model) const; // "x[t-1][2]", "sigma"
  auto key() const { return std::tuple(static_cast<int>(op), var, lag, component); }
};

class Differentiator {
public:
  // Differentiates nodes of `from` (a model block, or the builder's own arena).
  Differentiator(const ir::Block& from, ExprBuilder& builder) : from_(from), b_(builder) {}
  // d(node)/d(wrt): one arena scalar per component of the node (row-major), -1 where it is
  // exactly zero. Throws PassError for an operation without a derivative (none in the language).
  std::vector<int> derivative(int node, const Wrt& wrt);
  // The value of component `pos` of `node`, as an arena scalar.
  int value(int node, int pos);
  // The components differentiated so far (products count their terms): forward mode costs this
  // per variable differentiated in, so the analysis can stop before a large model's parameter
  // gradients take seconds.
  int64_t work() const { return work_; }

private:
  const ir::Block& from_;
  ExprBuilder& b_;
  std::map<std::tuple<int, int, int, int, int>, std::vector<int>> memo_;
  int64_t work_ = 0;
  // Component i of operand k of n, as an arena scalar, broadcasting a scalar operand.
  int operand(const ir::Node& n, int k, size_t i);
  std::vector<int> compute(const ir::Node& n, int node, const Wrt& wrt);
  // The cases of compute with most code: a matrix product, a dynamic index, a built-in call.
  std::vector<int> matmul(const ir::Node& n, const Wrt& wrt);
  std::vector<int> dyn_index(const ir::Node& n, const Wrt& wrt);
  std::vector<int> call(const ir::Node& n, int node, const Wrt& wrt);
  // An ode_rk4's derivative: the solution of its forward sensitivity system.
  std::vector<int> ode_sensitivity(const ir::Node& n, const Wrt& wrt);
  int substitute_ode_state(int id, int dim, int y, std::map<int, int>& copied);
};

// log p(target | args) of a relation of `block`, as an arena expression whose target is the
// relation's variable at lag 0; nullopt with `why` when no formula is written for its
// distribution yet.
std::optional<int> log_density(const ir::Model& model, const ir::Block& block,
                               const ir::Relation& rel, ExprBuilder& builder, std::string& why);

// The log-density's gradient in its arguments and target in closed form (the distribution's
// `adjoints`, distribution_formulas.h), or nullopt where the formula is differentiated instead.
std::optional<LogDensityAdjoints> log_density_adjoints(const ir::Model& model,
                                                       const ir::Block& block,
                                                       const ir::Relation& rel, ExprBuilder& b);
// d log p / d wrt by the chain rule through those adjoints: the sum over the arguments'
// components of adjoint x d(argument)/d(wrt), forward mode differentiating only the arguments
// (`from_block` differentiates the relation's block), plus the target's term. -1 where it is zero.
int log_density_derivative(const ir::Model& model, const ir::Relation& rel,
                           const LogDensityAdjoints& adjoints, Differentiator& from_block,
                           ExprBuilder& b, const Wrt& wrt);

} // namespace ssm::passes
