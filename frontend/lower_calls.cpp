// Calls of built-in functions (exp, log, dot, zeros...): the function's name and arity, and the
// shapes of its arguments. A call of a user function goes on to lower_functions.cpp.
#include "lowering.h"

#include <algorithm>

namespace ssm::frontend::lowering {

namespace {

// Functions that are only reached through operators (a < b, a && b, ...), not by name.
const std::set<std::string> operator_functions = {"lt", "le",  "gt", "ge", "eq",
                                                  "ne", "and", "or", "not"};
// Built-ins that make constants of a given size.
const std::set<std::string> constructor_functions = {"zeros", "ones", "eye"};

std::vector<std::string> builtin_function_names() {
  std::vector<std::string> names(constructor_functions.begin(), constructor_functions.end());
  for (const ir::FunctionInfo& f : ir::all_functions())
    if (!operator_functions.count(std::string(f.name)))
      names.emplace_back(f.name);
  return names;
}

} // namespace

std::optional<int> Lowering::lower_call(const Expr& e, Scope& s) {
  const std::string& fn = e.name;
  std::size_t n = e.args.size();
  auto arity = [&](std::size_t want, std::string_view sig) {
    if (n == want)
      return true;
    error(e.range, fmt::format("{} takes {}, but {} given", sig, plural(want, "argument"),
                               n == 1 ? "1 was" : fmt::format("{} were", n)));
    return false;
  };
  if (Symbol* sym = lookup(fn, e.name_range); sym && sym->kind == Symbol::Kind::Fn) {
    sym->used = true;
    return call_function(e, *sym, s);
  }
  const ir::FunctionInfo* info = operator_functions.count(fn) ? nullptr : ir::find_function(fn);
  bool unary = info && info->arity == 1;
  bool binary = info && info->arity == 2;
  if (constructor_functions.count(fn)) {
    if (!arity(1, fn + "(n)"))
      return std::nullopt;
    std::optional<int> size = eval_dimension(*e.args[0], fmt::format("the size given to {}", fn));
    if (!size)
      return std::nullopt;
    if (fn != "eye")
      return emit_const(s, ir::Shape::vector(*size),
                        std::vector<double>(*size, fn == "ones" ? 1.0 : 0.0), e.range);
    std::vector<double> values(static_cast<std::size_t>(*size) * *size, 0.0);
    for (int i = 0; i < *size; ++i)
      values[static_cast<std::size_t>(i) * *size + i] = 1.0;
    return emit_const(s, ir::Shape::matrix(*size, *size), std::move(values), e.range);
  }
  if (!unary && !binary) {
    if (const ir::DistInfo* d = ir::find_dist(fn); d && !d->internal)
      error(e.name_range, fmt::format("'{}' is a distribution, not a function; distributions "
                                      "appear only after '~'",
                                      fn));
    else if (report_hidden(e.name_range, fn)) {
      // declared in a module this file does not import: said so
    } else if (Symbol* sym = lookup(fn, e.name_range))
      error(e.name_range, fmt::format("'{}' is {}, not a function", fn, a_kind(sym->kind)));
    else if (auto guess = closest_name(fn, function_names(e.name_range)))
      error(e.name_range, fmt::format("unknown function '{}'; did you mean '{}'?", fn, *guess));
    else
      error(e.name_range, fmt::format("unknown function '{}'", fn));
    for (const ast::ExprPtr& a : e.args)
      lower(*a, s);
    return std::nullopt;
  }
  std::vector<std::optional<int>> args;
  for (const ast::ExprPtr& a : e.args)
    args.push_back(lower(*a, s));
  if (!arity(unary ? 1 : 2, unary ? fn + "(x)" : fn + "(a, b)"))
    return std::nullopt;
  if (std::any_of(args.begin(), args.end(), [](const auto& a) { return !a.has_value(); }))
    return std::nullopt;
  ir::Node node;
  node.op = ir::Op::Call;
  node.fn = fn;
  for (const auto& a : args)
    node.args.push_back(*a);
  if (unary) {
    node.shape = shape_of(s, *args[0]);
    return emit(s, std::move(node), e.range);
  }
  const ir::Shape sa = shape_of(s, *args[0]);
  const ir::Shape sb = shape_of(s, *args[1]);
  if (fn == "dot") {
    if (sa.rank() != 1 || !(sa == sb)) {
      error(e.range, fmt::format("dot(a, b) needs two vectors of the same length, but got {} "
                                 "and {}",
                                 sa.str(), sb.str()));
      return std::nullopt;
    }
    node.shape = ir::Shape::scalar();
    return emit(s, std::move(node), e.range);
  }
  if (!(sa == sb) && !sa.is_scalar() && !sb.is_scalar()) {
    error(e.range, fmt::format("shape mismatch in {}(): {} and {} (the arguments must have the "
                               "same shape, or one must be real)",
                               fn, sa.str(), sb.str()));
    return std::nullopt;
  }
  node.shape = sa.is_scalar() ? sb : sa;
  return emit(s, std::move(node), e.range);
}

std::vector<std::string> Lowering::function_names(Range from) const {
  std::vector<std::string> names = builtin_function_names();
  for (const ast::FnDecl& f : ast_.fns)
    if (visible(from, f.name.range))
      names.push_back(f.name.name);
  return names;
}

} // namespace ssm::frontend::lowering
