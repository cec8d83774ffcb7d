// compile_model: the frontend's entry point (parse the model and the modules it imports, then
// check and lower).
#include "frontend.h"

#include "lower.h"
#include "parser.h"

#include "core/text_encoding.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace fs = std::filesystem;

namespace ssm::frontend {

namespace {

// Where `import "name";` in `from` finds name.ssm: next to `from`, then along the import path.
std::vector<fs::path> import_candidates(const std::string& name, const std::string& from,
                                        const std::vector<std::string>& import_path) {
  fs::path file = name;
  if (file.extension() != ".ssm")
    file += ".ssm";
  std::vector<fs::path> dirs = {fs::path(from).parent_path()};
  for (const std::string& dir : import_path)
    dirs.emplace_back(dir);
  std::vector<fs::path> out;
  for (const fs::path& dir : dirs)
    out.push_back((dir.empty() ? file : dir / file).lexically_normal());
  return out;
}

std::optional<fs::path> resolve_import(const std::vector<fs::path>& candidates) {
  for (const fs::path& p : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(p, ec))
      return p;
  }
  return std::nullopt;
}

std::optional<std::string> read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A module holds imports, constants and functions only.
void check_module(const ast::Model& m, DiagnosticEngine& diags) {
  auto reject = [&](ast::Range r, std::string_view what) {
    diags.error(diags.loc(r.begin, r.end),
                fmt::format("module '{}' declares {}; a module can only declare constants and "
                            "functions, and import other modules",
                            m.name.name, what));
  };
  if (!m.vars.empty())
    reject(m.vars[0].range, "a variable");
  else if (!m.relations.empty())
    reject(m.relations[0].range, "a relation");
  else if (!m.lets.empty())
    reject(m.lets[0].range, "a let binding");
  else if (!m.functionals.empty())
    reject(m.functionals[0].range, "a functional");
}

// The modules a model imports, directly and through other modules, each read and parsed once
// into the diagnostic engine's buffer (after the model's text, in the order they are found).
class ModuleLoader {
public:
  ModuleLoader(DiagnosticEngine& diags, const std::vector<std::string>& import_path)
      : diags_(diags), import_path_(import_path) {}

  // Loads the imports of the model (file 0 of the engine, named `filename`).
  void load(const ast::Model& model, const std::string& filename) {
    load_imports(model.imports, filename);
  }

  // Every file read, as found, in the order they were read.
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    for (const Module& m : modules_)
      out.push_back(m.path);
    return out;
  }

  // The modules' constants and functions before the model's own, each module after those it
  // imports.
  ast::Model merge(ast::Model model) const {
    for (auto it = post_order_.rbegin(); it != post_order_.rend(); ++it) {
      const ast::Model& m = *modules_[*it].ast;
      model.consts.insert(model.consts.begin(), m.consts.begin(), m.consts.end());
      model.fns.insert(model.fns.begin(), m.fns.begin(), m.fns.end());
    }
    return model;
  }

  // Which file sees which (for name lookup) and the declaration order: only meaningful when every
  // module loaded without error (there is then no cycle).
  FileGraph graph() const {
    int n = 1;
    for (const Module& m : modules_)
      n = std::max(n, m.file + 1);
    FileGraph g;
    g.sees.assign(n, std::vector<bool>(n, false));
    g.sees[0].assign(n, true); // the model sees everything it imports, directly or not
    for (std::size_t i = 0; i < modules_.size(); ++i) {
      std::vector<bool>& sees = g.sees[modules_[i].file];
      std::vector<int> todo = {static_cast<int>(i)};
      while (!todo.empty()) {
        const Module& m = modules_[todo.back()];
        todo.pop_back();
        if (sees[m.file])
          continue;
        sees[m.file] = true;
        todo.insert(todo.end(), m.deps.begin(), m.deps.end());
      }
    }
    for (int i : post_order_)
      g.order.push_back(modules_[i].file);
    g.order.push_back(0);
    return g;
  }

private:
  struct Module {
    std::string path;              // as found
    int file = -1;                 // in the diagnostic engine
    std::optional<ast::Model> ast; // empty if it did not parse or is not a module
    std::vector<int> deps;         // the modules it imports (indices into modules_)
    bool loading = true;           // its imports are being loaded: importing it again is a cycle
  };

