// The Boost.Spirit X3 grammar of `.ssm` files (frontend/parser.cpp, its only translation unit).
#pragma once

#include "ast.h"

#include <optional>
#include <string_view>

namespace ssm::frontend {

class DiagnosticEngine;

// Parses one file: `text` is the diagnostic engine's buffer up to the file's end and the file
// starts at `begin`, so that the ranges in the AST are offsets into that buffer. A syntax error is
// reported to diags and stops the parse (nullopt).
std::optional<ast::Model> parse(std::string_view text, std::size_t begin, DiagnosticEngine& diags);

} // namespace ssm::frontend
