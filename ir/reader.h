// Reads the textual IR that ir::print writes (`ssmc build --emit=ir`) back into a Model, so that
// the printed form is a complete description of the IR: print(read(print(m))) == print(m) is
// tested on every example (tests/unit/test_ir_roundtrip.cpp).
#pragma once

#include "ir.h"

#include <stdexcept>
#include <string_view>

namespace ssm::ir {

class ReadError : public std::runtime_error {
public:
  ReadError(int line, int column, const std::string& message);
  int line() const { return line_; }
  int column() const { return column_; }                  // 1-based; 0 with line 0 (empty input)
  const std::string& message() const { return message_; } // without the position

private:
  int line_;
  int column_;
  std::string message_;
};

// Parses a printed model. Lines that start with ';' (as --print-after writes) are comments.
// What the printer leaves out is left at its default: source locations and Model::source_file.
// The result is not verified (ir::verify). Throws ReadError, naming the line and column, on
// malformed text.
Model read(std::string_view text);

} // namespace ssm::ir
