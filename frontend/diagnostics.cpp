// DiagnosticEngine: source locations, clang-style rendering, and typo suggestions.
#include "frontend.h"

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

namespace {
// Optimal string alignment distance: Levenshtein plus transposition of adjacent characters.
int edit_distance(std::string_view a, std::string_view b) {
  std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (std::size_t i = 0; i <= n; ++i)
    d[i][0] = static_cast<int>(i);
  for (std::size_t j = 0; j <= m; ++j)
    d[0][j] = static_cast<int>(j);
  for (std::size_t i = 1; i <= n; ++i)
    for (std::size_t j = 1; j <= m; ++j) {
      int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}
} // namespace

std::optional<std::string> closest_name(std::string_view name,
                                        const std::vector<std::string>& candidates) {
  // Up to one edit per three characters: enough for typos, too few to suggest unrelated names.
  int limit = std::max(1, static_cast<int>(name.size()) / 3);
  std::optional<std::string> best;
  int best_distance = limit + 1;
  for (const std::string& c : candidates) {
    int d = edit_distance(name, c);
    if (d < best_distance && d < static_cast<int>(std::min(name.size(), c.size()))) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

} // namespace ssm::frontend
