// Calls of built-in functions (exp, log, dot, zeros...): the function's name and arity, and the
// shapes of its arguments. A call of a user function goes on to lower_functions.cpp.
#include "lowering.h"

#include "ir/builtins.h"

#include <algorithm>

namespace ssm::frontend::lowering {

namespace {

// Built-ins that make constants of a given size.
const std::set<std::string> constructor_functions = {"zeros", "ones", "eye"};

std::vector<std::string> builtin_function_names() {
  std::vector<std::string> names(constructor_functions.begin(), constructor_functions.end());
  names.emplace_back("sum");
  names.emplace_back("ode_rk4");
  for (const ir::Builtin& f : ir::all_builtins())
    if (ir::find_callable(f.name))
      names.emplace_back(f.name);
  return names;
}

} // namespace

std::optional<int> Lowering::lower_call(const Expr& e, Scope& s) {
  const std::string& fn = e.name;
  std::size_t n = e.args.size();
  auto arity = [&](std::size_t want, std::string_view params) {
    if (n == want)
      return true;
    error(e.range, fmt::format(msg::fn_argument_count, fn, params, plural(want, "argument"),
                               n == 1 ? "1 was" : fmt::format("{} were", n)));
    return false;
  };
  if (Symbol* sym = lookup(fn, e.name_range);
      sym && (sym->kind == Symbol::Kind::Fn || sym->kind == Symbol::Kind::Net)) {
    sym->used = true;
    return sym->kind == Symbol::Kind::Fn ? call_function(e, *sym, s) : call_net(e, *sym, s);
  }
  if (fn == "ode_rk4")
    return lower_ode(e, s);
  const ir::Builtin* info = ir::find_callable(fn);
  if (constructor_functions.count(fn)) {
    // zeros(n), ones(n): vectors; zeros(r, c), ones(r, c): matrices; eye(n).
    if (fn == "eye" && !arity(1, "n"))
      return std::nullopt;
    if (n != 1 && n != 2) {
      error(e.range, fmt::format(msg::constructor_argument_count, fn, n));
      return std::nullopt;
    }
    std::vector<int> dims;
    for (const ast::ExprPtr& a : e.args) {
      std::optional<int> dim = eval_dimension(*a, fmt::format("the size given to {}", fn));
      if (!dim)
        return std::nullopt;
      dims.push_back(*dim);
    }
    const bool matrix = n == 2 || fn == "eye";
    const int rows = dims[0], cols = matrix ? dims.back() : 1;
    const long elements = static_cast<long>(rows) * cols;
    if (elements > max_elements) {
      error(e.range, fmt::format(msg::type_too_large, elements, max_elements));
      return std::nullopt;
    }
    std::vector<double> values(static_cast<std::size_t>(elements), fn == "ones" ? 1.0 : 0.0);
    if (fn == "eye")
      for (int i = 0; i < rows; ++i)
        values[static_cast<std::size_t>(i) * cols + i] = 1.0;
    return emit_const(s, matrix ? ir::Shape::matrix(rows, cols) : ir::Shape::vector(rows),
                      std::move(values), e.range);
  }
  if (fn == "sum" && !info) {
    if (!arity(1, "x")) {
      for (const ast::ExprPtr& a : e.args)
        lower(*a, s);
      return std::nullopt;
    }
    return lower_sum(*e.args[0], e.range, s);
  }
  if (!info) {
    if (const ir::DistInfo* d = ir::find_dist(fn); d && !d->internal)
      error(e.name_range, fmt::format(msg::distribution_called, fn));
    else if (report_hidden(e.name_range, fn)) {
      // declared in a module this file does not import: said so
    } else if (Symbol* sym = lookup(fn, e.name_range))
      error(e.name_range, fmt::format(msg::not_a_function, fn, a_kind(sym->kind)));
    else if (auto guess = closest_name(fn, function_names(e.name_range)))
      error(e.name_range, fmt::format(msg::unknown_function_did_you_mean, fn, *guess));
    else
      error(e.name_range,
            fmt::format(msg::unknown_function, fn, fmt::join(function_names(e.name_range), ", ")));
    for (const ast::ExprPtr& a : e.args)
      lower(*a, s);
    return std::nullopt;
  }
  std::vector<std::optional<int>> args;
  for (const ast::ExprPtr& a : e.args)
    args.push_back(lower(*a, s));
  if (!arity(info->arity, info->params))
    return std::nullopt;
  if (std::any_of(args.begin(), args.end(), [](const auto& a) { return !a.has_value(); }))
    return std::nullopt;
  ir::Node node;
  node.op = ir::Op::Call;
  node.fn = fn;
  std::vector<ir::Shape> shapes;
  for (const auto& a : args) {
    node.args.push_back(*a);
    shapes.push_back(shape_of(s, *a));
  }
  if (auto shape = ir::builtin_result_shape(*info, shapes)) {
    node.shape = *shape;
    return emit(s, std::move(node), e.range);
  }
  // The text of call-shape errors lives with the table (ir::builtin_shape_error).
  error(e.range, ir::builtin_shape_error(*info, shapes));
  return std::nullopt;
}

// sum(x): the sum of x's elements, as dot products with vectors of ones, which every analysis,
// derivative and kernel already handles: x for a real, dot(x, ones(n)) for a vector[n], and
// dot(A * ones(c), ones(r)) for a matrix[r, c].
std::optional<int> Lowering::lower_sum(const Expr& arg, Range range, Scope& s) {
  const std::optional<int> x = lower(arg, s);
  if (!x)
    return std::nullopt;
  const ir::Shape shape = shape_of(s, *x);
  if (shape.is_scalar())
    return x;
  if (shape.size() == 0) // no elements: an empty sum
    return emit_const(s, ir::Shape::scalar(), {0.0}, range);
  auto ones = [&](int n) {
    return emit_const(s, ir::Shape::vector(n), std::vector<double>(n, 1.0), range);
  };
  int v = *x;
  if (shape.dims.size() == 2)
    v = emit_op(s, ir::Op::MatMul, ir::Shape::vector(shape.dims[0]), {v, ones(shape.dims[1])},
                range);
  return emit_call(s, "dot", ir::Shape::scalar(), {v, ones(shape_of(s, v).dims[0])}, range);
}

std::vector<std::string> Lowering::function_names(Range from) const {
  std::vector<std::string> names = builtin_function_names();
  for (const ast::FnDecl& f : ast_.fns)
    if (visible(from, f.name.range))
      names.push_back(f.name.name);
  return names;
}

} // namespace ssm::frontend::lowering
