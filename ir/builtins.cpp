// The built-in function table: each function's value, shape rule, kernel code and derivative.
#include "builtins.h"
#include "kernel/distributions.h"

#include <fmt/format.h>

#include <boost/math/special_functions/digamma.hpp>

#include <cmath>
#include <numbers>
#include <stdexcept>
#include <utility>

namespace ssm::ir {

namespace {

using Whole = std::vector<std::vector<double>>;
using Shapes = std::vector<Shape>;
using Ids = std::vector<int>;

// ---- values ----

// Phi through erfc: accurate in the lower tail, where 1 + erf(x / sqrt 2) would cancel.
double normal_cdf(double x) {
  return 0.5 * std::erfc(-x / std::numbers::sqrt2);
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

// The shift that keeps exp(x_i - shift) from overflowing: the largest element, or 0 when that is
// not finite (all -inf gives log 0 = -inf, an inf gives inf, a NaN stays NaN). Kernels compute
// the same (kernel_codegen.cpp), so folded constants and kernels agree.
double exp_shift(const std::vector<double>& x) {
  double m = x.at(0);
  for (double v : x)
    m = std::fmax(m, v);
  return std::isfinite(m) ? m : 0;
}

double sum_exp(const std::vector<double>& x, double shift) {
  double s = 0;
  for (double v : x)
    s += std::exp(v - shift);
  return s;
}

std::vector<double> dot_value(const Whole& args, const Shapes&) {
  double s = 0;
  for (size_t i = 0; i < args[0].size(); ++i)
    s += args[0][i] * args[1][i];
  return {s};
}

std::vector<double> det_value(const Whole& args, const Shapes& shapes) {
  return {determinant(args[0], shapes.at(0).dims.at(0))};
}

std::vector<double> log_sum_exp_value(const Whole& args, const Shapes&) {
  const double shift = exp_shift(args[0]);
  return {shift + std::log(sum_exp(args[0], shift))};
}

std::vector<double> softmax_value(const Whole& args, const Shapes&) {
  const double shift = exp_shift(args[0]);
  const double s = sum_exp(args[0], shift);
  std::vector<double> out;
  for (double v : args[0])
    out.push_back(std::exp(v - shift) / s);
  return out;
}

// ---- derivatives ----
// An elementwise rule sees one component: e.a[0], e.self[0], e.da[0] (and e.c, e.dc for two
// arguments); it returns that component's derivative (-1: zero).

Ids d_exp(ExprOps& b, const CallElements& e) {
  return {b.mul(e.self(0), e.da[0])};
}
Ids d_log(ExprOps& b, const CallElements& e) {
  return {b.div(e.da[0], e.a(0))};
}
Ids d_sqrt(ExprOps& b, const CallElements& e) {
  return {b.div(e.da[0], b.mul(b.constant(2), e.self(0)))};
}
Ids d_abs(ExprOps& b, const CallElements& e) {
  return {b.mul(b.div(e.a(0), e.self(0)), e.da[0])};
}
Ids d_sin(ExprOps& b, const CallElements& e) {
  return {b.mul(b.call(Fn::Cos, {e.a(0)}), e.da[0])};
}
Ids d_cos(ExprOps& b, const CallElements& e) {
  return {b.neg(b.mul(b.call(Fn::Sin, {e.a(0)}), e.da[0]))};
}
Ids d_tan(ExprOps& b, const CallElements& e) { // 1 + tan^2
  const int self = e.self(0);
  return {b.mul(b.add(b.constant(1), b.mul(self, self)), e.da[0])};
}
Ids d_asin(ExprOps& b, const CallElements& e) { // 1 / sqrt(1 - a^2); acos is its negation
  const int a = e.a(0);
  return {b.div(e.da[0], b.call(Fn::Sqrt, {b.materialize(b.sub(b.constant(1), b.mul(a, a)))}))};
}
Ids d_acos(ExprOps& b, const CallElements& e) {
  return {b.neg(d_asin(b, e)[0])};
}
Ids d_atan(ExprOps& b, const CallElements& e) {
  const int a = e.a(0);
  return {b.div(e.da[0], b.add(b.constant(1), b.mul(a, a)))};
}
Ids d_atan2(ExprOps& b, const CallElements& e) { // atan2(y, x): (x dy - y dx) / (x^2 + y^2)
  const int y = e.a(0), x = e.c(0);
  return {b.div(b.sub(b.mul(x, e.da[0]), b.mul(y, e.dc[0])), b.add(b.mul(x, x), b.mul(y, y)))};
}
Ids d_tanh(ExprOps& b, const CallElements& e) {
  const int self = e.self(0);
  return {b.mul(b.sub(b.constant(1), b.mul(self, self)), e.da[0])};
}
Ids d_logistic(ExprOps& b, const CallElements& e) {
  const int self = e.self(0);
  return {b.mul(b.mul(self, b.sub(b.constant(1), self)), e.da[0])};
}
Ids d_log1p(ExprOps& b, const CallElements& e) {
  return {b.div(e.da[0], b.add(b.constant(1), e.a(0)))};
}
Ids d_expm1(ExprOps& b, const CallElements& e) {
  return {b.mul(b.add(e.self(0), b.constant(1)), e.da[0])};
}
Ids d_lgamma(ExprOps& b, const CallElements& e) {
  return {b.mul(b.call(Fn::Digamma, {e.a(0)}), e.da[0])};
}
Ids d_erf(ExprOps& b, const CallElements& e) { // 2 / sqrt(pi) exp(-a^2)
  const int a = e.a(0);
  return {b.mul(b.mul(b.constant(2 / std::sqrt(std::numbers::pi)),
                      b.call(Fn::Exp, {b.materialize(b.neg(b.mul(a, a)))})),
                e.da[0])};
}
Ids d_phi(ExprOps& b, const CallElements& e) { // the normal density exp(-a^2 / 2) / sqrt(2 pi)
  const int a = e.a(0);
  const int density =
      b.div(b.call(Fn::Exp, {b.materialize(b.neg(b.div(b.mul(a, a), b.constant(2))))}),
            b.constant(std::sqrt(2 * std::numbers::pi)));
  return {b.mul(density, e.da[0])};
}
Ids d_log_normal_mass(ExprOps& b, const CallElements& e) {
  // log(Phi(c) - Phi(a)): (phi(c) dc - phi(a) da) / mass
  const int a = e.a(0), self = e.self(0), c = e.c(0);
  auto phi_over_mass = [&](int z) { // exp(-z^2 / 2 - log sqrt(2 pi) - log mass); 0 at +-inf
    return b.call(Fn::Exp,
                  {b.materialize(b.sub(b.sub(b.neg(b.div(b.mul(z, z), b.constant(2))),
                                             b.constant(0.5 * std::log(2 * std::numbers::pi))),
                                       self))});
  };
  int r = b.neg(b.mul(phi_over_mass(a), e.da[0]));
  if (e.dc[0] >= 0)
    r = b.add(r, b.mul(phi_over_mass(c), e.dc[0]));
  return {r};
}
Ids d_pow(ExprOps& b, const CallElements& e) {
  const int a = e.a(0), self = e.self(0), c = e.c(0);
  int r = b.mul(b.mul(c, b.call(Fn::Pow, {a, b.sub(c, b.constant(1))})), e.da[0]);
  if (e.dc[0] >= 0)
    r = b.add(r, b.mul(b.mul(self, b.call(Fn::Log, {a})), e.dc[0]));
  return {r};
}
// min and max follow the argument they pick.
Ids pick(ExprOps& b, const CallElements& e, Fn compare) {
  const int cond = b.call(compare, {e.a(0), e.c(0)});
  return {e.da[0] < 0 && e.dc[0] < 0 ? -1 : b.select(cond, e.da[0], e.dc[0])};
}
Ids d_min(ExprOps& b, const CallElements& e) {
  return pick(b, e, Fn::Le);
}
Ids d_max(ExprOps& b, const CallElements& e) {
  return pick(b, e, Fn::Ge);
}
Ids d_mod(ExprOps& b, const CallElements& e) { // a - c floor(a / c)
  const int a = e.a(0);
  return {b.sub(e.da[0], b.mul(b.call(Fn::Floor, {b.div(a, e.c(0))}), e.dc[0]))};
}
Ids d_dot(ExprOps& b, const CallElements& e) {
  int s = -1;
  for (size_t k = 0; k < e.da.size(); ++k) {
    s = b.add(s, b.mul(e.da[k], e.c(k)));
    s = b.add(s, b.mul(e.a(k), e.dc[k]));
  }
  return {s};
}
Ids d_log_sum_exp(ExprOps& b, const CallElements& e) { // sum_i softmax_i da_i
  int s = -1;
  for (size_t k = 0; k < e.da.size(); ++k)
    if (e.da[k] >= 0)
      s = b.add(s, b.mul(b.call(Fn::Exp, {b.materialize(b.sub(e.a(k), e.self(0)))}), e.da[k]));
  return {s};
}
Ids d_softmax(ExprOps& b, const CallElements& e) { // s_i (da_i - sum_j s_j da_j)
  int mean = -1;
  for (size_t k = 0; k < e.da.size(); ++k)
    if (e.da[k] >= 0)
      mean = b.add(mean, b.mul(e.self(k), e.da[k]));
  Ids d(e.da.size(), -1);
  for (size_t k = 0; k < d.size(); ++k)
    d[k] = b.mul(e.self(k), b.sub(e.da[k], mean));
  return d;
}
Ids d_zero(ExprOps&, const CallElements& e) {
  return Ids(e.da.size(), -1);
}

// ---- the table ----

constexpr auto E = FnShape::Elementwise;
constexpr auto NoWhole = nullptr;

Builtin unary(Fn fn, std::string_view name, double (*f)(double, double), Emit emit,
              std::string_view symbol, Ids (*d)(ExprOps&, const CallElements&)) {
  return {fn, name, "x", 1, E, f, NoWhole, emit, symbol, d};
}
Builtin binary(Fn fn, std::string_view name, double (*f)(double, double), Emit emit,
               std::string_view symbol, Ids (*d)(ExprOps&, const CallElements&)) {
  return {fn, name, "a, b", 2, E, f, NoWhole, emit, symbol, d};
}
// Comparisons and logic: 1 or 0, inline code, derivative zero almost everywhere.
Builtin logic(Fn fn, std::string_view name, int arity, double (*f)(double, double)) {
  Builtin b{fn, name, arity == 1 ? "x" : "a, b", arity, E, f, NoWhole, Emit::Inline, "", d_zero};
  b.piecewise_constant = true;
  b.operator_only = true;
  return b;
}
Builtin rounding(Fn fn, std::string_view name, double (*f)(double, double),
                 std::string_view intrinsic) {
  Builtin b = unary(fn, name, f, Emit::Intrinsic, intrinsic, d_zero);
  b.piecewise_constant = true;
  return b;
}
Builtin internal(Builtin b) {
  b.internal = true;
  return b;
}

std::vector<Builtin> make_table() {
  using enum Emit;
  // Existing rows keep their order: it is the order diagnostics list and suggest names in.
  return {
      unary(
          Fn::Exp, "exp", [](double a, double) { return std::exp(a); }, Intrinsic, "llvm.exp",
          d_exp),
      unary(
          Fn::Log, "log", [](double a, double) { return std::log(a); }, Intrinsic, "llvm.log",
          d_log),
      unary(
          Fn::Sqrt, "sqrt", [](double a, double) { return std::sqrt(a); }, Intrinsic, "llvm.sqrt",
          d_sqrt),
      unary(
          Fn::Abs, "abs", [](double a, double) { return std::fabs(a); }, Intrinsic, "llvm.fabs",
          d_abs),
      unary(
          Fn::Sin, "sin", [](double a, double) { return std::sin(a); }, Intrinsic, "llvm.sin",
          d_sin),
      unary(
          Fn::Cos, "cos", [](double a, double) { return std::cos(a); }, Intrinsic, "llvm.cos",
          d_cos),
      unary(
          Fn::Tanh, "tanh", [](double a, double) { return std::tanh(a); }, Libm, "tanh", d_tanh),
      unary(
          Fn::Logistic, "logistic", [](double a, double) { return 1 / (1 + std::exp(-a)); }, Inline,
          "", d_logistic),
      unary(
          Fn::Log1p, "log1p", [](double a, double) { return std::log1p(a); }, Libm, "log1p",
          d_log1p),
      unary(
          Fn::Expm1, "expm1", [](double a, double) { return std::expm1(a); }, Libm, "expm1",
          d_expm1),
      rounding(
          Fn::Floor, "floor", [](double a, double) { return std::floor(a); }, "llvm.floor"),
      rounding(
          Fn::Ceil, "ceil", [](double a, double) { return std::ceil(a); }, "llvm.ceil"),
      rounding(
          Fn::Round, "round", [](double a, double) { return std::round(a); }, "llvm.round"),
      binary(
          Fn::Pow, "pow", [](double a, double b) { return std::pow(a, b); }, Inline, "", d_pow),
      binary(
          Fn::Min, "min", [](double a, double b) { return std::fmin(a, b); }, Intrinsic,
          "llvm.minnum", d_min),
      binary(
          Fn::Max, "max", [](double a, double b) { return std::fmax(a, b); }, Intrinsic,
          "llvm.maxnum", d_max),
      // Floored, so the result has the sign of b, as integer arithmetic expects.
      binary(
          Fn::Mod, "mod", [](double a, double b) { return a - b * std::floor(a / b); }, Inline, "",
          d_mod),
      {Fn::Dot, "dot", "a, b", 2, FnShape::VectorsToReal, nullptr, dot_value, Inline, "", d_dot},
      logic(Fn::Lt, "lt", 2, [](double a, double b) -> double { return a < b; }),
      logic(Fn::Le, "le", 2, [](double a, double b) -> double { return a <= b; }),
      logic(Fn::Gt, "gt", 2, [](double a, double b) -> double { return a > b; }),
      logic(Fn::Ge, "ge", 2, [](double a, double b) -> double { return a >= b; }),
      logic(Fn::Eq, "eq", 2, [](double a, double b) -> double { return a == b; }),
      logic(Fn::Ne, "ne", 2, [](double a, double b) -> double { return a != b; }),
      logic(Fn::And, "and", 2, [](double a, double b) -> double { return a != 0 && b != 0; }),
      logic(Fn::Or, "or", 2, [](double a, double b) -> double { return a != 0 || b != 0; }),
      logic(Fn::Not, "not", 1, [](double a, double) -> double { return a == 0; }),
      binary(
          Fn::Atan2, "atan2", [](double a, double b) { return std::atan2(a, b); }, Libm, "atan2",
          d_atan2),
      unary(
          Fn::Atan, "atan", [](double a, double) { return std::atan(a); }, Libm, "atan", d_atan),
      unary(
          Fn::Tan, "tan", [](double a, double) { return std::tan(a); }, Libm, "tan", d_tan),
      unary(
          Fn::Asin, "asin", [](double a, double) { return std::asin(a); }, Libm, "asin", d_asin),
      unary(
          Fn::Acos, "acos", [](double a, double) { return std::acos(a); }, Libm, "acos", d_acos),
      unary(
          Fn::Lgamma, "lgamma", [](double a, double) { return std::lgamma(a); }, KernelLib,
          "ssm_log_gamma", d_lgamma),
      unary(
          Fn::Erf, "erf", [](double a, double) { return std::erf(a); }, Libm, "erf", d_erf),
      unary(
          Fn::Phi, "Phi", [](double a, double) { return normal_cdf(a); }, Inline, "", d_phi),
      {Fn::Softmax, "softmax", "v", 1, FnShape::VectorToVector, nullptr, softmax_value, Inline, "",
       d_softmax},
      {Fn::LogSumExp, "log_sum_exp", "v", 1, FnShape::VectorsToReal, nullptr, log_sum_exp_value,
       Inline, "", d_log_sum_exp},
      internal(unary(
          Fn::Digamma, "digamma", [](double a, double) { return boost::math::digamma(a); }, Inline,
          "", nullptr)),
      internal(binary(
          Fn::LogNormalMass, "log_normal_mass",
          [](double a, double b) { return ssm::detail::log_normal_mass(a, b); }, KernelLib,
          "ssm_log_normal_mass", d_log_normal_mass)),
      internal(
          {Fn::Det, "det", "A", 1, FnShape::MatrixToReal, nullptr, det_value, Inline, "", nullptr}),
  };
}

} // namespace

const std::vector<Builtin>& all_builtins() {
  static const std::vector<Builtin> table = make_table();
  return table;
}

const Builtin& builtin(Fn fn) {
  static const std::vector<const Builtin*> by_fn = [] {
    std::vector<const Builtin*> index(all_builtins().size());
    for (const Builtin& b : all_builtins())
      index.at(static_cast<size_t>(b.fn)) = &b;
    return index;
  }();
  return *by_fn.at(static_cast<size_t>(fn));
}

const Builtin* find_builtin(std::string_view name) {
  for (const Builtin& b : all_builtins())
    if (b.name == name)
      return &b;
  return nullptr;
}

bool is_call(const Node& node, Fn fn) {
  if (node.op != Op::Call)
    return false;
  const Builtin* f = find_builtin(node.fn);
  return f && f->fn == fn;
}

const Builtin* find_callable(std::string_view name) {
  const Builtin* f = find_builtin(name);
  return f && !f->internal && !f->operator_only ? f : nullptr;
}

std::optional<Shape> builtin_result_shape(const Builtin& f, const std::vector<Shape>& args) {
  if (static_cast<int>(args.size()) != f.arity)
    return std::nullopt;
  const Shape& a = args[0];
  switch (f.shape) {
  case FnShape::Elementwise:
    if (f.arity == 1 || a == args[1] || args[1].is_scalar())
      return a;
    return a.is_scalar() ? std::optional(args[1]) : std::nullopt;
  case FnShape::VectorsToReal:
    if (a.rank() != 1 || (f.arity == 2 && !(a == args[1])))
      return std::nullopt;
    return Shape::scalar();
  case FnShape::VectorToVector:
    return a.rank() == 1 ? std::optional(a) : std::nullopt;
  case FnShape::MatrixToReal:
    return a.rank() == 2 && a.dims[0] == a.dims[1] ? std::optional(Shape::scalar()) : std::nullopt;
  }
  return std::nullopt;
}

std::string builtin_shape_error(const Builtin& f, const std::vector<Shape>& args) {
  switch (f.shape) {
  case FnShape::VectorsToReal:
    if (f.arity == 2)
      return fmt::format("{}({}) needs two vectors of the same length, but got {} and {}", f.name,
                         f.params, args[0].str(), args[1].str());
    [[fallthrough]];
  case FnShape::VectorToVector:
    return fmt::format("{}({}) needs a vector, but got {}", f.name, f.params, args[0].str());
  case FnShape::MatrixToReal:
    return fmt::format("{}({}) needs a square matrix, but got {}", f.name, f.params, args[0].str());
  case FnShape::Elementwise:
    break;
  }
  return fmt::format("shape mismatch in {}(): {} and {} (the arguments must have the same shape, "
                     "or one must be real)",
                     f.name, args[0].str(), args.back().str());
}

} // namespace ssm::ir
