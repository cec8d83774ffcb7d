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
    Not,    // !args[0]
    Binary, // args[0] op args[1], op one of + - * / % ^ < <= > >= == != && ||
    Cond,   // args[0] ? args[1] : args[2], also written if (args[0]) args[1] else args[2]
    Call,   // name(args...)
    List,   // [args...]
    Index,  // args[0][args[1], ...]: one bracket
    Slice,  // args[0]:args[1], an index that selects a range (v[a:b])
  };
  Kind kind = Kind::Number;
  Range range;
  double number = 0;
  std::string number_problem; // Number: why the literal is no double ("overflows a double ...")
  std::string name;
  Range name_range; // Call: the function's name
  std::string op;
  std::vector<ExprPtr> args;
};

struct TypeSpec {
  // Int: int[lo..hi] (bounds in `bounds`), or int without bounds. Real may carry bounds too:
  // real(lo, hi). Simplex: simplex[K]. Sequence: sequence[V], tokens in 0..V-1 of any number.
  enum class Kind { Real, Int, Vector, Matrix, CovMatrix, Simplex, Sequence };
  Kind kind = Kind::Real;
  std::vector<ExprPtr> dims;
  std::vector<ExprPtr> bounds; // lo, hi (either may be null for an open side)
  Range range;
};

// `name = value`: a named argument of a distribution, or an option of a network.
struct NamedArg {
  Ident name;
  ExprPtr value;
};

// `dist(a, b, name = c, ...)`: positional arguments, then named ones. resolve_named_arguments
// (named_arguments.cpp) puts the named ones in their places before lowering: `args` is then in
// the distribution's order, an optional argument left out before a given one as its default
// (diffusion's steps before its psi_lower), and `named` is empty. For a name that is no
// distribution's (a density network's, or a misspelling) the values are appended to `args` as
// written and `named` keeps the names, their values moved out.
struct DistCall {
  Ident name;
  std::vector<ExprPtr> args;
  std::vector<NamedArg> named; // as written: a positional argument after a named one has no name
  Range range;
  bool unresolved = false; // a named argument was reported wrong: lowering says nothing more
};

struct ConstDecl {
  Ident name;
  ExprPtr value;
  Range range;
};

// A declaration. `latent z[n] : T ~ D(...);` and `obs x[n] : T ~ D(...);` declare a variable of a
// plate model together with its relation (`plate` is the index in brackets); in a simulator,
// `latent a ~ D(...);`, `obs x ~ D(...);` and `obs x = EXPR;` do so without a plate.
struct VarDecl {
  enum class Kind { Param, State, Obs, Data, Input, Latent };
  Kind kind = Kind::Param;
  Ident name;
  std::optional<Ident> plate; // input/latent/obs: the plate index, `n` in z[n]
  std::optional<TypeSpec> type;
  std::optional<DistCall> prior; // param: its prior; latent/obs: its distribution
  ExprPtr default_value;         // param: its default; obs: its deterministic value. May be null
  Range range;

  // A latent or observation declared with its relation or value (not `obs y : T;`).
  bool defines_relation() const {
    return kind == Kind::Latent || (kind == Kind::Obs && (prior || default_value));
  }
};

// `target ~ dist(args);` where target is a name with zero or more bracket indices,
// `target = value;`: a deterministic state (no distribution),
// `proposal target ~ dist(args);`: the guided filter's proposal for a state, or
// `guide target ~ dist(args);`: the variational family of a plate model's latent variable.
struct Relation {
  enum class Role { Model, Proposal, Guide };
  ExprPtr target;
  DistCall dist; // empty for a deterministic relation
  Range range;
  Role role = Role::Model;
  ExprPtr value; // `target = value;`
  bool proposal() const { return role == Role::Proposal; }
  bool guide() const { return role == Role::Guide; }
  bool deterministic() const { return value != nullptr; }
};

// `let name = value;`: a named expression, substituted where it is used (so it may read x[t-1]
// in a transition and x[0] in an initial relation alike).
struct LetDecl {
  Ident name;
  ExprPtr value;
  Range range;
};

struct FnParam {
  Ident name;
  TypeSpec type;
};

// `fn name(a : real, b : vector[n]) -> real { let c = ...; return expr; }` or `... = expr;`.
// Functions are inlined at each call; they see constants and earlier functions, not variables.
struct FnDecl {
  Ident name;
  std::vector<FnParam> params;
  TypeSpec result;
  std::vector<LetDecl> lets;
  ExprPtr body;
  Range range;
};

// `functional name = sum_t expr;` (additive) or `functional name = expr;`.
struct FunctionalDecl {
  Ident name;
  bool additive = false;
  ExprPtr value;
  Range range;
};

// `lookahead x[t] = expr;`: the auxiliary particle filter's prediction of state x at t from the
// particle at t-1.
struct Lookahead {
  ExprPtr target;
  ExprPtr value;
  Range range;
};

// `net name : mlp(inputs = 2, outputs = 64, hidden = [128, 128], activation = relu);`: a neural
// network, called as a function in relations; its options are named, their values expressions.
struct NetDecl {
  Ident name;
  Ident kind; // mlp
  std::vector<NamedArg> options;
  Range range;
};

// `import "name";`
struct Import {
  std::string name;
  Range range;
};

// A model, a `simulator NAME { ... }` (sample-only), or (is_module) a `module NAME { ... }` file
// of constants and functions to import.
struct Model {
  bool is_module = false;
  bool is_simulator = false;
  Ident name;
  std::vector<Import> imports;
  std::vector<ConstDecl> consts;
  std::vector<VarDecl> vars;
  std::vector<Relation> relations;
  std::vector<LetDecl> lets;
  std::vector<FnDecl> fns;
  std::vector<NetDecl> nets;
  std::vector<FunctionalDecl> functionals;
  std::vector<Lookahead> lookaheads;
};

} // namespace ssm::frontend::ast
