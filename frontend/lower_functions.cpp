// User functions (`fn`): each is checked once where it is declared, then inlined at every call.
#include "limits.h"
#include "lowering.h"
#include "messages.h"

#include <fmt/ranges.h>

#include <algorithm>

namespace ssm::frontend::lowering {

// Checks each function once, where it is declared: its types, and its body lowered on
// placeholder arguments. A call then only has to check its arguments.
void Lowering::define_fn(const ast::FnDecl& f) {
  Symbol* sym = declared(f.name);
  FnSignature sig;
  bool ok = true;
  std::set<std::string> seen;
  for (const ast::FnParam& p : f.params) {
    if (!seen.insert(p.name.name).second) {
      error(p.name.range, fmt::format(msg::fn_duplicate_parameter, f.name.name, p.name.name));
      ok = false;
    }
    if (p.name.name == "t" || p.name.name == "pi" || p.name.name == "inf") {
      error(p.name.range,
            fmt::format(msg::fn_parameter_reserved, p.name.name,
                        p.name.name == "t" ? "the time index" : "a built-in constant"));
      ok = false;
    }
    std::optional<ir::Shape> shape = fn_type_shape(p.type);
    ok = ok && shape.has_value();
    sig.params.push_back(shape.value_or(ir::Shape::scalar()));
  }
  std::optional<ir::Shape> result = fn_type_shape(f.result);
  ok = ok && result.has_value();
  sig.result = result.value_or(ir::Shape::scalar());
  if (ok) {
    ir::Block scratch;
    // Any block would do: a body cannot read what differs between blocks (outside_function).
    Scope s(scratch, RelationScope(ir::BlockKind::Transition, ""));
    std::vector<int> args;
    for (const ir::Shape& shape : sig.params)
      args.push_back(emit_const(s, shape, std::vector<double>(shape.size(), 0.0), f.range));
    ok = inline_body(f, sig, args, s).has_value();
    sig.body_operations = scratch.nodes.size();
  }
  if (!sym)
    return;
  sym->valid = ok;
  fn_signatures_[sym->index] = sig;
}

std::optional<ir::Shape> Lowering::fn_type_shape(const ast::TypeSpec& t) {
  if (!t.bounds.empty() || t.kind == ast::TypeSpec::Kind::CovMatrix ||
      t.kind == ast::TypeSpec::Kind::Simplex || t.kind == ast::TypeSpec::Kind::Sequence) {
    std::string what = !t.bounds.empty()                          ? "bounds"
                       : t.kind == ast::TypeSpec::Kind::CovMatrix ? "cov_matrix"
                       : t.kind == ast::TypeSpec::Kind::Simplex   ? "simplex"
                                                                  : "sequence";
    error(t.range, fmt::format(msg::fn_type_not_plain, what, what == "bounds" ? "are" : "is"));
    return std::nullopt;
  }
  return type_shape(t);
}

// The body of f with its parameters bound to the nodes `args` of the current block.
std::optional<int> Lowering::inline_body(const ast::FnDecl& f, const FnSignature& sig,
                                         const std::vector<int>& args, Scope& s) {
  FunctionScope* outer = s.fn;
  FunctionScope scope{&f, {}}; // the body sees its own names only
  s.fn = &scope;
  for (std::size_t k = 0; k < f.params.size(); ++k)
    scope.locals[f.params[k].name.name] = args[k];
  bool ok = true;
  for (const ast::LetDecl& let : f.lets) {
    const std::string& n = let.name.name;
    if (n == "t" || n == "pi" || n == "inf") {
      error(let.name.range, fmt::format(msg::fn_let_reserved, n,
                                        n == "t" ? "the time index" : "a built-in constant"));
      ok = false;
      continue;
    }
    if (scope.locals.count(let.name.name)) {
      bool param = std::any_of(f.params.begin(), f.params.end(),
                               [&](const ast::FnParam& p) { return p.name.name == let.name.name; });
      error(let.name.range, fmt::format(msg::fn_let_redeclared, let.name.name,
                                        param ? "a parameter" : "a let", f.name.name));
      ok = false;
      continue;
    }
    std::optional<int> id = lower(*let.value, s);
    if (id)
      scope.locals[let.name.name] = *id;
    ok = ok && id.has_value();
  }
  std::optional<int> body = ok ? lower(*f.body, s) : std::nullopt;
  s.fn = outer;
  if (body && !(shape_of(s, *body) == sig.result)) {
    error(f.body->range, fmt::format(msg::fn_result_shape_mismatch, f.name.name, sig.result.str(),
                                     shape_of(s, *body).str()));
    return std::nullopt;
  }
  return body;
}

bool Lowering::check_call_order(const ast::FnDecl& f, Range name, const Scope& s) {
  if (!s.fn || order(f.name.range.begin) < order(s.fn->fn->name.range.begin))
    return true;
  if (&f == s.fn->fn)
    error(name, fmt::format(msg::fn_recursion, f.name.name));
  else
    error(name, fmt::format(msg::fn_calls_later_fn, f.name.name, s.fn->fn->name.name));
  return false;
}

std::optional<int> Lowering::expand_call(const ast::FnDecl& f, const FnSignature& sig,
                                         const std::vector<int>& args, Range use, Scope& s) {
  // Every call copies the body, and a body's calls copy theirs: stop before that explodes.
  if (s.block->nodes.size() + sig.body_operations > kMaxBlockOperations) {
    error(use, fmt::format(msg::inlining_too_large, f.name.name, sig.body_operations,
                           s.block->nodes.size(), kMaxBlockOperations));
    return std::nullopt;
  }
  std::optional<Range> outer_site = s.call_site;
  if (!outer_site && imported(f.range))
    s.call_site = use;
  std::optional<int> result = expanding(s, fmt::format("function '{}'", f.name.name), use,
                                        [&] { return inline_body(f, sig, args, s); });
  s.call_site = outer_site;
  return result;
}

std::optional<int> Lowering::call_function(const Expr& e, const Symbol& sym, Scope& s) {
  const ast::FnDecl& f = ast_.fns[sym.index];
  if (!check_call_order(f, e.name_range, s))
    return std::nullopt;
  std::vector<std::optional<int>> args;
  for (const ast::ExprPtr& a : e.args)
    args.push_back(lower(*a, s));
  auto it = fn_signatures_.find(sym.index);
  if (!sym.valid || it == fn_signatures_.end())
    return std::nullopt;
  const FnSignature& sig = it->second;
  if (args.size() != sig.params.size()) {
    std::vector<std::string> names;
    for (const ast::FnParam& p : f.params)
      names.push_back(p.name.name);
    error(e.range, fmt::format(msg::fn_argument_count, f.name.name, fmt::join(names, ", "),
                               plural(sig.params.size(), "argument"),
                               args.size() == 1 ? "1 was" : fmt::format("{} were", args.size())));
    return std::nullopt;
  }
  bool ok = true;
  std::vector<int> ids;
  for (std::size_t k = 0; k < args.size(); ++k) {
    if (!args[k]) {
      ok = false;
      continue;
    }
    if (!(shape_of(s, *args[k]) == sig.params[k])) {
      error(e.args[k]->range,
            fmt::format(msg::fn_argument_shape_mismatch, f.params[k].name.name, f.name.name,
                        sig.params[k].str(), shape_of(s, *args[k]).str()));
      ok = false;
    }
    ids.push_back(args[k].value_or(-1));
  }
  if (!ok)
    return std::nullopt;
  return expand_call(f, sig, ids, e.range, s);
}

} // namespace ssm::frontend::lowering
