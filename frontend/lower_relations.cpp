// Relations: `x[t] ~ D(...)`, proposals, look-aheads and functionals of a state-space model, and
// the relations of a plate model or simulator (`latent z[n] ~ ...`, `obs x = ...`). Each relation
// is lowered into its block and kept pending until the order of the block's relations is known.
#include "lowering.h"
#include "messages.h"

#include <functional>

namespace ssm::frontend::lowering {

// Checks the target of a relation (x[0], x[t], y[t], a proposal's x[t]): the variable it is for
// and the block it belongs to; nullopt after an error.
std::optional<std::pair<Symbol*, ir::BlockKind>> Lowering::relation_target(const ast::Relation& r) {
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
    return std::nullopt;
  }
  switch (sym->kind) {
  case Symbol::Kind::Const:
    error(r.target->range, fmt::format(msg::relation_on_constant, name));
    return std::nullopt;
  case Symbol::Kind::Param:
    error(r.target->range, r.deterministic()
                               ? fmt::format(msg::value_of_parameter, name)
                               : fmt::format(msg::relation_on_parameter, name, r.dist.name.name));
    return std::nullopt;
  default:
    break;
  }
  if (!model_.is_state_space()) {
    no_time(r.range, r.proposal() ? std::string("a proposal") : "a relation 'x[t] ~ ...'");
    return std::nullopt;
  }
  if (sym->kind != Symbol::Kind::State && sym->kind != Symbol::Kind::Obs) {
    error(r.target->range, fmt::format(msg::relation_on_other, name));
    return std::nullopt;
  }
  bool is_state = sym->kind == Symbol::Kind::State;
  if (r.deterministic() && !is_state) {
    error(r.target->range, fmt::format(msg::deterministic_observation, name));
    return std::nullopt;
  }
  std::string forms =
      is_state ? fmt::format(msg::state_relation_forms, name) : fmt::format("{}[t]", name);
  if (chain.empty()) {
    error(r.target->range, fmt::format(msg::relation_target_without_time, forms));
    return std::nullopt;
  }
  if (chain.size() > 1 || chain[0]->args.size() != 2) {
    error(r.target->range, fmt::format(msg::relation_target_component, forms));
    return std::nullopt;
  }
  std::optional<TimeIndex> time = time_index(*chain[0]->args[1], name);
  if (!time)
    return std::nullopt;
  ir::BlockKind kind;
  if (is_state && time->absolute && time->k == 0)
    kind = ir::BlockKind::Initial;
  else if (!time->absolute && time->k == 0)
    kind = is_state ? ir::BlockKind::Transition : ir::BlockKind::Observation;
  else {
    error(r.target->range, fmt::format(msg::relation_target_bad_time, forms, name, time->str()));
    return std::nullopt;
  }
  if (r.proposal()) {
    if (!is_state) {
      error(r.target->range, fmt::format(msg::proposal_for_obs, name));
      return std::nullopt;
    }
    if (kind == ir::BlockKind::Initial) {
      error(r.target->range, fmt::format(msg::proposal_for_initial_state, name));
      return std::nullopt;
    }
    kind = ir::BlockKind::Proposal;
  }
  return std::pair(sym, kind);
}

