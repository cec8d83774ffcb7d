// Guides: `guide z[n] ~ D(...);`, the variational family q(z[n] | x[n]) of a latent variable of a
// plate model, which `vi` fits instead of its default family. Its arguments read the item's
// observations, data, constants and networks of the observations (an encoder: amortised
// inference), never the model's parameters or other latent variables, so that q is a family of
// its own whose arguments the compiler evaluates, with their derivatives, before any latent value
// is drawn (the derivatives analysis, passes/derivatives.cpp). And `guide x[t] ~ backward(...)`,
// the backward-factorised Gaussian family of a state-space model's state that smooth --method
// variational fits (runtime/vsmooth), with its encoder: a network of the observations at t, or
// one observation.
#include "lowering.h"
#include "messages.h"

#include <fmt/ranges.h>

#include <algorithm>

namespace ssm::frontend::lowering {

Symbol* Lowering::guide_target(const ast::Relation& r, Symbol::Kind kind, const char* index,
                               const char* not_kind, const char* form) {
  const Expr& target = *r.target;
  const Expr* base = &target;
  while (base->kind == EKind::Index)
    base = base->args[0].get();
  Symbol* sym = lookup(base->name);
  if (!sym) {
    unknown_name(base->range, base->name);
    return nullptr;
  }
  if (sym->kind != kind) {
    error(target.range, fmt::format(fmt::runtime(not_kind), base->name));
    return nullptr;
  }
  if (target.kind != EKind::Index || target.args.size() != 2 ||
      target.args[0]->kind != EKind::Name || target.args[1]->kind != EKind::Name ||
      target.args[1]->name != index) {
    error(target.range, fmt::format(fmt::runtime(form), base->name));
    return nullptr;
  }
  sym->used = true;
  if (!sym->valid)
    return nullptr;
  const std::string name = fmt::format("{}[{}]", base->name, index);
  auto key = std::pair(ir::BlockKind::Guide, sym->index);
  if (auto it = first_relation_.find(key); it != first_relation_.end()) {
    error(target.range, fmt::format(msg::second_relation, name, "guide"));
    note(it->second->target->range, fmt::format(msg::first_relation_here, "guide", name));
    return nullptr;
  }
  first_relation_.emplace(key, &r);
  return sym;
}

void Lowering::add_guide(const ast::Relation& r) {
  if (model_.kind == ir::ModelKind::Simulator) {
    error(r.range, msg::guide_in_simulator);
    return;
  }
  if (model_.is_state_space()) {
    add_state_guide(r);
    return;
  }
  Symbol* sym =
      guide_target(r, Symbol::Kind::Latent, "n", msg::guide_for_non_latent, msg::guide_target_form);
  if (!sym)
    return;
  const ir::VarDecl& decl = model_.latents[sym->index];
  const std::string name = decl.name + "[n]";

  Scope s(model_.guide, RelationScope(ir::BlockKind::Guide, fmt::format(msg::guide_subject, name),
                                      ir::VarKind::Latent, sym->index, name));
  if (r.dist.name.name == ir::dist_info(ir::Dist::Dif).name) {
    add_dif_guide(r, decl, s);
    return;
  }
  if (const Symbol* net = density_net(r.dist.name.name)) {
    const ir::NetDecl& decl = model_.nets[net->index];
    error(r.dist.name.range,
          decl.density() ? fmt::format(msg::density_net_in_guide, decl.name)
                         : fmt::format(msg::sequence_net_misplaced, decl.name, decl.kind, name));
    return;
  }
  std::vector<std::optional<int>> args;
  std::vector<std::optional<ir::Shape>> shapes;
  for (const ast::ExprPtr& a : r.dist.args) {
    args.push_back(lower(*a, s));
    shapes.push_back(args.back() ? std::optional(shape_of(s, *args.back())) : std::nullopt);
  }
  std::optional<ir::Dist> dist = check_dist(r.dist, shapes, decl.shape, name, r.target->range);
  if (!dist || std::any_of(args.begin(), args.end(), [](auto& a) { return !a; }))
    return;
  // The families the runtime draws from and differentiates (vi/guide.cpp).
  const bool bernoulli = *dist == ir::Dist::Bernoulli || *dist == ir::Dist::BernoulliLogit;
  // mvnormal_chol: a full-rank Gaussian over a vector latent, its Cholesky factor from the guide.
  const bool full_rank = *dist == ir::Dist::MvNormalChol && decl.shape.rank() == 1;
  const bool family = decl.integer ? *dist == ir::Dist::Categorical || bernoulli
                                   : *dist == ir::Dist::Normal || full_rank;
  if (!family) {
    error(r.dist.name.range, fmt::format(msg::guide_family, ir::dist_info(*dist).name, name,
                                         decl.integer ? "categorical, bernoulli or bernoulli_logit"
                                         : decl.shape.rank() == 1 ? "normal, mvnormal_chol or dif"
                                         : decl.shape.rank() == 0 ? "normal or dif"
                                                                  : "normal"));
    return;
  }
  // A discrete guide covers the latent's values exactly: categorical(p) over 0..K-1 for an
  // int[0..K-1], bernoulli for an int[0..1].
  if (decl.integer) {
    const int values = bernoulli ? 2 : shapes[0]->size();
    if (!decl.bounded() || decl.lower != 0 || decl.upper != values - 1) {
      error(r.dist.name.range, fmt::format(msg::guide_discrete_values, name, ir::type_str(decl),
                                           values - 1, ir::dist_info(*dist).name));
      return;
    }
  }
  check_argument_domain(*dist, r.dist, *s.block, args);
  ir::Relation rel;
  rel.kind = ir::VarKind::Latent;
  rel.var = sym->index;
  rel.dist = *dist;
  rel.loc = loc(r.range);
  for (const auto& a : args)
    rel.args.push_back(*a);
  model_.guide.relations.push_back(std::move(rel));
}

// `guide z[n] ~ dif(context[, components, width, layers])`: a conditional Discretely Indexed Flow
// over a continuous latent (runtime/vi/guide.h). The context is lowered as any guide argument; the
// number of maps, the networks' width and the maps' flow layers are constants, kept as constant
// arguments.
void Lowering::add_dif_guide(const ast::Relation& r, const ir::VarDecl& decl, Scope& s) {
  const std::string name = decl.name + "[n]";
  if (r.dist.unresolved)
    return;
  if (decl.integer || decl.shape.rank() > 1) {
    error(r.target->range, fmt::format(msg::dif_guide_target, name, ir::type_str(decl)));
    return;
  }
  const ir::DistInfo& info = ir::dist_info(ir::Dist::Dif);
  const auto& args = r.dist.args;
  if (args.empty() || args.size() > info.arg_names.size()) {
    error(r.dist.range,
          fmt::format(msg::dist_argument_count,
                      fmt::format("dif({})", fmt::join(info.arg_names, ", ")),
                      fmt::format("1 to {} arguments", info.arg_names.size()),
                      args.size() == 1 ? "1 was" : fmt::format("{} were", args.size())));
    return;
  }
  const std::optional<int> context = lower(*args[0], s);
  if (!context)
    return;
  const ir::Shape shape = shape_of(s, *context);
  if (shape.rank() > 1) {
    error(args[0]->range, fmt::format(msg::dif_context_shape, shape.str()));
    return;
  }
  ir::Relation rel;
  rel.kind = ir::VarKind::Latent;
  rel.var = static_cast<int>(&decl - model_.latents.data());
  rel.dist = ir::Dist::Dif;
  rel.loc = loc(r.range);
  rel.args.push_back(*context);
  const int most[] = {ir::kMaxDifComponents, ir::kMaxDifWidth, ir::kMaxDifLayers};
  for (size_t k = 1; k < info.arg_names.size(); ++k) {
    double value = info.defaults[k - 1];
    if (k < args.size()) {
      const std::string what = fmt::format("the {} of the guide of {}", info.arg_names[k], name);
      const std::optional<long> n = eval_int(*args[k], what);
      if (!n)
        return;
      const int least = info.arg_names[k] == "layers" ? 0 : 1;
      if (*n < least || *n > most[k - 1]) {
        error(args[k]->range, fmt::format(msg::dif_option_constant, info.arg_names[k], least,
                                          most[k - 1], fmt::format(", but it is {}", *n)));
        return;
      }
      value = static_cast<double>(*n);
    }
    if (info.arg_names[k] == "layers" && value > 0 && decl.shape.size() == 1) {
      error(args[k]->range, fmt::format(msg::dif_guide_layers_one_dimension, name));
      return;
    }
    rel.args.push_back(emit_const(s, ir::Shape::scalar(), {value},
                                  k < args.size() ? args[k]->range : r.dist.range));
  }
  model_.guide.relations.push_back(std::move(rel));
}

// `guide x[t] ~ backward(NET(y[t], ...))` or `backward(y[t])`: the encoder's form is fixed (the
// runtime applies the network to the observations' columns itself, no kernel reads it), so it is
// lowered here rather than as an expression: an Obs node per observation read, and a Net node
// over them. The checks are those the runtime's guide relies on: one real or vector state, a
// network of the observations' size whose outputs are a natural mean and a precision per state
// component.
void Lowering::add_state_guide(const ast::Relation& r) {
  const Expr& target = *r.target;
  Symbol* sym = guide_target(r, Symbol::Kind::State, "t", msg::state_guide_for_non_state,
                             msg::state_guide_target_form);
  if (!sym)
    return;
  const ir::VarDecl& decl = model_.states[sym->index];
  const std::string name = decl.name + "[t]";
  if (r.dist.name.name != ir::dist_info(ir::Dist::Backward).name) {
    error(r.dist.name.range,
          fmt::format(msg::state_guide_family, r.dist.name.name, decl.name, decl.name));
    return;
  }
  if (model_.states.size() > 1) {
    std::vector<std::string> names;
    for (const ir::VarDecl& v : model_.states)
      names.push_back(v.name);
    error(target.range, fmt::format(msg::state_guide_several_states, fmt::join(names, ", ")));
    return;
  }
  if (decl.integer || decl.shape.rank() > 1) {
    error(target.range, fmt::format(msg::state_guide_integer, name, decl.name, ir::type_str(decl)));
    return;
  }
  for (const ast::NamedArg& a : r.dist.named)
    error(a.name.range, fmt::format(msg::state_guide_encoder));
  if (r.dist.args.size() != 1) {
    if (r.dist.named.empty())
      error(r.dist.range,
            fmt::format(msg::dist_argument_count, "backward(encoder)", "1 argument",
                        r.dist.args.size() == 0 ? "none was"
                                                : fmt::format("{} were", r.dist.args.size())));
    return;
  }
  // An observation at t, as an Obs node of the guide block.
  auto observation = [&](const Expr& e) -> std::optional<int> {
    const Expr* b = &e;
    while (b->kind == EKind::Index)
      b = b->args[0].get();
    const Symbol* o = b->kind == EKind::Name ? lookup(b->name) : nullptr;
    const bool at_t = e.kind == EKind::Index && e.args.size() == 2 &&
                      e.args[0]->kind == EKind::Name && e.args[1]->kind == EKind::Name &&
                      e.args[1]->name == "t";
    if (!o || o->kind != Symbol::Kind::Obs || !at_t ||
        model_.obs[o->index].constraint == ir::Constraint::Sequence) {
      if (b->kind == EKind::Name && !lookup(b->name))
        unknown_name(b->range, b->name);
      else
        error(e.range,
              fmt::format(msg::state_guide_reads, name,
                          b->kind == EKind::Name ? b->name : std::string("an expression")));
      return std::nullopt;
    }
    const ir::VarDecl& obs = model_.obs[o->index];
    ir::Node node;
    node.op = ir::Op::Obs;
    node.var = o->index;
    node.shape = obs.shape;
    node.loc = loc(e.range);
    return model_.guide.add(std::move(node));
  };
  const Expr& encoder = *r.dist.args[0];
  std::optional<int> arg;
  if (encoder.kind == EKind::Index) {
    arg = observation(encoder);
  } else if (encoder.kind == EKind::Call) {
    Symbol* net = lookup(encoder.name);
    if (!net || net->kind != Symbol::Kind::Net) {
      error(encoder.range, msg::state_guide_encoder);
      return;
    }
    net->used = true;
    if (net->index < 0 || !net->valid)
      return; // its declaration was rejected
    const ir::NetDecl& decl_net = model_.nets[net->index];
    if (decl_net.kind != "mlp") {
      error(encoder.range, fmt::format(msg::state_guide_net_kind, decl_net.name, decl_net.kind));
      return;
    }
    ir::Node call;
    call.op = ir::Op::Net;
    call.var = net->index;
    call.shape = ir::Shape::vector(decl_net.outputs);
    call.loc = loc(encoder.range);
    int size = 0;
    std::vector<std::string> shapes;
    for (const ast::ExprPtr& a : encoder.args) {
      std::optional<int> o = observation(*a);
      if (!o)
        return;
      const ir::Shape& shape = model_.guide.nodes[*o].shape;
      size += shape.size();
      shapes.push_back(shape.str());
      call.args.push_back(*o);
    }
    if (encoder.args.empty() || size != decl_net.inputs) {
      error(encoder.range, fmt::format(msg::net_input_size, decl_net.name, decl_net.inputs, size,
                                       fmt::join(shapes, ", ")));
      return;
    }
    const int p = decl.shape.size();
    if (decl_net.outputs != 2 * p) {
      error(encoder.range, fmt::format(msg::state_guide_net_outputs, decl_net.name,
                                       decl_net.outputs, name, ir::type_str(decl), 2 * p, p));
      diags_.note(decl_net.loc, fmt::format(msg::net_declared_here, decl_net.name));
      return;
    }
    arg = model_.guide.add(std::move(call));
  } else {
    error(encoder.range, msg::state_guide_encoder);
    return;
  }
  if (!arg)
    return;
  ir::Relation rel;
  rel.kind = ir::VarKind::State;
  rel.var = sym->index;
  rel.dist = ir::Dist::Backward;
  rel.loc = loc(r.range);
  rel.args.push_back(*arg);
  model_.guide.relations.push_back(std::move(rel));
}

} // namespace ssm::frontend::lowering
