// Semantic checking of a parsed model and its lowering to the IR: name resolution, constant
// evaluation, shape checking, time-index and relation checks, and the sampling order of relations.
#pragma once

#include "ast.h"
#include "ir/ir.h"

#include <optional>
#include <string>
#include <vector>

namespace ssm::frontend {

class DiagnosticEngine;

// How the files of a model and of the modules it imports relate, by their index in the
// DiagnosticEngine (the model is file 0). Empty: one file, or files that all see each other in
// the order of the engine's buffer.
struct FileGraph {
  // Declaration order: each module after the modules it imports, the model last.
  std::vector<int> order;
  // sees[f][g]: code in file f can use the names declared in file g (its own, and those of the
  // modules it imports directly or through other modules).
  std::vector<std::vector<bool>> sees;
};

// Puts the named arguments of distribution calls in their places (named_arguments.h), then checks
// and lowers. Reports every independent error it finds; returns nullopt if there was any.
std::optional<ir::Model> lower(ast::Model& model, const std::string& filename,
                               DiagnosticEngine& diags, const FileGraph& files = {});

} // namespace ssm::frontend
