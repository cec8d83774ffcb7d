// Constant evaluation of IR nodes: see evaluate.h.
#include "evaluate.h"
#include "builtins.h"

#include <cmath>
#include <stdexcept>
#include <utility>

namespace ssm::ir {

double apply_function(const std::string& fn, double a, double b) {
  const Builtin* f = find_builtin(fn);
  if (!f || !f->scalar)
    throw std::logic_error("unknown function " + fn);
  return f->scalar(a, b);
}

namespace {
// Element i of an operand that may be a broadcast scalar.
double at(const std::vector<double>& v, size_t i) {
  return v.size() == 1 ? v[0] : v[i];
}

template <class F> std::vector<double> elementwise(const Node& node, const auto& args, F f) {
  std::vector<double> out(node.shape.size());
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = args.size() == 1 ? f(at(args[0], i), 0.0) : f(at(args[0], i), at(args[1], i));
  return out;
}
} // namespace

std::vector<double> evaluate(const Node& node, const std::vector<std::vector<double>>& args,
                             const std::vector<Shape>& arg_shapes) {
  switch (node.op) {
  case Op::Const:
    return node.values;
  case Op::Neg:
    return elementwise(node, args, [](double a, double) { return -a; });
  case Op::Add:
    return elementwise(node, args, [](double a, double b) { return a + b; });
  case Op::Sub:
    return elementwise(node, args, [](double a, double b) { return a - b; });
  case Op::Mul:
    return elementwise(node, args, [](double a, double b) { return a * b; });
  case Op::Div:
    return elementwise(node, args, [](double a, double b) { return a / b; });
  case Op::Pow:
    return elementwise(node, args, [](double a, double b) { return std::pow(a, b); });
  case Op::Call: {
    const Builtin* f = find_builtin(node.fn);
    if (!f)
      throw std::logic_error("unknown function " + node.fn);
    if (f->whole)
      return f->whole(args, arg_shapes);
    return elementwise(node, args, f->scalar);
  }
  case Op::MatMul: {
    // [r, k] x [k] or [r, k] x [k, c]
    int r = node.shape.dims[0];
    int c = node.shape.rank() == 2 ? node.shape.dims[1] : 1;
    int k = r == 0 ? 0 : static_cast<int>(args[0].size()) / r;
    std::vector<double> out(r * c, 0.0);
    for (int i = 0; i < r; ++i)
      for (int j = 0; j < c; ++j)
        for (int l = 0; l < k; ++l)
          out[i * c + j] += args[0][i * k + l] * args[1][l * c + j];
    return out;
  }
  case Op::Build: {
    std::vector<double> out;
    for (const auto& a : args)
      out.push_back(a.at(0));
    return out;
  }
  case Op::Index: {
    size_t offset = index_offset(arg_shapes.at(0), node.index);
    return {args[0].begin() + offset, args[0].begin() + offset + node.shape.size()};
  }
  case Op::DynIndex: {
    double i = args[1].at(0);
    int rows = arg_shapes.at(0).dims.at(0);
    size_t size = node.shape.size();
    if (!(i >= 0 && i < rows && i == std::floor(i)))
      return std::vector<double>(size, NAN);
    size_t offset = static_cast<size_t>(i) * size;
    return {args[0].begin() + offset, args[0].begin() + offset + size};
  }
  case Op::Select: {
    std::vector<double> out(node.shape.size());
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = at(args[0], i) != 0 ? at(args[1], i) : at(args[2], i);
    return out;
  }
  case Op::Ode: {
    // Constant operands: a rate that reads neither t nor y is a constant c, and every
    // Runge-Kutta step adds h c: row i is y0 + (t_i - t0) c.
    const size_t n = args[0].size();
    std::vector<double> out;
    for (size_t i = 1; i < node.values.size(); ++i)
      for (size_t c = 0; c < n; ++c)
        out.push_back(args[0][c] + (node.values[i] - node.values[0]) * at(args[1], c));
    return out;
  }
  default:
    throw std::logic_error("cannot evaluate a non-constant node");
  }
}

} // namespace ssm::ir
