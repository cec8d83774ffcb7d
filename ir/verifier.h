// Checks the IR's invariants: SSA order, shapes, variable references allowed in each block, and
// that every relation reads only values sampled before it. Run between passes; a failure is a
// compiler bug.
#pragma once

#include "ir.h"

#include <optional>
#include <string>
#include <vector>

namespace ssm::ir {

// The shape a node of this op has for these argument shapes, or nullopt if they do not fit.
std::optional<Shape> result_shape(const Node& node, const std::vector<Shape>& arg_shapes);

// One message per violated invariant; empty when the model is well formed.
std::vector<std::string> verify(const Model& model);

} // namespace ssm::ir
