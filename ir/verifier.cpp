// IR verifier: see verifier.h.
#include "verifier.h"

#include "builtins.h"
#include "printer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace ssm::ir {

namespace {

std::optional<Shape> broadcast(const Shape& a, const Shape& b) {
  if (a == b || b.is_scalar())
    return a;
  if (a.is_scalar())
    return b;
  return std::nullopt;
}

} // namespace

std::optional<Shape> result_shape(const Node& node, const std::vector<Shape>& args) {
  auto arity = [&](size_t n) { return args.size() == n; };
  switch (node.op) {
  case Op::Const:
    if (!arity(0) || static_cast<int>(node.values.size()) != node.shape.size())
      return std::nullopt;
    return node.shape;
  case Op::Param:
  case Op::State:
  case Op::Obs:
  case Op::Data:
  case Op::Input:
  case Op::Latent:
    return arity(0) ? std::optional(node.shape) : std::nullopt;
  case Op::Time:
  case Op::OdeTime:
    return arity(0) ? std::optional(Shape::scalar()) : std::nullopt;
  case Op::OdeState:
    return arity(0) && node.shape.rank() == 1 ? std::optional(node.shape) : std::nullopt;
  case Op::Ode: {
    // {y0, rate}: vectors of one length n; times t0 < t_1 < ... < t_m, finite; a step count of
    // at least 1 per interval.
    const size_t m = node.index.size();
    if (!arity(2) || args[0].rank() != 1 || !(args[1] == args[0]) || m == 0 ||
        node.values.size() != m + 1)
      return std::nullopt;
    for (size_t i = 0; i < m; ++i)
      if (!std::isfinite(node.values[i]) || !std::isfinite(node.values[i + 1]) ||
          !(node.values[i] < node.values[i + 1]) || node.index[i] < 1)
        return std::nullopt;
    return Shape::matrix(static_cast<int>(m), args[0].dims[0]);
  }
  case Op::Net: // the input size against the network's: verify() knows the model
    return args.empty() || node.shape.rank() != 1 ? std::nullopt : std::optional(node.shape);
  case Op::Neg:
    return arity(1) ? std::optional(args[0]) : std::nullopt;
  case Op::Add:
  case Op::Sub:
  case Op::Div:
    return arity(2) ? broadcast(args[0], args[1]) : std::nullopt;
  case Op::Mul:
    if (!arity(2) || (!args[0].is_scalar() && !args[1].is_scalar()))
      return std::nullopt;
    return broadcast(args[0], args[1]);
  case Op::Pow:
    if (!arity(2) || (!args[1].is_scalar() && !(args[0] == args[1])))
      return std::nullopt;
    return args[0];
  case Op::MatMul:
    if (!arity(2) || args[0].rank() != 2 || args[1].rank() < 1 ||
        args[0].dims[1] != args[1].dims[0])
      return std::nullopt;
    return args[1].rank() == 1 ? Shape::vector(args[0].dims[0])
                               : Shape::matrix(args[0].dims[0], args[1].dims[1]);
  case Op::Call: {
    // Analyses' own functions (det, digamma, ...) never appear in a model.
    const Builtin* f = find_builtin(node.fn);
    return f && !f->internal ? builtin_result_shape(*f, args) : std::nullopt;
  }
  case Op::Select: {
    if (!arity(3))
      return std::nullopt;
    std::optional<Shape> ab = broadcast(args[1], args[2]);
    return ab ? broadcast(*ab, args[0]) : std::nullopt;
  }
  case Op::DynIndex:
    if (!arity(2) || args[0].rank() < 1 || !args[1].is_scalar())
      return std::nullopt;
    return Shape{std::vector<int>(args[0].dims.begin() + 1, args[0].dims.end())};
  case Op::Build:
    if (node.shape.rank() < 1 || static_cast<int>(args.size()) != node.shape.size() ||
        !std::all_of(args.begin(), args.end(), [](const Shape& s) { return s.is_scalar(); }))
      return std::nullopt;
    return node.shape;
  case Op::Index: {
    if (!arity(1) || node.index.empty() || static_cast<int>(node.index.size()) > args[0].rank())
      return std::nullopt;
    for (size_t k = 0; k < node.index.size(); ++k)
      if (node.index[k] < 0 || node.index[k] >= args[0].dims[k])
        return std::nullopt;
    return Shape{std::vector<int>(args[0].dims.begin() + node.index.size(), args[0].dims.end())};
  }
  }
  return std::nullopt;
}

namespace {

class BlockVerifier {
public:
  BlockVerifier(const Model& model, const Block& block, std::vector<std::string>& errors)
      : model_(model), block_(block), errors_(errors) {}

