// Constant evaluation: an expression that must be known at compile time (a constant's value, a
// dimension, an index, a bound, a prior's argument) is lowered into a scratch block and evaluated.
#include "lowering.h"
#include "messages.h"

#include "ir/evaluate.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace ssm::frontend::lowering {

std::optional<ConstValue> Lowering::eval_const(const Expr& e, std::string what,
                                               const ast::ConstDecl* defining) {
  ir::Block scratch;
  Scope s(scratch, ConstantScope{std::move(what), defining});
  std::optional<int> id = lower(e, s);
  if (!id)
    return std::nullopt;
  std::optional<std::vector<double>> value = constant_value(scratch, *id);
  if (!value) { // a constant scope lowers only constants, so this is a safety net
    error(e.range, fmt::format(msg::not_a_constant_expression, s.constant()->what));
    return std::nullopt;
  }
  return ConstValue{scratch.nodes[*id].shape, std::move(*value)};
}

// A constant that must be a single integer, as a dimension, index or time index.
std::optional<long> Lowering::eval_int(const Expr& e, const std::string& what) {
  std::optional<ConstValue> v = eval_const(e, what);
  if (!v)
    return std::nullopt;
  if (!v->shape.is_scalar()) {
    error(e.range, fmt::format(msg::not_a_single_integer, what, v->shape.str()));
    return std::nullopt;
  }
  double x = v->values[0];
  if (!std::isfinite(x) || x != std::floor(x) || std::fabs(x) > 1e15) {
    error(e.range, fmt::format(msg::not_an_integer, what, x));
    return std::nullopt;
  }
  return static_cast<long>(x);
}

std::optional<int> Lowering::eval_dimension(const Expr& e, const std::string& what) {
  std::optional<long> n = eval_int(e, what);
  if (!n)
    return std::nullopt;
  if (*n < 0) {
    error(e.range, fmt::format(msg::negative_integer, what, *n));
    return std::nullopt;
  }
  if (*n > max_dimension) {
    error(e.range, fmt::format(msg::dimension_too_large, what, *n, max_dimension));
    return std::nullopt;
  }
  return static_cast<int>(*n);
}

std::optional<double> Lowering::eval_real(const Expr& e, const std::string& what) {
  std::optional<ConstValue> v = eval_const(e, what);
  if (!v)
    return std::nullopt;
  if (!v->shape.is_scalar() || std::isnan(v->values[0])) {
    error(e.range,
          fmt::format(msg::not_a_real_number, what, v->shape.is_scalar() ? "NaN" : v->shape.str()));
    return std::nullopt;
  }
  return v->values[0];
}

void Lowering::define_const(const ast::ConstDecl& c) {
  Symbol* sym = declared(c.name);
  defining_const_ = &c;
  std::optional<ConstValue> v =
      eval_const(*c.value, fmt::format(msg::what_constant_value, c.name.name), &c);
  defining_const_ = nullptr;
  if (!sym)
    return;
  if (!v) {
    sym->valid = false;
    return;
  }
  sym->index = static_cast<int>(consts_.size());
  consts_.push_back(*v);
  model_.consts.push_back({c.name.name, v->shape, v->values, loc(c.name.range)});
}

// The value of a node of `block` when it reads nothing but constants. The walk visits only the
// node's own operands and stops at the first that is not constant, so that checking every
// divisor of a large block stays linear.
std::optional<std::vector<double>> Lowering::constant_value(const ir::Block& block, int id) {
  std::unordered_map<int, std::vector<double>> values;
  std::vector<std::pair<int, bool>> stack = {{id, false}}; // (node, operands done)
  while (!stack.empty()) {
    const auto [i, operands_done] = stack.back();
    stack.pop_back();
    if (values.count(i))
      continue;
    const ir::Node& n = block.nodes[i];
    if (n.op == ir::Op::Param || n.op == ir::Op::State || n.op == ir::Op::Obs ||
        n.op == ir::Op::Time || n.op == ir::Op::Data || n.op == ir::Op::Input ||
        n.op == ir::Op::Latent || n.op == ir::Op::Net || n.op == ir::Op::OdeTime ||
        n.op == ir::Op::OdeState)
      return std::nullopt;
    if (!operands_done) {
      stack.emplace_back(i, true);
      for (int a : n.args)
        if (!values.count(a))
          stack.emplace_back(a, false);
      continue;
    }
    std::vector<std::vector<double>> args;
    std::vector<ir::Shape> shapes;
    for (int a : n.args) {
      args.push_back(values.at(a));
      shapes.push_back(block.nodes[a].shape);
    }
    values[i] = ir::evaluate(n, args, shapes);
  }
  return values.at(id);
}

// Whether an expression's value is known when the model is compiled.
bool Lowering::is_constant(const Expr& e, const Scope& s) const {
  switch (e.kind) {
  case EKind::Number:
    return true;
  case EKind::Name: {
    if (s.local(e.name))
      return false;
    if (e.name == "pi" || e.name == "inf")
      return true;
    auto it = symbols_.find(e.name);
    return it != symbols_.end() && it->second.kind == Symbol::Kind::Const;
  }
  case EKind::Call:
    if (auto it = symbols_.find(e.name); it != symbols_.end())
      return false; // a user function: not folded here
    [[fallthrough]];
  default:
    return std::all_of(e.args.begin(), e.args.end(),
                       [&](const ast::ExprPtr& a) { return is_constant(*a, s); });
  }
}

} // namespace ssm::frontend::lowering
