// Constant evaluation of IR nodes: see evaluate.h.
#include "evaluate.h"
#include "kernel/distributions.h"

#include <boost/math/special_functions/digamma.hpp>

#include <cmath>
#include <stdexcept>
#include <utility>

namespace ssm::ir {

double apply_function(const std::string& fn, double a, double b) {
  if (fn == "exp")
    return std::exp(a);
  if (fn == "log")
    return std::log(a);
  if (fn == "sqrt")
    return std::sqrt(a);
  if (fn == "abs")
    return std::fabs(a);
  if (fn == "sin")
    return std::sin(a);
  if (fn == "cos")
    return std::cos(a);
  if (fn == "tanh")
    return std::tanh(a);
  if (fn == "logistic")
    return 1 / (1 + std::exp(-a));
  if (fn == "lgamma") // analysis results only (density bounds); not in the language
    return std::lgamma(a);
  if (fn == "digamma") // analysis results only (derivatives of lgamma); not in the language
    return boost::math::digamma(a);
  if (fn == "log_normal_mass") // analysis results only (truncated normal); not in the language
    return ssm::detail::log_normal_mass(a, b);
  if (fn == "pow")
    return std::pow(a, b);
  if (fn == "min")
    return std::fmin(a, b);
  if (fn == "max")
    return std::fmax(a, b);
  if (fn == "log1p")
    return std::log1p(a);
  if (fn == "expm1")
    return std::expm1(a);
  if (fn == "floor")
    return std::floor(a);
  if (fn == "ceil")
    return std::ceil(a);
  if (fn == "round")
    return std::round(a);
  if (fn == "mod") // floored, so the result has the sign of b, as integer arithmetic expects
    return a - b * std::floor(a / b);
  if (fn == "lt")
    return a < b;
  if (fn == "le")
    return a <= b;
  if (fn == "gt")
    return a > b;
  if (fn == "ge")
    return a >= b;
  if (fn == "eq")
    return a == b;
  if (fn == "ne")
    return a != b;
  if (fn == "and")
    return a != 0 && b != 0;
  if (fn == "or")
    return a != 0 || b != 0;
  if (fn == "not")
    return a == 0;
  throw std::logic_error("unknown function " + fn);
}

namespace {
// Element i of an operand that may be a broadcast scalar.
double at(const std::vector<double>& v, size_t i) {
  return v.size() == 1 ? v[0] : v[i];
}

// Determinant of a row-major n x n matrix, by Gaussian elimination with partial pivoting.
double determinant(std::vector<double> a, int n) {
  double det = 1;
  for (int k = 0; k < n; ++k) {
    int pivot = k;
    for (int i = k + 1; i < n; ++i)
      if (std::fabs(a[i * n + k]) > std::fabs(a[pivot * n + k]))
        pivot = i;
    if (a[pivot * n + k] == 0)
      return 0;
    if (pivot != k) {
      for (int j = 0; j < n; ++j)
        std::swap(a[k * n + j], a[pivot * n + j]);
      det = -det;
    }
    det *= a[k * n + k];
    for (int i = k + 1; i < n; ++i) {
      double f = a[i * n + k] / a[k * n + k];
      for (int j = k; j < n; ++j)
        a[i * n + j] -= f * a[k * n + j];
    }
  }
  return det;
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
  case Op::Call:
    if (node.fn == "dot") {
      double s = 0;
      for (size_t i = 0; i < args[0].size(); ++i)
        s += args[0][i] * args[1][i];
      return {s};
    }
    if (node.fn == "det") // analysis results only (density bounds); not in the language
      return {determinant(args[0], arg_shapes.at(0).dims.at(0))};
    return elementwise(node, args,
                       [&](double a, double b) { return apply_function(node.fn, a, b); });
  case Op::MatMul: {
    // [r, k] x [k] or [r, k] x [k, c]
    int r = node.shape.dims[0];
    int c = node.shape.rank() == 2 ? node.shape.dims[1] : 1;
    int k = static_cast<int>(args[0].size()) / r;
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
  default:
    throw std::logic_error("cannot evaluate a non-constant node");
  }
}

} // namespace ssm::ir
