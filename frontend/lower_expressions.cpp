// Expressions: the IR nodes they emit, names, operators, conditionals, lets and literals. Calls
// (lower_calls.cpp), user functions (lower_functions.cpp) and indexing (lower_indexing.cpp) have
// files of their own.
#include "limits.h"
#include "lowering.h"
#include "messages.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace ssm::frontend::lowering {

int Lowering::emit(Scope& s, ir::Node n, Range r) {
  n.loc = loc(s.call_site.value_or(r));
  return s.block->add(std::move(n));
}

int Lowering::emit_const(Scope& s, ir::Shape shape, std::vector<double> values, Range r) {
  ir::Node n;
  n.op = ir::Op::Const;
  n.shape = std::move(shape);
  n.values = std::move(values);
  return emit(s, std::move(n), r);
}

int Lowering::emit_op(Scope& s, ir::Op op, ir::Shape shape, std::vector<int> args, Range r) {
  ir::Node n;
  n.op = op;
  n.shape = std::move(shape);
  n.args = std::move(args);
  return emit(s, std::move(n), r);
}

int Lowering::emit_call(Scope& s, std::string fn, ir::Shape shape, std::vector<int> args, Range r) {
  ir::Node n;
  n.op = ir::Op::Call;
  n.fn = std::move(fn);
  n.shape = std::move(shape);
  n.args = std::move(args);
  return emit(s, std::move(n), r);
}

// c ? a : b. Both branches are computed (they are cheap, and selects vectorise); a branch that
// fails, such as log(-1), just is not chosen.
std::optional<int> Lowering::lower_cond(const Expr& e, Scope& s) {
  std::optional<int> c = lower(*e.args[0], s);
  ++s.guarded;
  std::optional<int> a = lower(*e.args[1], s);
  std::optional<int> b = lower(*e.args[2], s);
  --s.guarded;
  if (!c || !a || !b)
    return std::nullopt;
  const ir::Shape sc = shape_of(s, *c), sa = shape_of(s, *a), sb = shape_of(s, *b);
  if (!(sa == sb) && !sa.is_scalar() && !sb.is_scalar()) {
    error(e.range, fmt::format(msg::conditional_branch_shapes, sa.str(), sb.str()));
    return std::nullopt;
  }
  ir::Shape shape = sa.is_scalar() ? sb : sa;
  if (!sc.is_scalar() && !shape.is_scalar() && !(sc == shape)) {
    error(e.args[0]->range, fmt::format(msg::conditional_condition_shape, sc.str(), shape.str()));
    return std::nullopt;
  }
  return emit_op(s, ir::Op::Select, sc.is_scalar() ? shape : sc, {*c, *a, *b}, e.range);
}

std::optional<int> Lowering::lower(const Expr& e, Scope& s) {
  switch (e.kind) {
  case EKind::Number:
    if (!e.number_problem.empty()) {
      error(e.range, fmt::format(msg::number_out_of_range, e.number_problem));
      return std::nullopt;
    }
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
  case EKind::Slice:
    error(e.range, msg::slice_outside_index);
    return std::nullopt;
  }
  return std::nullopt;
}

void Lowering::not_constant(const Scope& s, Range r, const std::string& culprit) {
  error(r, fmt::format(msg::not_constant_because, s.constant()->what, culprit));
}

// A function body sees its arguments and constants only, so that a call means the same
// wherever it appears.
bool Lowering::outside_function(const Scope& s, Range r, const std::string& what) {
  if (!s.fn)
    return true;
  error(r, fmt::format(msg::function_reads_outside, s.fn->fn->name.name, what));
  return false;
}

