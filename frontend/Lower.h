// Semantic checking of a parsed model and its lowering to the IR: name resolution, constant
// evaluation, shape checking, time-index and relation checks, and the sampling order of relations.
#pragma once

#include "AST.h"
#include "ir/IR.h"

#include <optional>
#include <string>

namespace ssm::frontend {

class DiagnosticEngine;

// Reports every independent error it finds; returns nullopt if there was any.
std::optional<ir::Model> lower(const ast::Model& model, const std::string& filename,
                               DiagnosticEngine& diags);

} // namespace ssm::frontend
