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
  const ir::Builtin* info = ir::find_callable(fn);
  if (constructor_functions.count(fn)) {
    // zeros(n), ones(n): vectors; zeros(r, c), ones(r, c): matrices; eye(n).
    if (fn == "eye" && !arity(1, "n"))
      return std::nullopt;
    if (n != 1 && n != 2) {
      error(e.range, fmt::format("{}(n) and {}(rows, columns) take 1 or 2 arguments, but {} given",
                                 fn, fn, n == 0 ? "0 were" : fmt::format("{} were", n)));
      return std::nullopt;
    }
    std::vector<int> dims;
    for (const ast::ExprPtr& a : e.args) {
      std::optional<int> dim = eval_dimension(*a, fmt::format("the size given to {}", fn));
      if (!dim)
        return std::nullopt;
      dims.push_back(*dim);
    }
    const int size = dims[0];
    const long elements = dims.size() == 2 || fn == "eye" ? static_cast<long>(dims[0]) * dims.back()
                                                          : static_cast<long>(dims[0]);
    if (elements > max_elements) {
      error(e.range, fmt::format(msg::type_too_large, elements, max_elements));
      return std::nullopt;
    }
    if (dims.size() == 2)
      return emit_const(s, ir::Shape::matrix(dims[0], dims[1]),
                        std::vector<double>(static_cast<std::size_t>(dims[0]) * dims[1],
                                            fn == "ones" ? 1.0 : 0.0),
                        e.range);
    if (fn != "eye")
      return emit_const(s, ir::Shape::vector(size),
                        std::vector<double>(size, fn == "ones" ? 1.0 : 0.0), e.range);
    std::vector<double> values(static_cast<std::size_t>(size) * size, 0.0);
    for (int i = 0; i < size; ++i)
      values[static_cast<std::size_t>(i) * size + i] = 1.0;
    return emit_const(s, ir::Shape::matrix(size, size), std::move(values), e.range);
  }
  if (fn == "sum" && !info)
    return lower_sum(e, s);
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
std::optional<int> Lowering::lower_sum(const Expr& e, Scope& s) {
  if (e.args.size() != 1) {
    error(e.range,
          fmt::format(msg::fn_argument_count, "sum", "x", plural(1, "argument"),
                      e.args.size() == 0 ? "0 were" : fmt::format("{} were", e.args.size())));
    for (const ast::ExprPtr& a : e.args)
      lower(*a, s);
    return std::nullopt;
  }
  const std::optional<int> x = lower(*e.args[0], s);
  if (!x)
    return std::nullopt;
  const ir::Shape shape = shape_of(s, *x);
  if (shape.is_scalar())
    return x;
  if (shape.size() == 0) // no elements: an empty sum
    return emit_const(s, ir::Shape::scalar(), {0.0}, e.range);
  auto ones = [&](int n) {
    return emit_const(s, ir::Shape::vector(n), std::vector<double>(n, 1.0), e.range);
  };
  int v = *x;
  if (shape.dims.size() == 2)
    v = emit_op(s, ir::Op::MatMul, ir::Shape::vector(shape.dims[0]), {v, ones(shape.dims[1])},
                e.range);
  return emit_call(s, "dot", ir::Shape::scalar(), {v, ones(shape_of(s, v).dims[0])}, e.range);
}

std::vector<std::string> Lowering::function_names(Range from) const {
  std::vector<std::string> names = builtin_function_names();
  for (const ast::FnDecl& f : ast_.fns)
    if (visible(from, f.name.range))
      names.push_back(f.name.name);
  return names;
}

} // namespace ssm::frontend::lowering
