// The lowering's private header: the class `Lowering` that checks a parsed model and lowers it to
// the IR (lower.h is its public face), and the types it works with.
//
// One class whose member functions are defined in one file per concern (lower_names.cpp,
// lower_constants.cpp, ...): the concerns share one symbol table, one diagnostic engine and the
// model being built, and call each other recursively (an index lowers an expression, which calls
// a function, whose body lowers expressions...), so splitting the state between classes would
// only add plumbing. Each file says which part of the work it does.
#pragma once

#include "frontend.h"
#include "lower.h"
#include "messages.h"

#include "ir/ir.h"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace ssm::frontend::lowering {

using ast::Expr;
using ast::Range;
using EKind = ast::Expr::Kind;

constexpr int max_dimension = 1 << 20;
constexpr long max_elements = 1L << 26;

struct Symbol {
  enum class Kind { Const, Param, State, Obs, Data, Input, Let, Fn, Functional, Latent, Net } kind;
  int index = -1;    // into consts_, the model's params, states, obs, data, inputs, latents, or
                     // the AST's lets, fns, functionals
  Range range;       // the name in its declaration
  bool valid = true; // false after an error in the declaration: its uses report nothing more
  bool used = false; // read by some expression: unused declarations get a warning
};

struct ConstValue {
  ir::Shape shape;
  std::vector<double> values;
};

// Where an expression is lowered, in three types, one per job:
//  - ConstantScope: a value needed at compile time (a constant, a dimension, an index, a bound, a
//    prior's argument), lowered into a scratch block and evaluated;
//  - RelationScope: the model scope, an expression of one relation, functional or look-ahead of a
//    block, with what it reads (for the sampling order and the dependence checks);
//  - FunctionScope: the body of a user function being inlined, with its arguments and local lets.
// A Scope holds the block the nodes go to, exactly one of the first two (what the expression is
// for), the innermost function being inlined if any, and the lets and functions being expanded.

struct ConstantScope {
  std::string what;                         // the thing that must be constant, for messages
  const ast::ConstDecl* defining = nullptr; // the constant being defined, if any
};

struct RelationScope {
  RelationScope(ir::BlockKind kind, std::string subject,
                ir::VarKind target_kind = ir::VarKind::State, int target_var = -1,
                std::string target = {})
      : kind(kind), subject(std::move(subject)), target_kind(target_kind), target_var(target_var),
        target(std::move(target)) {}

  ir::BlockKind kind;
  std::string subject; // "the relation for x[t]", "functional 'f'": for messages
  // The variable the relation draws (none for a functional).
  ir::VarKind target_kind;
  int target_var;
  std::string target; // "x[t]"
  // What the expressions read.
  std::set<int> reads_now;  // lag-0 variables of the kind this block samples
  bool reads_state = false; // some state, at any lag
  // Lowering an SDE's drift or diffusion: the target at lag 0 is the path's current value.
  bool path = false;
  // Lowering an SDE's argument that must not read the path (dt, psi_lower, psi_upper): its name.
  const char* sde_fixed = nullptr;
};

struct FunctionScope {
  const ast::FnDecl* fn = nullptr;
  std::map<std::string, int> locals; // the parameters and local lets, as nodes of the block
};

class Scope {
public:
  Scope(ir::Block& block, ConstantScope c) : block(&block), purpose_(std::move(c)) {}
  Scope(ir::Block& block, RelationScope r) : block(&block), purpose_(std::move(r)) {}

  const ConstantScope* constant() const { return std::get_if<ConstantScope>(&purpose_); }
  RelationScope* relation() { return std::get_if<RelationScope>(&purpose_); }
  const RelationScope* relation() const { return std::get_if<RelationScope>(&purpose_); }
  // The block of a relation's expression; none for a constant.
  std::optional<ir::BlockKind> kind() const {
    return relation() ? std::optional(relation()->kind) : std::nullopt;
  }
  // A name bound by the function body being inlined.
  std::optional<int> local(const std::string& name) const {
    if (!fn)
      return std::nullopt;
    auto it = fn->locals.find(name);
    return it == fn->locals.end() ? std::nullopt : std::optional(it->second);
  }

  ir::Block* block;
  FunctionScope* fn = nullptr; // the innermost function being inlined
  // The lets and functions being expanded, innermost last: for notes on errors inside them.
  std::vector<std::pair<std::string, Range>> expanding;
  // Inside a function from an imported module: IR nodes take the call's location.
  std::optional<Range> call_site;
  // Inside the rate of an ode_rk4, which cannot hold another.
  int ode_rate = 0;
  // Inside a branch of a conditional, which may never be taken: a constant divisor of 0 or an
  // index range wider than the value there is a warning, not an error.
  int guarded = 0;
  // Inside a network call's arguments: where an observation that is a sequence may be read.
  int net_argument = 0;

private:
  std::variant<ConstantScope, RelationScope> purpose_;
};

