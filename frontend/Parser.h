// The Boost.Spirit X3 grammar of `.ssm` files (frontend/Parser.cpp, its only translation unit).
#pragma once

#include "AST.h"

#include <optional>
#include <string_view>

namespace ssm::frontend {

class DiagnosticEngine;

// Parses a whole file. A syntax error is reported to diags and stops the parse (nullopt).
std::optional<ast::Model> parse(std::string_view source, DiagnosticEngine& diags);

} // namespace ssm::frontend
