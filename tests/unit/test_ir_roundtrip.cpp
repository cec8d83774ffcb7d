// IR round trips on every model the repository ships (examples/, stdlib/, the golden diagnostics
// inputs that compile, the structure tests' models) and on the golden IR files:
// - the printed IR read back (ir::read) and printed again is the same text, and verifies;
// - a no-op pipeline leaves the printed IR unchanged;
// - on canonical IR (after constant-fold,cse) every registered pass is idempotent, and leaves the
//   IR unchanged unless it is a transform listed below; constant-fold,cse twice equals once.
#include "frontend/frontend.h"
#include "ir/printer.h"
#include "ir/reader.h"
#include "ir/verifier.h"
#include "passes/pass_manager.h"
#include "text_file.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#ifndef SSM_SOURCE_DIR
#error "SSM_SOURCE_DIR must name the repository"
#endif

namespace fs = std::filesystem;
using namespace ssm;

using unit_test_files::read_file;

namespace {

std::vector<fs::path> files(const std::string& dir, const std::string& extension) {
  std::vector<fs::path> out;
  fs::path path = fs::path(SSM_SOURCE_DIR) / dir;
  if (!fs::is_directory(path))
    return out;
  for (const auto& entry : fs::recursive_directory_iterator(path))
    if (entry.path().extension() == extension)
      out.push_back(entry.path());
  std::sort(out.begin(), out.end());
  return out;
}

// The lowered IR of every model that compiles without error; the golden diagnostics inputs that
// fail are skipped (they are the frontend's tests).
std::vector<std::pair<std::string, ir::Model>> models() {
  std::vector<std::pair<std::string, ir::Model>> out;
  for (const char* dir : {"examples", "stdlib", "tests/golden/diagnostics", "tests/structure"})
    for (const fs::path& path : files(dir, ".ssm")) {
      std::string source = read_file(path);
      frontend::DiagnosticEngine diags;
      auto model = frontend::compile_model(source, path.string(), diags,
                                           {(fs::path(SSM_SOURCE_DIR) / "stdlib").string()});
      if (model && !diags.has_errors())
        out.emplace_back(fs::relative(path, SSM_SOURCE_DIR).string(), std::move(*model));
    }
  return out;
}

std::string after(ir::Model model, std::string_view pipeline) {
  passes::PassManager pm; // verifies the IR before and after every pass
  pm.add_pipeline(pipeline);
  passes::PassContext context;
  std::ostringstream log;
  pm.run(model, context, log);
  return ir::print(model);
}

ir::Model canonical(ir::Model model) {
  passes::PassManager pm;
  pm.add_pipeline("constant-fold,cse");
  passes::PassContext context;
  std::ostringstream log;
  pm.run(model, context, log);
  return model;
}

// Transforms that may change IR that constant-fold and cse have nothing left to do on (lowering
// to another form, say). Each must still be idempotent. None yet.
// augment-lags on models with x[t-2], plate-items on plate models.
const std::set<std::string> changes_canonical_ir = {"augment-lags", "plate-items",
                                                    "simulator-draws"};

void check_read_back(const std::string& text) {
  ir::Model read = ir::read(text);
  CHECK(ir::verify(read).empty());
  CHECK(ir::print(read) == text);
}

} // namespace

TEST_CASE("every shipped model: printed IR reads back to the same text", "[ir][roundtrip]") {
  auto all = models();
  REQUIRE(all.size() >= 5); // the examples at least
  for (auto& [name, model] : all) {
    INFO(name);
    check_read_back(ir::print(model));
    check_read_back(ir::print(canonical(model)));
  }
}

TEST_CASE("golden IR files read back to the same text", "[ir][roundtrip]") {
  auto golden = files("tests/golden/ir", ".ir");
  REQUIRE_FALSE(golden.empty());
  for (const fs::path& path : golden) {
    INFO(path.string());
    std::string text = read_file(path);
    // `--print-after` output starts with a comment line and ends with a blank line.
    if (text.rfind("; IR after ", 0) == 0) {
      text = text.substr(text.find('\n') + 1);
      if (text.size() >= 2 && text.substr(text.size() - 2) == "\n\n")
        text.pop_back();
    }
    check_read_back(text);
  }
}

TEST_CASE("a no-op pipeline leaves the printed IR unchanged", "[ir][roundtrip]") {
  for (auto& [name, model] : models()) {
    INFO(name);
    std::string printed = ir::print(model);
    CHECK(after(model, "") == printed);
    CHECK(ir::print(model) == printed); // printing has no effect either
  }
}

TEST_CASE("passes are idempotent on canonical IR", "[ir][roundtrip][passes]") {
  for (auto& [name, model] : models()) {
    ir::Model canon = canonical(model);
    std::string printed = ir::print(canon);
    INFO(name << "\n" << printed);
    CHECK(after(canon, "constant-fold,cse") == printed);
    CHECK(after(model, "constant-fold,cse,constant-fold,cse") == printed);
    for (const std::string& pass : passes::registered_passes()) {
      INFO("pass " << pass);
      std::string once = after(canon, pass);
      ir::Model twice = ir::read(once); // also a round trip of what the pass produced
      CHECK(after(std::move(twice), pass) == once);
      if (!changes_canonical_ir.count(pass))
        CHECK(once == printed);
    }
  }
}

