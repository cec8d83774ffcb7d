// Lexical helpers: see source.h.
#include "source.h"

#include "frontend.h"

#include "core/text_encoding.h"
#include "limits.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <vector>

namespace ssm::frontend {

namespace {
bool is_space(char c) {
  return std::isspace(static_cast<unsigned char>(c)) != 0;
}
bool is_ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
} // namespace

std::size_t skip_trivia(std::string_view text, std::size_t pos) {
  while (pos < text.size()) {
    if (is_space(text[pos])) {
      ++pos;
    } else if (text.substr(pos, 2) == "//") {
      while (pos < text.size() && text[pos] != '\n')
        ++pos;
    } else if (text.substr(pos, 2) == "/*") {
      std::size_t end = text.find("*/", pos + 2);
      pos = end == std::string_view::npos ? text.size() : end + 2;
    } else {
      break;
    }
  }
  return pos;
}

std::size_t token_end(std::string_view text, std::size_t pos) {
  if (pos >= text.size())
    return pos;
  if (!is_ident_char(text[pos]) && text[pos] != '.')
    return pos + 1;
  std::size_t end = pos;
  while (end < text.size() && (is_ident_char(text[end]) || text[end] == '.'))
    ++end;
  return end;
}

bool is_keyword(std::string_view word) {
  static const std::set<std::string_view> keywords = {
      "model",    "module",    "import", "const",     "param",      "state", "obs", "data",
      "input",    "let",       "fn",     "return",    "functional", "sum_t", "if",  "else",
      "proposal", "lookahead", "latent", "simulator", "net",        "guide"};
  return keywords.count(word) > 0;
}

bool check_comments(std::string_view text, std::size_t begin, DiagnosticEngine& diags) {
  std::size_t pos = begin;
  while (pos < text.size()) {
    if (text.substr(pos, 2) == "//") {
      pos = text.find('\n', pos);
      if (pos == std::string_view::npos)
        return true;
    } else if (text.substr(pos, 2) == "/*") {
      std::size_t end = text.find("*/", pos + 2);
      if (end == std::string_view::npos) {
        diags.error(diags.loc(pos, pos + 2), "unterminated /* comment");
        return false;
      }
      pos = end + 2;
    } else {
      ++pos;
    }
  }
  return true;
}

bool check_nesting(std::string_view text, std::size_t begin, DiagnosticEngine& diags) {
  // Well within the stack of a sanitizer build, far beyond any model written by hand.
  constexpr int max_nesting = kMaxNesting;
  std::vector<int> operators{0}; // per open bracket: operators since its last ',' or ';'
  int nesting = 0;               // open brackets + all those operators
  for (std::size_t pos = begin; pos < text.size(); ++pos) {
    if (text.substr(pos, 2) == "//" || text.substr(pos, 2) == "/*") {
      bool line = text[pos + 1] == '/';
      // A line comment ends at '\r' or '\n', as the grammar's skipper (x3::eol) ends it.
      std::size_t end = line ? text.find_first_of("\r\n", pos + 2) : text.find("*/", pos + 2);
      if (end == std::string_view::npos)
        return true; // the end of the text, or an unterminated comment check_comments reports
      pos = line ? end : end + 1;
      continue;
    }
    char c = text[pos];
    if (c == '(' || c == '[' || c == '{') {
      operators.push_back(0);
      ++nesting;
    } else if ((c == ')' || c == ']' || c == '}') && operators.size() > 1) {
      nesting -= operators.back() + 1;
      operators.pop_back();
      if (c != '}') { // the group is an operand of the enclosing chain (x[0][0] nests too)
        ++operators.back();
        ++nesting;
      }
    } else if (c == ',' || c == ';') {
      nesting -= operators.back();
      operators.back() = 0;
    } else if (std::string_view("+-*/^?:<>=!&|%").find(c) != std::string_view::npos) {
      ++operators.back();
      ++nesting;
    }
    if (nesting > max_nesting) {
      // Mostly operators: a long flat chain (a sum of hundreds of terms), which the parser's
      // tree nests one level per operator, not brackets the user can see.
      const int brackets = static_cast<int>(operators.size()) - 1;
      diags.error(diags.loc(pos, pos + 1),
                  nesting - brackets > 2 * brackets
                      ? fmt::format("expression too long: more than {} levels in one chain of "
                                    "operators (each operator, and each indexed or bracketed "
                                    "term, nests the expression one level deeper)",
                                    max_nesting)
                      : fmt::format("expression nested too deeply: more than {} levels of "
                                    "brackets and operators",
                                    max_nesting));
      return false;
    }
  }
  return true;
}

} // namespace ssm::frontend

