// DiagnosticEngine: source locations, clang-style rendering, and typo suggestions.
#include "frontend.h"

#include "core/spelling.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

namespace ssm::frontend {

DiagnosticEngine::DiagnosticEngine() {
  set_source({}, {});
}

DiagnosticEngine::DiagnosticEngine(std::string filename, std::string source) {
  set_source(std::move(filename), std::move(source));
}

void DiagnosticEngine::set_source(std::string filename, std::string source) {
  diags_.clear();
  errors_ = 0;
  files_.clear();
  source_.clear();
  line_starts_.clear();
  add_file(std::move(filename), source);
}

std::size_t DiagnosticEngine::add_file(std::string filename, std::string_view text) {
  if (!source_.empty() && source_.back() != '\n')
    source_ += '\n'; // an imported file starts on a line of its own
  std::size_t begin = source_.size();
  if (line_starts_.empty() || line_starts_.back() != begin)
    line_starts_.push_back(begin);
  files_.push_back({std::move(filename), begin, static_cast<int>(line_starts_.size()) - 1});
  source_ += text;
  for (std::size_t i = begin; i < source_.size(); ++i)
    if (source_[i] == '\n')
      line_starts_.push_back(i + 1);
  return begin;
}

void DiagnosticEngine::error(ir::SourceLoc loc, std::string message) {
  diags_.push_back({Diagnostic::Severity::Error, loc, std::move(message)});
  ++errors_;
}

void DiagnosticEngine::warning(ir::SourceLoc loc, std::string message) {
  if (warnings_as_errors_) {
    error(loc, message + " [-Werror]");
    return;
  }
  diags_.push_back({Diagnostic::Severity::Warning, loc, std::move(message)});
}

void DiagnosticEngine::note(ir::SourceLoc loc, std::string message) {
  diags_.push_back({Diagnostic::Severity::Note, loc, std::move(message)});
}

int DiagnosticEngine::file_of(std::size_t pos) const {
  int file = 0;
  while (file + 1 < static_cast<int>(files_.size()) && files_[file + 1].begin <= pos)
    ++file;
  return file;
}

ir::SourceLoc DiagnosticEngine::loc(std::size_t begin, std::size_t end) const {
  begin = std::min(begin, source_.size());
  end = std::max(begin, std::min(end, source_.size()));
  int file = file_of(begin);
  auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), begin);
  int line = static_cast<int>(it - line_starts_.begin());
  std::size_t start = line_starts_[line - 1];
  std::size_t line_end = source_.find('\n', start);
  if (line_end == std::string::npos)
    line_end = source_.size();
  end = std::min(end, line_end);
  int col = static_cast<int>(begin - start) + 1;
  int end_col = static_cast<int>(end - start) + 1;
  return {line - files_[file].first_line, col, std::max(end_col, col + 1), file};
}

std::string DiagnosticEngine::line_text(int file, int line) const {
  line += files_.at(file).first_line;
  if (line < 1 || line > static_cast<int>(line_starts_.size()))
    return {};
  std::size_t start = line_starts_[line - 1];
  std::size_t end = source_.find('\n', start);
  std::string text = source_.substr(start, end == std::string::npos ? end : end - start);
  if (!text.empty() && text.back() == '\r')
    text.pop_back();
  return text;
}

void DiagnosticEngine::render(std::ostream& out) const {
  for (const Diagnostic& d : diags_) {
    std::string_view severity = d.severity == Diagnostic::Severity::Error     ? "error"
                                : d.severity == Diagnostic::Severity::Warning ? "warning"
                                                                              : "note";
    int file = d.loc.file >= 0 && d.loc.file < static_cast<int>(files_.size()) ? d.loc.file : 0;
    const std::string& name = files_.empty() ? std::string() : files_[file].name;
    if (d.loc.line <= 0) {
      out << fmt::format("{}: {}: {}\n", name, severity, d.message);
      continue;
    }
    out << fmt::format("{}:{}:{}: {}: {}\n", name, d.loc.line, d.loc.col, severity, d.message);
    if (source_.empty())
      continue; // a file that is not text: nothing to show
    std::string text = line_text(file, d.loc.line);
    out << text << '\n';
    // Tabs stay tabs so the caret lines up whatever the tab width; a multi-byte UTF-8 character
    // takes one screen column.
    std::string caret;
    for (int c = 1; c < d.loc.col; ++c) {
      char ch = c - 1 < static_cast<int>(text.size()) ? text[c - 1] : ' ';
      if (ch == '\t')
        caret += '\t';
      else if ((static_cast<unsigned char>(ch) & 0xC0) != 0x80)
        caret += ' ';
    }
    caret += '^';
    for (int c = d.loc.col + 1; c < d.loc.end_col; ++c) {
      char ch = c - 1 < static_cast<int>(text.size()) ? text[c - 1] : ' ';
      if ((static_cast<unsigned char>(ch) & 0xC0) != 0x80)
        caret += '~';
    }
    out << caret << '\n';
  }
}

std::string DiagnosticEngine::str() const {
  std::ostringstream out;
  render(out);
  return out.str();
}

std::optional<std::string> closest_name(std::string_view name,
                                        const std::vector<std::string>& candidates) {
  return ssm::closest_name(name, candidates);
}

} // namespace ssm::frontend
