// Syntax tree of a `.ssm` model, as the parser builds it. Every node keeps the byte range of its
// source text so that checking and lowering can point diagnostics at it.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ssm::frontend::ast {

struct Range {
  std::size_t begin = 0;
  std::size_t end = 0;
};

struct Ident {
  std::string name;
  Range range;
};

struct Expr;
using ExprPtr = std::shared_ptr<Expr>;

struct Expr {
  enum class Kind {
    Number, // number
    Name,   // name
    Neg,    // -args[0]
    Binary, // args[0] op args[1], op one of + - * / ^
    Call,   // name(args...)
    List,   // [args...]
    Index,  // args[0][args[1], ...]: one bracket
  };
  Kind kind = Kind::Number;
  Range range;
  double number = 0;
  std::string name;
  Range name_range; // Call: the function's name
  char op = 0;
  std::vector<ExprPtr> args;
};

struct TypeSpec {
  enum class Kind { Real, Vector, Matrix, CovMatrix };
  Kind kind = Kind::Real;
  std::vector<ExprPtr> dims;
  Range range;
};

struct DistCall {
  Ident name;
  std::vector<ExprPtr> args;
  Range range;
};

struct ConstDecl {
  Ident name;
  ExprPtr value;
  Range range;
};

struct VarDecl {
  enum class Kind { Param, State, Obs };
  Kind kind = Kind::Param;
  Ident name;
  std::optional<TypeSpec> type;
  std::optional<DistCall> prior;
  ExprPtr default_value; // may be null
  Range range;
};

// `target ~ dist(args);` where target is a name with zero or more bracket indices.
struct Relation {
  ExprPtr target;
  DistCall dist;
  Range range;
};

struct Model {
  Ident name;
  std::vector<ConstDecl> consts;
  std::vector<VarDecl> vars;
  std::vector<Relation> relations;
};

} // namespace ssm::frontend::ast