  void run() {
    // lag-0 variables each node reads, transitively; a relation may only use those sampled earlier
    std::vector<std::set<Var>> reads_now(block_.nodes.size());
    const size_t errors_before = errors_.size();
    for (size_t i = 0; i < block_.nodes.size(); ++i)
      check_node(static_cast<int>(i), reads_now);
    const bool operands_ok = errors_.size() == errors_before;
    std::set<Var> sampled;
    for (const Relation& rel : block_.relations)
      check_relation(rel, reads_now, sampled);
    if (operands_ok) // its walks follow the operands
      check_ode_rates();
  }

private:
  template <class... Args> void fail(fmt::format_string<Args...> f, Args&&... args) {
    errors_.push_back(fmt::format("{}: {}", block_name(block_.kind),
                                  fmt::format(f, std::forward<Args>(args)...)));
  }

  using Var = std::pair<VarKind, int>;

  // An Ode's current t and y have a value only inside its rate: what reads them is read by
  // nothing but other such nodes and, as its rate, an Ode, whose start value does not read them
  // (no Ode inside another's rate).
  void check_ode_rates() {
    const std::vector<bool> rate = ode_rate_nodes(block_);
    for (size_t i = 0; i < block_.nodes.size(); ++i) {
      const Node& node = block_.nodes[i];
      for (size_t k = 0; k < node.args.size(); ++k) {
        const int a = node.args[k];
        if (a < 0 || a >= static_cast<int>(i) || !rate[a] || rate[i])
          continue;
        if (node.op != Op::Ode || k != 1)
          fail("%{} = {} reads %{}, which reads an ode's current time or value", i,
               op_name(node.op), a);
      }
      if (rate[i])
        for (int a : node.args)
          if (a >= 0 && a < static_cast<int>(i) && block_.nodes[a].op == Op::Ode)
            fail("%{} = {}, part of an ode's rate, reads the ode %{}: no ode inside another's "
                 "rate",
                 i, op_name(node.op), a);
      if (node.op == Op::Ode && node.args.size() == 2 && node.args[1] >= 0 &&
          node.args[1] < static_cast<int>(i)) {
        const std::vector<bool> reached = reached_from(block_, {node.args[1]});
        for (size_t j = 0; j < i; ++j)
          if (reached[j] && block_.nodes[j].op == Op::OdeState && node.shape.rank() == 2 &&
              !(block_.nodes[j].shape == Shape::vector(node.shape.dims[1])))
            fail("%{} = ode integrates a vector[{}], but its rate reads %{} = ode_state : {}", i,
                 node.shape.dims[1], j, block_.nodes[j].shape.str());
      }
    }
    auto outside = [&](int id, std::string_view what) {
      if (id >= 0 && id < static_cast<int>(rate.size()) && rate[id])
        fail("{} %{} reads an ode's current time or value", what, id);
    };
    for (const Relation& rel : block_.relations)
      for (int a : rel.args)
        outside(a, "a relation's argument");
    for (int o : block_.outputs)
      outside(o, "output");
  }

  // Plate and simulator blocks sample latents and observations; the others one kind.
  bool samples_latents() const {
    return block_.kind == BlockKind::Plate || block_.kind == BlockKind::Simulator;
  }

  bool samples(VarKind kind) const {
    switch (block_.kind) {
    case BlockKind::Prior:
      return kind == VarKind::Param;
    case BlockKind::Observation:
      return kind == VarKind::Obs;
    case BlockKind::Plate:
    case BlockKind::Simulator:
      return kind == VarKind::Latent || kind == VarKind::Obs;
    case BlockKind::Guide:
      return kind == (model_.kind == ModelKind::Plate ? VarKind::Latent : VarKind::State);
    default:
      return kind == VarKind::State;
    }
  }

  void check_node(int id, std::vector<std::set<Var>>& reads_now) {
    const Node& node = block_.nodes[id];
    std::vector<Shape> arg_shapes;
    for (int a : node.args) {
      if (a < 0 || a >= id) {
        fail("%{} uses %{}, which is not an earlier node", id, a);
        return;
      }
      arg_shapes.push_back(block_.nodes[a].shape);
      reads_now[id].insert(reads_now[a].begin(), reads_now[a].end());
    }
    check_reference(id, node, reads_now[id]);
    auto shape = result_shape(node, arg_shapes);
    if (!shape)
      fail("%{} = {} has operands of incompatible shapes", id, op_name(node.op));
    else if (!(*shape == node.shape))
      fail("%{} = {} has shape {} but its operands give {}", id, op_name(node.op), node.shape.str(),
           shape->str());
  }

