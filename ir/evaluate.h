// Evaluates one IR node on constant operands. Used by constant folding and by anything that needs
// the value of a constant expression (priors, defaults), so there is one definition of each op.
#pragma once

#include "ir.h"

#include <vector>

namespace ssm::ir {

// args[k] holds the row-major values of operand k, of shape arg_shapes[k].
// Op::Param/State/Obs/Time cannot be evaluated. Op::Call computes the function's row of the
// built-in table (builtins.h), including the internal functions only analysis results use (`det`,
// `digamma`, `log_normal_mass`).
std::vector<double> evaluate(const Node& node, const std::vector<std::vector<double>>& args,
                             const std::vector<Shape>& arg_shapes);

// An elementwise built-in function by name, as Op::Call applies it to each component.
double apply_function(const std::string& fn, double a, double b = 0);

} // namespace ssm::ir