// A time index: t + k (relative) or the step k (absolute).
struct TimeIndex {
  bool absolute = false;
  long k = 0;
  std::string str() const {
    if (absolute)
      return std::to_string(k);
    return k == 0 ? "t" : fmt::format("t{:+}", k);
  }
};

// A relation lowered but not yet placed in its block: the blocks' sampling order is decided once
// every relation is known.
struct PendingRelation {
  const ast::Relation* ast = nullptr;
  ast::Range range; // where to report it: the relation's target, or the declared name
  ir::Relation rel;
  std::string target; // x[t]
  std::set<int> reads_now;
  bool reads_state = false;
  bool ok = false;
};

// The types of a user function's parameters and result.
struct FnSignature {
  std::vector<ir::Shape> params;
  ir::Shape result;
  std::size_t body_operations = 0; // IR operations of the body with its calls inlined
};

bool mentions_time(const Expr& e);
bool is_time_index(const Expr& e);
using msg::plural;

class Lowering {
public:
  Lowering(const ast::Model& ast, const std::string& filename, DiagnosticEngine& diags,
           const FileGraph& files)
      : ast_(ast), diags_(diags), files_(files) {
    model_.name = ast.name.name;
    model_.source_file = filename;
  }

  // The passes over the AST (lower.cpp).
  // errors_before: the error count before this model's checks began (the named arguments').
  std::optional<ir::Model> run(int errors_before);

private:
  // ---- diagnostics
  ir::SourceLoc loc(Range r) const { return diags_.loc(r.begin, r.end); }
  void error(Range r, std::string message) { diags_.error(loc(r), std::move(message)); }
  // An error, or in a branch of a conditional (s.guarded), which may never be taken, a warning
  // that says so. Returns whether it was an error.
  bool error_unless_guarded(const Scope& s, Range r, std::string message) {
    if (s.guarded == 0) {
      error(r, std::move(message));
      return true;
    }
    diags_.warning(loc(r), message + msg::in_a_branch);
    return false;
  }
  void note(Range r, std::string message) { diags_.note(loc(r), std::move(message)); }

  // ---- names and files (lower_names.cpp)
  std::size_t order(std::size_t pos) const;
  bool imported(Range r) const { return r.begin >= diags_.main_file_end(); }
  bool visible(Range from, Range decl) const;
  bool report_hidden(Range r, const std::string& name);
  std::vector<std::string> visible_names(Range from) const;
  void unknown_name(Range r, const std::string& name);
  static std::string kind_name(Symbol::Kind kind);
  static std::string a_kind(Symbol::Kind kind);
  void declare_names();
  static Symbol::Kind var_symbol_kind(ast::VarDecl::Kind kind);
  template <class Decls> static int index_in(const Decls& decls, const ast::Ident* name) {
    for (std::size_t i = 0; i < decls.size(); ++i)
      if (&decls[i].name == name)
        return static_cast<int>(i);
    return -1;
  }
  Symbol* declared(const ast::Ident& name);
  Symbol* lookup(const std::string& name);
  Symbol* lookup(const std::string& name, Range from);
  void warn_unused();

  // ---- constants (lower_constants.cpp)
  std::optional<ConstValue> eval_const(const Expr& e, std::string what,
                                       const ast::ConstDecl* defining = nullptr);
  std::optional<long> eval_int(const Expr& e, const std::string& what);
  std::optional<int> eval_dimension(const Expr& e, const std::string& what);
  std::optional<double> eval_real(const Expr& e, const std::string& what);
  void define_const(const ast::ConstDecl& c);
  static std::optional<std::vector<double>> constant_value(const ir::Block& block, int id);
  bool is_constant(const Expr& e, const Scope& s) const;

  // ---- declarations (lower_declarations.cpp)
  ir::ModelKind model_kind() const;
  ir::BlockKind static_block() const;
  bool in_static_block(const Scope& s) const;
  void no_time(Range r, const std::string& what);
  void check_declaration_forms();
  std::optional<ir::Shape> type_shape(const ast::TypeSpec& t);
  std::optional<std::pair<double, double>> type_bounds(const ast::TypeSpec& t);
  void define_var(const ast::VarDecl& v);
  void add_prior(const ast::VarDecl& v, int param, const ir::Shape& shape);
  bool check_prior_reads(const Expr& e, const ast::VarDecl& v);
  bool positive_in_prior(const Expr& e, bool probability) const;
  std::pair<double, double> param_support(int param) const;
  void set_default(const ast::VarDecl& v, ir::ParamDecl& p);