std::optional<int> Lowering::lower_let(const Expr& e, const Symbol& sym, Scope& s) {
  const ast::LetDecl& let = ast_.lets[sym.index];
  std::string what = fmt::format("let '{}'", let.name.name);
  for (const auto& [name, where] : s.expanding)
    if (name == what) {
      error(e.range, fmt::format(msg::let_self_reference, let.name.name));
      return std::nullopt;
    }
  if (!sym.valid || failed_lets_.count({sym.index, s.block}))
    return std::nullopt;
  // A let is expanded where it is used, so lets of lets multiply: stop before that explodes.
  if (s.block->nodes.size() > kMaxBlockOperations) {
    error(e.range, fmt::format(msg::let_expansion_too_large, let.name.name, s.block->nodes.size(),
                               kMaxBlockOperations));
    failed_lets_.insert({sym.index, s.block});
    return std::nullopt;
  }
  std::optional<int> id = expanding(s, what, e.range, [&] { return lower(*let.value, s); });
  if (!id)
    failed_lets_.insert({sym.index, s.block}); // one report per let and block
  return id;
}

// `t`: the time index, 0 in the initial block.
std::optional<int> Lowering::lower_time(const Expr& e, Scope& s) {
  if (s.constant()) {
    not_constant(s, e.range, "'t' (the time index) is not");
    return std::nullopt;
  }
  if (!outside_function(s, e.range, "'t'"))
    return std::nullopt;
  if (in_static_block(s)) {
    error(e.range, model_.kind == ir::ModelKind::Plate
                       ? msg::t_in_plate_model
                       : fmt::format(msg::t_in_simulator, model_.name));
    return std::nullopt;
  }
  if (s.kind() == ir::BlockKind::Initial)
    return emit_const(s, ir::Shape::scalar(), {0.0}, e.range);
  return emit_op(s, ir::Op::Time, ir::Shape::scalar(), {}, e.range);
}