void Lowering::add_relation(const ast::Relation& r) {
  auto checked = relation_target(r);
  if (!checked)
    return;
  auto [sym, kind] = *checked;
  if (!sym->valid)
    return;
  const bool is_state = sym->kind == Symbol::Kind::State;
  const std::string& name = is_state ? model_.states[sym->index].name : model_.obs[sym->index].name;
  std::string target = fmt::format("{}[{}]", name, kind == ir::BlockKind::Initial ? "0" : "t");
  const char* what = r.proposal() ? "proposal" : "relation";
  auto key = std::pair(kind, sym->index);
  if (auto it = first_relation_.find(key); it != first_relation_.end()) {
    error(r.target->range, fmt::format(msg::second_relation, target, what));
    note(it->second->target->range, fmt::format(msg::first_relation_here, what, target));
    return;
  }
  first_relation_.emplace(key, &r);

  Scope s(model_.block(kind),
          RelationScope(kind, fmt::format(msg::relation_subject, what, target),
                        is_state ? ir::VarKind::State : ir::VarKind::Obs, sym->index, target));
  const RelationScope& reads = *s.relation();
  const ir::VarDecl& decl = is_state ? model_.states[sym->index] : model_.obs[sym->index];
  std::vector<std::optional<int>> args;
  std::optional<ir::Dist> dist;
  bool ok = false;
  if (r.deterministic()) {
    args.push_back(lower_deterministic_value(r, decl, s, target));
    dist = ir::Dist::Dirac;
    ok = args[0].has_value();
  } else if (r.dist.name.name == ir::dist_info(ir::Dist::Diffusion).name) {
    dist = ir::Dist::Diffusion;
    if (auto lowered = lower_diffusion(r, decl, kind, sym->index, s, target)) {
      args.assign(lowered->begin(), lowered->end());
      ok = true;
    }
  } else if (!refuse_guide_only(r.dist, target)) {
    std::vector<std::optional<ir::Shape>> shapes;
    for (const ast::ExprPtr& a : r.dist.args) {
      args.push_back(lower(*a, s));
      shapes.push_back(args.back() ? std::optional(shape_of(s, *args.back())) : std::nullopt);
    }
    dist = check_dist(r.dist, shapes, decl.shape, target, r.target->range);
    ok = dist && check_relation(r, decl, *s.block, reads.target_kind, *dist, args, target);
  }

  PendingRelation p;
  p.ast = &r;
  p.range = r.target->range;
  p.target = target;
  p.rel.kind = reads.target_kind;
  p.rel.var = sym->index;
  p.rel.loc = loc(r.range);
  p.reads_now = reads.reads_now;
  p.reads_state = reads.reads_state;
  p.ok = ok;
  if (ok) {
    p.rel.dist = dist.value();
    for (const auto& a : args)
      p.rel.args.push_back(*a);
  }
  pending_[kind].push_back(std::move(p));
}

// The value of `x[t] = value;`, which must have the state's shape; nullopt after an error.
std::optional<int> Lowering::lower_deterministic_value(const ast::Relation& r,
                                                       const ir::VarDecl& decl, Scope& s,
                                                       const std::string& target) {
  if (decl.integer) {
    error(r.target->range,
          fmt::format(msg::deterministic_integer_state, decl.name, ir::type_str(decl)));
    return std::nullopt;
  }
  std::optional<int> id = lower(*r.value, s);
  if (id && !(shape_of(s, *id) == decl.shape)) {
    error(r.value->range, fmt::format(msg::deterministic_value_shape, target,
                                      shape_of(s, *id).str(), decl.name, decl.shape.str()));
    return std::nullopt;
  }
  return id;
}