  void check_reference(int id, const Node& node, std::set<Var>& reads_now) {
    if (node.op != Op::Param && node.op != Op::State && node.op != Op::Obs && node.op != Op::Time &&
        node.op != Op::Data && node.op != Op::Input && node.op != Op::Latent)
      return;
    BlockKind kind = block_.kind;
    if (kind == BlockKind::Prior) { // constants, and parameters (hierarchical priors)
      if (node.op != Op::Param)
        fail("%{}: prior arguments may read parameters only", id);
      else if (check_variable(id, node, VarKind::Param))
        reads_now.insert({VarKind::Param, node.var}); // a prior reads those drawn before it
      return;
    }
    if (kind == BlockKind::Guide) {
      check_guide_reference(id, node);
      return;
    }
    if (samples_latents() || node.op == Op::Latent) {
      check_static_reference(id, node, reads_now);
      return;
    }
    if (node.op == Op::Data || node.op == Op::Input) {
      const auto& decls = node.op == Op::Data ? model_.data : model_.inputs;
      if (node.var < 0 || node.var >= static_cast<int>(decls.size()))
        fail("%{} refers to {} {} of {}", id, op_name(node.op), node.var, decls.size());
      else if (!(node.shape == decls[node.var].shape))
        fail("%{} has shape {} but {} is {}", id, node.shape.str(), decls[node.var].name,
             decls[node.var].shape.str());
      else if (node.lag != 0)
        fail("%{} reads input {} at lag {}", id, decls[node.var].name, node.lag);
      return;
    }
    if (node.op == Op::Time) {
      if (kind == BlockKind::Initial)
        fail("%{}: time in the initial block must be folded to 0", id);
      return;
    }
    VarKind vk = node.op == Op::Param   ? VarKind::Param
                 : node.op == Op::State ? VarKind::State
                                        : VarKind::Obs;
    if (!check_variable(id, node, vk))
      return;
    if (vk == VarKind::Param)
      return;
    // Transitions read x[t-1] and y[t-1]; functional terms read x[t-1], x[t] and y[t]; proposals
    // read x[t-1], y[t-1] and y[t].
    // Look-ahead predictions read x[t-1], y[t-1] and y[t].
    // States at lags beyond 1 until the augment-lags transform replaces them (codegen checks).
    const bool proposal = kind == BlockKind::Proposal, lookahead = kind == BlockKind::Lookahead;
    const bool reads_past =
        kind == BlockKind::Transition || proposal || lookahead ||
        ((kind == BlockKind::Functional || kind == BlockKind::Observation) && vk == VarKind::State);
    int max_lag = !reads_past ? 0 : vk == VarKind::State ? std::numeric_limits<int>::max() : 1;
    bool allowed =
        (vk == VarKind::State && (!lookahead || node.lag == 1)) ||
        (vk == VarKind::Obs && (kind == BlockKind::Observation || kind == BlockKind::Functional ||
                                proposal || lookahead || node.lag == 1));
    if (!allowed || node.lag < 0 || node.lag > max_lag) {
      fail("%{} reads {} at lag {}, which the {} block cannot", id, model_.var_name(vk, node.var),
           node.lag, block_name(kind));
    } else if (node.lag == 0 && samples(vk)) {
      // A network's output is computed from its arguments: reading it reads the states among
      // them (covariates, parameters and data are known before anything is drawn).
      if (const NetCall* call = vk == VarKind::State ? model_.net_call_of(node.var) : nullptr) {
        for (const Node& a : call->args)
          if (a.op == Op::State)
            reads_now.insert({VarKind::State, a.var});
      } else {
        reads_now.insert({vk, node.var});
      }
    }
  }

  // A guide reads the item's observations, data and network outputs (hidden states), so that its
  // arguments are known before any latent value is drawn.
  void check_guide_reference(int id, const Node& node) {
    if (node.op == Op::Data || node.op == Op::Input) { // constants of the item
      const auto& decls = node.op == Op::Data ? model_.data : model_.inputs;
      if (node.var < 0 || node.var >= static_cast<int>(decls.size()))
        fail("%{} refers to {} {} of {}", id, op_name(node.op), node.var, decls.size());
      else if (!(node.shape == decls[node.var].shape) || node.lag != 0)
        fail("%{} reads {} {} with the wrong shape or at a lag", id, op_name(node.op), node.var);
      return;
    }
    const bool network = node.op == Op::State && node.var >= 0 && model_.net_call_of(node.var);
    if (!(node.op == Op::Obs || network) || node.lag != 0) {
      fail("%{} = {}: a guide reads observations, data, inputs and network outputs at lag 0", id,
           op_name(node.op));
      return;
    }
    check_variable(id, node, node.op == Op::Obs ? VarKind::Obs : VarKind::State);
  }