  // The modules `imports` (in the file `from`) name, loaded with everything they import.
  std::vector<int> load_imports(const std::vector<ast::Import>& imports, const std::string& from) {
    std::vector<int> deps;
    for (const ast::Import& imp : imports) {
      std::vector<fs::path> candidates = import_candidates(imp.name, from, import_path_);
      std::optional<fs::path> path = resolve_import(candidates);
      std::optional<std::string> text = path ? read_text(*path) : std::nullopt;
      if (!text) {
        std::vector<std::string> tried;
        for (const fs::path& c : candidates)
          tried.push_back(c.string());
        diags_.error(diags_.loc(imp.range.begin, imp.range.end),
                     fmt::format("cannot {} module '{}' (looked for {})", path ? "read" : "find",
                                 imp.name, fmt::join(tried, ", ")));
        continue;
      }
      // The same file reached by two paths (a/../m.ssm, a symbolic link) is one module.
      std::error_code ec;
      fs::path key = fs::weakly_canonical(*path, ec);
      if (ec)
        key = fs::absolute(*path, ec).lexically_normal();
      if (auto it = by_key_.find(key.string()); it != by_key_.end()) {
        if (modules_[it->second].loading)
          report_cycle(imp, it->second);
        else if (std::find(deps.begin(), deps.end(), it->second) == deps.end())
          deps.push_back(it->second); // imported before: once is enough
        continue;
      }
      if (std::optional<std::string> why = not_utf8_text(*text)) {
        diags_.error(diags_.loc(imp.range.begin, imp.range.end),
                     fmt::format("module '{}' ({}) is {}", imp.name, path->string(), *why));
        continue;
      }
      int index = static_cast<int>(modules_.size());
      by_key_[key.string()] = index;
      modules_.emplace_back();
      modules_[index].path = path->string();
      std::size_t begin = diags_.add_file(path->string(), without_utf8_bom(*text));
      modules_[index].file = diags_.file_of(begin);
      std::optional<ast::Model> module = parse(diags_.source(), begin, diags_);
      if (module && !module->is_module) {
        diags_.error(diags_.loc(imp.range.begin, imp.range.end),
                     fmt::format("'{}' is a {}; only a module (module NAME {{ ... }}) can be "
                                 "imported",
                                 path->string(), module->is_simulator ? "simulator" : "model"));
        module.reset();
      }
      deps.push_back(index);
      if (!module) {
        modules_[index].loading = false;
        continue;
      }
      check_module(*module, diags_);
      stack_.push_back({index, module->name.name});
      std::vector<int> module_deps = load_imports(module->imports, path->string());
      stack_.pop_back();
      modules_[index].ast = std::move(module);
      modules_[index].deps = std::move(module_deps);
      modules_[index].loading = false;
      post_order_.push_back(index);
    }
    return deps;
  }

  // `imp` names `module`, whose imports are being loaded: the modules from it to here import
  // each other in a circle.
  void report_cycle(const ast::Import& imp, int module) {
    auto first = std::find_if(stack_.begin(), stack_.end(),
                              [&](const auto& entry) { return entry.first == module; });
    std::vector<std::string> names;
    for (auto it = first; it != stack_.end(); ++it)
      names.push_back(it->second);
    names.push_back(first->second);
    diags_.error(diags_.loc(imp.range.begin, imp.range.end),
                 fmt::format("import cycle: {} (a module cannot import itself, directly or "
                             "through other modules)",
                             fmt::join(names, " -> ")));
  }

  DiagnosticEngine& diags_;
  const std::vector<std::string>& import_path_;
  std::vector<Module> modules_;
  std::map<std::string, int> by_key_;              // canonical path -> module
  std::vector<std::pair<int, std::string>> stack_; // the modules being loaded, by name
  std::vector<int> post_order_;                    // each module after those it imports
};

} // namespace

std::optional<ir::Model> compile_model(std::string_view source, const std::string& filename,
                                       DiagnosticEngine& diags,
                                       const std::vector<std::string>& import_path) {
  if (std::optional<std::string> why = not_utf8_text(source)) { // shown at 1:1, without its text
    diags.set_source(filename, "");
    diags.error(diags.loc(0, 1), *why);
    return std::nullopt;
  }
  diags.set_source(filename, std::string(without_utf8_bom(source)));
  std::optional<ast::Model> ast = parse(diags.source(), 0, diags);
  if (!ast)
    return std::nullopt;
  if (ast->is_module) {
    diags.error(diags.loc(ast->name.range.begin, ast->name.range.end),
                fmt::format("'{}' is a module, not a model: import it into a model with "
                            "'import \"{}\";'",
                            ast->name.name, fs::path(filename).stem().string()));
    return std::nullopt;
  }

  // Imported files follow the model's in the diagnostic engine's buffer, so every range in the
  // merged syntax tree is an offset into one text and messages name the right file.
  ModuleLoader modules(diags, import_path);
  modules.load(*ast, filename);
  if (diags.has_errors())
    return std::nullopt;
  ast::Model merged = modules.merge(std::move(*ast));
  std::optional<ir::Model> model = lower(merged, filename, diags, modules.graph());
  if (model)
    model->imported_files = modules.files();
  return model;
}

std::vector<std::string> imported_files(std::string_view source, const std::string& filename,
                                        const std::vector<std::string>& import_path) {
  DiagnosticEngine diags(filename, std::string(without_utf8_bom(source)));
  std::optional<ast::Model> ast = parse(diags.source(), 0, diags);
  if (!ast)
    return {};
  ModuleLoader modules(diags, import_path);
  modules.load(*ast, filename);
  return modules.files();
}

} // namespace ssm::frontend