namespace ssm::frontend {

void report_syntax_error(std::string_view text, std::size_t begin, std::size_t where,
                         std::string_view which, DiagnosticEngine& diags) {
  std::size_t next = skip_trivia(text, std::min(where, text.size()));
  // The end of the last token before `next`: a missing ';' or ')' is reported right after the
  // token it should follow, as clang does.
  std::size_t prev_end = std::string_view::npos;
  for (std::size_t pos = skip_trivia(text, begin); pos < next; pos = skip_trivia(text, pos)) {
    pos = token_end(text, pos);
    prev_end = pos;
  }
  bool at_eof = next >= text.size();
  std::string_view token = text.substr(next, token_end(text, next) - next);
  auto at_next = [&](std::string message) {
    if (at_eof && prev_end != std::string_view::npos)
      diags.error(diags.loc(prev_end, prev_end + 1), "unexpected end of file: " + message);
    else
      diags.error(diags.loc(next, token_end(text, next)), std::move(message));
  };

  // A character that no token starts with: say so rather than what the parser hoped for.
  if (!at_eof) {
    unsigned char c = static_cast<unsigned char>(text[next]);
    if (c >= 0x80 || (!std::isalnum(c) && std::string_view("_()[]{},;:~=+-*/%^.<>!&|?").find(c) ==
                                              std::string_view::npos)) {
      std::size_t end = next + 1;
      while (c >= 0x80 && end < text.size() &&
             (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80)
        ++end;
      diags.error(diags.loc(next, end),
                  fmt::format("unexpected character {}", shown_character(text, next)));
      return;
    }
  }
  if (which == "identifier") {
    if (is_keyword(token))
      at_next(fmt::format("expected a name, but '{}' is a keyword", token));
    else
      at_next("expected a name");
  } else if (which == "expression") {
    at_next("expected an expression");
  } else if (which == "type") {
    at_next("expected a type: real, int[lo..hi], vector[n], matrix[r, c], cov_matrix[n] or "
            "simplex[n]");
  } else if (which == "distribution") {
    at_next("expected a distribution, as in 'normal(mu, sigma)'");
  } else if (which == "end of model") {
    if (at_eof)
      at_next("expected '}'");
    else
      at_next("expected a declaration, a relation or '}'");
  } else if (which == "function body") {
    at_next("expected '= expression;' or '{ ... return expression; }'");
  } else if (which == "parameter") {
    at_next("expected a parameter, as in 'x : real'");
  } else if (which == "eoi") {
    at_next("unexpected text after the end of the model");
  } else if (which == "string") {
    at_next("expected the module's name in quotes, as in 'import \"math\";'");
  } else if (which == "relation") {
    at_next("expected the state it is for, as in 'x[t]'");
  } else if (which == "'model'") {
    at_next("expected 'model NAME { ... }', 'simulator NAME { ... }' or 'module NAME { ... }'");
  } else if (!which.empty() && (which.front() == '\'' || which.front() == '"') &&
             prev_end != std::string_view::npos) {
    // A punctuation character ('(') or string ("->"): quoted the same way.
    std::string message = fmt::format("expected '{}'", which.substr(1, which.size() - 2));
    if (at_eof)
      message = "unexpected end of file: " + message;
    diags.error(diags.loc(prev_end, prev_end + 1), message);
  } else {
    at_next(fmt::format("syntax error: expected {}", which));
  }
}

} // namespace ssm::frontend