  // ---- networks (lower_nets.cpp)
  void define_net(const ast::NetDecl& d);
  bool define_cascade(ir::NetDecl& net, const ast::NamedArg& option, const Symbol& self);
  std::optional<int> call_net(const Expr& e, Symbol& sym, Scope& s);
  // A network of a density kind named `name`, or null.
  Symbol* density_net(const std::string& name);
  std::optional<int> lower_density_call(const ast::DistCall& d, Symbol& sym, ir::VarKind kind,
                                        int var, Scope& s, const std::string& target);

  // ---- distributions (lower_distributions.cpp)
  // A variational family (dif) outside a guide: reported, before its arguments are lowered
  // (which would report what a guide may read and a model's relation may not).
  bool refuse_guide_only(const ast::DistCall& d, const std::string& target_name);
  std::optional<ir::Dist> check_dist(const ast::DistCall& d,
                                     const std::vector<std::optional<ir::Shape>>& args,
                                     const ir::Shape& target, const std::string& target_name,
                                     Range target_range);
  void check_argument_domain(ir::Dist dist, const ast::DistCall& call,
                             const std::vector<std::optional<std::vector<double>>>& values);
  void check_argument_domain(ir::Dist dist, const ast::DistCall& call, const ir::Block& block,
                             const std::vector<std::optional<int>>& args);
  bool check_integer_target(const ir::VarDecl& decl, ir::Dist dist, const std::string& name,
                            const ast::DistCall& call);
  bool check_integer_range(const ir::VarDecl& decl, const ir::Block& block, const ir::Relation& rel,
                           const ast::Relation& r, const std::string& target);
  std::optional<int> lower_deterministic_value(const ast::Relation& r, const ir::VarDecl& decl,
                                               Scope& s, const std::string& target);
  std::optional<std::vector<int>> lower_diffusion(const ast::Relation& r, const ir::VarDecl& decl,
                                                  ir::BlockKind kind, int state, Scope& s,
                                                  const std::string& target);
  std::string state_or_observation_read(const ir::Block& block, int id) const;
  std::optional<std::vector<int>> lower_psi_bounds(const ast::DistCall& call,
                                                   const ir::VarDecl& decl, Scope& s,
                                                   const std::string& target);
  bool check_relation(const ast::Relation& r, const ir::VarDecl& decl, const ir::Block& block,
                      ir::VarKind target_kind, ir::Dist dist,
                      const std::vector<std::optional<int>>& args, const std::string& target);

  // ---- expressions (lower_expressions.cpp)
  int emit(Scope& s, ir::Node n, Range r);
  int emit_const(Scope& s, ir::Shape shape, std::vector<double> values, Range r);
  int emit_op(Scope& s, ir::Op op, ir::Shape shape, std::vector<int> args, Range r);
  int emit_call(Scope& s, std::string fn, ir::Shape shape, std::vector<int> args, Range r);
  const ir::Shape& shape_of(const Scope& s, int id) const { return s.block->nodes[id].shape; }
  std::optional<int> lower(const Expr& e, Scope& s);
  std::optional<int> lower_cond(const Expr& e, Scope& s);
  void not_constant(const Scope& s, Range r, const std::string& culprit);
  bool outside_function(const Scope& s, Range r, const std::string& what);
  // Lowers `body` as the expansion of a let or a function named `name`, used at `use`; errors
  // inside get a note pointing at the use.
  template <class F>
  std::optional<int> expanding(Scope& s, const std::string& what, Range use, F&& body) {
    int errors = diags_.error_count();
    s.expanding.emplace_back(what, use);
    std::optional<int> id = body();
    s.expanding.pop_back();
    if (diags_.error_count() > errors)
      note(use, fmt::format(msg::expanded_here, what));
    return id;
  }
  std::optional<int> lower_let(const Expr& e, const Symbol& sym, Scope& s);
  std::optional<int> lower_name(const Expr& e, Scope& s);
  std::optional<int> lower_time(const Expr& e, Scope& s);
  std::optional<int> lower_unindexed_var(const Expr& e, const Symbol& sym, Scope& s);
  std::optional<int> lower_binary(const Expr& e, Scope& s);
  std::optional<int> lower_list(const Expr& e, Scope& s);

  // ---- calls of built-in functions (lower_calls.cpp)
  std::optional<int> lower_call(const Expr& e, Scope& s);
  std::optional<int> lower_sum(const Expr& arg, Range range, Scope& s); // sum(arg): dot products
  std::vector<std::string> function_names(Range from) const;

  // ---- ODE integration (lower_ode.cpp)
  std::optional<int> lower_ode(const Expr& e, Scope& s);

