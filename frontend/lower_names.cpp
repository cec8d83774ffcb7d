// Names: the symbol table (declare_names), lookups, which module sees which names, and the
// messages for unknown and hidden names; the warning for unused declarations, which needs the
// symbol table (the IR keeps no trace of constants, lets and functions once they are inlined).
#include "lowering.h"
#include "messages.h"

#include <algorithm>
#include <filesystem>

namespace ssm::frontend::lowering {

// Declaration order: imported modules (which follow the model's file in the diagnostic
// engine's buffer), each after the modules it imports, come before the model's own
// declarations.
std::size_t Lowering::order(std::size_t pos) const {
  std::size_t size = diags_.source().size() + 1;
  if (!files_.order.empty()) {
    auto rank = std::find(files_.order.begin(), files_.order.end(), diags_.file_of(pos));
    return static_cast<std::size_t>(rank - files_.order.begin()) * size + pos;
  }
  std::size_t main_end = diags_.main_file_end();
  return pos >= main_end ? pos - main_end : pos + size;
}

// Whether code at `from` can use a name declared at `decl`: a module sees its own names and
// those of the modules it imports (directly or through other modules), not the model's or
// those of modules it does not import; the model sees everything.
bool Lowering::visible(Range from, Range decl) const {
  if (files_.sees.empty())
    return true;
  int f = diags_.file_of(from.begin), g = diags_.file_of(decl.begin);
  return f < static_cast<int>(files_.sees.size()) && g < static_cast<int>(files_.sees[f].size()) &&
         files_.sees[f][g];
}

// A name that is declared, but in a file that `r`'s file does not import: says which import is
// missing. False if the name is not declared at all.
bool Lowering::report_hidden(Range r, const std::string& name) {
  auto it = symbols_.find(name);
  if (it == symbols_.end() || visible(r, it->second.range))
    return false;
  int here = diags_.file_of(r.begin), there = diags_.file_of(it->second.range.begin);
  std::string file = diags_.file_name(there);
  if (there == 0)
    error(r, fmt::format(msg::name_declared_by_importing_model, name, file));
  else
    error(r, fmt::format(msg::name_declared_in_unimported_module, name, file,
                         diags_.file_name(here), std::filesystem::path(file).stem().string()));
  return true;
}

std::vector<std::string> Lowering::visible_names(Range from) const {
  std::vector<std::string> names = {"t", "pi", "inf"};
  for (const auto& [name, sym] : symbols_)
    if (visible(from, sym.range))
      names.push_back(name);
  return names;
}

void Lowering::unknown_name(Range r, const std::string& name) {
  if (report_hidden(r, name))
    return;
  std::string message = fmt::format(msg::unknown_name, name);
  if (auto guess = closest_name(name, visible_names(r)))
    message += fmt::format(msg::did_you_mean, *guess);
  error(r, message);
}

std::string Lowering::kind_name(Symbol::Kind kind) {
  switch (kind) {
  case Symbol::Kind::Const:
    return "constant";
  case Symbol::Kind::Param:
    return "parameter";
  case Symbol::Kind::State:
    return "state";
  case Symbol::Kind::Obs:
    return "observation";
  case Symbol::Kind::Data:
    return "data item";
  case Symbol::Kind::Input:
    return "input";
  case Symbol::Kind::Let:
    return "let binding";
  case Symbol::Kind::Fn:
    return "function";
  case Symbol::Kind::Functional:
    return "functional";
  case Symbol::Kind::Latent:
    return "latent variable";
  case Symbol::Kind::Net:
    return "network";
  }
  return "?";
}

std::string Lowering::a_kind(Symbol::Kind kind) {
  std::string name = kind_name(kind);
  return (std::string_view("aeiou").find(name[0]) != std::string_view::npos ? "an " : "a ") + name;
}

void Lowering::declare_names() {
  struct Decl {
    const ast::Ident* name;
    Symbol::Kind kind;
  };
  std::vector<Decl> decls;
  for (const ast::ConstDecl& c : ast_.consts)
    decls.push_back({&c.name, Symbol::Kind::Const});
  for (const ast::VarDecl& v : ast_.vars)
    decls.push_back({&v.name, var_symbol_kind(v.kind)});
  for (const ast::LetDecl& l : ast_.lets)
    decls.push_back({&l.name, Symbol::Kind::Let});
  for (const ast::FnDecl& f : ast_.fns)
    decls.push_back({&f.name, Symbol::Kind::Fn});
  for (const ast::FunctionalDecl& f : ast_.functionals)
    decls.push_back({&f.name, Symbol::Kind::Functional});
  for (const ast::NetDecl& n : ast_.nets)
    decls.push_back({&n.name, Symbol::Kind::Net});
  std::sort(decls.begin(), decls.end(), [this](const Decl& a, const Decl& b) {
    return order(a.name->range.begin) < order(b.name->range.begin);
  });
  for (const Decl& d : decls) {
    const std::string& name = d.name->name;
    if (name == "t") {
      error(d.name->range, msg::t_declared);
      continue;
    }
    if (name == "pi" || name == "inf") {
      error(d.name->range, fmt::format(msg::builtin_constant_declared, name));
      continue;
    }
    if (name == "n" && model_.kind == ir::ModelKind::Plate) {
      error(d.name->range, msg::n_declared_in_plate_model);
      continue;
    }
    if (auto it = symbols_.find(name); it != symbols_.end()) {
      error(d.name->range, fmt::format(msg::redeclaration, name));
      note(it->second.range, fmt::format(msg::first_declared_here, name));
      continue;
    }
    Symbol sym{d.kind, -1, d.name->range, true};
    switch (d.kind) {
    case Symbol::Kind::Const:
      break; // index assigned when defined
    case Symbol::Kind::Param:
      sym.index = static_cast<int>(model_.params.size());
      model_.params.push_back({name, ir::ParamType::Real, {}, std::nullopt, loc(d.name->range)});
      break;
    case Symbol::Kind::State:
      sym.index = static_cast<int>(model_.states.size());
      model_.states.push_back({name, {}, loc(d.name->range)});
      break;
    case Symbol::Kind::Obs:
      sym.index = static_cast<int>(model_.obs.size());
      model_.obs.push_back({name, {}, loc(d.name->range)});
      break;
    case Symbol::Kind::Data:
      sym.index = static_cast<int>(model_.data.size());
      model_.data.push_back({name, {}, loc(d.name->range)});
      break;
    case Symbol::Kind::Input:
      sym.index = static_cast<int>(model_.inputs.size());
      model_.inputs.push_back({name, {}, loc(d.name->range)});
      break;
    case Symbol::Kind::Latent:
      sym.index = static_cast<int>(model_.latents.size());
      model_.latents.push_back({name, {}, loc(d.name->range)});
      break;
    case Symbol::Kind::Let:
      sym.index = index_in(ast_.lets, d.name);
      break;
    case Symbol::Kind::Fn:
      sym.index = index_in(ast_.fns, d.name);
      break;
    case Symbol::Kind::Functional:
      sym.index = index_in(ast_.functionals, d.name);
      break;
    case Symbol::Kind::Net:
      break; // index assigned when defined
    }
    symbols_.emplace(name, sym);
  }
}

Symbol::Kind Lowering::var_symbol_kind(ast::VarDecl::Kind kind) {
  switch (kind) {
  case ast::VarDecl::Kind::Param:
    return Symbol::Kind::Param;
  case ast::VarDecl::Kind::State:
    return Symbol::Kind::State;
  case ast::VarDecl::Kind::Obs:
    return Symbol::Kind::Obs;
  case ast::VarDecl::Kind::Data:
    return Symbol::Kind::Data;
  case ast::VarDecl::Kind::Input:
    return Symbol::Kind::Input;
  case ast::VarDecl::Kind::Latent:
    return Symbol::Kind::Latent;
  }
  return Symbol::Kind::Param;
}

// The symbol a declaration introduced, or null if the declaration was rejected as a duplicate.
Symbol* Lowering::declared(const ast::Ident& name) {
  auto it = symbols_.find(name.name);
  if (it == symbols_.end() || it->second.range.begin != name.range.begin)
    return nullptr;
  return &it->second;
}

Symbol* Lowering::lookup(const std::string& name) {
  auto it = symbols_.find(name);
  return it == symbols_.end() ? nullptr : &it->second;
}

// The symbol `name` refers to where it is used (at `from`): null when it is not declared, or
// declared in a module that from's file does not import.
Symbol* Lowering::lookup(const std::string& name, Range from) {
  Symbol* sym = lookup(name);
  return sym && visible(from, sym->range) ? sym : nullptr;
}

void Lowering::warn_unused() {
  std::vector<std::pair<std::string, const Symbol*>> unused;
  for (const auto& [name, sym] : symbols_) {
    bool reportable = sym.kind == Symbol::Kind::Param || sym.kind == Symbol::Kind::Const ||
                      sym.kind == Symbol::Kind::Let || sym.kind == Symbol::Kind::Fn ||
                      sym.kind == Symbol::Kind::Net || sym.kind == Symbol::Kind::Data ||
                      sym.kind == Symbol::Kind::Input;
    if (reportable && sym.valid && !sym.used && !imported(sym.range))
      unused.emplace_back(name, &sym);
  }
  std::sort(unused.begin(), unused.end(), [](const auto& a, const auto& b) {
    return a.second->range.begin < b.second->range.begin;
  });
  for (const auto& [name, sym] : unused)
    diags_.warning(loc(sym->range),
                   fmt::format(msg::unused_declaration, kind_name(sym->kind), name));
}

} // namespace ssm::frontend::lowering