std::optional<int> Lowering::lower_name(const Expr& e, Scope& s) {
  if (std::optional<int> local = s.local(e.name))
    return local;
  if (e.name == "t")
    return lower_time(e, s);
  if (e.name == "pi")
    return emit_const(s, ir::Shape::scalar(), {std::numbers::pi}, e.range);
  if (e.name == "inf")
    return emit_const(s, ir::Shape::scalar(), {INFINITY}, e.range);
  Symbol* sym = lookup(e.name, e.range);
  if (!sym && e.name == "n" && model_.kind == ir::ModelKind::Plate) {
    error(e.range, msg::n_as_value);
    return std::nullopt;
  }
  if (!sym) {
    unknown_name(e.range, e.name);
    return std::nullopt;
  }
  sym->used = true;
  switch (sym->kind) {
  case Symbol::Kind::Latent:
    if (s.constant()) {
      not_constant(s, e.range, fmt::format(msg::is_a_latent_variable, e.name));
      return std::nullopt;
    }
    if (!outside_function(s, e.range, fmt::format(msg::what_latent_variable, e.name)))
      return std::nullopt;
    if (s.kind() == ir::BlockKind::Simulator)
      return lower_static_ref(e, *sym, s);
    error(e.range, fmt::format(msg::latent_without_plate_index, e.name));
    return std::nullopt;
  case Symbol::Kind::Let:
    if (s.constant()) {
      not_constant(s, e.range, fmt::format(msg::is_a_let_binding, e.name));
      return std::nullopt;
    }
    if (!outside_function(s, e.range, fmt::format(msg::what_let_binding, e.name)))
      return std::nullopt;
    return lower_let(e, *sym, s);
  case Symbol::Kind::Fn:
    error(e.range, fmt::format(msg::function_not_called, e.name));
    return std::nullopt;
  case Symbol::Kind::Net:
    error(e.range, fmt::format(msg::net_not_called, e.name));
    return std::nullopt;
  case Symbol::Kind::Functional:
    error(e.range, fmt::format(msg::functional_in_expression, e.name));
    return std::nullopt;
  case Symbol::Kind::Data: {
    if (s.constant()) {
      not_constant(s, e.range, fmt::format(msg::is_data, e.name));
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
    if (const ast::ConstDecl* defining =
            s.constant() && s.constant()->defining ? s.constant()->defining : defining_const_;
        defining && order(sym->range.begin) >= order(defining->name.range.begin)) {
      if (sym->range.begin == defining->name.range.begin)
        error(e.range, fmt::format(msg::constant_self_reference, e.name));
      else
        error(e.range,
              fmt::format(msg::constant_used_before_declared, e.name, defining->name.name));
      return std::nullopt;
    }
    if (!sym->valid)
      return std::nullopt;
    if (sym->index < 0 || sym->index >= static_cast<int>(consts_.size())) { // no value yet
      error(e.range, fmt::format(msg::constant_self_reference, e.name));
      return std::nullopt;
    }
    return emit_const(s, consts_[sym->index].shape, consts_[sym->index].values, e.range);
  case Symbol::Kind::Param: {
    if (s.constant()) {
      not_constant(s, e.range, fmt::format(msg::is_a_parameter, e.name));
      return std::nullopt;
    }
    if (s.kind() == ir::BlockKind::Guide) {
      error(e.range, fmt::format(msg::guide_reads_parameter, s.relation()->subject, e.name));
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
  case Symbol::Kind::Input:
    return lower_unindexed_var(e, *sym, s);
  }
  return std::nullopt;
}

// A state, observation or input named without a time index: an error, except for an observation
// of a simulator (which has no time).
std::optional<int> Lowering::lower_unindexed_var(const Expr& e, const Symbol& sym, Scope& s) {
  if (s.constant()) {
    not_constant(s, e.range, fmt::format("'{}' is {}", e.name, a_kind(sym.kind)));
    return std::nullopt;
  }
  if (!outside_function(s, e.range, fmt::format("{} '{}'", kind_name(sym.kind), e.name)))
    return std::nullopt;
  if (s.kind() == ir::BlockKind::Simulator && sym.kind == Symbol::Kind::Obs)
    return lower_static_ref(e, sym, s);
  if ((s.kind() == ir::BlockKind::Plate || s.kind() == ir::BlockKind::Guide) &&
      (sym.kind == Symbol::Kind::Obs || sym.kind == Symbol::Kind::Input)) {
    error(e.range, sym.kind == Symbol::Kind::Obs
                       ? fmt::format(msg::obs_without_plate_index, e.name)
                       : fmt::format(msg::plate_input_without_index, e.name));
    return std::nullopt;
  }
  if (!sym.valid)
    return std::nullopt; // a state or input of a model without time, reported already
  std::string how;
  if (s.kind() == ir::BlockKind::Initial)
    how = fmt::format("{}[0]", e.name);
  else if ((s.kind() == ir::BlockKind::Transition || s.kind() == ir::BlockKind::Functional ||
            s.kind() == ir::BlockKind::Proposal) &&
           sym.kind == Symbol::Kind::State)
    how = fmt::format(msg::state_time_index_forms, e.name);
  else if (s.kind() == ir::BlockKind::Transition && sym.kind == Symbol::Kind::Obs)
    how = fmt::format("{}[t-1]", e.name);
  else
    how = fmt::format("{}[t]", e.name);
  error(e.range, fmt::format(msg::needs_time_index, kind_name(sym.kind), e.name, how));
  return std::nullopt;
}

std::optional<int> Lowering::lower_binary(const Expr& e, Scope& s) {
  std::optional<int> a = lower(*e.args[0], s);
  std::optional<int> b = lower(*e.args[1], s);
  if (!a || !b)
    return std::nullopt;
  const ir::Shape sa = shape_of(s, *a);
  const ir::Shape sb = shape_of(s, *b);
  std::string both = fmt::format("{} {} {}", sa.str(), e.op, sb.str());
  // A constant divisor of 0 is a mistake, not a model of inf. In a function body the arguments
  // are placeholders (zeros) until a call: only a divisor written with constants counts there.
  if ((e.op == "/" || e.op == "%") && (!s.fn || is_constant(*e.args[1], s)))
    if (const std::optional<std::vector<double>> divisor = constant_value(*s.block, *b)) {
      const auto zero = std::find(divisor->begin(), divisor->end(), 0.0);
      if (zero != divisor->end()) {
        const std::string what = e.op == "/" ? "divisor" : "modulus";
        std::string message = divisor->size() == 1 ? fmt::format(msg::division_by_zero, what)
                                                   : fmt::format(msg::division_by_zero_component,
                                                                 what, zero - divisor->begin());
        if (error_unless_guarded(s, e.args[1]->range, std::move(message)))
          return std::nullopt;
      }
    }
  static const std::map<std::string, std::string> elementwise = {
      {"%", "mod"}, {"<", "lt"},  {"<=", "le"},  {">", "gt"}, {">=", "ge"},
      {"==", "eq"}, {"!=", "ne"}, {"&&", "and"}, {"||", "or"}};
  if (auto it = elementwise.find(e.op); it != elementwise.end()) {
    if (!(sa == sb) && !sa.is_scalar() && !sb.is_scalar()) {
      error(e.range, fmt::format(msg::operand_shape_mismatch, both, e.op));
      return std::nullopt;
    }
    return emit_call(s, it->second, sa.is_scalar() ? sb : sa, {*a, *b}, e.range);
  }
  switch (e.op[0]) {
  case '+':
  case '-':
  case '/': {
    if (!(sa == sb) && !sa.is_scalar() && !sb.is_scalar()) {
      error(e.range, fmt::format(msg::operand_shape_mismatch, both, e.op));
      return std::nullopt;
    }
    ir::Op op = e.op == "+" ? ir::Op::Add : e.op == "-" ? ir::Op::Sub : ir::Op::Div;
    return emit_op(s, op, sa.is_scalar() ? sb : sa, {*a, *b}, e.range);
  }
  case '*': {
    if (sa.is_scalar() || sb.is_scalar())
      return emit_op(s, ir::Op::Mul, sa.is_scalar() ? sb : sa, {*a, *b}, e.range);
    if (sa.rank() == 1 && sb.rank() == 1) {
      error(e.range, fmt::format(msg::vector_times_vector, both));
      return std::nullopt;
    }
    if (sa.rank() == 1) {
      error(e.range, fmt::format(msg::vector_times_matrix, both));
      return std::nullopt;
    }
    if (sa.dims[1] != sb.dims[0]) {
      std::string why = sb.rank() == 1
                            ? fmt::format(msg::matvec_size_mismatch, sa.dims[1], sb.dims[0])
                            : fmt::format(msg::matmul_size_mismatch, sa.dims[1], sb.dims[0]);
      error(e.range, fmt::format(msg::product_shape_mismatch, both, why));
      return std::nullopt;
    }
    ir::Shape shape =
        sb.rank() == 1 ? ir::Shape::vector(sa.dims[0]) : ir::Shape::matrix(sa.dims[0], sb.dims[1]);
    return emit_op(s, ir::Op::MatMul, shape, {*a, *b}, e.range);
  }
  case '^':
    if (!sb.is_scalar()) {
      error(e.args[1]->range, fmt::format(msg::exponent_not_real, sb.str()));
      return std::nullopt;
    }
    return emit_op(s, ir::Op::Pow, sa, {*a, *b}, e.range);
  }
  return std::nullopt;
}

// [a, b, c] is a vector of scalars; [[a, b], [c, d]] (or a list of vector expressions) is a
// matrix given by rows.
std::optional<int> Lowering::lower_list(const Expr& e, Scope& s) {
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
          error(x->range, fmt::format(msg::matrix_row_element_not_real, shape_of(s, *id).str()));
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
        error(a->range,
              fmt::format(msg::literal_element_not_number_or_row, shape_of(s, *id).str()));
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
      error(e.range, msg::literal_mixes_numbers_and_rows);
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
            fmt::format(msg::literal_row_length_mismatch, i,
                        plural(elements[i].scalars.size(), "element"), plural(cols, "element")));
      return std::nullopt;
    }
  for (const Element& el : elements)
    build.args.insert(build.args.end(), el.scalars.begin(), el.scalars.end());
  build.shape = ir::Shape::matrix(static_cast<int>(elements.size()), static_cast<int>(cols));
  return emit(s, std::move(build), e.range);
}

} // namespace ssm::frontend::lowering
