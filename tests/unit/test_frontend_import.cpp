// `import`: modules found next to the model and along the import path, their constants and
// functions usable in the model, errors reported in the right file, and every module of the
// standard library importable.
#include "frontend/frontend.h"
#include "ir/verifier.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#ifndef SSM_STDLIB_DIR
#error "SSM_STDLIB_DIR must name stdlib/"
#endif

namespace fs = std::filesystem;
using namespace ssm;

namespace {

struct ImportDir {
  fs::path path;
  ImportDir() {
    path = fs::temp_directory_path() / fs::path("ssmc-import-" + std::to_string(::getpid()));
    fs::create_directories(path / "lib");
  }
  ~ImportDir() { fs::remove_all(path); }
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

// Compiles a model that must compile without any diagnostic.
ir::Model compile_clean(const std::string& source, const std::string& path) {
  frontend::DiagnosticEngine diags;
  std::optional<ir::Model> m = frontend::compile_model(source, path, diags);
  INFO(diags.str());
  REQUIRE(m.has_value());
  CHECK(diags.diagnostics().empty());
  return std::move(*m);
}

} // namespace

TEST_CASE("a model imports constants and functions from a module", "[frontend][import]") {
  ImportDir dir;
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
  ImportDir dir;
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

TEST_CASE("modules import modules", "[frontend][import]") {
  ImportDir dir;
  // m imports lib/outer, which imports inner: found next to lib/outer.ssm first, although the
  // model's directory has an inner.ssm too. Both are visible to the model.
  dir.write("lib/outer.ssm", "module outer {\n  import \"inner\";\n"
                             "  fn twice(x : real) -> real = 2 * half(x) * unit;\n}\n");
  dir.write("lib/inner.ssm", "module inner {\n  const unit = 1;\n"
                             "  fn half(x : real) -> real = x / 2;\n}\n");
  dir.write("inner.ssm", "module inner {\n  const wrong = 1;\n}\n");
  const char* source = R"(model m {
  import "lib/outer";
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ normal(twice(x[t-1]), half(unit));
  y[t] ~ normal(x[t], 1);
}
)";
  std::string model = dir.write("m.ssm", source);
  const std::optional<ir::Model> m = compile_clean(source, model);
  CHECK(ir::verify(*m).empty());
  std::vector<std::string> names;
  for (const std::string& f : m->imported_files)
    names.push_back(fs::relative(f, dir.path).string());
  CHECK(names == std::vector<std::string>{"lib/outer.ssm", "lib/inner.ssm"});
  // What the compile cache keys on: the modules imported through other modules too.
  CHECK(frontend::imported_files(source, model, {}) == m->imported_files);
  // twice(x[t-1]) = 2 * (x[t-1] / 2) * 1, inlined through both modules.
  const ir::Block& tr = m->transition;
  CHECK(tr.nodes.at(tr.relations[0].args[0]).op == ir::Op::Mul);
  CHECK(tr.nodes.at(tr.relations[0].args[1]).op == ir::Op::Div); // half(unit)
}

TEST_CASE("a module imported twice is read once", "[frontend][import]") {
  ImportDir dir;
  // A diamond: m imports left and right, which both import base (by different paths).
  dir.write("base.ssm", "module base {\n  fn sq(x : real) -> real = x * x;\n}\n");
  dir.write("lib/left.ssm", "module left {\n  import \"../base\";\n"
                            "  fn l(x : real) -> real = sq(x) + 1;\n}\n");
  dir.write("right.ssm", "module right {\n  import \"base\";\n"
                         "  fn r(x : real) -> real = sq(x) - 1;\n}\n");
  const char* source = R"(model m {
  import "lib/left";
  import "right";
  import "base";
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ normal(l(x[t-1]) + r(x[t-1]) + sq(1), 1);
  y[t] ~ normal(x[t], 1);
}
)";
  std::string model = dir.write("m.ssm", source);
  CHECK(compile_clean(source, model).imported_files.size() == 3);
}

TEST_CASE("a module sees only its own names and those it imports", "[frontend][import]") {
  ImportDir dir;
  dir.write("a.ssm", "module a {\n  fn fa(x : real) -> real = x + 1;\n}\n");
  dir.write("b.ssm", "module b {\n  fn fb(x : real) -> real = fa(x) * k;\n}\n");
  const char* source = R"(model m {
  import "a";
  import "b";
  const k = 2;
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ normal(fb(x[t-1]), 1);
  y[t] ~ normal(x[t], 1);
}
)";
  std::string model = dir.write("m.ssm", source);
  frontend::DiagnosticEngine diags;
  CHECK_FALSE(frontend::compile_model(source, model, diags).has_value());
  std::string a = (dir.path / "a.ssm").lexically_normal().string();
  std::string b = (dir.path / "b.ssm").lexically_normal().string();
  CHECK(diags.str() ==
        b + ":2:29: error: 'fa' is declared in " + a + ", which " + b +
            " does not import: add 'import \"a\";' to it\n"
            "  fn fb(x : real) -> real = fa(x) * k;\n"
            "                            ^~\n" +
            b + ":2:37: error: 'k' is declared by the model that imports this module (" + model +
            "); a module can only use its own names and those of the modules it imports\n"
            "  fn fb(x : real) -> real = fa(x) * k;\n"
            "                                    ^\n");
}

TEST_CASE("modules that import each other in a circle are an error", "[frontend][import]") {
  ImportDir dir;
  dir.write("a.ssm", "module a {\n  import \"b\";\n  const ka = 1;\n}\n");
  dir.write("b.ssm", "module b {\n  import \"c\";\n  const kb = 1;\n}\n");
  dir.write("c.ssm", "module c {\n  import \"a\";\n  const kc = 1;\n}\n");
  std::string model = dir.write("m.ssm", kModel);
  std::string source = "model m {\n  import \"a\";\n  state x : real;\n}\n";
  frontend::DiagnosticEngine diags;
  CHECK_FALSE(frontend::compile_model(source, model, diags).has_value());
  std::string c = (dir.path / "c.ssm").lexically_normal().string();
  CHECK(diags.str() == c + ":2:3: error: import cycle: a -> b -> c -> a (a module cannot import "
                           "itself, directly or through other modules)\n"
                           "  import \"a\";\n"
                           "  ^~~~~~~~~~~\n");
  // The files of the cycle are still what a build depends on, each once.
  CHECK(frontend::imported_files(source, model, {}).size() == 3);
}