  // Node `id` reads variable node.var of kind `vk`: it exists and has its declared shape. False
  // (after failing) when the index is out of range, so the caller looks no further.
  bool check_variable(int id, const Node& node, VarKind vk) {
    const size_t count = vk == VarKind::Param   ? model_.params.size()
                         : vk == VarKind::State ? model_.states.size()
                         : vk == VarKind::Obs   ? model_.obs.size()
                                                : model_.latents.size();
    if (node.var < 0 || node.var >= static_cast<int>(count)) {
      fail("%{} refers to variable {} of {}", id, node.var, count);
      return false;
    }
    if (!(node.shape == model_.var_shape(vk, node.var)))
      fail("%{} has shape {} but {} is {}", id, node.shape.str(), model_.var_name(vk, node.var),
           model_.var_shape(vk, node.var).str());
    return true;
  }

  // Plate and simulator blocks have no time: they read parameters, data and the latents and
  // observations of the same item (of the one draw); latents exist only there.
  void check_static_reference(int id, const Node& node, std::set<Var>& reads_now) {
    if (!samples_latents()) {
      fail("%{} reads a latent variable, which only plate and simulator blocks have", id);
      return;
    }
    if (node.op == Op::Param || node.op == Op::Data) {
      const auto& count = node.op == Op::Param ? model_.params.size() : model_.data.size();
      if (node.var < 0 || node.var >= static_cast<int>(count))
        fail("%{} refers to {} {} of {}", id, op_name(node.op), node.var, count);
      else if (!(node.shape == (node.op == Op::Param ? model_.params[node.var].shape
                                                     : model_.data[node.var].shape)))
        fail("%{} has the wrong shape for {} {}", id, op_name(node.op), node.var);
      return;
    }
    if (node.op == Op::Input && block_.kind != BlockKind::Simulator) { // an item's covariate
      if (node.var < 0 || node.var >= static_cast<int>(model_.inputs.size()))
        fail("%{} refers to input {} of {}", id, node.var, model_.inputs.size());
      else if (!(node.shape == model_.inputs[node.var].shape))
        fail("%{} has the wrong shape for input {}", id, node.var);
      else if (node.lag != 0)
        fail("%{} reads an input at lag {}, which the {} block cannot", id, node.lag,
             block_name(block_.kind));
      return;
    }
    if (node.op != Op::Latent && node.op != Op::Obs) {
      fail("%{} = {}: the {} block has no time", id, op_name(node.op), block_name(block_.kind));
      return;
    }
    VarKind vk = node.op == Op::Latent ? VarKind::Latent : VarKind::Obs;
    if (!check_variable(id, node, vk))
      return;
    if (node.lag != 0)
      fail("%{} reads {} at lag {}, which the {} block cannot", id, model_.var_name(vk, node.var),
           node.lag, block_name(block_.kind));
    reads_now.insert({vk, node.var});
  }

