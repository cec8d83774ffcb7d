// Checks a parsed model and lowers it to the IR: see lower.h.
//
// The work is done in passes over the AST, each of which keeps going after an error so that one
// run reports every independent problem: (1) declare every name, (2) evaluate the constants in
// source order, (3) the shapes, priors and defaults of parameters, states and observations, (4)
// the relations, (5) what is missing (relations, state dependence) and the sampling order of the
// relations within each block. A declaration with an error is marked invalid, and uses of it
// report nothing more, so one mistake gives one message.
#include "lower.h"

#include "frontend.h"

#include "ir/builtins.h"
#include "ir/evaluate.h"

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <numbers>
#include <set>
#include <stdexcept>

namespace ssm::frontend {

namespace {

using ast::Expr;
using ast::Range;
using EKind = ast::Expr::Kind;

constexpr int max_dimension = 1 << 20;
constexpr long max_elements = 1L << 26;

// Built-ins that make constants of a given size.
const std::set<std::string> constructor_functions = {"zeros", "ones", "eye"};

std::vector<std::string> builtin_function_names() {
  std::vector<std::string> names(constructor_functions.begin(), constructor_functions.end());
  for (const ir::Builtin& f : ir::all_builtins())
    if (ir::find_callable(f.name))
      names.emplace_back(f.name);
  return names;
}

struct Symbol {
  enum class Kind { Const, Param, State, Obs, Data, Input, Let, Fn, Functional, Latent } kind;
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

// What an expression is being lowered for.
struct Scope {
  ir::Block* block = nullptr;

  // Constant expressions: `what` names the thing that must be constant, for messages.
  bool constant = false;
  std::string what;
  const ast::ConstDecl* defining = nullptr; // the constant being defined, if any

  // Relations: the block, and the target ("x[t]") whose relation this is.
  ir::BlockKind kind = ir::BlockKind::Initial;
  ir::VarKind target_kind = ir::VarKind::State;
  int target_var = -1;
  std::string target;      // "x[t]"
  std::string subject;     // "the relation for x[t]", "functional 'f'": for messages
  std::set<int> reads_now; // lag-0 variables of the kind this block samples
  bool reads_state = false;
  std::set<int> states_read; // at any lag
  std::set<int> latents_read;

  // Inside an inlined function: its parameters and local lets, as nodes of this block.
  const ast::FnDecl* fn = nullptr;
  std::map<std::string, int> locals;
  // The lets and functions being expanded, innermost last: for notes on errors inside them.
  std::vector<std::pair<std::string, Range>> expanding;
  // Inside a function from an imported module: IR nodes take the call's location.
  std::optional<Range> call_site;
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

struct PendingRelation {
  const ast::Relation* ast = nullptr;
  ast::Range range; // where to report it: the relation's target, or the declared name
  ir::Relation rel;
  std::string target; // x[t]
  std::set<int> reads_now;
  bool reads_state = false;
  std::set<int> states_read;
  std::set<int> latents_read;
  bool ok = false;
};

bool mentions_time(const Expr& e) {
  if (e.kind == EKind::Name && e.name == "t")
    return true;
  return std::any_of(e.args.begin(), e.args.end(),
                     [](const ast::ExprPtr& a) { return mentions_time(*a); });
}

// t, t-k or t+k: an index that reads as a time step (P[z[t-1]] indexes by a value instead).
bool is_time_index(const Expr& e) {
  auto is_t = [](const Expr& x) { return x.kind == EKind::Name && x.name == "t"; };
  if (is_t(e))
    return true;
  return e.kind == EKind::Binary && (e.op == "+" || e.op == "-") &&
         ((is_t(*e.args[0]) && !mentions_time(*e.args[1])) ||
          (e.op == "+" && is_t(*e.args[1]) && !mentions_time(*e.args[0])));
}

std::string plural(std::size_t n, std::string_view word) {
  if (n == 1)
    return fmt::format("1 {}", word);
  return fmt::format("{} {}", n, word == "index" ? "indices" : std::string(word) + "s");
}

std::string signature(const ir::DistInfo& info) {
  return fmt::format("{}({})", info.name, fmt::join(info.arg_names, ", "));
}

class Lowering {
public:
  Lowering(const ast::Model& ast, const std::string& filename, DiagnosticEngine& diags,
           const FileGraph& files)
      : ast_(ast), diags_(diags), files_(files) {
    model_.name = ast.name.name;
    model_.source_file = filename;
  }

  std::optional<ir::Model> run() {
    int errors_before = diags_.error_count();
    model_.kind = model_kind();
    declare_names();
    check_declaration_forms();
    for (const ast::ConstDecl& c : ast_.consts)
      define_const(c);
    for (const ast::VarDecl& v : ast_.vars)
      define_var(v);
    for (const ast::FnDecl& f : ast_.fns)
      define_fn(f);
    for (const ast::Relation& r : ast_.relations)
      add_relation(r);
    if (!model_.is_state_space())
      for (const ast::VarDecl* v : static_relation_order())
        add_static_relation(*v);
    for (const ast::FunctionalDecl& f : ast_.functionals)
      add_functional(f);
    add_lookaheads();
    check_completeness();
    if (diags_.error_count() > errors_before)
      return std::nullopt;
    order_relations(ir::BlockKind::Initial);
    order_relations(ir::BlockKind::Transition);
    order_relations(ir::BlockKind::Observation);
    complete_proposal();
    order_relations(ir::BlockKind::Proposal);
    if (!model_.is_state_space()) {
      // Latents cannot read observations, so they all come first.
      ir::BlockKind own = static_block();
      order_relations(pending_latents_, model_.block(own));
      order_relations(own);
    }
    if (diags_.error_count() > errors_before)
      return std::nullopt;
    warn_unused();
    warn_states_without_influence();
    warn_latents_without_influence();
    warn_priors_outside_bounds();
    if (diags_.error_count() > errors_before) // -Werror
      return std::nullopt;
    return std::move(model_);
  }

private:
  // Declaration order: imported modules (which follow the model's file in the diagnostic
  // engine's buffer), each after the modules it imports, come before the model's own
  // declarations.
  std::size_t order(std::size_t pos) const {
    std::size_t size = diags_.source().size() + 1;
    if (!files_.order.empty()) {
      auto rank = std::find(files_.order.begin(), files_.order.end(), diags_.file_of(pos));
      return static_cast<std::size_t>(rank - files_.order.begin()) * size + pos;
    }
    std::size_t main_end = diags_.main_file_end();
    return pos >= main_end ? pos - main_end : pos + size;
  }

  bool imported(Range r) const { return r.begin >= diags_.main_file_end(); }

  // Whether code at `from` can use a name declared at `decl`: a module sees its own names and
  // those of the modules it imports (directly or through other modules), not the model's or
  // those of modules it does not import; the model sees everything.
  bool visible(Range from, Range decl) const {
    if (files_.sees.empty())
      return true;
    int f = diags_.file_of(from.begin), g = diags_.file_of(decl.begin);
    return f < static_cast<int>(files_.sees.size()) &&
           g < static_cast<int>(files_.sees[f].size()) && files_.sees[f][g];
  }

  // A name that is declared, but in a file that `r`'s file does not import: says which import is
  // missing. False if the name is not declared at all.
  bool report_hidden(Range r, const std::string& name) {
    auto it = symbols_.find(name);
    if (it == symbols_.end() || visible(r, it->second.range))
      return false;
    int here = diags_.file_of(r.begin), there = diags_.file_of(it->second.range.begin);
    std::string file = diags_.file_name(there);
    if (there == 0)
      error(r, fmt::format("'{}' is declared by the model that imports this module ({}); a module "
                           "can only use its own names and those of the modules it imports",
                           name, file));
    else
      error(r, fmt::format("'{}' is declared in {}, which {} does not import: add 'import "
                           "\"{}\";' to it",
                           name, file, diags_.file_name(here),
                           std::filesystem::path(file).stem().string()));
    return true;
  }

  // ---- diagnostics ------------------------------------------------------------------------

  ir::SourceLoc loc(Range r) const { return diags_.loc(r.begin, r.end); }
  void error(Range r, std::string message) { diags_.error(loc(r), std::move(message)); }
  void note(Range r, std::string message) { diags_.note(loc(r), std::move(message)); }

  std::vector<std::string> visible_names(Range from) const {
    std::vector<std::string> names = {"t", "pi", "inf"};
    for (const auto& [name, sym] : symbols_)
      if (visible(from, sym.range))
        names.push_back(name);
    return names;
  }

  void unknown_name(Range r, const std::string& name) {
    if (report_hidden(r, name))
      return;
    std::string message = fmt::format("unknown name '{}'", name);
    if (auto guess = closest_name(name, visible_names(r)))
      message += fmt::format("; did you mean '{}'?", *guess);
    error(r, message);
  }

  static std::string kind_name(Symbol::Kind kind) {
    switch (kind) {
    case Symbol::Kind::Const:
      return "constant";
    case Symbol::Kind::Param:
      return "parameter";
    case Symbol::Kind::State:
      return "state";
    case Symbol::Kind::Obs:
      return "observation";
    case Symbol::Kind::Data:
      return "data item";
    case Symbol::Kind::Input:
      return "input";
    case Symbol::Kind::Let:
      return "let binding";
    case Symbol::Kind::Fn:
      return "function";
    case Symbol::Kind::Functional:
      return "functional";
    case Symbol::Kind::Latent:
      return "latent variable";
    }
    return "?";
  }

  static std::string a_kind(Symbol::Kind kind) {
    std::string name = kind_name(kind);
    return (std::string_view("aeiou").find(name[0]) != std::string_view::npos ? "an " : "a ") +
           name;
  }

  void not_constant(const Scope& s, Range r, const std::string& culprit) {
    error(r, fmt::format("{} must be a constant expression, but {}", s.what, culprit));
  }

  // ---- models without time: plates and simulators -----------------------------------------

  // A simulator; a model over a plate when it declares a latent variable or an observation with a
  // plate index (latent z[n], obs x[n]); else a state-space model.
  ir::ModelKind model_kind() const {
    if (ast_.is_simulator)
      return ir::ModelKind::Simulator;
    for (const ast::VarDecl& v : ast_.vars)
      if (v.kind == ast::VarDecl::Kind::Latent || v.plate)
        return ir::ModelKind::Plate;
    return ir::ModelKind::StateSpace;
  }

  ir::BlockKind static_block() const {
    return model_.kind == ir::ModelKind::Plate ? ir::BlockKind::Plate : ir::BlockKind::Simulator;
  }

  bool in_static_block(const Scope& s) const {
    return s.kind == ir::BlockKind::Plate || s.kind == ir::BlockKind::Simulator;
  }

  // `what` (a state, an input, a time relation...) in a model without time.
  void no_time(Range r, const std::string& what) {
    if (model_.kind == ir::ModelKind::Plate)
      error(r, fmt::format("{} belongs to a time series, but this model is over the i.i.d. plate "
                           "n: a model cannot have both",
                           what));
    else
      error(r, fmt::format("{} belongs to a time series, but simulator '{}' has no time", what,
                           model_.name));
  }

  // Which declarations each kind of model allows, and in which form; a rejected declaration is
  // marked invalid so that its uses report nothing more.
  void check_declaration_forms() {
    using VK = ast::VarDecl::Kind;
    const bool plate = model_.kind == ir::ModelKind::Plate;
    const bool simulator = model_.kind == ir::ModelKind::Simulator;
    for (const ast::VarDecl& v : ast_.vars) {
      Symbol* sym = declared(v.name);
      const std::string& name = v.name.name;
      bool ok = true;
      auto reject = [&](Range r, std::string message) {
        error(r, std::move(message));
        ok = false;
      };
      const bool latent = v.kind == VK::Latent;
      if (v.kind == VK::Param && simulator && !v.prior)
        // Likelihood-free inference learns a simulator's parameters from draws of their prior.
        reject(v.name.range,
               fmt::format("parameter '{0}' of simulator '{1}' needs a prior, as in 'param {0} ~ "
                           "uniform(0, 1);', since likelihood-free inference draws the parameters "
                           "from it; a fixed value is a constant: 'const {0} = ...;'",
                           name, model_.name));
      if (v.kind == VK::State || v.kind == VK::Input) {
        if (plate || simulator) {
          no_time(v.range, fmt::format("{} '{}'", kind_name(var_symbol_kind(v.kind)), name));
          ok = false;
        }
      } else if (latent || v.kind == VK::Obs) {
        std::string what = latent ? "latent variable" : "observation";
        if (v.plate && v.plate->name != "n")
          reject(v.plate->range, fmt::format("the items of a plate are indexed by 'n': write "
                                             "{}[n]",
                                             name));
        else if (simulator && v.plate)
          reject(v.plate->range, fmt::format("a simulator draws one sample and has no plate: "
                                             "write '{} {} ~ ...;'",
                                             latent ? "latent" : "obs", name));
        else if (plate && !v.plate)
          reject(v.name.range, fmt::format("{} '{}' in a model over the plate n needs the plate "
                                           "index: write '{} {}[n] ~ ...;'",
                                           what, name, latent ? "latent" : "obs", name));
        else if (!plate && !simulator && v.defines_relation())
          reject(v.range, fmt::format("an observation of a time series is declared as 'obs {0} "
                                      ": TYPE;' with a relation '{0}[t] ~ ...;'; 'obs {0} ~ ...' "
                                      "and 'obs {0} = ...' are for plate models (obs {0}[n] ~ "
                                      "...) and simulators",
                                      name));
        else if (!plate && !simulator && !v.type)
          reject(v.range,
                 fmt::format("observation '{}' needs a type, as in 'obs {} : real;'", name, name));
        else if (v.kind == VK::Obs && (plate || simulator) && v.prior && v.default_value)
          reject(
              v.default_value->range,
              fmt::format("observation '{}' has both a distribution and a value: give one", name));
        else if (v.kind == VK::Obs && plate && v.default_value)
          reject(v.default_value->range,
                 fmt::format("a deterministic observation ('obs {0} = ...') is only for "
                             "simulators; in a model over a plate, give its distribution: 'obs "
                             "{0}[n] ~ ...;'",
                             name));
        else if (v.kind == VK::Obs && (plate || simulator) && !v.defines_relation())
          reject(v.range, fmt::format("observation '{0}' needs a distribution{1}, as in 'obs "
                                      "{0}{2} ~ normal(...);'",
                                      name, simulator ? " or a value" : "", plate ? "[n]" : ""));
      }
      if (!ok && sym)
        sym->valid = false;
    }
  }

