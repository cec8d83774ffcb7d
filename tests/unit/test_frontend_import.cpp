// `import`: modules found next to the model and along the import path, their constants and
// functions usable in the model, errors reported in the right file, and every module of the
// standard library importable.
#include "frontend/Frontend.h"
#include "ir/Verifier.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#ifndef SSM_STDLIB_DIR
#error "SSM_STDLIB_DIR must name stdlib/"
#endif

namespace fs = std::filesystem;
using namespace ssm;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / fs::path("ssmc-import-" + std::to_string(::getpid()));
    fs::create_directories(path / "lib");
  }
  ~TempDir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
    return (path / name).string();
  }
};

const char* kModel = R"(model m {
  import "helpers";
  state x : real;
  obs y : real;
  x[0] ~ normal(0, scale);
  x[t] ~ normal(half(x[t-1]), 1);
  y[t] ~ normal(x[t], 1);
}
)";

} // namespace

TEST_CASE("a model imports constants and functions from a module", "[frontend][import]") {
  TempDir dir;
  dir.write("lib/helpers.ssm", "module helpers {\n  const scale = 3;\n"
                               "  fn half(x : real) -> real = x / 2;\n}\n");
  std::string model = dir.write("m.ssm", kModel);
  frontend::DiagnosticEngine diags;

  // Not found next to the model, found along the import path.
  CHECK_FALSE(frontend::compile_model(kModel, model, diags).has_value());
  CHECK(diags.str().find("cannot find module 'helpers'") != std::string::npos);
  std::optional<ir::Model> m =
      frontend::compile_model(kModel, model, diags, {(dir.path / "lib").string()});
  INFO(diags.str());
  REQUIRE(m.has_value());
  CHECK(ir::verify(*m).empty());
  REQUIRE(m->imported_files.size() == 1);
  CHECK(fs::path(m->imported_files[0]).filename() == "helpers.ssm");
  CHECK(m->initial.nodes.at(m->initial.relations[0].args[1]).values == std::vector<double>{3});
  // half(x[t-1]) is inlined, and its nodes carry the location of the call (line 6), not a line of
  // the module.
  const ir::Block& tr = m->transition;
  const ir::Node& mean = tr.nodes.at(tr.relations[0].args[0]);
  CHECK(mean.op == ir::Op::Div);
  CHECK(mean.loc.line == 6);
  CHECK(mean.loc.file == 0);
  CHECK(frontend::imported_files(kModel, model, {(dir.path / "lib").string()}) ==
        m->imported_files);
}

TEST_CASE("errors in imported files name those files", "[frontend][import]") {
  TempDir dir;
  dir.write("helpers.ssm", "module helpers {\n  const scale = 3;\n"
                           "  fn half(x : real) -> real = x / 2 + unknown;\n}\n");
  std::string model = dir.write("m.ssm", kModel);
  frontend::DiagnosticEngine diags;
  CHECK_FALSE(frontend::compile_model(kModel, model, diags).has_value());
  std::string helpers = (dir.path / "helpers.ssm").lexically_normal().string();
  CHECK(diags.str() == helpers + ":3:39: error: unknown name 'unknown'\n"
                                 "  fn half(x : real) -> real = x / 2 + unknown;\n"
                                 "                                      ^~~~~~~\n");

  dir.write("helpers.ssm", "model helpers { state x : real; }\n");
  frontend::compile_model(kModel, model, diags);
  CHECK(diags.str().find("only a module (module NAME { ... }) can be imported") !=
        std::string::npos);
  dir.write("helpers.ssm", "module helpers { param p = 1; }\n");
  frontend::compile_model(kModel, model, diags);
  CHECK(diags.str().find(helpers + ":1:18: error: module 'helpers' declares a variable") !=
        std::string::npos);
}

TEST_CASE("every standard library module can be imported", "[frontend][import][stdlib]") {
  int modules = 0;
  for (const auto& entry : fs::directory_iterator(SSM_STDLIB_DIR)) {
    if (entry.path().extension() != ".ssm")
      continue;
    ++modules;
    std::string name = entry.path().stem().string();
    INFO("module " << name);
    std::string source = "model m {\n  import \"" + name +
                         "\";\n  state x : real;\n  obs y : real;\n  x[0] ~ normal(0, 1);\n"
                         "  x[t] ~ normal(x[t-1], 1);\n  y[t] ~ normal(x[t], 1);\n}\n";
    frontend::DiagnosticEngine diags;
    auto m = frontend::compile_model(source, "m.ssm", diags, {SSM_STDLIB_DIR});
    INFO(diags.str());
    CHECK(m.has_value());
    CHECK(diags.diagnostics().empty());
  }
  CHECK(modules >= 2);
}