  void check_relation(const Relation& rel, const std::vector<std::set<Var>>& reads_now,
                      std::set<Var>& sampled) {
    if (!samples(rel.kind)) {
      fail("a relation targets a variable of the wrong kind");
      return;
    }
    std::string target = model_.var_name(rel.kind, rel.var);
    if (!sampled.insert({rel.kind, rel.var}).second)
      fail("{} has two relations", target);
    if (block_.kind == BlockKind::Guide && model_.is_state_space() && !model_.items) {
      // smooth --method variational's family (frontend/lower_guides.cpp, add_state_guide)
      if (rel.dist != Dist::Backward || rel.kind != VarKind::State)
        fail("the guide of {} is {}: a state-space model's guide is backward", target,
             dist_info(rel.dist).name);
      else
        check_backward_encoder(rel, target);
    } else if (block_.kind == BlockKind::Guide) { // the families vi draws from
      const bool family = rel.dist == Dist::Normal || rel.dist == Dist::MvNormalChol ||
                          rel.dist == Dist::Categorical || rel.dist == Dist::Bernoulli ||
                          rel.dist == Dist::BernoulliLogit || rel.dist == Dist::Dif;
      if (!family)
        fail("the guide of {} is {}, which vi does not draw from", target,
             dist_info(rel.dist).name);
      if (rel.kind == VarKind::State && model_.net_call_of(rel.var))
        fail("the guide draws {}, a network's output", target);
      if (rel.dist == Dist::Dif) {
        const VarDecl& v =
            rel.kind == VarKind::State ? model_.states[rel.var] : model_.latents[rel.var];
        if (v.shape.rank() > 1 || v.integer)
          fail("the dif guide of {} is not for a real or a vector", target);
      }
    }
    if (rel.dist == Dist::Density && !density_call_of_target(rel))
      fail("{} ~ density does not read a density network's output on {}", target, target);
    if (rel.kind == VarKind::Obs && rel.var >= 0 && rel.var < static_cast<int>(model_.obs.size()) &&
        model_.obs[rel.var].constraint == Constraint::Sequence && rel.dist != Dist::Density)
      fail("{} is a sequence, but its distribution is {}", target, dist_info(rel.dist).name);
    if (dist_info(rel.dist).guide_only && block_.kind != BlockKind::Guide)
      fail("{} ~ {} outside a guide", target, dist_info(rel.dist).name);
    if (rel.dist == Dist::Diffusion &&
        !(rel.kind == VarKind::State &&
          (block_.kind == BlockKind::Transition || block_.kind == BlockKind::Proposal)))
      fail("{} ~ diffusion outside a state's transition", target);
    const DistInfo& info = dist_info(rel.dist);
    if (rel.args.size() != info.arg_names.size()) {
      fail("{} ~ {} has {} arguments", target, info.name, rel.args.size());
      return;
    }
    const Shape& shape = model_.var_shape(rel.kind, rel.var);
    for (size_t k = 0; k < rel.args.size(); ++k) {
      int a = rel.args[k];
      if (a < 0 || a >= static_cast<int>(block_.nodes.size())) {
        fail("{} ~ {} uses missing node %{}", target, info.name, a);
        return;
      }
      // An SDE's drift and diffusion read its own x[t]: the path's current value.
      // A learned density's network reads its own target (its log p is of that value).
      const bool path = (rel.dist == Dist::Diffusion && (k == 1 || k == 2)) ||
                        (rel.dist == Dist::Density && k == 0);
      for (const Var& v : reads_now[a])
        if ((!sampled.count(v) && !(block_.kind == BlockKind::Prior && !has_relation(v))) ||
            (v == Var{rel.kind, rel.var} && !path))
          fail("{} ~ {} reads {} before it is sampled", target, info.name,
               model_.var_name(v.first, v.second));
      // A prior's support, which the parameter's unconstrained map is built on, is constant.
      if (block_.kind == BlockKind::Prior && info.support_from >= 0 &&
          (k == static_cast<size_t>(info.support_from) ||
           k == static_cast<size_t>(info.support_from) + 1) &&
          block_.nodes[a].op != Op::Const)
        fail("{} ~ {}: the bound {} is not a constant", target, info.name, info.arg_names[k]);
      const Shape& arg = block_.nodes[a].shape;
      const bool square = shape.rank() == 1 && arg == Shape::matrix(shape.dims[0], shape.dims[0]);
      bool ok =
          rel.dist == Dist::Diffusion
              ? (k == 0             ? arg == shape
                 : k == 3 || k >= 5 ? arg.is_scalar() // dt, psi's bounds
                 : k == 4           ? is_substep_count(block_.nodes[a], shape.size())
                                    : arg.is_scalar() || arg == shape || (k == 2 && square))
          : rel.dist == Dist::MvNormal || rel.dist == Dist::MvNormalChol
              ? (shape.rank() == 1 &&
                 (k == 0 ? arg == shape : arg == Shape::matrix(shape.dims[0], shape.dims[0])))
          : rel.dist == Dist::Density // the network's log p: one value
              ? arg == Shape::vector(1)
              : rel.dist == Dist::Backward // its encoder: check_backward_encoder
                    ? arg.rank() <= 1
                    : rel.dist == Dist::Dif // a context, then the constant sizes
                          ? (k == 0 ? arg.rank() <= 1
                             : k == 3
                                 ? is_whole_constant(block_.nodes[a], 0, kMaxDifLayers)
                                 : is_whole_constant(block_.nodes[a], 1,
                                                     k == 1 ? kMaxDifComponents : kMaxDifWidth))
                          : rel.dist == Dist::Dirichlet
                                ? shape.rank() == 1 && (arg.is_scalar() || arg == shape)
                            : rel.dist == Dist::Multinomial
                                ? shape.rank() == 1 && (k == 0 ? arg.is_scalar() : arg == shape)
                            : rel.dist == Dist::Categorical ? shape.is_scalar() && arg.rank() == 1
                                                            : (arg.is_scalar() || arg == shape);
      if (!ok)
        fail("{} ~ {}: argument {} has shape {}", target, info.name, info.arg_names[k], arg.str());
    }
  }

