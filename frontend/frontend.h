// Public interface of the ssmc frontend: parse a `.ssm` model, check it, and lower it to the IR.
// Every problem is reported to a DiagnosticEngine, which renders clang-style messages with the
// source line and a caret under the offending range.
#pragma once

#include "ir/ir.h"

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
  DiagnosticEngine();
  DiagnosticEngine(std::string filename, std::string source);

  // Starts over on a new file (diagnostics so far are dropped). compile_model() calls this;
  // other callers only need it to report on another file.
  void set_source(std::string filename, std::string source);
  // Appends an imported file; its text starts at the returned offset of source().
  std::size_t add_file(std::string filename, std::string_view text);
  const std::string& filename() const { return files_.at(0).name; }
  // The model's file followed by the imported ones (each ends with a newline).
  std::string_view source() const { return source_; }
  // Where the first imported file starts (the end of the model's own text).
  std::size_t main_file_end() const { return files_.size() > 1 ? files_[1].begin : source_.size(); }
  // The file (0 for the model's, then the imported ones in the order they were added) that holds
  // the byte at `pos` of source().
  int file_of(std::size_t pos) const;
  const std::string& file_name(int file) const { return files_.at(file).name; }

  // With warnings_as_errors (-Werror), warning() reports an error.
  void set_warnings_as_errors(bool on) { warnings_as_errors_ = on; }
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
  std::string line_text(int file, int line) const; // 1-based, without its line terminator

  struct File {
    std::string name;
    std::size_t begin = 0;
    int first_line = 0; // index into line_starts_ of its first line
  };
  std::vector<File> files_;
  std::string source_;
  std::vector<std::size_t> line_starts_;
  std::vector<Diagnostic> diags_;
  int errors_ = 0;
  bool warnings_as_errors_ = false;
};

// Parses, checks and lowers a model. `import "name";` (in the model or in a module) looks for
// name.ssm next to the importing file, then in each directory of import_path in order. Returns
// nullopt when an error was reported.
std::optional<ir::Model> compile_model(std::string_view source, const std::string& filename,
                                       DiagnosticEngine& diags,
                                       const std::vector<std::string>& import_path = {});

// The files a model imports, directly or through other modules, resolved as compile_model does
// (those that cannot be found or read are left out): what, besides its own text, determines the
// compiled model.
std::vector<std::string> imported_files(std::string_view source, const std::string& filename,
                                        const std::vector<std::string>& import_path);

// The candidate closest to `name` by edit distance, if it is close enough to be a likely typo.
std::optional<std::string> closest_name(std::string_view name,
                                        const std::vector<std::string>& candidates);

} // namespace ssm::frontend