  // The declarations with a relation of a plate model or simulator, in the order to lower them:
  // source order, except that an untyped `obs x = e;`, which takes the shape of e, comes before
  // the first declaration that reads it (directly or through lets).
  std::vector<const ast::VarDecl*> static_relation_order() const {
    std::map<std::string, const ast::VarDecl*> untyped;
    for (const ast::VarDecl& v : ast_.vars)
      if (v.kind == ast::VarDecl::Kind::Obs && v.default_value && !v.prior && !v.type)
        untyped.emplace(v.name.name, &v);
    std::map<std::string, const ast::LetDecl*> lets;
    for (const ast::LetDecl& l : ast_.lets)
      lets.emplace(l.name.name, &l);
    std::vector<const ast::VarDecl*> order;
    std::set<const ast::VarDecl*> placed;
    std::set<std::string> lets_followed;
    std::function<void(const ast::VarDecl&)> place;
    std::function<void(const Expr&)> follow = [&](const Expr& e) {
      if (e.kind == Expr::Kind::Name) {
        if (auto u = untyped.find(e.name); u != untyped.end())
          place(*u->second);
        else if (auto l = lets.find(e.name); l != lets.end() && lets_followed.insert(e.name).second)
          follow(*l->second->value);
      }
      for (const ast::ExprPtr& a : e.args)
        if (a)
          follow(*a);
    };
    place = [&](const ast::VarDecl& v) {
      if (!placed.insert(&v).second)
        return; // placed, or being placed: a cycle, which lowering reports
      if (v.default_value)
        follow(*v.default_value);
      if (v.prior)
        for (const ast::ExprPtr& a : v.prior->args)
          follow(*a);
      order.push_back(&v);
    };
    for (const ast::VarDecl& v : ast_.vars)
      if (v.defines_relation())
        place(v);
    return order;
  }

  // `latent z[n] ~ D(...);`, `obs x[n] ~ D(...);` (plate), `latent a ~ D(...);`, `obs x ~ D(...);`
  // and `obs x = e;` (simulator): the relations of the plate or simulator block. A deterministic
  // observation is x ~ dirac(e); without a type it takes the shape of e.
  void add_static_relation(const ast::VarDecl& v) {
    Symbol* sym = declared(v.name);
    if (!sym || !sym->valid)
      return;
    const bool latent = v.kind == ast::VarDecl::Kind::Latent;
    const bool plate = model_.kind == ir::ModelKind::Plate;
    ir::VarDecl& decl = latent ? model_.latents[sym->index] : model_.obs[sym->index];
    Scope s;
    s.kind = static_block();
    s.block = &model_.block(s.kind);
    s.target_kind = latent ? ir::VarKind::Latent : ir::VarKind::Obs;
    s.target_var = sym->index;
    s.target = plate ? v.name.name + "[n]" : v.name.name;
    s.subject = fmt::format("the {} of {}", v.prior ? "distribution" : "value", s.target);
    PendingRelation p;
    p.target = s.target;
    p.range = v.name.range;
    p.rel.kind = s.target_kind;
    p.rel.var = sym->index;
    p.rel.loc = loc(v.range);
    if (v.default_value) { // obs x = e
      std::optional<int> id = lower(*v.default_value, s);
      if (id && !v.type)
        decl.shape = shape_of(s, *id);
      if (id && !(shape_of(s, *id) == decl.shape)) {
        error(v.default_value->range,
              fmt::format("the value of observation '{}' is {}, but '{}' is {}", v.name.name,
                          shape_of(s, *id).str(), v.name.name, decl.shape.str()));
        id.reset();
      }
      p.ok = id.has_value();
      p.rel.dist = ir::Dist::Dirac;
      p.rel.args = {id.value_or(-1)};
    } else {
      std::vector<std::optional<int>> args;
      std::vector<std::optional<ir::Shape>> shapes;
      for (const ast::ExprPtr& a : v.prior->args) {
        args.push_back(lower(*a, s));
        shapes.push_back(args.back() ? std::optional(shape_of(s, *args.back())) : std::nullopt);
      }
      std::optional<ir::Dist> dist =
          check_dist(*v.prior, shapes, decl.shape, s.target, v.name.range);
      p.ok = dist && check_integer_target(decl, *dist, v.name.name, *v.prior);
      if (p.ok)
        check_argument_domain(*dist, *v.prior, *s.block, args);
      if (p.ok) {
        p.rel.dist = *dist;
        for (const auto& a : args)
          p.rel.args.push_back(*a);
      }
    }
    p.reads_now = s.reads_now;
    p.latents_read = s.latents_read;
    (latent ? pending_latents_ : pending_[s.kind]).push_back(std::move(p));
  }

  // z[n] (plate) or a (simulator): a latent variable or an observation of the current item.
  std::optional<int> lower_static_ref(const Expr& e, const Symbol& sym, Scope& s) {
    const bool latent = sym.kind == Symbol::Kind::Latent;
    const std::string& name = latent ? model_.latents[sym.index].name : model_.obs[sym.index].name;
    std::string ref = s.kind == ir::BlockKind::Plate ? name + "[n]" : name;
    ir::VarKind kind = latent ? ir::VarKind::Latent : ir::VarKind::Obs;
    if (!sym.valid)
      return std::nullopt;
    if (!latent && s.target_kind == ir::VarKind::Latent) {
      error(e.range, fmt::format("{} reads observation {}: latent variables are drawn before the "
                                 "observations and cannot read them",
                                 s.subject, ref));
      return std::nullopt;
    }
    if (kind == s.target_kind && sym.index == s.target_var) {
      error(e.range, fmt::format("{} reads {} itself", s.subject, ref));
      return std::nullopt;
    }
    ir::Node n;
    n.op = latent ? ir::Op::Latent : ir::Op::Obs;
    n.var = sym.index;
    n.shape = model_.var_shape(kind, sym.index);
    if (kind == s.target_kind)
      s.reads_now.insert(sym.index);
    if (latent)
      s.latents_read.insert(sym.index);
    return emit(s, std::move(n), e.range);
  }

  // ---- (1) names ---------------------------------------------------------------------------

  void declare_names() {
    struct Decl {
      const ast::Ident* name;
      Symbol::Kind kind;
    };
    std::vector<Decl> decls;
    for (const ast::ConstDecl& c : ast_.consts)
      decls.push_back({&c.name, Symbol::Kind::Const});
    for (const ast::VarDecl& v : ast_.vars)
      decls.push_back({&v.name, var_symbol_kind(v.kind)});
    for (const ast::LetDecl& l : ast_.lets)
      decls.push_back({&l.name, Symbol::Kind::Let});
    for (const ast::FnDecl& f : ast_.fns)
      decls.push_back({&f.name, Symbol::Kind::Fn});
    for (const ast::FunctionalDecl& f : ast_.functionals)
      decls.push_back({&f.name, Symbol::Kind::Functional});
    std::sort(decls.begin(), decls.end(), [this](const Decl& a, const Decl& b) {
      return order(a.name->range.begin) < order(b.name->range.begin);
    });
    for (const Decl& d : decls) {
      const std::string& name = d.name->name;
      if (name == "t") {
        error(d.name->range, "'t' is reserved for the time index and cannot be declared");
        continue;
      }
      if (name == "pi" || name == "inf") {
        error(d.name->range,
              fmt::format("'{}' is a built-in constant and cannot be declared", name));
        continue;
      }
      if (name == "n" && model_.kind == ir::ModelKind::Plate) {
        error(d.name->range, "'n' is the index of the plate's items in this model and cannot be "
                             "declared");
        continue;
      }
      if (auto it = symbols_.find(name); it != symbols_.end()) {
        error(d.name->range, fmt::format("redeclaration of '{}'", name));
        note(it->second.range, fmt::format("'{}' was first declared here", name));
        continue;
      }
      Symbol sym{d.kind, -1, d.name->range, true};
      switch (d.kind) {
      case Symbol::Kind::Const:
        break; // index assigned when defined
      case Symbol::Kind::Param:
        sym.index = static_cast<int>(model_.params.size());
        model_.params.push_back({name, ir::ParamType::Real, {}, std::nullopt, loc(d.name->range)});
        break;
      case Symbol::Kind::State:
        sym.index = static_cast<int>(model_.states.size());
        model_.states.push_back({name, {}, loc(d.name->range)});
        break;
      case Symbol::Kind::Obs:
        sym.index = static_cast<int>(model_.obs.size());
        model_.obs.push_back({name, {}, loc(d.name->range)});
        break;
      case Symbol::Kind::Data:
        sym.index = static_cast<int>(model_.data.size());
        model_.data.push_back({name, {}, loc(d.name->range)});
        break;
      case Symbol::Kind::Input:
        sym.index = static_cast<int>(model_.inputs.size());
        model_.inputs.push_back({name, {}, loc(d.name->range)});
        break;
      case Symbol::Kind::Latent:
        sym.index = static_cast<int>(model_.latents.size());
        model_.latents.push_back({name, {}, loc(d.name->range)});
        break;
      case Symbol::Kind::Let:
        sym.index = index_in(ast_.lets, d.name);
        break;
      case Symbol::Kind::Fn:
        sym.index = index_in(ast_.fns, d.name);
        break;
      case Symbol::Kind::Functional:
        sym.index = index_in(ast_.functionals, d.name);
        break;
      }
      symbols_.emplace(name, sym);
    }
  }

  static Symbol::Kind var_symbol_kind(ast::VarDecl::Kind kind) {
    switch (kind) {
    case ast::VarDecl::Kind::Param:
      return Symbol::Kind::Param;
    case ast::VarDecl::Kind::State:
      return Symbol::Kind::State;
    case ast::VarDecl::Kind::Obs:
      return Symbol::Kind::Obs;
    case ast::VarDecl::Kind::Data:
      return Symbol::Kind::Data;
    case ast::VarDecl::Kind::Input:
      return Symbol::Kind::Input;
    case ast::VarDecl::Kind::Latent:
      return Symbol::Kind::Latent;
    }
    return Symbol::Kind::Param;
  }

  template <class Decls> static int index_in(const Decls& decls, const ast::Ident* name) {
    for (std::size_t i = 0; i < decls.size(); ++i)
      if (&decls[i].name == name)
        return static_cast<int>(i);
    return -1;
  }

  // The symbol a declaration introduced, or null if the declaration was rejected as a duplicate.
  Symbol* declared(const ast::Ident& name) {
    auto it = symbols_.find(name.name);
    if (it == symbols_.end() || it->second.range.begin != name.range.begin)
      return nullptr;
    return &it->second;
  }

  Symbol* lookup(const std::string& name) {
    auto it = symbols_.find(name);
    return it == symbols_.end() ? nullptr : &it->second;
  }

  // The symbol `name` refers to where it is used (at `from`): null when it is not declared, or
  // declared in a module that from's file does not import.
  Symbol* lookup(const std::string& name, Range from) {
    Symbol* sym = lookup(name);
    return sym && visible(from, sym->range) ? sym : nullptr;
  }

  // ---- constant evaluation ----------------------------------------------------------------

  std::optional<ConstValue> eval_const(const Expr& e, std::string what,
                                       const ast::ConstDecl* defining = nullptr) {
    ir::Block scratch;
    Scope s;
    s.block = &scratch;
    s.constant = true;
    s.what = std::move(what);
    s.defining = defining;
    std::optional<int> id = lower(e, s);
    if (!id)
      return std::nullopt;
    std::optional<std::vector<double>> value = constant_value(scratch, *id);
    if (!value) { // a constant scope lowers only constants, so this is a safety net
      error(e.range, fmt::format("{} must be a constant expression", s.what));
      return std::nullopt;
    }
    return ConstValue{scratch.nodes[*id].shape, std::move(*value)};
  }

  // A constant that must be a single integer, as a dimension, index or time index.
  std::optional<long> eval_int(const Expr& e, const std::string& what) {
    std::optional<ConstValue> v = eval_const(e, what);
    if (!v)
      return std::nullopt;
    if (!v->shape.is_scalar()) {
      error(e.range,
            fmt::format("{} must be a single integer, but it is {}", what, v->shape.str()));
      return std::nullopt;
    }
    double x = v->values[0];
    if (!std::isfinite(x) || x != std::floor(x) || std::fabs(x) > 1e15) {
      error(e.range, fmt::format("{} must be an integer, but it is {}", what, x));
      return std::nullopt;
    }
    return static_cast<long>(x);
  }

  std::optional<int> eval_dimension(const Expr& e, const std::string& what) {
    std::optional<long> n = eval_int(e, what);
    if (!n)
      return std::nullopt;
    if (*n < 0) {
      error(e.range, fmt::format("{} must be a non-negative integer, but it is {}", what, *n));
      return std::nullopt;
    }
    if (*n > max_dimension) {
      error(e.range,
            fmt::format("{} of {} is too large (the limit is {})", what, *n, max_dimension));
      return std::nullopt;
    }
    return static_cast<int>(*n);
  }

  // ---- (2) constants ----------------------------------------------------------------------

