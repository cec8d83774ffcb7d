// Public interface of the ssmc frontend: parse a `.ssm` model, check it, and lower it to the IR.
// Every problem is reported to a DiagnosticEngine, which renders clang-style messages with the
// source line and a caret under the offending range.
#pragma once

#include "ir/IR.h"

#include <cstddef>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace ssm::frontend {

// loc.end_col is one past the last column of the range (loc.col == loc.end_col - 1 for a single
// character); a range that spans lines is clipped to its first line.
struct Diagnostic {
  enum class Severity { Error, Warning, Note } severity = Severity::Error;
  ir::SourceLoc loc;
  std::string message;
};

class DiagnosticEngine {
public:
  DiagnosticEngine() = default;
  DiagnosticEngine(std::string filename, std::string source);

  // compile_model() calls this; other callers only need it to report on another file.
  void set_source(std::string filename, std::string source);
  const std::string& filename() const { return filename_; }
  std::string_view source() const { return source_; }

  void error(ir::SourceLoc loc, std::string message);
  void warning(ir::SourceLoc loc, std::string message);
  void note(ir::SourceLoc loc, std::string message);

  // The location of the byte range [begin, end) of the source.
  ir::SourceLoc loc(std::size_t begin, std::size_t end) const;

  bool has_errors() const { return errors_ > 0; }
  int error_count() const { return errors_; }
  const std::vector<Diagnostic>& diagnostics() const { return diags_; }

  // file:line:col: error: message, then the source line and a caret line, for each diagnostic.
  void render(std::ostream& out) const;
  std::string str() const;

private:
  std::string line_text(int line) const; // 1-based, without its line terminator

  std::string filename_;
  std::string source_;
  std::vector<std::size_t> line_starts_;
  std::vector<Diagnostic> diags_;
  int errors_ = 0;
};

// Parses, checks and lowers a model. Returns nullopt when an error was reported.
std::optional<ir::Model> compile_model(std::string_view source, const std::string& filename,
                                       DiagnosticEngine& diags);

// The candidate closest to `name` by edit distance, if it is close enough to be a likely typo.
std::optional<std::string> closest_name(std::string_view name,
                                        const std::vector<std::string>& candidates);

} // namespace ssm::frontend