  // A backward guide's encoder: an observation at t, or an mlp's call over observations at t
  // whose outputs are two per state component (natural mean and precision).
  void check_backward_encoder(const Relation& rel, const std::string& target) {
    const int a = rel.args.size() == 1 ? rel.args[0] : -1;
    if (a < 0 || a >= static_cast<int>(block_.nodes.size()))
      return; // the argument checks below report it
    const Node& enc = block_.nodes[a];
    auto observation = [&](int i) {
      return i >= 0 && i < static_cast<int>(block_.nodes.size()) && block_.nodes[i].op == Op::Obs &&
             block_.nodes[i].lag == 0;
    };
    const int p = model_.states.at(rel.var).shape.size();
    if (enc.op == Op::Obs ? !observation(a)
        : enc.op == Op::Net
            ? !std::all_of(enc.args.begin(), enc.args.end(), observation) ||
                  model_.nets.at(enc.var).kind != "mlp" || !(enc.shape == Shape::vector(2 * p))
            : true)
      fail("the guide of {} reads neither an observation at t nor an mlp of observations at t "
           "with 2 x {} outputs",
           target, p);
  }

  // A learned density's relation reads the output of a density network's call whose first
  // argument is its own target: the call (before net-outputs hoists it), or its hidden state.
  bool density_call_of_target(const Relation& rel) const {
    if (rel.args.size() != 1 || rel.args[0] < 0 ||
        rel.args[0] >= static_cast<int>(block_.nodes.size()))
      return false;
    const Node& a = block_.nodes[rel.args[0]];
    auto is_target = [&](const Node& n) {
      return n.var == rel.var && n.lag == 0 &&
             ((n.op == Op::Latent && rel.kind == VarKind::Latent) ||
              (n.op == Op::State && rel.kind == VarKind::State) ||
              (n.op == Op::Obs && rel.kind == VarKind::Obs));
    };
    // A latent's (a state's) density is over vectors; an observation's, over its sequence.
    auto density = [&](int net) {
      if (net < 0 || net >= static_cast<int>(model_.nets.size()))
        return false;
      return rel.kind == VarKind::Obs
                 ? model_.nets[net].kind == "rnn_lm" &&
                       model_.obs.at(rel.var).constraint == Constraint::Sequence
                 : model_.nets[net].density();
    };
    if (a.op == Op::Net)
      return density(a.var) && !a.args.empty() && a.args[0] >= 0 &&
             a.args[0] < static_cast<int>(block_.nodes.size()) &&
             is_target(block_.nodes[a.args[0]]);
    const NetCall* call = a.op == Op::State ? model_.net_call_of(a.var) : nullptr;
    return call && density(call->net) && !call->args.empty() && is_target(call->args[0]);
  }

  // The number of Euler-Maruyama substeps of a diffusion: a constant whole number >= 1.
  // A constant whole number in [lo, hi] (a dif's sizes).
  static bool is_whole_constant(const Node& n, double lo, double hi) {
    return n.op == Op::Const && n.shape.is_scalar() && n.values.size() == 1 &&
           n.values[0] == std::floor(n.values[0]) && n.values[0] >= lo && n.values[0] <= hi;
  }

  static bool is_substep_count(const Node& n, int dim) {
    return n.op == Op::Const && n.values.size() == 1 && n.values[0] >= 1 &&
           n.values[0] <= static_cast<double>(max_diffusion_steps(dim)) &&
           n.values[0] == std::floor(n.values[0]);
  }

  // Whether a relation of the block draws v (a parameter without a prior is a fixed value).
  bool has_relation(const Var& v) const {
    return std::any_of(block_.relations.begin(), block_.relations.end(), [&](const Relation& r) {
      return Var{r.kind, r.var} == v;
    });
  }

  const Model& model_;
  const Block& block_;
  std::vector<std::string>& errors_;
};

void check_all_sampled(const Model& model, const Block& block, VarKind kind, size_t count,
                       std::vector<std::string>& errors) {
  for (size_t v = 0; v < count; ++v) {
    if (kind == VarKind::State && model.net_call_of(static_cast<int>(v)))
      continue; // a network's output: the runtime computes it
    bool found = std::any_of(block.relations.begin(), block.relations.end(), [&](auto& r) {
      return r.kind == kind && r.var == static_cast<int>(v);
    });
    if (!found)
      errors.push_back(fmt::format("{}: no relation for {}", block_name(block.kind),
                                   model.var_name(kind, static_cast<int>(v))));
  }
}

} // namespace

