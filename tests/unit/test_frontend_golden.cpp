// Golden tests of the frontend's diagnostics: every tests/golden/diagnostics/NAME.ssm is compiled
// and its rendered diagnostics must equal NAME.expected byte for byte. With SSM_UPDATE_GOLDEN=1 in
// the environment the expected files are rewritten instead (review the diff before committing).
// The modules the golden models import are in tests/golden/diagnostics/modules/ (import
// "modules/NAME";); file names in messages are relative to tests/golden/diagnostics, and the
// standard library's directory is written STDLIB.
#include "frontend/frontend.h"
#include "text_file.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#ifndef SSM_GOLDEN_DIAGNOSTICS_DIR
#error "SSM_GOLDEN_DIAGNOSTICS_DIR must name tests/golden/diagnostics"
#endif

namespace fs = std::filesystem;

using unit_test_files::read_file;

namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

// A unified-style line diff (longest common subsequence): ' ' both, '-' expected only, '+' actual
// only. The files are small, so the quadratic table is fine.
std::string line_diff(const std::string& expected, const std::string& actual) {
  std::vector<std::string> a = split_lines(expected), b = split_lines(actual);
  std::vector<std::vector<int>> lcs(a.size() + 1, std::vector<int>(b.size() + 1, 0));
  for (size_t i = a.size(); i-- > 0;)
    for (size_t j = b.size(); j-- > 0;)
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
  std::string out;
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (i < a.size() && j < b.size() && a[i] == b[j]) {
      out += "  " + a[i++] + "\n";
      ++j;
    } else if (j < b.size() && (i == a.size() || lcs[i][j + 1] >= lcs[i + 1][j])) {
      out += "+ " + b[j++] + "\n";
    } else {
      out += "- " + a[i++] + "\n";
    }
  }
  if (!expected.empty() && expected.back() != '\n')
    out += "(the expected file does not end with a newline)\n";
  return out;
}

} // namespace

TEST_CASE("frontend diagnostics match the golden files", "[frontend][golden]") {
  fs::path dir = SSM_GOLDEN_DIAGNOSTICS_DIR;
  std::vector<fs::path> models;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".ssm")
      models.push_back(entry.path());
  std::sort(models.begin(), models.end());
  REQUIRE(models.size() >= 40);

  // The model is compiled under its full name, so that its imports are found next to it, and the
  // directory is taken out of the messages.
  std::string prefix = (dir.lexically_normal() / "").string();
  std::string stdlib = (fs::path(SSM_STDLIB_DIR).lexically_normal() / "").string();
  for (const fs::path& model : models) {
    fs::path expected_path = fs::path(model).replace_extension(".expected");
    INFO("golden file " << model.filename().string());
    std::string expected;

    ssm::frontend::DiagnosticEngine diags;
    auto result = ssm::frontend::compile_model(read_file(model), prefix + model.filename().string(),
                                               diags, {SSM_STDLIB_DIR});
    std::string actual = diags.str();
    for (std::size_t at; (at = actual.find(prefix)) != std::string::npos;)
      actual.erase(at, prefix.size());
    for (std::size_t at; (at = actual.find(stdlib)) != std::string::npos;)
      actual.replace(at, stdlib.size(), "STDLIB/");
    if (const char* update = std::getenv("SSM_UPDATE_GOLDEN"); update && std::string(update) == "1")
      std::ofstream(expected_path, std::ios::binary) << actual;
    else
      expected = read_file(expected_path);
    INFO("diff (- expected, + actual):\n" << line_diff(expected, actual));
    CHECK(actual == expected);
    // A model compiles exactly when it has no error.
    CHECK(result.has_value() == !diags.has_errors());
    // Every golden file exists to pin a message.
    CHECK(!diags.diagnostics().empty());
  }
}