  void define_const(const ast::ConstDecl& c) {
    Symbol* sym = declared(c.name);
    std::optional<ConstValue> v =
        eval_const(*c.value, fmt::format("the value of constant '{}'", c.name.name), &c);
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

  // ---- (3) parameters, states, observations -----------------------------------------------

  std::optional<ir::Shape> type_shape(const ast::TypeSpec& t) {
    std::vector<int> dims;
    bool ok = true;
    for (const ast::ExprPtr& d : t.dims) {
      std::optional<int> n = eval_dimension(*d, "a dimension");
      ok = ok && n.has_value();
      dims.push_back(n.value_or(0));
    }
    if (!ok)
      return std::nullopt;
    long elements = 1;
    for (int d : dims)
      elements *= d;
    if (elements > max_elements) {
      error(t.range, fmt::format("this type has {} elements, more than the limit of {}", elements,
                                 max_elements));
      return std::nullopt;
    }
    switch (t.kind) {
    case ast::TypeSpec::Kind::Real:
      return ir::Shape::scalar();
    case ast::TypeSpec::Kind::Vector:
      return ir::Shape::vector(dims[0]);
    case ast::TypeSpec::Kind::Matrix:
      return ir::Shape::matrix(dims[0], dims[1]);
    case ast::TypeSpec::Kind::CovMatrix:
      return ir::Shape::matrix(dims[0], dims[0]);
    case ast::TypeSpec::Kind::Simplex:
      if (dims[0] < 1) {
        error(t.range, "a simplex needs at least one component");
        return std::nullopt;
      }
      return ir::Shape::vector(dims[0]);
    case ast::TypeSpec::Kind::Int:
      return ir::Shape::scalar();
    }
    return std::nullopt;
  }

  // The bounds of real(lo, hi) or int[lo..hi]; nullopt after an error.
  std::optional<std::pair<double, double>> type_bounds(const ast::TypeSpec& t) {
    if (t.bounds.empty())
      return std::pair(-INFINITY, INFINITY);
    bool integer = t.kind == ast::TypeSpec::Kind::Int;
    std::optional<double> lo, hi;
    if (integer) { // an integer, or inf / -inf for an open side: int[0..inf]
      auto bound = [&](const Expr& e, const char* what) -> std::optional<double> {
        std::optional<double> v = eval_real(e, what);
        if (v && std::isfinite(*v) && *v != std::floor(*v)) {
          error(e.range, fmt::format("{} must be an integer or inf, but it is {}", what, *v));
          return std::nullopt;
        }
        return v;
      };
      lo = bound(*t.bounds[0], "the lower bound");
      hi = bound(*t.bounds[1], "the upper bound");
    } else {
      lo = eval_real(*t.bounds[0], "the lower bound");
      hi = eval_real(*t.bounds[1], "the upper bound");
    }
    if (!lo || !hi)
      return std::nullopt;
    if (!(*lo <= *hi) || (!integer && *lo == *hi)) {
      error(t.range, fmt::format("the lower bound ({}) must be {} the upper bound ({})", *lo,
                                 integer ? "at most" : "below", *hi));
      return std::nullopt;
    }
    return std::pair(*lo, *hi);
  }

  std::optional<double> eval_real(const Expr& e, const std::string& what) {
    std::optional<ConstValue> v = eval_const(e, what);
    if (!v)
      return std::nullopt;
    if (!v->shape.is_scalar() || std::isnan(v->values[0])) {
      error(e.range, fmt::format("{} must be a real number, but it is {}", what,
                                 v->shape.is_scalar() ? "NaN" : v->shape.str()));
      return std::nullopt;
    }
    return v->values[0];
  }

  void define_var(const ast::VarDecl& v) {
    using TK = ast::TypeSpec::Kind;
    using VK = ast::VarDecl::Kind;
    Symbol* sym = declared(v.name);
    std::optional<ir::Shape> shape = ir::Shape::scalar();
    double lower = -INFINITY, upper = INFINITY;
    bool bounds_ok = true;
    TK tk = v.type ? v.type->kind : TK::Real;
    if (v.type) {
      shape = type_shape(*v.type);
      if (auto b = type_bounds(*v.type))
        std::tie(lower, upper) = *b;
      else
        bounds_ok = false;
      std::string what = kind_name(var_symbol_kind(v.kind));
      if (tk == TK::CovMatrix && v.kind != VK::Param && v.kind != VK::Data) {
        error(v.type->range, fmt::format("cov_matrix is a parameter or data type; use matrix[n, n] "
                                         "for {}",
                                         a_kind(var_symbol_kind(v.kind))));
        shape.reset();
      } else if (tk == TK::Simplex && v.kind != VK::Param && v.kind != VK::Data) {
        error(v.type->range,
              fmt::format("simplex is a parameter or data type; use vector[n] for {}",
                          a_kind(var_symbol_kind(v.kind))));
        shape.reset();
      } else if (tk == TK::Int && v.kind == VK::Param) {
        error(v.type->range, "a parameter cannot be an integer: parameters are continuous (use a "
                             "constant, or data, for a fixed integer)");
        shape.reset();
      } else if (tk == TK::Real && !v.type->bounds.empty() && v.kind != VK::Param &&
                 v.kind != VK::Data) {
        error(v.type->range,
              fmt::format("bounds real(lo, hi) are for parameters and data; {} '{}' {}", what,
                          v.name.name,
                          v.kind == VK::Input ? "is read as given (declare it real)"
                                              : "takes the support of its distribution"));
        shape.reset();
      }
    }
    if (!sym)
      return;
    if (!shape || !bounds_ok) {
      sym->valid = false;
      return;
    }
    ir::VarDecl* var = nullptr;
    switch (v.kind) {
    case VK::State:
      var = &model_.states[sym->index];
      break;
    case VK::Obs:
      var = &model_.obs[sym->index];
      break;
    case VK::Data:
      var = &model_.data[sym->index];
      break;
    case VK::Input:
      var = &model_.inputs[sym->index];
      break;
    case VK::Latent:
      var = &model_.latents[sym->index];
      break;
    case VK::Param:
      break;
    }
    if (var) {
      var->shape = *shape;
      var->integer = tk == TK::Int;
      var->lower = lower;
      var->upper = upper;
      var->constraint = tk == TK::CovMatrix ? ir::Constraint::CovMatrix
                        : tk == TK::Simplex ? ir::Constraint::Simplex
                                            : ir::Constraint::None;
      return;
    }
    ir::ParamDecl& p = model_.params[sym->index];
    p.shape = *shape;
    p.lower = lower;
    p.upper = upper;
    p.type = tk == TK::Real      ? ir::ParamType::Real
             : tk == TK::Vector  ? ir::ParamType::Vector
             : tk == TK::Matrix  ? ir::ParamType::Matrix
             : tk == TK::Simplex ? ir::ParamType::Simplex
                                 : ir::ParamType::CovMatrix;
    if (v.prior) {
      if (tk == TK::CovMatrix)
        error(v.prior->range, "a prior on a cov_matrix parameter is not supported yet (there is "
                              "no distribution over covariance matrices)");
      else
        add_prior(v, sym->index, p.shape);
    }
    if (v.default_value)
      set_default(v, p);
  }

  void add_prior(const ast::VarDecl& v, int param, const ir::Shape& shape) {
    const ast::DistCall& d = *v.prior;
    std::vector<std::optional<ConstValue>> values;
    for (const ast::ExprPtr& a : d.args)
      values.push_back(eval_const(*a, "a prior argument"));
    std::vector<std::optional<ir::Shape>> shapes;
    for (const auto& value : values)
      shapes.push_back(value ? std::optional(value->shape) : std::nullopt);
    std::optional<ir::Dist> dist = check_dist(d, shapes, shape, v.name.name, v.name.range);
    if (!dist)
      return;
    std::vector<std::optional<std::vector<double>>> constants;
    for (const auto& value : values)
      constants.push_back(value ? std::optional(value->values) : std::nullopt);
    check_argument_domain(*dist, d, constants);
    ir::Relation rel;
    rel.kind = ir::VarKind::Param;
    rel.var = param;
    rel.dist = *dist;
    rel.loc = loc(v.range);
    for (std::size_t k = 0; k < values.size(); ++k) {
      ir::Node n;
      n.op = ir::Op::Const;
      n.shape = values[k]->shape;
      n.values = values[k]->values;
      n.loc = loc(d.args[k]->range);
      rel.args.push_back(model_.prior.add(std::move(n)));
    }
    model_.prior.relations.push_back(std::move(rel));
  }

  void set_default(const ast::VarDecl& v, ir::ParamDecl& p) {
    const Expr& e = *v.default_value;
    std::optional<ConstValue> value =
        eval_const(e, fmt::format("the default value of '{}'", p.name));
    if (!value)
      return;
    std::vector<double> values;
    if (value->shape == p.shape) {
      values = value->values;
    } else if (value->shape.is_scalar()) {
      values.assign(p.shape.size(), value->values[0]);
    } else {
      error(e.range, fmt::format("the default value of '{}' is {}, but '{}' is {}", p.name,
                                 value->shape.str(), p.name, p.shape.str()));
      return;
    }
    for (double x : values)
      if (!std::isfinite(x)) {
        error(e.range, fmt::format("the default value of '{}' is not finite ({})", p.name, x));
        return;
      }
    for (double x : values)
      if (x < p.lower || x > p.upper) {
        error(e.range, fmt::format("the default value of '{}' ({}) is outside its bounds [{}, {}]",
                                   p.name, x, p.lower, p.upper));
        return;
      }
    if (p.type == ir::ParamType::Simplex) {
      double total = 0;
      for (double x : values)
        total += x;
      auto negative = std::find_if(values.begin(), values.end(), [](double x) { return x < 0; });
      if (negative != values.end() || std::fabs(total - 1) > 1e-9) {
        error(e.range,
              fmt::format("the default value of simplex '{}' must be non-negative and sum to 1, "
                          "but {}",
                          p.name,
                          negative != values.end()
                              ? fmt::format("component {} is negative ({})",
                                            negative - values.begin(), *negative)
                              : fmt::format("it sums to {}", total)));
        return;
      }
    }
    if (p.type == ir::ParamType::CovMatrix) {
      int n = p.shape.dims[0];
      Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> m(
          values.data(), n, n);
      if (!m.isApprox(m.transpose(), 1e-12) && !(m - m.transpose()).isZero(1e-12)) {
        error(e.range,
              fmt::format("the default value of cov_matrix '{}' is not symmetric", p.name));
        return;
      }
      if (Eigen::LLT<Eigen::MatrixXd>(m).info() != Eigen::Success) {
        error(e.range,
              fmt::format("the default value of cov_matrix '{}' is not positive definite", p.name));
        return;
      }
    }
    p.default_value = std::move(values);
  }

  // ---- distributions ----------------------------------------------------------------------

  // Checks a distribution call against its target; arguments that failed to lower are nullopt.
  std::optional<ir::Dist> check_dist(const ast::DistCall& d,
                                     const std::vector<std::optional<ir::Shape>>& args,
                                     const ir::Shape& target, const std::string& target_name,
                                     Range target_range) {
    const ir::DistInfo* info = ir::find_dist(d.name.name);
    if (info && info->internal)
      info = nullptr;
    if (!info) {
      std::vector<std::string> names;
      for (const ir::DistInfo& known : ir::all_dists())
        if (!known.internal)
          names.emplace_back(known.name);
      std::string message = fmt::format("unknown distribution '{}'", d.name.name);
      if (auto guess = closest_name(d.name.name, names))
        message += fmt::format("; did you mean '{}'?", *guess);
      error(d.name.range, message);
      return std::nullopt;
    }
    if (args.size() != info->arg_names.size()) {
      error(d.range, fmt::format("{} takes {}, but {} given", signature(*info),
                                 plural(info->arg_names.size(), "argument"),
                                 args.size() == 1 ? "1 was" : fmt::format("{} were", args.size())));
      return std::nullopt;
    }
    if (std::any_of(args.begin(), args.end(), [](const auto& a) { return !a.has_value(); }))
      return std::nullopt;
    bool ok = true;
    if (info->dist == ir::Dist::Categorical) {
      if (!target.is_scalar()) {
        error(target_range, fmt::format("categorical needs a single integer target, but '{}' is {}",
                                        target_name, target.str()));
        return std::nullopt;
      }
      if (args[0]->rank() != 1) {
        error(d.args[0]->range, fmt::format("argument 'p' of categorical must be a vector of "
                                            "probabilities, but it is {}",
                                            args[0]->str()));
        return std::nullopt;
      }
      return info->dist;
    }
    if (info->dist == ir::Dist::Dirichlet || info->dist == ir::Dist::Multinomial) {
      if (target.rank() != 1) {
        error(target_range, fmt::format("{} needs a vector target, but '{}' is {}", info->name,
                                        target_name, target.str()));
        return std::nullopt;
      }
      bool dirichlet = info->dist == ir::Dist::Dirichlet;
      const std::optional<ir::Shape>& weights = args[dirichlet ? 0 : 1];
      if (!(*weights == target) && !(dirichlet && weights->is_scalar())) {
        error(d.args[dirichlet ? 0 : 1]->range,
              fmt::format("argument '{}' of {} must be {}{}, like its target '{}', but it is {}",
                          info->arg_names[dirichlet ? 0 : 1], info->name, target.str(),
                          dirichlet ? " or real" : "", target_name, weights->str()));
        ok = false;
      }
      if (!dirichlet && !args[0]->is_scalar()) {
        error(d.args[0]->range, fmt::format("argument 'n' of multinomial must be real (the number "
                                            "of draws), but it is {}",
                                            args[0]->str()));
        ok = false;
      }
      return ok ? std::optional(info->dist) : std::nullopt;
    }
    if (info->dist == ir::Dist::MvNormal || info->dist == ir::Dist::MvNormalChol) {
      std::string_view matrix = info->dist == ir::Dist::MvNormal ? "Sigma" : "L";
      if (target.rank() != 1) {
        error(target_range, fmt::format("{} needs a vector target, but '{}' is {}", info->name,
                                        target_name, target.str()));
        return std::nullopt;
      }
      ir::Shape cov = ir::Shape::matrix(target.dims[0], target.dims[0]);
      if (!(*args[0] == target)) {
        error(d.args[0]->range,
              fmt::format("argument 'mu' of {} must be {}, like its target '{}', but it is {}",
                          info->name, target.str(), target_name, args[0]->str()));
        ok = false;
      }
      if (!(*args[1] == cov)) {
        error(d.args[1]->range,
              fmt::format("argument '{}' of {} must be {} for a target of shape {}, but it is {}",
                          matrix, info->name, cov.str(), target.str(), args[1]->str()));
        ok = false;
      }
    } else {
      for (std::size_t k = 0; k < args.size(); ++k) {
        if (args[k]->is_scalar() || *args[k] == target)
          continue;
        std::string allowed = target.is_scalar() ? "real" : "real or " + target.str();
        error(d.args[k]->range,
              fmt::format("argument '{}' of {} must be {}, like its target '{}', but it is {}",
                          info->arg_names[k], info->name, allowed, target_name, args[k]->str()));
        ok = false;
      }
    }
    return ok ? std::optional(info->dist) : std::nullopt;
  }

  // ---- expressions ------------------------------------------------------------------------

  int emit(Scope& s, ir::Node n, Range r) {
    n.loc = loc(s.call_site.value_or(r));
    return s.block->add(std::move(n));
  }

  int emit_const(Scope& s, ir::Shape shape, std::vector<double> values, Range r) {
    ir::Node n;
    n.op = ir::Op::Const;
    n.shape = std::move(shape);
    n.values = std::move(values);
    return emit(s, std::move(n), r);
  }

  int emit_op(Scope& s, ir::Op op, ir::Shape shape, std::vector<int> args, Range r) {
    ir::Node n;
    n.op = op;
    n.shape = std::move(shape);
    n.args = std::move(args);
    return emit(s, std::move(n), r);
  }

  int emit_call(Scope& s, std::string fn, ir::Shape shape, std::vector<int> args, Range r) {
    ir::Node n;
    n.op = ir::Op::Call;
    n.fn = std::move(fn);
    n.shape = std::move(shape);
    n.args = std::move(args);
    return emit(s, std::move(n), r);
  }

  const ir::Shape& shape_of(const Scope& s, int id) const { return s.block->nodes[id].shape; }

  // c ? a : b. Both branches are computed (they are cheap, and selects vectorise); a branch that
  // fails, such as log(-1), just is not chosen.
  std::optional<int> lower_cond(const Expr& e, Scope& s) {
    std::optional<int> c = lower(*e.args[0], s);
    std::optional<int> a = lower(*e.args[1], s);
    std::optional<int> b = lower(*e.args[2], s);
    if (!c || !a || !b)
      return std::nullopt;
    const ir::Shape sc = shape_of(s, *c), sa = shape_of(s, *a), sb = shape_of(s, *b);
    if (!(sa == sb) && !sa.is_scalar() && !sb.is_scalar()) {
      error(e.range, fmt::format("the two branches of a conditional must have the same shape, or "
                                 "one must be real, but they are {} and {}",
                                 sa.str(), sb.str()));
      return std::nullopt;
    }
    ir::Shape shape = sa.is_scalar() ? sb : sa;
    if (!sc.is_scalar() && !shape.is_scalar() && !(sc == shape)) {
      error(e.args[0]->range,
            fmt::format("the condition is {}, but the branches are {}: a condition is real, or "
                        "has the shape of the branches to choose between them component by "
                        "component",
                        sc.str(), shape.str()));
      return std::nullopt;
    }
    return emit_op(s, ir::Op::Select, sc.is_scalar() ? shape : sc, {*c, *a, *b}, e.range);
  }

  std::optional<int> lower(const Expr& e, Scope& s) {
    switch (e.kind) {
    case EKind::Number:
      return emit_const(s, ir::Shape::scalar(), {e.number}, e.range);
    case EKind::Name:
      return lower_name(e, s);
    case EKind::Neg: {
      std::optional<int> a = lower(*e.args[0], s);
      if (!a)
        return std::nullopt;
      return emit_op(s, ir::Op::Neg, shape_of(s, *a), {*a}, e.range);
    }
    case EKind::Not: {
      std::optional<int> a = lower(*e.args[0], s);
      if (!a)
        return std::nullopt;
      return emit_call(s, "not", shape_of(s, *a), {*a}, e.range);
    }
    case EKind::Cond:
      return lower_cond(e, s);
    case EKind::Binary:
      return lower_binary(e, s);
    case EKind::Call:
      return lower_call(e, s);
    case EKind::List:
      return lower_list(e, s);
    case EKind::Index:
      return lower_index(e, s);
    }
    return std::nullopt;
  }

  // A function body sees its arguments and constants only, so that a call means the same
  // wherever it appears.
  bool outside_function(const Scope& s, Range r, const std::string& what) {
    if (!s.fn)
      return true;
    error(r, fmt::format("function '{}' cannot read {}: pass it as an argument", s.fn->name.name,
                         what));
    return false;
  }

  // Lowers `body` as the expansion of a let or a function named `name`, used at `use`; errors
  // inside get a note pointing at the use.
  template <class F>
  std::optional<int> expanding(Scope& s, const std::string& what, Range use, F&& body) {
    int errors = diags_.error_count();
    s.expanding.emplace_back(what, use);
    std::optional<int> id = body();
    s.expanding.pop_back();
    if (diags_.error_count() > errors)
      note(use, fmt::format("in {}, used here", what));
    return id;
  }

  std::optional<int> lower_let(const Expr& e, const Symbol& sym, Scope& s) {
    const ast::LetDecl& let = ast_.lets[sym.index];
    std::string what = fmt::format("let '{}'", let.name.name);
    for (const auto& [name, where] : s.expanding)
      if (name == what) {
        error(e.range, fmt::format("let '{}' is defined in terms of itself", let.name.name));
        return std::nullopt;
      }
    if (!sym.valid || failed_lets_.count({sym.index, s.block}))
      return std::nullopt;
    std::optional<int> id = expanding(s, what, e.range, [&] { return lower(*let.value, s); });
    if (!id)
      failed_lets_.insert({sym.index, s.block}); // one report per let and block
    return id;
  }

  std::optional<int> lower_name(const Expr& e, Scope& s) {
    if (auto it = s.locals.find(e.name); it != s.locals.end())
      return it->second;
    if (e.name == "t") {
      if (s.constant) {
        not_constant(s, e.range, "'t' (the time index) is not");
        return std::nullopt;
      }
      if (!outside_function(s, e.range, "'t'"))
        return std::nullopt;
      if (in_static_block(s)) {
        error(e.range, model_.kind == ir::ModelKind::Plate
                           ? "'t' is the time index, but this model is over the i.i.d. plate n "
                             "and has no time"
                           : fmt::format("'t' is the time index, but simulator '{}' has no time",
                                         model_.name));
        return std::nullopt;
      }
      if (s.kind == ir::BlockKind::Initial)
        return emit_const(s, ir::Shape::scalar(), {0.0}, e.range);
      return emit_op(s, ir::Op::Time, ir::Shape::scalar(), {}, e.range);
    }
    if (e.name == "pi")
      return emit_const(s, ir::Shape::scalar(), {std::numbers::pi}, e.range);
    if (e.name == "inf")
      return emit_const(s, ir::Shape::scalar(), {INFINITY}, e.range);
    Symbol* sym = lookup(e.name, e.range);
    if (!sym && e.name == "n" && model_.kind == ir::ModelKind::Plate) {
      error(e.range, "'n' only indexes the latent variables and observations of the plate, as in "
                     "z[n]; it is not a value");
      return std::nullopt;
    }
    if (!sym) {
      unknown_name(e.range, e.name);
      return std::nullopt;
    }
    sym->used = true;
    switch (sym->kind) {
    case Symbol::Kind::Latent:
      if (s.constant) {
        not_constant(s, e.range, fmt::format("'{}' is a latent variable", e.name));
        return std::nullopt;
      }
      if (!outside_function(s, e.range, fmt::format("latent variable '{}'", e.name)))
        return std::nullopt;
      if (s.kind == ir::BlockKind::Simulator)
        return lower_static_ref(e, *sym, s);
      error(e.range,
            fmt::format("latent variable '{0}' needs the plate index here: write {0}[n]", e.name));
      return std::nullopt;
    case Symbol::Kind::Let:
      if (s.constant) {
        not_constant(s, e.range, fmt::format("'{}' is a let binding", e.name));
        return std::nullopt;
      }
      if (!outside_function(s, e.range, fmt::format("let binding '{}'", e.name)))
        return std::nullopt;
      return lower_let(e, *sym, s);
    case Symbol::Kind::Fn:
      error(e.range, fmt::format("'{0}' is a function: call it, as in {0}(...)", e.name));
      return std::nullopt;
    case Symbol::Kind::Functional:
      error(e.range, fmt::format("'{}' is a functional: it is estimated by the runtime and cannot "
                                 "be used in an expression",
                                 e.name));
      return std::nullopt;
    case Symbol::Kind::Data: {
      if (s.constant) {
        not_constant(s, e.range,
                     fmt::format("'{}' is data, known only when the program runs", e.name));
        return std::nullopt;
      }
      if (!outside_function(s, e.range, fmt::format("data '{}'", e.name)) || !sym->valid)
        return std::nullopt;
      ir::Node n;
      n.op = ir::Op::Data;
      n.var = sym->index;
      n.shape = model_.data[sym->index].shape;
      return emit(s, std::move(n), e.range);
    }
    case Symbol::Kind::Const:
      if (s.defining && order(sym->range.begin) >= order(s.defining->name.range.begin)) {
        if (sym->range.begin == s.defining->name.range.begin)
          error(e.range, fmt::format("constant '{}' is defined in terms of itself", e.name));
        else
          error(e.range, fmt::format("constant '{}' is declared after '{}'; a constant can only "
                                     "use constants declared before it",
                                     e.name, s.defining->name.name));
        return std::nullopt;
      }
      if (!sym->valid)
        return std::nullopt;
      return emit_const(s, consts_[sym->index].shape, consts_[sym->index].values, e.range);
    case Symbol::Kind::Param: {
      if (s.constant) {
        not_constant(s, e.range, fmt::format("'{}' is a parameter", e.name));
        return std::nullopt;
      }
      if (!outside_function(s, e.range, fmt::format("parameter '{}'", e.name)) || !sym->valid)
        return std::nullopt;
      ir::Node n;
      n.op = ir::Op::Param;
      n.var = sym->index;
      n.shape = model_.params[sym->index].shape;
      return emit(s, std::move(n), e.range);
    }
    case Symbol::Kind::State:
    case Symbol::Kind::Obs:
    case Symbol::Kind::Input: {
      if (s.constant) {
        not_constant(s, e.range, fmt::format("'{}' is {}", e.name, a_kind(sym->kind)));
        return std::nullopt;
      }
      if (!outside_function(s, e.range, fmt::format("{} '{}'", kind_name(sym->kind), e.name)))
        return std::nullopt;
      if (s.kind == ir::BlockKind::Simulator && sym->kind == Symbol::Kind::Obs)
        return lower_static_ref(e, *sym, s);
      if (s.kind == ir::BlockKind::Plate && sym->kind == Symbol::Kind::Obs) {
        error(e.range,
              fmt::format("observation '{0}' needs the plate index here: write {0}[n]", e.name));
        return std::nullopt;
      }
      if (!sym->valid)
        return std::nullopt; // a state or input of a model without time, reported already
      std::string how;
      if (s.kind == ir::BlockKind::Initial)
        how = fmt::format("{}[0]", e.name);
      else if ((s.kind == ir::BlockKind::Transition || s.kind == ir::BlockKind::Functional ||
                s.kind == ir::BlockKind::Proposal) &&
               sym->kind == Symbol::Kind::State)
        how = fmt::format("{0}[t-1] for the previous value or {0}[t]", e.name);
      else if (s.kind == ir::BlockKind::Transition && sym->kind == Symbol::Kind::Obs)
        how = fmt::format("{}[t-1]", e.name);
      else
        how = fmt::format("{}[t]", e.name);
      error(e.range, fmt::format("{} '{}' needs a time index here: write {}", kind_name(sym->kind),
                                 e.name, how));
      return std::nullopt;
    }
    }
    return std::nullopt;
  }

  std::optional<int> lower_binary(const Expr& e, Scope& s) {
    std::optional<int> a = lower(*e.args[0], s);
    std::optional<int> b = lower(*e.args[1], s);
    if (!a || !b)
      return std::nullopt;
    const ir::Shape sa = shape_of(s, *a);
    const ir::Shape sb = shape_of(s, *b);
    std::string both = fmt::format("{} {} {}", sa.str(), e.op, sb.str());
    static const std::map<std::string, std::string> elementwise = {
        {"%", "mod"}, {"<", "lt"},  {"<=", "le"},  {">", "gt"}, {">=", "ge"},
        {"==", "eq"}, {"!=", "ne"}, {"&&", "and"}, {"||", "or"}};
    if (auto it = elementwise.find(e.op); it != elementwise.end()) {
      if (!(sa == sb) && !sa.is_scalar() && !sb.is_scalar()) {
        error(e.range, fmt::format("shape mismatch: {} (the operands of '{}' must have the same "
                                   "shape, or one must be real)",
                                   both, e.op));
        return std::nullopt;
      }
      return emit_call(s, it->second, sa.is_scalar() ? sb : sa, {*a, *b}, e.range);
    }
    switch (e.op[0]) {
    case '+':
    case '-':
    case '/': {
      if (!(sa == sb) && !sa.is_scalar() && !sb.is_scalar()) {
        error(e.range, fmt::format("shape mismatch: {} (the operands of '{}' must have the same "
                                   "shape, or one must be real)",
                                   both, e.op));
        return std::nullopt;
      }
      ir::Op op = e.op == "+" ? ir::Op::Add : e.op == "-" ? ir::Op::Sub : ir::Op::Div;
      return emit_op(s, op, sa.is_scalar() ? sb : sa, {*a, *b}, e.range);
    }
    case '*': {
      if (sa.is_scalar() || sb.is_scalar())
        return emit_op(s, ir::Op::Mul, sa.is_scalar() ? sb : sa, {*a, *b}, e.range);
      if (sa.rank() == 1 && sb.rank() == 1) {
        error(e.range, fmt::format("cannot multiply two vectors with '*' ({}); use dot(a, b) for "
                                   "their inner product",
                                   both));
        return std::nullopt;
      }
      if (sa.rank() == 1) {
        error(e.range, fmt::format("cannot multiply {}: vectors are columns, so only matrix * "
                                   "vector is defined",
                                   both));
        return std::nullopt;
      }
      if (sa.dims[1] != sb.dims[0]) {
        std::string why =
            sb.rank() == 1
                ? fmt::format("the matrix has {} columns but the vector has {} elements",
                              sa.dims[1], sb.dims[0])
                : fmt::format("the left matrix has {} columns but the right one has {} rows",
                              sa.dims[1], sb.dims[0]);
        error(e.range, fmt::format("shape mismatch: {} ({})", both, why));
        return std::nullopt;
      }
      ir::Shape shape = sb.rank() == 1 ? ir::Shape::vector(sa.dims[0])
                                       : ir::Shape::matrix(sa.dims[0], sb.dims[1]);
      return emit_op(s, ir::Op::MatMul, shape, {*a, *b}, e.range);
    }
    case '^':
      if (!sb.is_scalar()) {
        error(e.args[1]->range,
              fmt::format("the exponent of '^' must be real, but it is {}; use pow(a, b) for "
                          "elementwise powers",
                          sb.str()));
        return std::nullopt;
      }
      return emit_op(s, ir::Op::Pow, sa, {*a, *b}, e.range);
    }
    return std::nullopt;
  }

  std::optional<int> lower_call(const Expr& e, Scope& s) {
    const std::string& fn = e.name;
    std::size_t n = e.args.size();
    auto arity = [&](std::size_t want, std::string_view sig) {
      if (n == want)
        return true;
      error(e.range, fmt::format("{} takes {}, but {} given", sig, plural(want, "argument"),
                                 n == 1 ? "1 was" : fmt::format("{} were", n)));
      return false;
    };
    if (Symbol* sym = lookup(fn, e.name_range); sym && sym->kind == Symbol::Kind::Fn) {
      sym->used = true;
      return call_function(e, *sym, s);
    }
    const ir::Builtin* info = ir::find_callable(fn);
    if (constructor_functions.count(fn)) {
      if (!arity(1, fn + "(n)"))
        return std::nullopt;
      std::optional<int> size = eval_dimension(*e.args[0], fmt::format("the size given to {}", fn));
      if (!size)
        return std::nullopt;
      if (fn != "eye")
        return emit_const(s, ir::Shape::vector(*size),
                          std::vector<double>(*size, fn == "ones" ? 1.0 : 0.0), e.range);
      std::vector<double> values(static_cast<std::size_t>(*size) * *size, 0.0);
      for (int i = 0; i < *size; ++i)
        values[static_cast<std::size_t>(i) * *size + i] = 1.0;
      return emit_const(s, ir::Shape::matrix(*size, *size), std::move(values), e.range);
    }
    if (!info) {
      if (const ir::DistInfo* d = ir::find_dist(fn); d && !d->internal)
        error(e.name_range, fmt::format("'{}' is a distribution, not a function; distributions "
                                        "appear only after '~'",
                                        fn));
      else if (report_hidden(e.name_range, fn)) {
        // declared in a module this file does not import: said so
      } else if (Symbol* sym = lookup(fn, e.name_range))
        error(e.name_range, fmt::format("'{}' is {}, not a function", fn, a_kind(sym->kind)));
      else if (auto guess = closest_name(fn, function_names(e.name_range)))
        error(e.name_range, fmt::format("unknown function '{}'; did you mean '{}'?", fn, *guess));
      else
        error(e.name_range, fmt::format("unknown function '{}'; the functions are: {}", fn,
                                        fmt::join(function_names(e.name_range), ", ")));
      for (const ast::ExprPtr& a : e.args)
        lower(*a, s);
      return std::nullopt;
    }
    std::vector<std::optional<int>> args;
    for (const ast::ExprPtr& a : e.args)
      args.push_back(lower(*a, s));
    if (!arity(info->arity, fmt::format("{}({})", fn, info->params)))
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
    error(e.range, ir::builtin_shape_error(*info, shapes));
    return std::nullopt;
  }

  std::vector<std::string> function_names(Range from) const {
    std::vector<std::string> names = builtin_function_names();
    for (const ast::FnDecl& f : ast_.fns)
      if (visible(from, f.name.range))
        names.push_back(f.name.name);
    return names;
  }

  // ---- user functions ---------------------------------------------------------------------

  struct FnSignature {
    std::vector<ir::Shape> params;
    ir::Shape result;
  };

  // Checks each function once, where it is declared: its types, and its body lowered on
  // placeholder arguments. A call then only has to check its arguments.
  void define_fn(const ast::FnDecl& f) {
    Symbol* sym = declared(f.name);
    FnSignature sig;
    bool ok = true;
    std::set<std::string> seen;
    for (const ast::FnParam& p : f.params) {
      if (!seen.insert(p.name.name).second) {
        error(p.name.range,
              fmt::format("function '{}' has two parameters named '{}'", f.name.name, p.name.name));
        ok = false;
      }
      if (p.name.name == "t" || p.name.name == "pi" || p.name.name == "inf") {
        error(p.name.range,
              fmt::format("'{}' is {} and cannot name a function parameter", p.name.name,
                          p.name.name == "t" ? "the time index" : "a built-in constant"));
        ok = false;
      }
      std::optional<ir::Shape> shape = fn_type_shape(p.type);
      ok = ok && shape.has_value();
      sig.params.push_back(shape.value_or(ir::Shape::scalar()));
    }
    std::optional<ir::Shape> result = fn_type_shape(f.result);
    ok = ok && result.has_value();
    sig.result = result.value_or(ir::Shape::scalar());
    if (ok) {
      ir::Block scratch;
      Scope s;
      s.block = &scratch;
      s.kind = ir::BlockKind::Transition;
      std::vector<int> args;
      for (const ir::Shape& shape : sig.params)
        args.push_back(emit_const(s, shape, std::vector<double>(shape.size(), 0.0), f.range));
      ok = inline_body(f, sig, args, s).has_value();
    }
    if (!sym)
      return;
    sym->valid = ok;
    fn_signatures_[sym->index] = sig;
  }

  std::optional<ir::Shape> fn_type_shape(const ast::TypeSpec& t) {
    if (!t.bounds.empty() || t.kind == ast::TypeSpec::Kind::CovMatrix ||
        t.kind == ast::TypeSpec::Kind::Simplex) {
      std::string what = !t.bounds.empty()                          ? "bounds"
                         : t.kind == ast::TypeSpec::Kind::CovMatrix ? "cov_matrix"
                                                                    : "simplex";
      error(t.range, fmt::format("the parameters and result of a function take plain types "
                                 "(real, int, vector[n] or matrix[r, c]); {} {} only for the "
                                 "declarations of variables",
                                 what, what == "bounds" ? "are" : "is"));
      return std::nullopt;
    }
    return type_shape(t);
  }

  // The body of f with its parameters bound to the nodes `args` of the current block.
  std::optional<int> inline_body(const ast::FnDecl& f, const FnSignature& sig,
                                 const std::vector<int>& args, Scope& s) {
    const ast::FnDecl* outer_fn = s.fn;
    std::map<std::string, int> outer_locals = std::move(s.locals);
    s.fn = &f;
    s.locals.clear();
    for (std::size_t k = 0; k < f.params.size(); ++k)
      s.locals[f.params[k].name.name] = args[k];
    bool ok = true;
    for (const ast::LetDecl& let : f.lets) {
      const std::string& n = let.name.name;
      if (n == "t" || n == "pi" || n == "inf") {
        error(let.name.range, fmt::format("'{}' is {} and cannot name a let", n,
                                          n == "t" ? "the time index" : "a built-in constant"));
        ok = false;
        continue;
      }
      if (s.locals.count(let.name.name)) {
        bool param = std::any_of(f.params.begin(), f.params.end(), [&](const ast::FnParam& p) {
          return p.name.name == let.name.name;
        });
        error(let.name.range,
              fmt::format("'{}' is already {} of function '{}': give this let "
                          "another name",
                          let.name.name, param ? "a parameter" : "a let", f.name.name));
        ok = false;
        continue;
      }
      std::optional<int> id = lower(*let.value, s);
      if (id)
        s.locals[let.name.name] = *id;
      ok = ok && id.has_value();
    }
    std::optional<int> body = ok ? lower(*f.body, s) : std::nullopt;
    s.fn = outer_fn;
    s.locals = std::move(outer_locals);
    if (body && !(shape_of(s, *body) == sig.result)) {
      error(f.body->range, fmt::format("function '{}' returns {}, but this is {}", f.name.name,
                                       sig.result.str(), shape_of(s, *body).str()));
      return std::nullopt;
    }
    return body;
  }

  std::optional<int> call_function(const Expr& e, const Symbol& sym, Scope& s) {
    const ast::FnDecl& f = ast_.fns[sym.index];
    if (s.fn && order(f.name.range.begin) >= order(s.fn->name.range.begin)) {
      if (&f == s.fn)
        error(e.name_range,
              fmt::format("function '{}' calls itself; recursion is not supported", f.name.name));
      else
        error(e.name_range, fmt::format("function '{}' is declared after '{}'; a function can only "
                                        "call functions declared before it",
                                        f.name.name, s.fn->name.name));
      return std::nullopt;
    }
    std::vector<std::optional<int>> args;
    for (const ast::ExprPtr& a : e.args)
      args.push_back(lower(*a, s));
    auto it = fn_signatures_.find(sym.index);
    if (!sym.valid || it == fn_signatures_.end())
      return std::nullopt;
    const FnSignature& sig = it->second;
    if (args.size() != sig.params.size()) {
      std::vector<std::string> names;
      for (const ast::FnParam& p : f.params)
        names.push_back(p.name.name);
      error(e.range, fmt::format("{}({}) takes {}, but {} given", f.name.name,
                                 fmt::join(names, ", "), plural(sig.params.size(), "argument"),
                                 args.size() == 1 ? "1 was" : fmt::format("{} were", args.size())));
      return std::nullopt;
    }
    bool ok = true;
    std::vector<int> ids;
    for (std::size_t k = 0; k < args.size(); ++k) {
      if (!args[k]) {
        ok = false;
        continue;
      }
      if (!(shape_of(s, *args[k]) == sig.params[k])) {
        error(e.args[k]->range,
              fmt::format("argument '{}' of {} must be {}, but it is {}", f.params[k].name.name,
                          f.name.name, sig.params[k].str(), shape_of(s, *args[k]).str()));
        ok = false;
      }
      ids.push_back(args[k].value_or(-1));
    }
    if (!ok)
      return std::nullopt;
    std::optional<Range> outer_site = s.call_site;
    if (!outer_site && imported(f.range))
      s.call_site = e.range;
    std::optional<int> result = expanding(s, fmt::format("function '{}'", f.name.name), e.range,
                                          [&] { return inline_body(f, sig, ids, s); });
    s.call_site = outer_site;
    return result;
  }

  // [a, b, c] is a vector of scalars; [[a, b], [c, d]] (or a list of vector expressions) is a
  // matrix given by rows.
  std::optional<int> lower_list(const Expr& e, Scope& s) {
    struct Element {
      bool row = false;
      std::vector<int> scalars;
    };
    std::vector<Element> elements;
    bool ok = true;
    for (const ast::ExprPtr& a : e.args) {
      Element el;
      if (a->kind == EKind::List) {
        el.row = true;
        for (const ast::ExprPtr& x : a->args) {
          std::optional<int> id = lower(*x, s);
          if (id && !shape_of(s, *id).is_scalar()) {
            error(x->range, fmt::format("the elements of a matrix row must be real, but this is {}",
                                        shape_of(s, *id).str()));
            id.reset();
          }
          ok = ok && id.has_value();
          el.scalars.push_back(id.value_or(-1));
        }
      } else {
        std::optional<int> id = lower(*a, s);
        if (!id) {
          ok = false;
        } else if (shape_of(s, *id).is_scalar()) {
          el.scalars.push_back(*id);
        } else if (shape_of(s, *id).rank() == 1) {
          el.row = true;
          int len = shape_of(s, *id).dims[0];
          for (int i = 0; i < len; ++i) {
            ir::Node idx;
            idx.op = ir::Op::Index;
            idx.args = {*id};
            idx.index = {i};
            el.scalars.push_back(emit(s, std::move(idx), a->range));
          }
        } else {
          error(a->range, fmt::format("the elements of a literal must be numbers or rows, but "
                                      "this is {}",
                                      shape_of(s, *id).str()));
          ok = false;
        }
      }
      elements.push_back(std::move(el));
    }
    if (!ok)
      return std::nullopt;
    bool rows = elements[0].row;
    for (std::size_t i = 1; i < elements.size(); ++i)
      if (elements[i].row != rows) {
        error(e.range, "a literal must hold only numbers (a vector) or only rows of the same "
                       "length (a matrix)");
        return std::nullopt;
      }
    ir::Node build;
    build.op = ir::Op::Build;
    if (!rows) {
      for (const Element& el : elements)
        build.args.push_back(el.scalars[0]);
      build.shape = ir::Shape::vector(static_cast<int>(elements.size()));
      return emit(s, std::move(build), e.range);
    }
    std::size_t cols = elements[0].scalars.size();
    for (std::size_t i = 1; i < elements.size(); ++i)
      if (elements[i].scalars.size() != cols) {
        error(e.args[i]->range,
              fmt::format("row {} has {}, but row 0 has {}", i,
                          plural(elements[i].scalars.size(), "element"), plural(cols, "element")));
        return std::nullopt;
      }
    for (const Element& el : elements)
      build.args.insert(build.args.end(), el.scalars.begin(), el.scalars.end());
    build.shape = ir::Shape::matrix(static_cast<int>(elements.size()), static_cast<int>(cols));
    return emit(s, std::move(build), e.range);
  }

  // How messages name an expression: its source text if short, as in 'A[0]'.
  std::string quote(const Expr& e) const {
    std::string_view text = diags_.source().substr(e.range.begin, e.range.end - e.range.begin);
    if (text.size() > 24 || text.find('\n') != std::string_view::npos)
      return "this expression";
    return fmt::format("'{}'", text);
  }

  // One bracket of component indices applied to the value `base` (the bracket's args[0]).
  std::optional<int> apply_index(int base, const Expr& bracket, Scope& s) {
    const ir::Shape shape = shape_of(s, base);
    std::string subject = quote(*bracket.args[0]);
    std::size_t count = bracket.args.size() - 1;
    Range brackets{bracket.args[0]->range.end, bracket.range.end};
    if (shape.is_scalar()) {
      error(brackets, fmt::format("{} is real and cannot be indexed", subject));
      return std::nullopt;
    }
    if (count > static_cast<std::size_t>(shape.rank())) {
      error(brackets, fmt::format("{} is {}, which takes at most {}, but {} given", subject,
                                  shape.str(), plural(shape.rank(), "index"),
                                  count == 1 ? "1 was" : fmt::format("{} were", count)));
      return std::nullopt;
    }
    bool dynamic = false;
    for (std::size_t k = 0; k < count; ++k)
      dynamic = dynamic || !is_constant(*bracket.args[k + 1], s);
    if (dynamic)
      return apply_dynamic_index(base, bracket, s);
    std::vector<int> index;
    bool ok = true;
    for (std::size_t k = 0; k < count; ++k) {
      const Expr& ie = *bracket.args[k + 1];
      std::optional<long> i = eval_int(ie, "an index");
      if (!i) {
        ok = false;
        continue;
      }
      int dim = shape.dims[k];
      if (*i < 0 || *i >= dim) {
        std::string which = shape.rank() == 1 ? "index" : k == 0 ? "row index" : "column index";
        std::string valid =
            dim == 0 ? "it has no elements" : fmt::format("valid indices are 0 to {}", dim - 1);
        error(ie.range, fmt::format("{} {} is out of range for {}, which is {} ({})", which, *i,
                                    subject, shape.str(), valid));
        ok = false;
        continue;
      }
      index.push_back(static_cast<int>(*i));
    }
    if (!ok)
      return std::nullopt;
    ir::Node n;
    n.op = ir::Op::Index;
    n.args = {base};
    n.index = index;
    n.shape = ir::Shape{std::vector<int>(shape.dims.begin() + count, shape.dims.end())};
    return emit(s, std::move(n), bracket.range);
  }

  // Whether an expression's value is known when the model is compiled.
  bool is_constant(const Expr& e, const Scope& s) const {
    switch (e.kind) {
    case EKind::Number:
      return true;
    case EKind::Name: {
      if (s.locals.count(e.name))
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

  // v[i] or A[i] (a row) with i computed at run time, e.g. P[z[t-1]]: one index at a time, each
  // dropping a dimension. An index outside the value gives NaN at run time.
  std::optional<int> apply_dynamic_index(int base, const Expr& bracket, Scope& s) {
    std::optional<int> value = base;
    const ir::Shape whole = shape_of(s, base);
    for (std::size_t k = 1; k < bracket.args.size() && value; ++k) {
      const Expr& ie = *bracket.args[k];
      const ir::Shape shape = shape_of(s, *value);
      if (is_constant(ie, s)) {
        std::optional<long> i = eval_int(ie, "an index");
        if (!i)
          return std::nullopt;
        if (*i < 0 || *i >= shape.dims[0]) {
          std::string which = whole.rank() == 1 ? "index" : k == 1 ? "row index" : "column index";
          std::string valid = shape.dims[0] == 0
                                  ? "it has no elements"
                                  : fmt::format("valid indices are 0 to {}", shape.dims[0] - 1);
          error(ie.range, fmt::format("{} {} is out of range for {}, which is {} ({})", which, *i,
                                      quote(*bracket.args[0]), whole.str(), valid));
          return std::nullopt;
        }
        ir::Node n;
        n.op = ir::Op::Index;
        n.args = {*value};
        n.index = {static_cast<int>(*i)};
        n.shape = ir::Shape{std::vector<int>(shape.dims.begin() + 1, shape.dims.end())};
        value = emit(s, std::move(n), bracket.range);
        continue;
      }
      std::optional<int> i = lower(ie, s);
      if (!i)
        return std::nullopt;
      if (!shape_of(s, *i).is_scalar()) {
        error(ie.range, fmt::format("an index must be a single integer, but this is {}",
                                    shape_of(s, *i).str()));
        return std::nullopt;
      }
      value = emit_op(s, ir::Op::DynIndex,
                      ir::Shape{std::vector<int>(shape.dims.begin() + 1, shape.dims.end())},
                      {*value, *i}, bracket.range);
    }
    return value;
  }

  std::optional<int> lower_index(const Expr& e, Scope& s) {
    // The chain of brackets, innermost first: x[t-1][0] is Index(Index(x, t-1), 0).
    std::vector<const Expr*> chain;
    const Expr* base = &e;
    while (base->kind == EKind::Index) {
      chain.insert(chain.begin(), base);
      base = base->args[0].get();
    }
    if (base->kind == EKind::Name) {
      Symbol* sym = lookup(base->name, base->range);
      if (sym && s.kind == ir::BlockKind::Plate &&
          (sym->kind == Symbol::Kind::Latent || sym->kind == Symbol::Kind::Obs)) {
        sym->used = true;
        return lower_plate_ref(*base, *sym, chain, s);
      }
      if (sym && s.kind == ir::BlockKind::Simulator && sym->kind == Symbol::Kind::Obs) {
        // not a time index: components of the value, as for a parameter
      } else if (sym && (sym->kind == Symbol::Kind::State || sym->kind == Symbol::Kind::Obs ||
                         sym->kind == Symbol::Kind::Input)) {
        sym->used = true;
        return lower_var_ref(*base, *sym, chain, s);
      }
      if (sym &&
          (sym->kind == Symbol::Kind::Param || sym->kind == Symbol::Kind::Const ||
           sym->kind == Symbol::Kind::Data) &&
          std::any_of(chain[0]->args.begin() + 1, chain[0]->args.end(),
                      [](const ast::ExprPtr& a) { return is_time_index(*a); })) {
        error(chain[0]->range,
              fmt::format("{} '{}' does not depend on time: write '{}', not "
                          "'{}[t]'",
                          kind_name(sym->kind), base->name, base->name, base->name));
        return std::nullopt;
      }
    }
    std::optional<int> value = lower(*base, s);
    for (const Expr* bracket : chain) {
      if (!value)
        return std::nullopt;
      value = apply_index(*value, *bracket, s);
    }
    return value;
  }

  // z[n][components...] for a latent variable or observation z of a plate model.
  std::optional<int> lower_plate_ref(const Expr& name, const Symbol& sym,
                                     const std::vector<const Expr*>& chain, Scope& s) {
    const Expr& first = *chain[0];
    if (first.args.size() != 2) {
      error(first.range, fmt::format("the first index of '{0}' is the item n alone; index its "
                                     "components in a second bracket, as in {0}[n][0]",
                                     name.name));
      return std::nullopt;
    }
    const Expr& index = *first.args[1];
    if (index.kind != EKind::Name || index.name != "n") {
      error(index.range, fmt::format("the items of a plate are independent: a relation reads the "
                                     "current item only, {}[n]",
                                     name.name));
      return std::nullopt;
    }
    std::optional<int> value = lower_static_ref(first, sym, s);
    for (std::size_t k = 1; k < chain.size() && value; ++k)
      value = apply_index(*value, *chain[k], s);
    return value;
  }

  std::optional<TimeIndex> time_index(const Expr& e, const std::string& var) {
    std::string what = fmt::format("the time index of '{}'", var);
    if (e.kind == EKind::Name && e.name == "t")
      return TimeIndex{false, 0};
    if (!mentions_time(e)) {
      std::optional<long> k = eval_int(e, what);
      if (!k)
        return std::nullopt;
      return TimeIndex{true, *k};
    }
    if (e.kind == EKind::Binary && (e.op == "+" || e.op == "-")) {
      const Expr& lhs = *e.args[0];
      const Expr& rhs = *e.args[1];
      bool t_left = lhs.kind == EKind::Name && lhs.name == "t" && !mentions_time(rhs);
      bool t_right =
          e.op == "+" && rhs.kind == EKind::Name && rhs.name == "t" && !mentions_time(lhs);
      if (t_left || t_right) {
        std::optional<long> k = eval_int(t_left ? rhs : lhs, "a time offset");
        if (!k)
          return std::nullopt;
        return TimeIndex{false, e.op == "-" ? -*k : *k};
      }
    }
    error(e.range, fmt::format("unsupported time index for '{}': write {}[t], {}[t-1] or {}[0]",
                               var, var, var, var));
    return std::nullopt;
  }

  // x[time][components...] for a state or observation x.
  std::optional<int> lower_var_ref(const Expr& name, const Symbol& sym,
                                   const std::vector<const Expr*>& chain, Scope& s) {
    bool is_state = sym.kind == Symbol::Kind::State;
    bool is_input = sym.kind == Symbol::Kind::Input;
    if (s.constant) {
      not_constant(s, chain.back()->range, fmt::format("'{}' is {}", name.name, a_kind(sym.kind)));
      return std::nullopt;
    }
    if (!outside_function(s, chain.back()->range,
                          fmt::format("{} '{}'", kind_name(sym.kind), name.name)))
      return std::nullopt;
    const Expr& first = *chain[0];
    if (first.args.size() != 2) {
      error(first.range, fmt::format("the first index of '{0}' is the time alone; index its "
                                     "components in a second bracket, as in {0}[t][0]",
                                     name.name));
      return std::nullopt;
    }
    std::optional<TimeIndex> time = time_index(*first.args[1], name.name);
    if (!time || !sym.valid)
      return std::nullopt;
    std::string ref = fmt::format("{}[{}]", name.name, time->str());
    Range where = first.range;
    ir::BlockKind kind = s.kind;
    bool initial = kind == ir::BlockKind::Initial;
    // Proposals and look-aheads read what a transition does, and y[t].
    bool proposal = kind == ir::BlockKind::Proposal || kind == ir::BlockKind::Lookahead;
    bool transition = kind == ir::BlockKind::Transition || proposal;
    bool functional = kind == ir::BlockKind::Functional;
    if (!initial && time->absolute) {
      error(where, fmt::format("reading a fixed time step ({}) is not supported: {} can read {}",
                               ref, functional ? s.subject : "a relation at time t",
                               (is_state && (transition || functional)) ||
                                       (!is_state && !is_input && transition)
                                   ? fmt::format("{0}[t] and {0}[t-1]", name.name)
                                   : fmt::format("{}[t]", name.name)));
      return std::nullopt;
    }
    long offset = time->k; // relative to the target's time; t = 0 in the initial block
    bool same_kind = !is_input && is_state == (s.target_kind == ir::VarKind::State);
    auto fail = [&](std::string message) {
      error(where, std::move(message));
      return std::nullopt;
    };
    if (offset > 0)
      return fail(fmt::format("{} reads {}, a future value; {} can only read the present and the "
                              "past",
                              s.subject, ref, functional ? "a functional" : "a relation"));
    if (initial && offset < 0)
      return fail(
          fmt::format("{} does not exist: the initial relation for {} is at t = 0", ref, s.target));
    if (is_input) {
      if (offset < 0)
        return fail(fmt::format("not supported yet: reading a past input ({}); {} can read {}[t]",
                                ref, s.subject, name.name));
    } else if (!is_state) {
      if (initial)
        return fail(fmt::format("not supported yet: an initial relation that reads an observation "
                                "({})",
                                ref));
      if (transition && !proposal && offset == 0)
        return fail(fmt::format("a transition cannot read {}: the observation at time t depends "
                                "on the state at t; a transition can read {}[t-1]",
                                ref, name.name));
      if (transition && offset < -1)
        return fail(
            fmt::format("not supported yet: lags beyond 1 ({}); {}", ref,
                        proposal ? fmt::format("a proposal can read {0}[t-1] and {0}[t]", name.name)
                                 : fmt::format("a transition can read {}[t-1]", name.name)));
      if (!transition && offset < 0)
        return fail(fmt::format("not supported yet: {} that reads a past observation ({}); it "
                                "can read observations at time t",
                                functional ? "a functional" : "an observation", ref));
    }
    // States at any lag, observations included: the augment-lags transform makes the state
    // first-order, and gives observations x[t-k] as a hidden state at t.
    if (offset == 0 && same_kind && !functional && sym.index == s.target_var)
      return fail(fmt::format("{} reads {} itself", s.subject, ref));
    if (offset == 0 && is_state && kind == ir::BlockKind::Lookahead)
      return fail(fmt::format("{} reads {}: a look-ahead predicts the states at t from those at "
                              "t-1, so it can read {}[t-1]",
                              s.subject, ref, name.name));
    ir::Node n;
    n.op = is_state ? ir::Op::State : is_input ? ir::Op::Input : ir::Op::Obs;
    n.var = sym.index;
    n.lag = static_cast<int>(-offset);
    n.shape = is_state   ? model_.states[sym.index].shape
              : is_input ? model_.inputs[sym.index].shape
                         : model_.obs[sym.index].shape;
    if (offset == 0 && same_kind)
      s.reads_now.insert(sym.index);
    if (is_state) {
      s.reads_state = true;
      s.states_read.insert(sym.index);
    }
    std::optional<int> value = emit(s, std::move(n), where);
    for (std::size_t k = 1; k < chain.size() && value; ++k)
      value = apply_index(*value, *chain[k], s);
    return value;
  }

  // ---- (4) relations ----------------------------------------------------------------------

  void add_relation(const ast::Relation& r) {
    std::vector<const Expr*> chain;
    const Expr* base = r.target.get();
    while (base->kind == EKind::Index) {
      chain.insert(chain.begin(), base);
      base = base->args[0].get();
    }
    const std::string& name = base->name;
    Symbol* sym = lookup(name);
    if (!sym) {
      unknown_name(base->range, name);
      return;
    }
    switch (sym->kind) {
    case Symbol::Kind::Const:
      error(r.target->range, fmt::format("'{}' is a constant; only states and observations can "
                                         "be the target of a relation",
                                         name));
      return;
    case Symbol::Kind::Param:
      error(r.target->range,
            fmt::format("cannot assign to parameter '{0}': give its prior in its declaration, as "
                        "in 'param {0} ~ {1}(...);'",
                        name, r.dist.name.name));
      return;
    default:
      break;
    }
    if (!model_.is_state_space()) {
      no_time(r.range, r.proposal ? std::string("a proposal") : "a relation 'x[t] ~ ...'");
      return;
    }
    if (sym->kind != Symbol::Kind::State && sym->kind != Symbol::Kind::Obs) {
      error(r.target->range,
            fmt::format("'{}' is not a state or an observation; only those can be the target of a "
                        "relation",
                        name));
      return;
    }
    bool is_state = sym->kind == Symbol::Kind::State;
    std::string forms = is_state ? fmt::format("{0}[0] (initial) or {0}[t] (transition)", name)
                                 : fmt::format("{}[t]", name);
    if (chain.empty()) {
      error(r.target->range,
            fmt::format("the target of a relation needs a time index: write {}", forms));
      return;
    }
    if (chain.size() > 1 || chain[0]->args.size() != 2) {
      error(r.target->range, fmt::format("a relation must target a whole variable, as in {}; "
                                         "relations for single components are not supported",
                                         forms));
      return;
    }
    std::optional<TimeIndex> time = time_index(*chain[0]->args[1], name);
    if (!time)
      return;
    ir::BlockKind kind;
    if (is_state && time->absolute && time->k == 0)
      kind = ir::BlockKind::Initial;
    else if (!time->absolute && time->k == 0)
      kind = is_state ? ir::BlockKind::Transition : ir::BlockKind::Observation;
    else {
      error(r.target->range, fmt::format("the target of a relation must be {}, not {}[{}]", forms,
                                         name, time->str()));
      return;
    }
    if (r.proposal) {
      if (!is_state) {
        error(r.target->range,
              fmt::format("a proposal draws a state, but '{}' is an observation", name));
        return;
      }
      if (kind == ir::BlockKind::Initial) {
        error(r.target->range,
              fmt::format("not supported yet: a proposal for the initial state ({0}[0]); the "
                          "guided filter draws {0}[0] from its initial relation",
                          name));
        return;
      }
      kind = ir::BlockKind::Proposal;
    }
    if (!sym->valid)
      return;
    std::string target = fmt::format("{}[{}]", name, kind == ir::BlockKind::Initial ? "0" : "t");
    const char* what = r.proposal ? "proposal" : "relation";
    auto key = std::pair(kind, sym->index);
    if (auto it = first_relation_.find(key); it != first_relation_.end()) {
      error(r.target->range, fmt::format("{} has a second {}", target, what));
      note(it->second->target->range, fmt::format("the first {} for {} is here", what, target));
      return;
    }
    first_relation_.emplace(key, &r);

    Scope s;
    s.block = &model_.block(kind);
    s.kind = kind;
    s.target_kind = is_state ? ir::VarKind::State : ir::VarKind::Obs;
    s.target_var = sym->index;
    s.target = target;
    s.subject = fmt::format("the {} for {}", what, target);
    std::vector<std::optional<int>> args;
    std::vector<std::optional<ir::Shape>> shapes;
    for (const ast::ExprPtr& a : r.dist.args) {
      args.push_back(lower(*a, s));
      shapes.push_back(args.back() ? std::optional(shape_of(s, *args.back())) : std::nullopt);
    }
    const ir::Shape& shape =
        is_state ? model_.states[sym->index].shape : model_.obs[sym->index].shape;
    std::optional<ir::Dist> dist = check_dist(r.dist, shapes, shape, target, r.target->range);
    const ir::VarDecl& decl = is_state ? model_.states[sym->index] : model_.obs[sym->index];
    bool ok = dist.has_value() && check_integer_target(decl, *dist, name, r.dist);
    if (ok)
      check_argument_domain(*dist, r.dist, *s.block, args);
    if (ok && r.proposal && !decl.integer && ir::dist_info(*dist).discrete) {
      error(r.dist.name.range,
            fmt::format("'{}' is continuous, but {} is a discrete distribution; its proposal "
                        "must have a density with respect to the same measure as its transition",
                        name, ir::dist_info(*dist).name));
      ok = false;
    }
    if (ok) {
      ir::Relation rel;
      rel.kind = s.target_kind;
      rel.dist = *dist;
      for (const auto& a : args)
        rel.args.push_back(*a);
      ok = check_integer_range(decl, *s.block, rel, r, target);
    }

    PendingRelation p;
    p.ast = &r;
    p.range = r.target->range;
    p.target = target;
    p.rel.kind = s.target_kind;
    p.rel.var = sym->index;
    p.rel.loc = loc(r.range);
    p.reads_now = s.reads_now;
    p.reads_state = s.reads_state;
    p.states_read = s.states_read;
    p.ok = ok;
    if (ok) {
      p.rel.dist = dist.value();
      for (const auto& a : args)
        p.rel.args.push_back(*a);
    }
    pending_[kind].push_back(std::move(p));
  }

  // The value of a node of `block` when it reads nothing but constants.
  static std::optional<std::vector<double>> constant_value(const ir::Block& block, int id) {
    const std::vector<bool> reached = ir::reached_from(block, {id});
    std::vector<std::vector<double>> values(id + 1);
    for (int i = 0; i <= id; ++i) {
      if (!reached[i])
        continue;
      const ir::Node& n = block.nodes[i];
      if (n.op == ir::Op::Param || n.op == ir::Op::State || n.op == ir::Op::Obs ||
          n.op == ir::Op::Time || n.op == ir::Op::Data || n.op == ir::Op::Input ||
          n.op == ir::Op::Latent)
        return std::nullopt;
      std::vector<std::vector<double>> args;
      std::vector<ir::Shape> shapes;
      for (int a : n.args) {
        args.push_back(values[a]);
        shapes.push_back(block.nodes[a].shape);
      }
      values[i] = ir::evaluate(n, args, shapes);
    }
    return values[id];
  }

  // Constant arguments must lie in the distribution's parameter domain: a zero scale or a
  // probability of 2 would only show at run time, as NaN densities and draws.
  void check_argument_domain(ir::Dist dist, const ast::DistCall& call,
                             const std::vector<std::optional<std::vector<double>>>& values) {
    using enum ir::ArgDomain;
    const ir::DistInfo& info = ir::dist_info(dist);
    const std::vector<ir::ArgDomain>& rules = info.domains;
    for (size_t k = 0; k < rules.size() && k < values.size(); ++k) {
      if (!values[k] || rules[k] == Any)
        continue;
      const std::vector<double>& v = *values[k];
      auto fail = [&](std::string_view must, size_t i) {
        error(call.args[k]->range,
              fmt::format("the argument '{}' of {} must be {}, but {} {}", info.arg_names[k],
                          info.name, must,
                          v.size() == 1 ? "it is" : fmt::format("its component {} is", i), v[i]));
      };
      double total = 0;
      bool failed = false;
      for (size_t i = 0; i < v.size() && !failed; ++i) {
        const double x = v[i];
        failed = true;
        if (rules[k] == Positive && !(x > 0))
          fail("positive", i);
        else if ((rules[k] == NonNegative || rules[k] == Weights) && !(x >= 0))
          fail(rules[k] == Weights ? "a vector of non-negative weights" : "at least 0", i);
        else if (rules[k] == Probability && !(x >= 0 && x <= 1))
          fail("a probability (between 0 and 1)", i);
        else if (rules[k] == Count && !(x >= 0 && x == std::floor(x)))
          fail("a whole number of trials (0, 1, 2, ...)", i);
        else
          failed = false;
        total += x;
      }
      if (!failed && rules[k] == Weights && !(total > 0))
        error(call.args[k]->range, fmt::format("the weights '{}' of {} must not all be 0",
                                               info.arg_names[k], info.name));
    }
    // lo < hi for uniform(lo, hi) and truncated_normal(mu, sigma, lo, hi).
    const size_t lo = static_cast<size_t>(info.support_from);
    if (info.support_from >= 0 && values.size() > lo + 1 && values[lo] && values[lo + 1] &&
        values[lo]->size() == 1 && values[lo + 1]->size() == 1 &&
        !((*values[lo])[0] < (*values[lo + 1])[0]))
      error(call.range, fmt::format("the interval of {} is empty: lo = {} must be below hi = {}",
                                    info.name, (*values[lo])[0], (*values[lo + 1])[0]));
  }
  void check_argument_domain(ir::Dist dist, const ast::DistCall& call, const ir::Block& block,
                             const std::vector<std::optional<int>>& args) {
    std::vector<std::optional<std::vector<double>>> values;
    for (const std::optional<int>& a : args)
      values.push_back(a ? constant_value(block, *a) : std::nullopt);
    check_argument_domain(dist, call, values);
  }

  // An integer variable needs a discrete distribution.
  bool check_integer_target(const ir::VarDecl& decl, ir::Dist dist, const std::string& name,
                            const ast::DistCall& call) {
    if (!decl.integer || ir::dist_info(dist).discrete)
      return true;
    std::vector<std::string> discrete;
    for (const ir::DistInfo& info : ir::all_dists())
      if (info.discrete && !(info.dist == ir::Dist::Multinomial && decl.shape.is_scalar()))
        discrete.emplace_back(info.name); // multinomial draws a vector
    error(call.name.range, fmt::format("'{}' is an integer, but {} is a continuous "
                                       "distribution; use one of {}",
                                       name, ir::dist_info(dist).name, fmt::join(discrete, ", ")));
    return false;
  }

  // An int[lo..hi] target whose distribution can take values outside lo..hi: an error when no
  // value of the distribution is inside, else a warning that says what happens to the others.
  bool check_integer_range(const ir::VarDecl& decl, const ir::Block& block, const ir::Relation& rel,
                           const ast::Relation& r, const std::string& target) {
    if (!decl.integer || !decl.bounded())
      return true;
    std::optional<std::pair<double, double>> support = ir::discrete_support(block, rel);
    if (!support)
      return true;
    auto [lo, hi] = *support;
    if (lo >= decl.lower && hi <= decl.upper)
      return true;
    const std::string values = hi == INFINITY ? fmt::format("can take any value >= {}", lo)
                               : lo == hi     ? fmt::format("takes the value {}", lo)
                               : hi == lo + 1 ? fmt::format("takes the values {} and {}", lo, hi)
                                              : fmt::format("takes the values {}..{}", lo, hi);
    const std::string what = fmt::format("{}{} ~ {}(...) {}", r.proposal ? "proposal " : "", target,
                                         ir::dist_info(rel.dist).name, values);
    const std::string type = ir::type_str(decl);
    if (hi < decl.lower || lo > decl.upper) {
      error(r.range, fmt::format("{}, but '{}' is declared {}, which holds none of them", what,
                                 decl.name, type));
      return false;
    }
    const std::string range = fmt::format("{}..{}", decl.lower, decl.upper);
    std::string consequence;
    if (r.proposal)
      consequence = fmt::format("the guided filter stops with an error when the proposal draws "
                                "a value outside {}",
                                range);
    else if (rel.kind == ir::VarKind::Obs)
      consequence =
          fmt::format("simulate stops with an error when it draws a value outside {}", range);
    else
      consequence = fmt::format("simulate and the particle methods stop with an error when they "
                                "draw a value outside {}, and the exact methods (forward-backward, "
                                "Viterbi) when more than 1e-9 of the probability falls outside it",
                                range);
    diags_.warning(loc(r.range), fmt::format("{}, but '{}' is declared {}: {}", what, decl.name,
                                             type, consequence));
    return true;
  }

  // A model with a proposal for some states draws the others from their transitions: their
  // relations are copied into the proposal block, so it samples the whole state (their factors
  // cancel in the guided filter's weights).
  void complete_proposal() {
    std::vector<PendingRelation>& proposals = pending_[ir::BlockKind::Proposal];
    if (proposals.empty())
      return;
    std::set<int> proposed;
    for (const PendingRelation& p : proposals)
      proposed.insert(p.rel.var);
    std::map<int, int> copied; // transition node -> proposal node
    for (const PendingRelation& p : pending_[ir::BlockKind::Transition]) {
      if (proposed.count(p.rel.var) || !p.ok)
        continue;
      PendingRelation q = p;
      for (int& a : q.rel.args)
        a = copy_node(model_.transition, a, model_.proposal, copied);
      proposals.push_back(std::move(q));
    }
  }

  static int copy_node(const ir::Block& from, int id, ir::Block& to, std::map<int, int>& copied) {
    if (auto it = copied.find(id); it != copied.end())
      return it->second;
    ir::Node node = from.nodes[id];
    for (int& a : node.args)
      a = copy_node(from, a, to, copied);
    return copied[id] = to.add(std::move(node));
  }

  // `lookahead x[t] = expr;` for every state or none: the auxiliary filter's predictions, as the
  // lookahead block's outputs in state order.
  void add_lookaheads() {
    if (ast_.lookaheads.empty())
      return;
    if (!model_.is_state_space()) {
      no_time(ast_.lookaheads.front().range, "a look-ahead");
      return;
    }
    std::vector<const ast::Lookahead*> by_state(model_.states.size(), nullptr);
    std::vector<int> outputs(model_.states.size(), -1);
    for (const ast::Lookahead& a : ast_.lookaheads) {
      const Expr& target = *a.target;
      const Expr* base = target.kind == EKind::Index ? target.args[0].get() : &target;
      Symbol* sym = base->kind == EKind::Name ? lookup(base->name) : nullptr;
      if (!sym || sym->kind != Symbol::Kind::State) {
        error(target.range, "a look-ahead predicts a state: write lookahead x[t] = ...; for a "
                            "state x");
        continue;
      }
      const std::string& name = base->name;
      if (target.kind != EKind::Index || target.args.size() != 2 ||
          target.args[1]->kind != EKind::Name || target.args[1]->name != "t") {
        error(target.range, fmt::format("a look-ahead predicts the whole state at t: write "
                                        "lookahead {}[t] = ...;",
                                        name));
        continue;
      }
      if (!sym->valid)
        continue;
      if (const ast::Lookahead* first = by_state[sym->index]) {
        error(target.range, fmt::format("{}[t] has a second look-ahead", name));
        note(first->target->range, fmt::format("the first look-ahead for {}[t] is here", name));
        continue;
      }
      by_state[sym->index] = &a;
      Scope s;
      s.block = &model_.lookahead;
      s.kind = ir::BlockKind::Lookahead;
      s.target_kind = ir::VarKind::State;
      s.target_var = sym->index;
      s.target = name + "[t]";
      s.subject = fmt::format("the look-ahead for {}[t]", name);
      std::optional<int> id = lower(*a.value, s);
      if (!id)
        continue;
      const ir::Shape& shape = model_.states[sym->index].shape;
      if (!(shape_of(s, *id) == shape)) {
        error(a.value->range, fmt::format("the look-ahead for {}[t] is {}, but '{}' is {}", name,
                                          shape_of(s, *id).str(), name, shape.str()));
        continue;
      }
      outputs[sym->index] = *id;
    }
    for (std::size_t x = 0; x < model_.states.size(); ++x)
      if (!by_state[x])
        error(ast_.lookaheads.front().range,
              fmt::format("the auxiliary filter predicts every state, and state '{0}' has no "
                          "look-ahead: add one, as in lookahead {0}[t] = ...;",
                          model_.states[x].name));
    model_.lookahead.outputs = std::move(outputs);
  }

  void add_functional(const ast::FunctionalDecl& f) {
    if (!model_.is_state_space()) {
      no_time(f.range, fmt::format("functional '{}'", f.name.name));
      return;
    }
    Symbol* sym = declared(f.name);
    Scope s;
    s.block = &model_.functional;
    s.kind = ir::BlockKind::Functional;
    s.subject = fmt::format("functional '{}'", f.name.name);
    std::optional<int> id = lower(*f.value, s);
    if (!id || !sym)
      return;
    if (shape_of(s, *id).rank() > 1) {
      error(f.value->range, fmt::format("a functional must be real or a vector, but this is {}",
                                        shape_of(s, *id).str()));
      return;
    }
    model_.functionals.push_back({f.name.name, f.additive, loc(f.name.range)});
    model_.functional.outputs.push_back(*id);
  }

  // ---- (6) warnings: legal but probably not what was meant ---------------------------------

  void warn_unused() {
    std::vector<std::pair<std::string, const Symbol*>> unused;
    for (const auto& [name, sym] : symbols_) {
      bool reportable = sym.kind == Symbol::Kind::Param || sym.kind == Symbol::Kind::Const ||
                        sym.kind == Symbol::Kind::Let || sym.kind == Symbol::Kind::Fn ||
                        sym.kind == Symbol::Kind::Data || sym.kind == Symbol::Kind::Input;
      if (reportable && sym.valid && !sym.used && !imported(sym.range))
        unused.emplace_back(name, &sym);
    }
    std::sort(unused.begin(), unused.end(), [](const auto& a, const auto& b) {
      return a.second->range.begin < b.second->range.begin;
    });
    for (const auto& [name, sym] : unused)
      diags_.warning(loc(sym->range),
                     fmt::format("{} '{}' is never used", kind_name(sym->kind), name));
  }

  // A state that no observation depends on, directly or through the states it drives, is not
  // informed by the data: its filtering distribution is its prior dynamics.
  void warn_states_without_influence() {
    if (model_.obs.empty())
      return; // said already: the model declares no observation
    std::vector<const PendingRelation*> relations;
    for (ir::BlockKind kind : {ir::BlockKind::Initial, ir::BlockKind::Transition})
      for (const PendingRelation& p : pending_[kind])
        relations.push_back(&p);
    const std::vector<bool> influential =
        reaching_observations(model_.states.size(), pending_[ir::BlockKind::Observation], relations,
                              &PendingRelation::states_read);
    for (std::size_t x = 0; x < model_.states.size(); ++x)
      if (!influential[x])
        diags_.warning(model_.states[x].loc,
                       fmt::format("state '{}' does not influence any observation, directly or "
                                   "through other states: the data say nothing about it",
                                   model_.states[x].name));
  }

  // A latent variable that no observation reads, directly or through other latents, is not
  // informed by the data.
  void warn_latents_without_influence() {
    if (model_.obs.empty())
      return;
    std::vector<const PendingRelation*> relations;
    for (const PendingRelation& p : pending_latents_)
      relations.push_back(&p);
    const std::vector<bool> influential = reaching_observations(
        model_.latents.size(), pending_[static_block()], relations, &PendingRelation::latents_read);
    for (std::size_t z = 0; z < model_.latents.size(); ++z)
      if (!influential[z])
        diags_.warning(model_.latents[z].loc,
                       fmt::format("latent variable '{}' does not influence any observation, "
                                   "directly or through other latent variables: the data say "
                                   "nothing about it",
                                   model_.latents[z].name));
  }

  // Which of n variables (states, or latents) an observation depends on: those the observations'
  // relations read (`reads` of each), then, to a fixed point, those read by the relations of
  // variables already found.
  static std::vector<bool> reaching_observations(std::size_t n,
                                                 const std::vector<PendingRelation>& observations,
                                                 const std::vector<const PendingRelation*>& rels,
                                                 std::set<int> PendingRelation::*reads) {
    std::vector<bool> found(n, false);
    for (const PendingRelation& p : observations)
      for (int v : p.*reads)
        found[v] = true;
    for (bool changed = true; changed;) {
      changed = false;
      for (const PendingRelation* p : rels)
        if (found[p->rel.var])
          for (int v : (*p).*reads)
            if (!found[v])
              found[v] = changed = true;
    }
    return found;
  }

  // A prior whose support reaches outside the declared bounds real(lo, hi).
  void warn_priors_outside_bounds() {
    for (const ir::Relation& rel : model_.prior.relations) {
      const ir::ParamDecl& p = model_.params[rel.var];
      if (p.lower == -INFINITY && p.upper == INFINITY)
        continue;
      const ir::DistInfo& info = ir::dist_info(rel.dist);
      double lo = info.lower, hi = info.upper;
      if (info.support_from >= 0) {
        const ir::Node& a = model_.prior.nodes[rel.args[info.support_from]];
        const ir::Node& b = model_.prior.nodes[rel.args[info.support_from + 1]];
        if (a.shape.is_scalar() && b.shape.is_scalar())
          lo = a.values[0], hi = b.values[0];
      }
      if (lo < p.lower || hi > p.upper)
        diags_.warning(rel.loc, fmt::format("the prior {} of '{}' has support [{}, {}], which "
                                            "reaches outside its declared bounds [{}, {}]",
                                            info.name, p.name, lo, hi, p.lower, p.upper));
    }
  }

  // ---- (5) completeness and order ---------------------------------------------------------

  const PendingRelation* relation_for(ir::BlockKind kind, int var) const {
    auto it = pending_.find(kind);
    if (it == pending_.end())
      return nullptr;
    for (const PendingRelation& p : it->second)
      if (p.rel.var == var)
        return &p;
    return nullptr;
  }

  void check_completeness() {
    if (!model_.is_state_space()) {
      if (model_.obs.empty())
        error(ast_.name.range,
              fmt::format("{} '{}' declares no observation: add one, as in '{}'",
                          ast_.is_simulator ? "simulator" : "model", model_.name,
                          ast_.is_simulator ? "obs x = ...;" : "obs x[n] ~ normal(...);"));
      return;
    }
    if (model_.states.empty())
      error(ast_.name.range, fmt::format("model '{}' declares no state", model_.name));
    if (model_.obs.empty())
      diags_.warning(loc(ast_.name.range),
                     fmt::format("model '{}' declares no observation: it can be simulated but "
                                 "not filtered",
                                 model_.name));
    for (const ast::VarDecl& v : ast_.vars) {
      Symbol* sym = declared(v.name);
      if (!sym || !sym->valid)
        continue;
      const std::string& name = v.name.name;
      if (v.kind == ast::VarDecl::Kind::State) {
        if (!relation_for(ir::BlockKind::Initial, sym->index))
          error(v.name.range, fmt::format("state '{0}' has no initial relation: add one, as in "
                                          "'{0}[0] ~ normal(0, 1);'",
                                          name));
        if (!relation_for(ir::BlockKind::Transition, sym->index))
          error(v.name.range, fmt::format("state '{0}' has no transition relation: add one, as "
                                          "in '{0}[t] ~ normal({0}[t-1], 1);'",
                                          name));
      } else if (v.kind == ast::VarDecl::Kind::Obs) {
        if (!relation_for(ir::BlockKind::Observation, sym->index))
          error(v.name.range, fmt::format("observation '{0}' has no relation: add one that "
                                          "depends on a state, as in '{0}[t] ~ normal(x[t], 1);'",
                                          name));
      }
    }
    check_obs_depend_on_states();
  }

  // An observation must depend on some state at time t, directly or through the observations
  // its relation reads; otherwise it says nothing about the states.
  void check_obs_depend_on_states() {
    std::vector<PendingRelation>& obs = pending_[ir::BlockKind::Observation];
    std::map<int, bool> informative;
    for (const PendingRelation& p : obs)
      informative[p.rel.var] = !p.ok || p.reads_state; // a failed relation was reported already
    for (bool changed = true; changed;) {
      changed = false;
      for (const PendingRelation& p : obs)
        if (!informative[p.rel.var])
          for (int o : p.reads_now)
            if (informative.count(o) && informative[o]) {
              informative[p.rel.var] = changed = true;
              break;
            }
    }
    for (const PendingRelation& p : obs)
      if (!informative[p.rel.var])
        error(p.range,
              fmt::format("observation '{}' does not depend on any state: its relation reads no "
                          "state, directly or through other observations",
                          model_.obs[p.rel.var].name));
  }

  // Appends the block's relations in source order, except that a relation comes after those of
  // the lag-0 variables it reads.
  void order_relations(ir::BlockKind kind) { order_relations(pending_[kind], model_.block(kind)); }

  void order_relations(std::vector<PendingRelation>& rels, ir::Block& block) {
    std::set<int> sampled;
    std::vector<bool> placed(rels.size(), false);
    for (std::size_t done = 0; done < rels.size();) {
      bool progress = false;
      for (std::size_t i = 0; i < rels.size(); ++i) {
        if (placed[i] || !std::includes(sampled.begin(), sampled.end(), rels[i].reads_now.begin(),
                                        rels[i].reads_now.end()))
          continue;
        block.relations.push_back(rels[i].rel);
        sampled.insert(rels[i].rel.var);
        placed[i] = progress = true;
        ++done;
        break; // restart, so that source order decides among the ready ones
      }
      if (!progress) {
        report_cycle(rels, placed);
        return;
      }
    }
  }

  void report_cycle(const std::vector<PendingRelation>& rels, const std::vector<bool>& placed) {
    std::map<int, std::size_t> by_var;
    for (std::size_t i = 0; i < rels.size(); ++i)
      if (!placed[i])
        by_var[rels[i].rel.var] = i;
    // Every unplaced relation reads an unplaced one, so following reads must close a cycle.
    std::vector<std::size_t> path;
    std::size_t i = std::find(placed.begin(), placed.end(), false) - placed.begin();
    while (std::find(path.begin(), path.end(), i) == path.end()) {
      path.push_back(i);
      for (int v : rels[i].reads_now)
        if (by_var.count(v)) {
          i = by_var[v];
          break;
        }
    }
    path.erase(path.begin(), std::find(path.begin(), path.end(), i));
    std::rotate(path.begin(), std::min_element(path.begin(), path.end()), path.end());
    std::string chain = rels[path[0]].target + " reads " + rels[path[1 % path.size()]].target;
    for (std::size_t k = 1; k < path.size(); ++k)
      chain += ", which reads " + rels[path[(k + 1) % path.size()]].target;
    error(rels[path[0]].range, fmt::format("circular dependency between relations: {}", chain));
  }

  const ast::Model& ast_;
  DiagnosticEngine& diags_;
  const FileGraph& files_;
  ir::Model model_;
  std::map<std::string, Symbol> symbols_;
  std::vector<ConstValue> consts_;
  std::map<std::pair<ir::BlockKind, int>, const ast::Relation*> first_relation_;
  std::set<std::pair<int, const ir::Block*>> failed_lets_;
  std::map<int, FnSignature> fn_signatures_;
  std::map<ir::BlockKind, std::vector<PendingRelation>> pending_;
  std::vector<PendingRelation> pending_latents_; // of the plate or simulator block
};

} // namespace

std::optional<ir::Model> lower(const ast::Model& model, const std::string& filename,
                               DiagnosticEngine& diags, const FileGraph& files) {
  return Lowering(model, filename, diags, files).run();
}

} // namespace ssm::frontend