// Network calls: a known network, inputs of its size, an output of its size; a hoisted call's
// state is a vector of the output's size and its arguments are leaves.
void check_nets(const Model& model, std::vector<std::string>& errors) {
  const int nets = static_cast<int>(model.nets.size());
  for (int k = 0; k < nets; ++k) { // a cascade: a density's base, a density before it
    const NetDecl& d = model.nets[k];
    if (d.base >= 0 && (d.base >= k || !d.density() || !model.nets[d.base].density() ||
                        model.nets[d.base].dim != d.dim || model.nets[d.base].base_of != k ||
                        model.nets[d.base].inputs != d.dim))
      errors.push_back(fmt::format("net {}: its base is no density of its dimension before it, "
                                   "without a context",
                                   d.name));
  }
  for (const NetDecl& d : model.nets)
    if (d.over_sequences() &&
        (d.vocab < 1 || d.embedding < 1 || d.layers < 1 || d.hidden.size() != 1 ||
         d.hidden[0] < 1 || (d.cell != "lstm" && d.cell != "gru") || d.inputs < 1 ||
         (d.kind == "rnn_lm" && d.outputs != 1)))
      errors.push_back(fmt::format("net {}: an {} needs vocab, embedding, layers and one hidden "
                                   "width of at least 1, a cell lstm or gru, and its sequence "
                                   "among its inputs",
                                   d.name, d.kind));
  auto check_call = [&](std::string_view where, int net, int input_size, const Shape& output) {
    if (net < 0 || net >= nets) {
      errors.push_back(fmt::format("{}: network {} of {}", where, net, nets));
      return;
    }
    const NetDecl& d = model.nets[net];
    if (d.base_of >= 0) // part of another's cascade
      errors.push_back(fmt::format("{}: {} is the base of {}, not called itself", where, d.name,
                                   model.nets.at(d.base_of).name));
    if (input_size != d.inputs || !(output == Shape::vector(d.outputs)))
      errors.push_back(fmt::format("{}: {} takes {} inputs to vector[{}], called with {} to {}",
                                   where, d.name, d.inputs, d.outputs, input_size, output.str()));
  };
  model.for_each_block([&](const Block& block) {
    for (size_t i = 0; i < block.nodes.size(); ++i) {
      const Node& node = block.nodes[i];
      if (node.op != Op::Net)
        continue;
      int size = 0;
      for (int a : node.args)
        if (a >= 0 && a < static_cast<int>(i))
          size += block.nodes[a].shape.size();
      check_call(fmt::format("{}: %{}", block_name(block.kind), i), node.var, size, node.shape);
    }
  });
  for (const NetCall& c : model.net_calls) {
    if (c.state < 0 || c.state >= static_cast<int>(model.states.size())) {
      errors.push_back(fmt::format("net call: state {} of {}", c.state, model.states.size()));
      continue;
    }
    int size = 0;
    for (const Node& a : c.args) {
      size += a.shape.size();
      if (!(a.op == Op::Param || a.op == Op::Data ||
            ((a.op == Op::State || a.op == Op::Obs || a.op == Op::Input) && a.lag == 0)))
        errors.push_back(fmt::format("net call {}: an argument is {}", model.states[c.state].name,
                                     op_name(a.op)));
    }
    check_call(fmt::format("net call {}", model.states[c.state].name), c.net, size,
               model.states[c.state].shape);
    // A call that reads observations is the guide's: the model's kernels would read a slot
    // that the runtime never fills. The runtime holds the tokens of sequences for every call.
    const bool reads_obs = std::any_of(c.args.begin(), c.args.end(), [&](const Node& a) {
      return a.op == Op::Obs && model.obs.at(a.var).constraint != Constraint::Sequence;
    });
    if (reads_obs && !model.guide_only_state(c.state))
      errors.push_back(fmt::format("net call {} reads observations, but a block other than the "
                                   "guide reads its output",
                                   model.states[c.state].name));
  }
}

