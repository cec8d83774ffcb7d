// Evaluates one IR node on constant operands. Used by constant folding and by anything that needs
// the value of a constant expression (priors, defaults), so there is one definition of each op.
#pragma once

#include "ir.h"

#include <vector>

namespace ssm::ir {

// args[k] holds the row-major values of operand k, of shape arg_shapes[k].
// Op::Param/State/Obs/Time cannot be evaluated. Besides the language's functions, Op::Call knows
// `det` (matrix -> scalar), `lgamma`, `digamma` and `log_normal_mass(a, b)` = log(Phi(b) - Phi(a))
// (elementwise), which only analysis results use
// (the density bounds of passes/density.cpp, the derivatives of passes/derivatives.cpp);
// the frontend does not accept them.
std::vector<double> evaluate(const Node& node, const std::vector<std::vector<double>>& args,
                             const std::vector<Shape>& arg_shapes);

// Scalar function by name, as Op::Call applies it elementwise.
double apply_function(const std::string& fn, double a, double b = 0);

} // namespace ssm::ir
