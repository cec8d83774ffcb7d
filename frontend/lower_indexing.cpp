// Indexing: time indices (x[t-1], x[0]) and what each block may read at which lag, plate indices
// (z[n]), and the components of vectors and matrices, with constant or run-time indices.
#include "limits.h"
#include "lowering.h"
#include "messages.h"

#include <algorithm>
#include <cmath>

namespace ssm::frontend::lowering {

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

// How messages name an expression: its source text if short, as in 'A[0]'.
std::string Lowering::quote(const Expr& e) const {
  std::string_view text = diags_.source().substr(e.range.begin, e.range.end - e.range.begin);
  if (text.size() > 24 || text.find('\n') != std::string_view::npos)
    return "this expression";
  return fmt::format("'{}'", text);
}

// One bracket of component indices applied to the value `base` (the bracket's args[0]).
std::optional<int> Lowering::apply_index(int base, const Expr& bracket, Scope& s) {
  const ir::Shape shape = shape_of(s, base);
  std::string subject = quote(*bracket.args[0]);
  std::size_t count = bracket.args.size() - 1;
  Range brackets{bracket.args[0]->range.end, bracket.range.end};
  if (shape.is_scalar()) {
    error(brackets, fmt::format(msg::real_indexed, subject));
    return std::nullopt;
  }
  if (count > static_cast<std::size_t>(shape.rank())) {
    error(brackets,
          fmt::format(msg::too_many_indices, subject, shape.str(), plural(shape.rank(), "index"),
                      count == 1 ? "1 was" : fmt::format("{} were", count)));
    return std::nullopt;
  }
  for (std::size_t k = 0; k < count; ++k)
    if (bracket.args[k + 1]->kind == EKind::Slice)
      return apply_slice(base, bracket, s);
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
          dim == 0 ? "it has no elements" : fmt::format(msg::valid_indices, dim - 1);
      error(ie.range, fmt::format(msg::index_out_of_range, which, *i, subject, shape.str(), valid));
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

// v[a:b]: components a, a+1, ..., b-1 of a vector, as a vector (constant a < b). A[a:b, j] and
// A[i, a:b]: part of a column or of a row of a matrix, as a vector (the index j or i may be read
// at run time); A[a:b, c:d]: a block.
std::optional<int> Lowering::apply_slice(int base, const Expr& bracket, Scope& s) {
  const ir::Shape shape = shape_of(s, base);
  if (shape.rank() == 2 && bracket.args.size() == 3)
    return apply_matrix_slice(base, bracket, s);
  const Expr& range = *bracket.args.back();
  if (shape.rank() != 1 || bracket.args.size() != 2 || range.kind != EKind::Slice) {
    error(bracket.range,
          fmt::format(msg::slice_of_non_vector, quote(*bracket.args[0]), shape.str()));
    return std::nullopt;
  }
  std::optional<long> a = eval_int(*range.args[0], "the start of a range");
  std::optional<long> b = eval_int(*range.args[1], "the end of a range");
  if (!a || !b)
    return std::nullopt;
  const long dim = shape.dims[0];
  if (*a < 0 || *b > dim || *a >= *b) {
    error(range.range,
          fmt::format(msg::slice_out_of_range, *a, *b, quote(*bracket.args[0]), shape.str(), dim));
    return std::nullopt;
  }
  std::vector<int> parts;
  for (long i = *a; i < *b; ++i) {
    ir::Node n;
    n.op = ir::Op::Index;
    n.args = {base};
    n.index = {static_cast<int>(i)};
    n.shape = ir::Shape::scalar();
    parts.push_back(emit(s, std::move(n), bracket.range));
  }
  return emit_op(s, ir::Op::Build, ir::Shape::vector(static_cast<int>(parts.size())), parts,
                 bracket.range);
}

// An index read at run time, `which` ("row index") of a value whose dimension is `dim`: a scalar,
// and, when it is a discrete variable, one whose declared range fits.
std::optional<int> Lowering::lower_run_time_index(const Expr& ie, int dim, const std::string& which,
                                                  const Expr& bracket, const ir::Shape& whole,
                                                  Scope& s) {
  std::optional<int> i = lower(ie, s);
  if (!i)
    return std::nullopt;
  if (!shape_of(s, *i).is_scalar()) {
    error(ie.range, fmt::format(msg::dynamic_index_not_scalar, shape_of(s, *i).str()));
    return std::nullopt;
  }
  if (const ir::VarDecl* decl = discrete_variable(s.block->nodes[*i]);
      decl && std::isfinite(decl->lower) && std::isfinite(decl->upper) &&
      (decl->lower < 0 || decl->upper >= dim)) {
    const std::string valid =
        dim == 0 ? "it has no elements" : fmt::format(msg::valid_indices, dim - 1);
    std::string message =
        fmt::format(msg::index_range_out_of_range, which, quote(ie), decl->name,
                    ir::type_str(*decl), quote(*bracket.args[0]), whole.str(), valid);
    if (error_unless_guarded(s, ie.range, std::move(message)))
      return std::nullopt;
  }
  return i;
}

std::optional<int> Lowering::apply_matrix_slice(int base, const Expr& bracket, Scope& s) {
  const ir::Shape shape = shape_of(s, base);
  std::vector<std::pair<long, long>> spans; // [first, last) per dimension
  std::vector<int> kept;                    // the sliced dimensions' lengths
  int run_time = -1, run_time_dim = -1;     // an index read at run time, and its dimension
  for (int k = 0; k < 2; ++k) {
    const Expr& ie = *bracket.args[k + 1];
    const long dim = shape.dims[k];
    if (ie.kind != EKind::Slice && !is_constant(ie, s)) {
      std::optional<int> i = lower_run_time_index(
          ie, static_cast<int>(dim), k == 0 ? "row index" : "column index", bracket, shape, s);
      if (!i)
        return std::nullopt;
      run_time = *i;
      run_time_dim = k;
      spans.emplace_back(0, 1);
      continue;
    }
    if (ie.kind == EKind::Slice) {
      std::optional<long> a = eval_int(*ie.args[0], "the start of a range");
      std::optional<long> b = eval_int(*ie.args[1], "the end of a range");
      if (!a || !b)
        return std::nullopt;
      if (*a < 0 || *b > dim || *a >= *b) {
        error(ie.range, fmt::format(msg::slice_out_of_range, *a, *b, quote(*bracket.args[0]),
                                    shape.str(), dim));
        return std::nullopt;
      }
      spans.emplace_back(*a, *b);
      kept.push_back(static_cast<int>(*b - *a));
      continue;
    }
    std::optional<long> i = eval_int(ie, "an index");
    if (!i)
      return std::nullopt;
    if (*i < 0 || *i >= dim) {
      error(ie.range, fmt::format(msg::index_out_of_range, k == 0 ? "row index" : "column index",
                                  *i, quote(*bracket.args[0]), shape.str(),
                                  fmt::format(msg::valid_indices, dim - 1)));
      return std::nullopt;
    }
    spans.emplace_back(*i, *i + 1);
  }
  auto index = [&](int from, std::vector<int> at, ir::Shape shape_at) {
    ir::Node n;
    n.op = ir::Op::Index;
    n.args = {from};
    n.index = std::move(at);
    n.shape = std::move(shape_at);
    return emit(s, std::move(n), bracket.range);
  };
  // A row read at run time (A[i, a:b]) is selected once; a column's entries row by row.
  const int row = run_time_dim == 0 ? emit_op(s, ir::Op::DynIndex, ir::Shape::vector(shape.dims[1]),
                                              {base, run_time}, bracket.range)
                                    : -1;
  std::vector<int> parts;
  for (long i = spans[0].first; i < spans[0].second; ++i)
    for (long j = spans[1].first; j < spans[1].second; ++j) {
      const int r = static_cast<int>(i), c = static_cast<int>(j);
      if (run_time_dim == 0)
        parts.push_back(index(row, {c}, ir::Shape::scalar()));
      else if (run_time_dim == 1)
        parts.push_back(emit_op(s, ir::Op::DynIndex, ir::Shape::scalar(),
                                {index(base, {r}, ir::Shape::vector(shape.dims[1])), run_time},
                                bracket.range));
      else
        parts.push_back(index(base, {r, c}, ir::Shape::scalar()));
    }
  const ir::Shape result =
      kept.size() == 2 ? ir::Shape::matrix(kept[0], kept[1]) : ir::Shape::vector(kept[0]);
  return emit_op(s, ir::Op::Build, result, parts, bracket.range);
}

// The declaration of the integer variable that `node` reads (a state, latent, observation,
// input or data item declared int), or null.
const ir::VarDecl* Lowering::discrete_variable(const ir::Node& node) const {
  const std::vector<ir::VarDecl>* decls = node.op == ir::Op::State    ? &model_.states
                                          : node.op == ir::Op::Latent ? &model_.latents
                                          : node.op == ir::Op::Obs    ? &model_.obs
                                          : node.op == ir::Op::Input  ? &model_.inputs
                                          : node.op == ir::Op::Data   ? &model_.data
                                                                      : nullptr;
  if (!decls || node.var < 0 || node.var >= static_cast<int>(decls->size()))
    return nullptr;
  const ir::VarDecl& decl = (*decls)[node.var];
  return decl.integer && decl.shape.is_scalar() ? &decl : nullptr;
}

// v[i] or A[i] (a row) with i computed at run time, e.g. P[z[t-1]]: one index at a time, each
// dropping a dimension. An index outside the value gives NaN at run time.
std::optional<int> Lowering::apply_dynamic_index(int base, const Expr& bracket, Scope& s) {
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
        std::string valid = shape.dims[0] == 0 ? "it has no elements"
                                               : fmt::format(msg::valid_indices, shape.dims[0] - 1);
        error(ie.range, fmt::format(msg::index_out_of_range, which, *i, quote(*bracket.args[0]),
                                    whole.str(), valid));
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
    const std::string which = whole.rank() == 1 ? "index" : k == 1 ? "row index" : "column index";
    std::optional<int> i = lower_run_time_index(ie, shape.dims[0], which, bracket, whole, s);
    if (!i)
      return std::nullopt;
    value = emit_op(s, ir::Op::DynIndex,
                    ir::Shape{std::vector<int>(shape.dims.begin() + 1, shape.dims.end())},
                    {*value, *i}, bracket.range);
  }
  return value;
}

std::optional<int> Lowering::lower_index(const Expr& e, Scope& s) {
  // The chain of brackets, innermost first: x[t-1][0] is Index(Index(x, t-1), 0).
  std::vector<const Expr*> chain;
  const Expr* base = &e;
  while (base->kind == EKind::Index) {
    chain.insert(chain.begin(), base);
    base = base->args[0].get();
  }
  if (base->kind == EKind::Name) {
    Symbol* sym = lookup(base->name, base->range);
    if (sym && (s.kind() == ir::BlockKind::Plate || s.kind() == ir::BlockKind::Guide) &&
        (sym->kind == Symbol::Kind::Latent || sym->kind == Symbol::Kind::Obs ||
         sym->kind == Symbol::Kind::Input)) {
      sym->used = true;
      return lower_plate_ref(*base, *sym, chain, s);
    }
    if (sym && s.kind() == ir::BlockKind::Simulator && sym->kind == Symbol::Kind::Obs) {
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
      error(chain[0]->range, fmt::format(msg::time_index_on_timeless, kind_name(sym->kind),
                                         base->name, base->name, base->name));
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

// z[n][components...] for a latent variable, observation or input z of a plate model.
std::optional<int> Lowering::lower_plate_ref(const Expr& name, const Symbol& sym,
                                             const std::vector<const Expr*>& chain, Scope& s) {
  const Expr& first = *chain[0];
  if (first.args.size() != 2) {
    error(first.range, fmt::format(msg::plate_index_with_components, name.name));
    return std::nullopt;
  }
  const Expr& index = *first.args[1];
  if (index.kind != EKind::Name || index.name != "n") {
    error(index.range, fmt::format(msg::plate_reads_other_item, name.name));
    return std::nullopt;
  }
  std::optional<int> value = lower_static_ref(first, sym, s);
  for (std::size_t k = 1; k < chain.size() && value; ++k)
    value = apply_index(*value, *chain[k], s);
  return value;
}

std::optional<TimeIndex> Lowering::time_index(const Expr& e, const std::string& var) {
  std::string what = fmt::format(msg::what_time_index, var);
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
    bool t_right = e.op == "+" && rhs.kind == EKind::Name && rhs.name == "t" && !mentions_time(lhs);
    if (t_left || t_right) {
      std::optional<long> k = eval_int(t_left ? rhs : lhs, "a time offset");
      if (!k)
        return std::nullopt;
      if (*k > kMaxLag || *k < -kMaxLag) {
        error(e.range, fmt::format(msg::lag_too_large, *k, kMaxLag));
        return std::nullopt;
      }
      return TimeIndex{false, e.op == "-" ? -*k : *k};
    }
  }
  error(e.range, fmt::format(msg::unsupported_time_index, var, var, var, var));
  return std::nullopt;
}

// x[time][components...] for a state or observation x.
std::optional<int> Lowering::lower_var_ref(const Expr& name, const Symbol& sym,
                                           const std::vector<const Expr*>& chain, Scope& s) {
  bool is_state = sym.kind == Symbol::Kind::State;
  bool is_input = sym.kind == Symbol::Kind::Input;
  if (s.constant()) {
    not_constant(s, chain.back()->range, fmt::format("'{}' is {}", name.name, a_kind(sym.kind)));
    return std::nullopt;
  }
  if (!outside_function(s, chain.back()->range,
                        fmt::format("{} '{}'", kind_name(sym.kind), name.name)))
    return std::nullopt;
  const Expr& first = *chain[0];
  if (first.args.size() != 2) {
    error(first.range, fmt::format(msg::time_index_with_components, name.name));
    return std::nullopt;
  }
  std::optional<TimeIndex> time = time_index(*first.args[1], name.name);
  if (!time || !sym.valid)
    return std::nullopt;
  std::string ref = fmt::format("{}[{}]", name.name, time->str());
  Range where = first.range;
  RelationScope& rel = *s.relation(); // not a constant: checked above
  ir::BlockKind kind = rel.kind;
  bool initial = kind == ir::BlockKind::Initial;
  // Proposals and look-aheads read what a transition does, and y[t].
  bool proposal = kind == ir::BlockKind::Proposal || kind == ir::BlockKind::Lookahead;
  bool transition = kind == ir::BlockKind::Transition || proposal;
  bool functional = kind == ir::BlockKind::Functional;
  if (!initial && time->absolute) {
    error(where,
          fmt::format(msg::fixed_time_step, ref, functional ? rel.subject : "a relation at time t",
                      (is_state && (transition || functional)) ||
                              (!is_state && !is_input && transition)
                          ? fmt::format("{0}[t] and {0}[t-1]", name.name)
                          : fmt::format("{}[t]", name.name)));
    return std::nullopt;
  }
  long offset = time->k; // relative to the target's time; t = 0 in the initial block
  bool same_kind = !is_input && is_state == (rel.target_kind == ir::VarKind::State);
  auto fail = [&](std::string message) {
    error(where, std::move(message));
    return std::nullopt;
  };
  if (offset > 0)
    return fail(fmt::format(msg::reads_future, rel.subject, ref,
                            functional ? "a functional" : "a relation"));
  if (initial && offset < 0)
    return fail(fmt::format(msg::before_time_zero, ref, rel.target));
  if (is_input) {
    if (offset < 0)
      return fail(fmt::format(msg::past_input, ref, rel.subject, name.name));
  } else if (!is_state) {
    if (initial)
      return fail(fmt::format(msg::initial_reads_obs, ref));
    if (transition && !proposal && offset == 0)
      return fail(fmt::format(msg::transition_reads_current_obs, ref, name.name));
    if (transition && offset < -1)
      return fail(fmt::format(msg::obs_lag_beyond_1, ref,
                              proposal ? fmt::format(msg::proposal_obs_reads, name.name)
                                       : fmt::format(msg::transition_obs_reads, name.name)));
    if (!transition && offset < 0)
      return fail(fmt::format(msg::past_obs, functional ? "a functional" : "an observation", ref));
  }
  // States at any lag, observations included: the augment-lags transform makes the state
  // first-order, and gives observations x[t-k] as a hidden state at t.
  const bool path = offset == 0 && same_kind && rel.path && sym.index == rel.target_var;
  if (offset == 0 && same_kind && !functional && sym.index == rel.target_var && !path)
    return fail(rel.sde_fixed
                    ? fmt::format(msg::diffusion_fixed_reads_path, rel.sde_fixed, rel.target, ref,
                                  std::string_view(rel.sde_fixed) == "dt"
                                      ? msg::diffusion_dt_reads_path
                                      : msg::diffusion_bound_reads_path)
                    : fmt::format(msg::reads_own_target, rel.subject, ref));
  if (offset == 0 && is_state && kind == ir::BlockKind::Lookahead)
    return fail(fmt::format(msg::lookahead_reads_current_state, rel.subject, ref, name.name));
  ir::Node n;
  n.op = is_state ? ir::Op::State : is_input ? ir::Op::Input : ir::Op::Obs;
  n.var = sym.index;
  n.lag = static_cast<int>(-offset);
  n.shape = is_state   ? model_.states[sym.index].shape
            : is_input ? model_.inputs[sym.index].shape
                       : model_.obs[sym.index].shape;
  if (offset == 0 && same_kind && !path)
    rel.reads_now.insert(sym.index);
  if (is_state)
    rel.reads_state = true;
  std::optional<int> value = emit(s, std::move(n), where);
  for (std::size_t k = 1; k < chain.size() && value; ++k)
    value = apply_index(*value, *chain[k], s);
  return value;
}

} // namespace ssm::frontend::lowering