std::vector<std::string> verify(const Model& model) {
  std::vector<std::string> errors;
  model.for_each_block([&](const Block& block) { BlockVerifier(model, block, errors).run(); });
  check_nets(model, errors);
  for (const ParamDecl& p : model.params)
    if (p.default_value && static_cast<int>(p.default_value->size()) != p.shape.size())
      errors.push_back(fmt::format("param {}: default has {} values for shape {}", p.name,
                                   p.default_value->size(), p.shape.str()));
  auto check_decls = [&](std::string_view what, const std::vector<VarDecl>& decls) {
    for (const VarDecl& v : decls) {
      const bool data = what == "data";
      const bool sequence = v.constraint == Constraint::Sequence;
      if (v.constraint != Constraint::None && !data && !(sequence && what == "obs"))
        errors.push_back(fmt::format("{} {}: only data can be {}", what, v.name, type_name(v)));
      if (sequence && (what != "obs" || !v.integer || v.lower != 0 || !(v.upper >= 0)))
        errors.push_back(fmt::format("{} {}: a sequence must be an observation's, of tokens 0..V-1",
                                     what, v.name));
      if (v.constraint == Constraint::CovMatrix &&
          (v.shape.rank() != 2 || v.shape.dims[0] != v.shape.dims[1]))
        errors.push_back(
            fmt::format("{} {}: a cov_matrix of shape {}", what, v.name, v.shape.str()));
      if (v.constraint == Constraint::Simplex && v.shape.rank() != 1)
        errors.push_back(fmt::format("{} {}: a simplex of shape {}", what, v.name, v.shape.str()));
      if (v.integer && (!v.shape.is_scalar() || (v.constraint != Constraint::None && !sequence)))
        errors.push_back(fmt::format("{} {}: an integer of shape {}", what, v.name, v.shape.str()));
      if (v.bounded() && !v.integer && !(data && v.shape.is_scalar()))
        errors.push_back(fmt::format("{} {}: bounds ({}, {}) on {}", what, v.name, v.lower, v.upper,
                                     v.shape.str()));
      if (!(v.lower <= v.upper))
        errors.push_back(fmt::format("{} {}: lower bound {} above upper bound {}", what, v.name,
                                     v.lower, v.upper));
    }
  };
  check_decls("state", model.states);
  check_decls("obs", model.obs);
  check_decls("data", model.data);
  check_decls("input", model.inputs);
  check_decls("latent", model.latents);
  if (!model.is_state_space()) {
    // A plate model or a simulator: its own block samples every latent and observation, and the
    // blocks of time do not exist.
    const Block& own = model.kind == ModelKind::Plate ? model.plate : model.simulator;
    check_all_sampled(model, own, VarKind::Latent, model.latents.size(), errors);
    check_all_sampled(model, own, VarKind::Obs, model.obs.size(), errors);
    if (!model.states.empty() || !model.functionals.empty())
      errors.push_back("a model without time has states or functionals");
    if (model.kind == ModelKind::Simulator && !model.inputs.empty()) // a plate's are per item
      errors.push_back("a simulator has inputs");
    model.for_each_block([&](const Block& block) {
      bool empty = block.nodes.empty() && block.relations.empty() && block.outputs.empty();
      const bool guide = block.kind == BlockKind::Guide && model.kind == ModelKind::Plate;
      if (&block != &own && block.kind != BlockKind::Prior && !guide && !empty)
        errors.push_back(fmt::format("{}: a {} has no {} block", block_name(block.kind),
                                     model.kind == ModelKind::Plate ? "plate model" : "simulator",
                                     block_name(block.kind)));
    });
    return errors;
  }
  if (!model.latents.empty() || !model.plate.nodes.empty() || !model.simulator.nodes.empty())
    errors.push_back("a state-space model has latent variables or a plate or simulator block");
  if (!model.items && model.guide.relations.size() > 1)
    errors.push_back("guide: a state-space model has one backward guide, over its state");
  if (model.simulation && (model.simulation_params < 0 ||
                           model.simulation_params > static_cast<int>(model.states.size())))
    errors.push_back(fmt::format("simulation {}: a simulation has that many parameters among its "
                                 "{} states",
                                 model.simulation_params, model.states.size()));
  check_all_sampled(model, model.initial, VarKind::State, model.states.size(), errors);
  check_all_sampled(model, model.transition, VarKind::State, model.states.size(), errors);
  check_all_sampled(model, model.observation, VarKind::Obs, model.obs.size(), errors);
  if (!model.proposal.relations.empty())
    check_all_sampled(model, model.proposal, VarKind::State, model.states.size(), errors);
  const Block& terms = model.functional;
  if (terms.outputs.size() != model.functionals.size())
    errors.push_back(fmt::format("functional: {} terms for {} functionals", terms.outputs.size(),
                                 model.functionals.size()));
  model.for_each_block([&](const Block& block) {
    for (int a : block.outputs)
      if (a < 0 || a >= static_cast<int>(block.nodes.size()) || block.nodes[a].shape.rank() > 1)
        errors.push_back(
            fmt::format("{}: output %{} is not a real or vector node", block_name(block.kind), a));
  });
  if (!model.functional.relations.empty())
    errors.push_back("functional: the block has relations");
  const Block& ahead = model.lookahead;
  if (!ahead.relations.empty())
    errors.push_back("lookahead: the block has relations");
  if (!ahead.outputs.empty() && ahead.outputs.size() != model.states.size())
    errors.push_back(fmt::format("lookahead: {} predictions for {} states", ahead.outputs.size(),
                                 model.states.size()));
  for (size_t i = 0; i < ahead.outputs.size() && i < model.states.size(); ++i)
    if (ahead.outputs[i] >= 0 && ahead.outputs[i] < static_cast<int>(ahead.nodes.size()) &&
        !(ahead.nodes[ahead.outputs[i]].shape == model.states[i].shape))
      errors.push_back(fmt::format("lookahead: the prediction of {} has shape {}",
                                   model.states[i].name,
                                   ahead.nodes[ahead.outputs[i]].shape.str()));
  return errors;
}

} // namespace ssm::ir