TEST_CASE("the IR reader rejects malformed text with the line and column", "[ir][roundtrip]") {
  const std::string good = "model m\nparam s : real = 1\nstate x : real\nobs y : real\n\n"
                           "initial {\n  %0 = const 0 : real\n  %1 = param s : real\n"
                           "  x[0] ~ normal(%0, %1)\n}\n";
  CHECK(ir::print(ir::read(good)) == good);
  // The line and column of the error reading `text`; (-1, -1) if it reads.
  auto position_of_error = [](const std::string& text) {
    try {
      ir::read(text);
    } catch (const ir::ReadError& e) {
      return std::pair(e.line(), e.column());
    }
    return std::pair(-1, -1);
  };
  auto line_of_error = [&](const std::string& text) { return position_of_error(text).first; };
  auto column_of_error = [&](const std::string& text) { return position_of_error(text).second; };
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  CHECK(line_of_error("") == 0);
  CHECK(line_of_error(replace("model m", "modle m")) == 1);
  CHECK(line_of_error(replace("= 1", "= [1]")) == 2); // a vector for a real
  CHECK(line_of_error(replace("%1 = param s", "%1 = param q")) == 8);
  CHECK(line_of_error(replace("%1 = param", "%2 = param")) == 8); // numbering
  CHECK(line_of_error(replace("normal(%0, %1)", "normal(%0, %2)")) == 9);
  CHECK(line_of_error(replace("normal(", "norml(")) == 9);
  CHECK(line_of_error(replace("x[0] ~", "z[0] ~")) == 9);
  CHECK(line_of_error(replace(": real\n  x", ": realish\n  x")) == 8);
  CHECK(line_of_error(replace("}\n", "")) == 9); // no closing brace
  // The column is that of the offending word, else of the line's first character.
  CHECK(column_of_error("") == 0);
  CHECK(column_of_error(replace("model m", "modle m")) == 1);
  CHECK(column_of_error(replace("%1 = param s", "%1 = param q")) == 14);
  CHECK(column_of_error(replace("%1 = param", "%2 = param")) == 3);
  CHECK(column_of_error(replace("normal(%0, %1)", "normal(%0, %2)")) == 21);
  CHECK(column_of_error(replace("normal(", "norml(")) == 10);
  CHECK(column_of_error(replace(": real\n  x", ": realish\n  x")) == 18);
}

TEST_CASE("data keep their declared types through printing, reading and verifying",
          "[ir][roundtrip]") {
  const std::string source = R"(model typed {
  data Sigma : cov_matrix[2];
  data w : simplex[3];
  data k : int[0..5];
  data n : int;
  data r : real(0, inf);
  data X : matrix[2, 2];
  state x : vector[2];
  obs y : vector[2];
  x[0] ~ mvnormal(zeros(2), Sigma);
  x[t] ~ mvnormal(X * x[t-1] * w[1] * n, Sigma);
  y[t] ~ normal(x[t] + k, r + 1);
}
)";
  frontend::DiagnosticEngine diags;
  auto model = frontend::compile_model(source, "typed.ssm", diags, {});
  REQUIRE(model);
  REQUIRE_FALSE(diags.has_errors());
  const std::string printed = ir::print(*model);
  CHECK_THAT(printed, Catch::Contains("data Sigma : cov_matrix[2]\ndata w : simplex[3]\n"
                                      "data k : int[0..5]\ndata n : int\ndata r : real(0, inf)\n"
                                      "data X : matrix[2, 2]\n"));
  check_read_back(printed);
  ir::Model read = ir::read(printed);
  REQUIRE(read.data.size() == 6);
  CHECK(read.data[0].constraint == ir::Constraint::CovMatrix);
  CHECK(read.data[0].shape == ir::Shape::matrix(2, 2));
  CHECK(read.data[1].constraint == ir::Constraint::Simplex);
  CHECK(read.data[1].shape == ir::Shape::vector(3));
  CHECK((read.data[2].integer && read.data[2].lower == 0 && read.data[2].upper == 5));
  CHECK((!read.data[4].integer && read.data[4].lower == 0 && read.data[4].upper == INFINITY));

  // The verifier rejects the types where they do not belong.
  ir::Model bad = read;
  bad.states[0].constraint = ir::Constraint::Simplex;
  bad.data[1].shape = ir::Shape::matrix(3, 1);
  bad.obs[0].lower = 0;
  const std::vector<std::string> errors = ir::verify(bad);
  CHECK(std::count_if(errors.begin(), errors.end(), [](const std::string& e) {
          return e.find("state x: only data can be simplex") != std::string::npos ||
                 e.find("data w: a simplex of shape matrix[3, 1]") != std::string::npos ||
                 e.find("obs y: bounds (0, inf) on vector[2]") != std::string::npos;
        }) == 3);
}
