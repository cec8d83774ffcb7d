// Lexical helpers shared by the parser and its error reporting, kept out of the (slow to compile)
// grammar's translation unit.
#pragma once

#include <cstddef>
#include <string_view>

namespace ssm::frontend {

class DiagnosticEngine;

// The first position at or after pos that is not whitespace or inside a comment.
std::size_t skip_trivia(std::string_view text, std::size_t pos);

// The end of the token that starts at pos: a whole identifier or number, else one character.
std::size_t token_end(std::string_view text, std::size_t pos);

// Words that start a declaration and so cannot name anything.
bool is_keyword(std::string_view word);

// `text` is the diagnostic engine's buffer up to the end of the file being parsed, which starts
// at offset `begin` (imported files follow the main one in that buffer); offsets are absolute.

// Reports a syntax error: the parser expected `which` (an X3 rule name or quoted literal) at
// byte offset `where`.
void report_syntax_error(std::string_view text, std::size_t begin, std::size_t where,
                         std::string_view which, DiagnosticEngine& diags);

// Reports an unterminated /* comment; returns false if there is one.
bool check_comments(std::string_view text, std::size_t begin, DiagnosticEngine& diags);

// Reports an expression nested deeper than the recursive parser and lowering can take without
// exhausting the stack (found by fuzzing); returns false if there is one. Each open bracket is a
// level, and so is each operator, since a chain `a + b + ...` nests in the syntax tree.
bool check_nesting(std::string_view text, std::size_t begin, DiagnosticEngine& diags);

} // namespace ssm::frontend