  // ---- user functions (lower_functions.cpp)
  void define_fn(const ast::FnDecl& f);
  std::optional<ir::Shape> fn_type_shape(const ast::TypeSpec& t);
  std::optional<int> inline_body(const ast::FnDecl& f, const FnSignature& sig,
                                 const std::vector<int>& args, Scope& s);
  // Whether f, named at `name`, may be called here (a function body calls earlier functions
  // only); reports why not.
  bool check_call_order(const ast::FnDecl& f, Range name, const Scope& s);
  // f's body inlined on `args` for the call at `use`: within the block's operation limit, an
  // imported function's nodes at the call's location, errors inside noted at the use.
  std::optional<int> expand_call(const ast::FnDecl& f, const FnSignature& sig,
                                 const std::vector<int>& args, Range use, Scope& s);
  std::optional<int> call_function(const Expr& e, const Symbol& sym, Scope& s);

  // ---- indexing and time indices (lower_indexing.cpp)
  std::string quote(const Expr& e) const;
  std::optional<int> apply_index(int base, const Expr& bracket, Scope& s);
  const ir::VarDecl* discrete_variable(const ir::Node& node) const;
  std::optional<int> apply_dynamic_index(int base, const Expr& bracket, Scope& s);
  std::optional<int> apply_slice(int base, const Expr& bracket, Scope& s);
  std::optional<int> apply_matrix_slice(int base, const Expr& bracket, Scope& s);
  std::optional<int> lower_run_time_index(const Expr& ie, int dim, const std::string& which,
                                          const Expr& bracket, const ir::Shape& whole, Scope& s);
  std::optional<int> lower_index(const Expr& e, Scope& s);
  std::optional<int> lower_plate_ref(const Expr& name, const Symbol& sym,
                                     const std::vector<const Expr*>& chain, Scope& s);
  std::optional<TimeIndex> time_index(const Expr& e, const std::string& var);
  std::optional<int> lower_var_ref(const Expr& name, const Symbol& sym,
                                   const std::vector<const Expr*>& chain, Scope& s);

  // ---- relations (lower_relations.cpp)
  std::optional<std::pair<Symbol*, ir::BlockKind>> relation_target(const ast::Relation& r);
  void add_relation(const ast::Relation& r);
  std::vector<const ast::VarDecl*> static_relation_order() const;
  void add_static_relation(const ast::VarDecl& v);
  std::optional<int> lower_static_ref(const Expr& e, const Symbol& sym, Scope& s);
  void complete_proposal();
  static int copy_node(const ir::Block& from, int id, ir::Block& to, std::map<int, int>& copied);
  void add_lookaheads();
  void add_functional(const ast::FunctionalDecl& f);

  // ---- guides (lower_guides.cpp)
  // A guide's target `v[INDEX]`: its symbol, marked used, once it is a declared `kind` written
  // v[INDEX] and the first guide of v; null after an error, or when v's declaration was rejected.
  Symbol* guide_target(const ast::Relation& r, Symbol::Kind kind, const char* index,
                       const char* not_kind, const char* form);
  void add_guide(const ast::Relation& r);
  void add_dif_guide(const ast::Relation& r, const ir::VarDecl& decl, Scope& s);
  void add_state_guide(const ast::Relation& r);

  // ---- completeness and order (lower_ordering.cpp)
  const PendingRelation* relation_for(ir::BlockKind kind, int var) const;
  void check_completeness();
  void check_obs_depend_on_states();
  // Appends the block's relations in source order, except that a relation comes after those of
  // the lag-0 variables it reads.
  void order_relations(ir::BlockKind kind) { order_relations(pending_[kind], model_.block(kind)); }
  void order_relations(std::vector<PendingRelation>& rels, ir::Block& block);
  void report_cycle(const std::vector<PendingRelation>& rels, const std::vector<bool>& placed);

  const ast::Model& ast_;
  DiagnosticEngine& diags_;
  const FileGraph& files_;
  ir::Model model_;
  std::map<std::string, Symbol> symbols_;
  std::vector<ConstValue> consts_;
  // The constant whose value define_const is evaluating: a dimension or an index evaluated inside
  // that value (`const d = sum(zeros(d))`) reads its constants against it too.
  const ast::ConstDecl* defining_const_ = nullptr;
  std::map<std::pair<ir::BlockKind, int>, const ast::Relation*> first_relation_;
  std::set<std::pair<int, const ir::Block*>> failed_lets_;
  std::map<int, FnSignature> fn_signatures_;
  std::map<ir::BlockKind, std::vector<PendingRelation>> pending_;
  std::vector<PendingRelation> pending_latents_; // of the plate or simulator block
};

} // namespace ssm::frontend::lowering
