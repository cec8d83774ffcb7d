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
  ReadError(int line, const std::string& message);
  int line() const { return line_; }

private:
  int line_;
};

// Parses a printed model. Lines that start with ';' (as --print-after writes) are comments.
// What the printer leaves out is left at its default: source locations and Model::source_file.
// The result is not verified (ir::verify). Throws ReadError, naming the line, on malformed text.
Model read(std::string_view text);

} // namespace ssm::ir
