// compile_model: the frontend's entry point (parse the model and the modules it imports, then
// check and lower).
#include "Frontend.h"

#include "Lower.h"
#include "Parser.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
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

// A module holds constants and functions only.
void check_module(const ast::Model& m, DiagnosticEngine& diags) {
  auto reject = [&](ast::Range r, std::string_view what) {
    diags.error(diags.loc(r.begin, r.end),
                fmt::format("module '{}' declares {}; a module can only declare constants and "
                            "functions",
                            m.name.name, what));
  };
  if (!m.imports.empty())
    diags.error(diags.loc(m.imports[0].range.begin, m.imports[0].range.end),
                "not supported yet: a module that imports another module");
  else if (!m.vars.empty())
    reject(m.vars[0].range, "a variable");
  else if (!m.relations.empty())
    reject(m.relations[0].range, "a relation");
  else if (!m.lets.empty())
    reject(m.lets[0].range, "a let binding");
  else if (!m.functionals.empty())
    reject(m.functionals[0].range, "a functional");
}

} // namespace

std::optional<ir::Model> compile_model(std::string_view source, const std::string& filename,
                                       DiagnosticEngine& diags,
                                       const std::vector<std::string>& import_path) {
  diags.set_source(filename, std::string(source));
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
  std::vector<std::string> files;
  std::vector<ast::Model> modules;
  for (const ast::Import& imp : ast->imports) {
    std::vector<fs::path> candidates = import_candidates(imp.name, filename, import_path);
    std::optional<fs::path> path = resolve_import(candidates);
    std::optional<std::string> text = path ? read_text(*path) : std::nullopt;
    if (!text) {
      std::vector<std::string> tried;
      for (const fs::path& c : candidates)
        tried.push_back(c.string());
      diags.error(diags.loc(imp.range.begin, imp.range.end),
                  fmt::format("cannot {} module '{}' (looked for {})", path ? "read" : "find",
                              imp.name, fmt::join(tried, ", ")));
      continue;
    }
    if (std::find(files.begin(), files.end(), path->string()) != files.end())
      continue; // imported twice: once is enough
    files.push_back(path->string());
    std::size_t begin = diags.add_file(path->string(), *text);
    std::optional<ast::Model> module = parse(diags.source(), begin, diags);
    if (!module)
      continue;
    if (!module->is_module) {
      diags.error(diags.loc(module->name.range.begin, module->name.range.end),
                  fmt::format("'{}' is a model; only a module (module NAME {{ ... }}) can be "
                              "imported",
                              path->string()));
      continue;
    }
    check_module(*module, diags);
    modules.push_back(std::move(*module));
  }
  if (diags.has_errors())
    return std::nullopt;

  // Imported constants and functions are declared before the model's own.
  ast::Model merged = std::move(*ast);
  for (auto it = modules.rbegin(); it != modules.rend(); ++it) {
    merged.consts.insert(merged.consts.begin(), it->consts.begin(), it->consts.end());
    merged.fns.insert(merged.fns.begin(), it->fns.begin(), it->fns.end());
  }
  std::optional<ir::Model> model = lower(merged, filename, diags);
  if (model)
    model->imported_files = files;
  return model;
}

std::vector<std::string> imported_files(std::string_view source, const std::string& filename,
                                        const std::vector<std::string>& import_path) {
  DiagnosticEngine diags(filename, std::string(source));
  std::optional<ast::Model> ast = parse(diags.source(), 0, diags);
  std::vector<std::string> files;
  if (!ast)
    return files;
  for (const ast::Import& imp : ast->imports)
    if (auto path = resolve_import(import_candidates(imp.name, filename, import_path)))
      files.push_back(path->string());
  return files;
}

} // namespace ssm::frontend
