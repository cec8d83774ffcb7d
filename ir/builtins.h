// The table of built-in functions (Op::Call): one row per function says everything the compiler
// knows about it, so that the frontend's checks, the evaluator, codegen and differentiation read
// the same definition and adding a function is adding a row (see docs/language.md, "Functions").
#pragma once

#include "ir.h"

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ssm::ir {

enum class Fn {
  // Elementwise, one argument.
  Exp,
  Log,
  Sqrt,
  Abs,
  Sin,
  Cos,
  Tan,
  Asin,
  Acos,
  Atan,
  Tanh,
  Logistic,
  Log1p,
  Expm1,
  Lgamma,
  Erf,
  Phi,
  Floor,
  Ceil,
  Round,
  Not,
  // Elementwise, two arguments; a scalar operand broadcasts.
  Pow,
  Min,
  Max,
  Mod,
  Atan2,
  Lt,
  Le,
  Gt,
  Ge,
  Eq,
  Ne,
  And,
  Or,
  // On whole vectors.
  Dot,
  LogSumExp,
  Softmax,
  // Internal: analysis results only (density bounds, derivatives), not in the language.
  Digamma,
  LogNormalMass, // log(Phi(b) - Phi(a))
  Det,           // of a covariance matrix
};

// How the result's shape follows from the arguments'.
enum class FnShape {
  Elementwise,    // the argument's shape; binary: equal shapes, or one scalar that broadcasts
  VectorsToReal,  // vectors of one length -> real (dot, log_sum_exp)
  VectorToVector, // a vector -> a vector of the same length (softmax)
  MatrixToReal,   // a square matrix -> real (det)
};

// How kernels compute it: an LLVM intrinsic (`symbol` is its name, e.g. "llvm.exp"), a C library
// call (`symbol(double[, double])`), a function of the kernel library (runtime/kernel_lib.h), or
// code that codegen writes itself for this Fn (Inline).
enum class Emit { Intrinsic, Libm, KernelLib, Inline };

// The node-building operations a derivative rule needs; passes/derivatives.cpp implements them
// with its simplifying builder. Ids are node ids; -1 stands for a zero.
class ExprOps {
public:
  virtual ~ExprOps() = default;
  virtual int constant(double v) = 0;
  virtual int materialize(int id) = 0; // -1 -> a constant 0
  virtual int neg(int a) = 0;
  virtual int add(int a, int b) = 0;
  virtual int sub(int a, int b) = 0;
  virtual int mul(int a, int b) = 0;
  virtual int div(int a, int b) = 0;
  virtual int call(Fn fn, std::vector<int> args) = 0;
  virtual int select(int cond, int a, int b) = 0; // a where cond != 0, else b
};

// The scalar elements of a call and of its arguments, and the arguments' derivatives (-1: zero),
// given to a derivative rule. Elements are made on request (a(k), c(k), self(k)), so a rule adds
// only the nodes it uses. For an elementwise function, one component: index 0 only (c and dc
// unset for a unary function).
struct CallElements {
  std::function<int(size_t)> a, c; // the arguments' elements
  std::function<int(size_t)> self; // the call's elements
  std::vector<int> da, dc;         // the arguments' derivatives
};

struct Builtin {
  Fn fn;
  std::string_view name;
  std::string_view params; // as diagnostics show a call: "x", "a, b", "v"
  int arity;
  FnShape shape;
  // Elementwise functions: the value at one component (b is 0 for a unary function).
  double (*scalar)(double a, double b);
  // The others: the row-major result from the arguments' values and shapes.
  std::vector<double> (*whole)(const std::vector<std::vector<double>>& args,
                               const std::vector<Shape>& shapes);
  Emit emit;
  std::string_view symbol; // Intrinsic, Libm, KernelLib: what to call
  // The derivative's elements, one per element of the call; nullptr: none yet (an error).
  std::vector<int> (*derivative)(ExprOps& b, const CallElements& e);
  bool piecewise_constant = false; // derivative zero almost everywhere
  bool internal = false;           // made by analyses, not accepted in models
  bool operator_only = false;      // written as an operator (a < b, !a), not called by name
};

const std::vector<Builtin>& all_builtins();
const Builtin& builtin(Fn fn);
const Builtin* find_builtin(std::string_view name); // nullptr if unknown
// A function that models call by name: not internal, not an operator's.
const Builtin* find_callable(std::string_view name);
// Whether `node` is a call to `fn` (analyses that treat one function specially).
bool is_call(const Node& node, Fn fn);
// The shape of a call to `f` on arguments of these shapes; nullopt when they do not fit.
std::optional<Shape> builtin_result_shape(const Builtin& f, const std::vector<Shape>& args);
// The frontend's message when builtin_result_shape gives nullopt (with the right arity).
std::string builtin_shape_error(const Builtin& f, const std::vector<Shape>& args);

} // namespace ssm::ir