// The declarations with a relation of a plate model or simulator, in the order to lower them:
// source order, except that an untyped `obs x = e;`, which takes the shape of e, comes before
// the first declaration that reads it (directly or through lets).
std::vector<const ast::VarDecl*> Lowering::static_relation_order() const {
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
void Lowering::add_static_relation(const ast::VarDecl& v) {
  Symbol* sym = declared(v.name);
  if (!sym || !sym->valid)
    return;
  const bool latent = v.kind == ast::VarDecl::Kind::Latent;
  const bool plate = model_.kind == ir::ModelKind::Plate;
  ir::VarDecl& decl = latent ? model_.latents[sym->index] : model_.obs[sym->index];
  const std::string target = plate ? v.name.name + "[n]" : v.name.name;
  Scope s(model_.block(static_block()),
          RelationScope(
              static_block(),
              fmt::format(msg::static_relation_subject, v.prior ? "distribution" : "value", target),
              latent ? ir::VarKind::Latent : ir::VarKind::Obs, sym->index, target));
  const RelationScope& reads = *s.relation();
  PendingRelation p;
  p.target = target;
  p.range = v.name.range;
  p.rel.kind = reads.target_kind;
  p.rel.var = sym->index;
  p.rel.loc = loc(v.range);
  if (v.default_value) { // obs x = e
    std::optional<int> id = lower(*v.default_value, s);
    if (id && !v.type)
      decl.shape = shape_of(s, *id);
    if (id && !(shape_of(s, *id) == decl.shape)) {
      error(v.default_value->range,
            fmt::format(msg::obs_value_shape_mismatch, v.name.name, shape_of(s, *id).str(),
                        v.name.name, decl.shape.str()));
      id.reset();
    }
    p.ok = id.has_value();
    p.rel.dist = ir::Dist::Dirac;
    p.rel.args = {id.value_or(-1)};
  } else if (Symbol* net = plate ? density_net(v.prior->name.name) : nullptr;
             net && (latent ? model_.nets[net->index].density()
                            : decl.constraint == ir::Constraint::Sequence &&
                                  model_.nets[net->index].over_sequences())) {
    // A latent's density over vectors, or a sequence's rnn_lm.
    const std::optional<int> id =
        lower_density_call(*v.prior, *net, p.rel.kind, sym->index, s, target);
    p.ok = id.has_value();
    p.rel.dist = ir::Dist::Density;
    p.rel.args = {id.value_or(-1)};
  } else if (decl.constraint == ir::Constraint::Sequence) {
    error(v.prior->name.range,
          fmt::format(msg::sequence_distribution, target, decl.upper + 1, v.prior->name.name));
    p.ok = false;
  } else if (!refuse_guide_only(*v.prior, target)) {
    std::vector<std::optional<int>> args;
    std::vector<std::optional<ir::Shape>> shapes;
    for (const ast::ExprPtr& a : v.prior->args) {
      args.push_back(lower(*a, s));
      shapes.push_back(args.back() ? std::optional(shape_of(s, *args.back())) : std::nullopt);
    }
    std::optional<ir::Dist> dist = check_dist(*v.prior, shapes, decl.shape, target, v.name.range);
    p.ok = dist && check_integer_target(decl, *dist, v.name.name, *v.prior);
    if (p.ok)
      check_argument_domain(*dist, *v.prior, *s.block, args);
    if (p.ok) {
      p.rel.dist = *dist;
      for (const auto& a : args)
        p.rel.args.push_back(*a);
    }
  }
  p.reads_now = reads.reads_now;
  (latent ? pending_latents_ : pending_[reads.kind]).push_back(std::move(p));
}

// z[n] (plate) or a (simulator): a latent variable or an observation of the current item.
std::optional<int> Lowering::lower_static_ref(const Expr& e, const Symbol& sym, Scope& s) {
  if (sym.kind == Symbol::Kind::Input) { // the item's covariate: the step's input
    if (!sym.valid)
      return std::nullopt;
    ir::Node n;
    n.op = ir::Op::Input;
    n.var = sym.index;
    n.shape = model_.inputs[sym.index].shape;
    return emit(s, std::move(n), e.range);
  }
  const bool latent = sym.kind == Symbol::Kind::Latent;
  const std::string& name = latent ? model_.latents[sym.index].name : model_.obs[sym.index].name;
  RelationScope& rel = *s.relation(); // the plate or simulator block
  std::string ref = rel.kind == ir::BlockKind::Simulator ? name : name + "[n]";
  ir::VarKind kind = latent ? ir::VarKind::Latent : ir::VarKind::Obs;
  if (!sym.valid)
    return std::nullopt;
  if (latent && rel.kind == ir::BlockKind::Guide) {
    error(e.range, fmt::format(msg::guide_reads_latent, rel.subject, ref));
    return std::nullopt;
  }
  if (!latent && rel.target_kind == ir::VarKind::Latent && rel.kind != ir::BlockKind::Guide) {
    error(e.range, fmt::format(msg::latent_reads_obs, rel.subject, ref));
    return std::nullopt;
  }
  if (kind == rel.target_kind && sym.index == rel.target_var) {
    error(e.range, fmt::format(msg::reads_own_target, rel.subject, ref));
    return std::nullopt;
  }
  if (!latent && model_.obs[sym.index].constraint == ir::Constraint::Sequence &&
      s.net_argument == 0) {
    error(e.range, fmt::format(msg::sequence_outside_network, ref));
    return std::nullopt;
  }
  ir::Node n;
  n.op = latent ? ir::Op::Latent : ir::Op::Obs;
  n.var = sym.index;
  n.shape = model_.var_shape(kind, sym.index);
  if (kind == rel.target_kind)
    rel.reads_now.insert(sym.index);
  return emit(s, std::move(n), e.range);
}

// A model with a proposal for some states draws the others from their transitions: their
// relations are copied into the proposal block, so it samples the whole state (their factors
// cancel in the guided filter's weights).
void Lowering::complete_proposal() {
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

int Lowering::copy_node(const ir::Block& from, int id, ir::Block& to, std::map<int, int>& copied) {
  if (auto it = copied.find(id); it != copied.end())
    return it->second;
  ir::Node node = from.nodes[id];
  for (int& a : node.args)
    a = copy_node(from, a, to, copied);
  return copied[id] = to.add(std::move(node));
}

// `lookahead x[t] = expr;` for every state or none: the auxiliary filter's predictions, as the
// lookahead block's outputs in state order.
void Lowering::add_lookaheads() {
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
      error(target.range, msg::lookahead_target_not_state);
      continue;
    }
    const std::string& name = base->name;
    if (target.kind != EKind::Index || target.args.size() != 2 ||
        target.args[1]->kind != EKind::Name || target.args[1]->name != "t") {
      error(target.range, fmt::format(msg::lookahead_target_not_whole, name));
      continue;
    }
    if (!sym->valid)
      continue;
    if (const ast::Lookahead* first = by_state[sym->index]) {
      error(target.range, fmt::format(msg::second_lookahead, name));
      note(first->target->range, fmt::format(msg::first_lookahead_here, name));
      continue;
    }
    by_state[sym->index] = &a;
    Scope s(model_.lookahead,
            RelationScope(ir::BlockKind::Lookahead, fmt::format(msg::lookahead_subject, name),
                          ir::VarKind::State, sym->index, name + "[t]"));
    std::optional<int> id = lower(*a.value, s);
    if (!id)
      continue;
    const ir::Shape& shape = model_.states[sym->index].shape;
    if (!(shape_of(s, *id) == shape)) {
      error(a.value->range, fmt::format(msg::lookahead_shape_mismatch, name, shape_of(s, *id).str(),
                                        name, shape.str()));
      continue;
    }
    outputs[sym->index] = *id;
  }
  for (std::size_t x = 0; x < model_.states.size(); ++x)
    if (!by_state[x])
      error(ast_.lookaheads.front().range,
            fmt::format(msg::lookahead_missing, model_.states[x].name));
  model_.lookahead.outputs = std::move(outputs);
}

void Lowering::add_functional(const ast::FunctionalDecl& f) {
  if (!model_.is_state_space()) {
    no_time(f.range, fmt::format("functional '{}'", f.name.name));
    return;
  }
  Symbol* sym = declared(f.name);
  Scope s(model_.functional,
          RelationScope(ir::BlockKind::Functional, fmt::format("functional '{}'", f.name.name)));
  std::optional<int> id = lower(*f.value, s);
  if (!id || !sym)
    return;
  if (shape_of(s, *id).rank() > 1) {
    error(f.value->range, fmt::format(msg::functional_shape, shape_of(s, *id).str()));
    return;
  }
  model_.functionals.push_back({f.name.name, f.additive, loc(f.name.range)});
  model_.functional.outputs.push_back(*id);
}

} // namespace ssm::frontend::lowering
