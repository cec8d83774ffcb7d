// Textual form of the IR, for `ssmc build --emit=ir`, `--print-after` and golden tests.
#pragma once

#include "ir.h"

#include <string>

namespace ssm::ir {

std::string print(const Model& model);
std::string print(const Model& model, const Block& block);
std::string print_relation_target(const Model& model, const Block& block, const Relation& rel);

// Node `id` of `block` as an expression in the model's own names, with the language's operator
// precedence (`mu + rho * (x[t-1] - mu)`), for reports and messages rather than round trips:
// constants equal to pi (or 2, 3, 4 pi) print as `pi`, an identity matrix as `eye(n)`, a zero
// vector as `zeros(n)`, and a diagonal matrix as `c * eye(n)` or `diag([a, b])`. Ops the printer
// does not know print as `op(args)`.
std::string print_expr(const Model& model, const Block& block, int id);

} // namespace ssm::ir
