// Networks: `net NAME : mlp(inputs = I, outputs = O, hidden = [...], activation = A);` declares
// a multilayer perceptron, and `NAME(a, b, ...)` in a relation applies it to variables; `rnn`
// reads a sequence (an observation `sequence[V]`) first. The densities (dif, maf, realnvp over a
// latent vector; rnn_lm over a sequence) are relations' distributions instead. The compiler
// checks the sizes; the runtime evaluates and trains the network (LibTorch), and
// passes/net_outputs.cpp turns each call into a hidden state that the kernels read.
#include "lowering.h"
#include "messages.h"

#include <algorithm>
#include <map>

namespace ssm::frontend::lowering {

namespace {

// The activations of runtime/nn/mlp.cpp (mlp_activations), which checks them again.
const std::vector<std::string> activations = {"tanh", "relu", "silu", "gelu"};
// A dif's maps (runtime/flows/dif.h): location-scale, or flow layers before it.
const std::vector<std::string> dif_maps = {"affine", "maf", "realnvp"};
// The recurrent cells of runtime/nn/recurrent.h.
const std::vector<std::string> cells = {"lstm", "gru"};

// The options each kind takes: an mlp maps inputs to outputs; a density (runtime/flows, built
// by runtime/vi/model_networks.cpp) is over vector[dim], given `context` values for a dif.
const std::map<std::string, std::vector<std::string>> kind_options = {
    {"mlp", {"inputs", "outputs", "hidden", "activation"}},
    {"dif", {"dim", "context", "components", "maps", "layers", "hidden", "base"}},
    {"maf", {"dim", "layers", "hidden", "base"}},
    {"realnvp", {"dim", "layers", "hidden", "base"}},
    {"embedding", {"vocab", "dim"}},
    {"rnn", {"vocab", "outputs", "context", "embedding", "hidden", "layers", "cell"}},
    {"rnn_lm", {"vocab", "context", "embedding", "hidden", "layers", "cell"}},
};

} // namespace

void Lowering::define_net(const ast::NetDecl& d) {
  Symbol* sym = declared(d.name);
  if (!sym)
    return;
  const std::string& name = d.name.name;
  bool ok = true;
  auto reject = [&](Range r, std::string message) {
    error(r, std::move(message));
    ok = false;
  };
  if (model_.kind == ir::ModelKind::Simulator)
    reject(d.name.range, fmt::format(msg::net_in_simulator, name));
  const auto known = kind_options.find(d.kind.name);
  if (known == kind_options.end())
    reject(d.kind.range, fmt::format(msg::net_unknown_kind, d.kind.name));
  ir::NetDecl net;
  net.name = name;
  net.kind = d.kind.name;
  const bool recurrent = net.over_sequences();
  const bool embedding = net.kind == "embedding"; // a vector per token: dim outputs of 1 input
  const bool density =
      known != kind_options.end() && d.kind.name != "mlp" && !recurrent && !embedding;
  net.hidden = density ? std::vector<int>{32, 32} : std::vector<int>{64};
  if (density) {
    net.outputs = 1; // log p(target | context)
    net.components = d.kind.name == "dif" ? ir::kDefaultDifComponents : 0;
    net.layers = d.kind.name == "dif" ? 0 : 5;
  }
  if (recurrent) { // Kim, Wiseman & Rush (2018)'s sizes, at the scale of characters
    net.embedding = 32;
    net.layers = 1;
    if (net.kind == "rnn_lm")
      net.outputs = 1; // log p(sequence | context)
  }
  net.loc = loc(d.name.range);
  int context = 0;
  bool maps_known = true;
  const ast::NamedArg* base = nullptr; // `base = NET`: checked once the dimension is known
  std::set<std::string> seen;
  for (const ast::NamedArg& o : d.options) {
    const std::string& key = o.name.name;
    if (!seen.insert(key).second) {
      reject(o.name.range, fmt::format(msg::net_option_twice, key, name));
      continue;
    }
    const std::string what = fmt::format("option '{}' of network '{}'", key, name);
    if (known != kind_options.end() &&
        std::find(known->second.begin(), known->second.end(), key) == known->second.end()) {
      reject(o.name.range,
             fmt::format(msg::net_unknown_option, key, name, fmt::join(known->second, ", ")));
    } else if (key == "inputs" || key == "outputs" || key == "dim" || key == "context" ||
               key == "components" || key == "layers" || key == "vocab" || key == "embedding") {
      std::optional<int> n = eval_dimension(*o.value, what);
      if (n && *n == 0 && key != "context")
        reject(o.value->range, fmt::format(msg::net_size_zero, what));
      if (n && key == "components" && *n > ir::kMaxDifComponents)
        reject(o.value->range,
               fmt::format(msg::net_components_too_many, what, ir::kMaxDifComponents));
      if (n && key == "layers" && *n > ir::kMaxDifLayers)
        reject(o.value->range, fmt::format(msg::net_layers_too_many, what, ir::kMaxDifLayers));
      const int v = n.value_or(0);
      if (key == "vocab")
        net.vocab = v;
      else if (key == "embedding")
        net.embedding = v;
      else if (key == "inputs")
        net.inputs = v;
      else if (key == "outputs")
        net.outputs = v;
      else if (key == "dim")
        net.dim = v;
      else if (key == "context")
        context = v;
      else if (key == "components")
        net.components = v;
      else
        net.layers = v;
      ok = ok && n.has_value();
    } else if (key == "hidden") {
      net.hidden.clear();
      if (o.value->kind == EKind::Name && o.value->name == "none") {
        if (recurrent)
          reject(o.value->range, fmt::format(msg::rnn_hidden_one_width, name, net.kind));
        continue; // no hidden layer: an affine map
      }
      std::vector<const ast::Expr*> widths;
      if (o.value->kind == EKind::List)
        for (const ast::ExprPtr& w : o.value->args)
          widths.push_back(w.get());
      else
        widths.push_back(o.value.get());
      for (const ast::Expr* w : widths) {
        std::optional<int> n = eval_dimension(*w, fmt::format("a hidden width of '{}'", name));
        if (n && *n == 0)
          reject(w->range, fmt::format(msg::net_size_zero, "a hidden width"));
        ok = ok && n.has_value();
        net.hidden.push_back(n.value_or(1));
      }
      if (recurrent && widths.size() != 1)
        reject(o.value->range, fmt::format(msg::rnn_hidden_one_width, name, net.kind));
    } else if (key == "cell") {
      if (o.value->kind != EKind::Name ||
          std::find(cells.begin(), cells.end(), o.value->name) == cells.end())
        reject(o.value->range, fmt::format(msg::net_unknown_cell, name, fmt::join(cells, ", ")));
      else
        net.cell = o.value->name;
    } else if (key == "base") {
      base = &o;
    } else if (key == "maps") {
      if (o.value->kind != EKind::Name ||
          std::find(dif_maps.begin(), dif_maps.end(), o.value->name) == dif_maps.end()) {
        reject(o.value->range, fmt::format(msg::net_unknown_maps, name, fmt::join(dif_maps, ", ")));
        maps_known = false; // no further errors about them
      } else {
        net.maps = o.value->name;
      }
    } else if (key == "activation") {
      if (o.value->kind != EKind::Name ||
          std::find(activations.begin(), activations.end(), o.value->name) == activations.end())
        reject(o.value->range,
               fmt::format(msg::net_unknown_activation, name, fmt::join(activations, ", ")));
      else
        net.activation = o.value->name;
    }
  }
  const std::vector<const char*> required = density                ? std::vector{"dim"}
                                            : net.kind == "rnn"    ? std::vector{"vocab", "outputs"}
                                            : net.kind == "rnn_lm" ? std::vector{"vocab"}
                                            : embedding            ? std::vector{"vocab", "dim"}
                                                        : std::vector{"inputs", "outputs"};
  for (const char* option : required)
    if (known != kind_options.end() && !seen.count(option))
      reject(d.name.range, fmt::format(msg::net_option_missing, name, option));
  if (density)
    net.inputs = net.dim + context; // the call's arguments: the target, then the context
  if (recurrent)
    net.inputs = 1 + context; // the sequence (its one slot: its length), then the context
  if (embedding) {            // the token, an int; its vector
    net.inputs = 1;
    net.outputs = net.dim;
    net.dim = 0;
    net.hidden.clear();
  }
  if (net.kind == "dif" && maps_known && net.maps == "affine" && seen.count("layers"))
    reject(d.name.range, fmt::format(msg::dif_layers_without_maps, name));
  if (net.kind == "dif" && net.maps != "affine" && !seen.count("layers"))
    net.layers = 5; // as `ssmc density fit --maps`
  if (net.kind == "dif" && net.maps != "affine" && seen.count("dim") && net.dim == 1)
    reject(d.name.range, fmt::format(msg::flow_maps_one_dimension, name));
  else if (net.kind == "realnvp" && seen.count("dim") && net.dim == 1)
    reject(d.name.range, fmt::format(msg::realnvp_one_dimension, name));
  if (ir::find_dist(name)) // `z[n] ~ NAME()` would be ambiguous
    reject(d.name.range, fmt::format(msg::net_named_as_distribution, name));
  if (base && density && seen.count("dim")) // else the declaration's own errors say enough
    ok = define_cascade(net, *base, *sym) && ok;
  sym->index = static_cast<int>(model_.nets.size());
  sym->valid = ok;
  model_.nets.push_back(std::move(net));
}

// `base = NET`: this density transports onto NET's, declared before it, instead of N(0, I) (a
// cascade, as `ssmc density fit --model dif,maf` builds). NET becomes part of it: over the same
// dimension, reading the outermost density's context, the base of no other, never a latent's
// distribution itself (lower_density_call). A dif over a dif has the product of their
// components, which the limit of one dif's bounds.
bool Lowering::define_cascade(ir::NetDecl& net, const ast::NamedArg& option, const Symbol& self) {
  const ast::Expr& value = *option.value;
  Symbol* sym = value.kind == EKind::Name ? lookup(value.name) : nullptr;
  if (sym == &self) {
    error(value.range, fmt::format(msg::net_base_self, net.name));
    return false;
  }
  if (!sym || sym->kind != Symbol::Kind::Net) {
    error(value.range, fmt::format(msg::net_base_not_density, net.name));
    return false;
  }
  sym->used = true;
  if (sym->index < 0) { // declared later: nets are defined in order
    error(value.range, fmt::format(msg::net_base_later, value.name, net.name));
    return false;
  }
  if (!sym->valid)
    return false; // its declaration was rejected
  ir::NetDecl& base = model_.nets[sym->index];
  std::string problem;
  if (!base.density())
    problem =
        fmt::format("'{}' is an {}, not a density (dif, maf or realnvp)", base.name, base.kind);
  else if (base.dim != net.dim)
    problem = fmt::format("'{}' is over {} dimensions, '{}' over {}", base.name, base.dim, net.name,
                          net.dim);
  else if (base.inputs != base.dim)
    problem = fmt::format("'{}' reads a context: a cascade reads its outermost density's "
                          "(`context` on '{}' only)",
                          base.name, net.name);
  else if (base.base_of >= 0)
    problem =
        fmt::format("'{}' is already the base of '{}'", base.name, model_.nets[base.base_of].name);
  int64_t components = net.kind == "dif" ? net.components : 1;
  for (int k = sym->index; k >= 0; k = model_.nets[k].base)
    components *= model_.nets[k].kind == "dif" ? model_.nets[k].components : 1;
  if (problem.empty() && components > ir::kMaxDifComponents)
    problem = fmt::format("a cascade's components multiply, to {} here, and a dif's are at most {}",
                          components, ir::kMaxDifComponents);
  if (!problem.empty()) {
    error(value.range, fmt::format(msg::net_base_unfit, net.name, problem));
    return false;
  }
  net.base = sym->index;
  base.base_of = static_cast<int>(model_.nets.size()); // the index `net` is about to get
  return true;
}

std::optional<int> Lowering::call_net(const Expr& e, Symbol& sym, Scope& s) {
  if (sym.index < 0)
    return std::nullopt; // its declaration was rejected
  if (s.fn) {
    error(e.range, fmt::format(msg::net_in_function, e.name));
    return std::nullopt;
  }
  if (model_.is_state_space()) { // its guide's encoder is lowered by add_state_guide
    const RelationScope* rel = s.relation();
    error(e.range, fmt::format(msg::net_in_state_space_relation, e.name,
                               rel ? rel->subject : std::string("a relation")));
    return std::nullopt;
  }
  std::vector<std::optional<int>> args;
  ++s.net_argument; // a sequence may be read here (an rnn's first argument)
  for (const ast::ExprPtr& a : e.args)
    args.push_back(lower(*a, s));
  --s.net_argument;
  if (!sym.valid || std::any_of(args.begin(), args.end(), [](auto& a) { return !a; }))
    return std::nullopt;
  const ir::NetDecl& net = model_.nets[sym.index];
  if (net.distribution()) {
    error(e.range, net.density() ? fmt::format(msg::density_net_called, net.name, net.kind)
                                 : fmt::format(msg::sequence_net_called, net.name, net.kind));
    return std::nullopt;
  }
  if (args.empty()) {
    error(e.range, fmt::format(msg::net_without_arguments, net.name, net.inputs));
    return std::nullopt;
  }
  int size = 0;
  std::vector<std::string> shapes;
  ir::Node node;
  node.op = ir::Op::Net;
  node.var = sym.index;
  node.shape = ir::Shape::vector(net.outputs);
  for (size_t k = 0; k < args.size(); ++k) {
    const ir::Node& a = s.block->nodes[*args[k]];
    const bool sequence =
        a.op == ir::Op::Obs && model_.obs[a.var].constraint == ir::Constraint::Sequence;
    const std::string arg_name = sequence ? model_.obs[a.var].name + "[n]" : std::string();
    if (sequence && (net.kind != "rnn" || k > 0)) { // only an rnn reads one, first
      error(e.args[k]->range, fmt::format(msg::sequence_argument, net.name, net.kind, arg_name));
      return std::nullopt;
    }
    if (net.kind == "rnn" && k == 0 && !sequence) {
      error(e.args[k]->range, fmt::format(msg::rnn_first_argument, net.name, net.inputs - 1));
      return std::nullopt;
    }
    if (sequence && model_.obs[a.var].upper + 1 != net.vocab) {
      error(e.args[k]->range, fmt::format(msg::sequence_vocabulary, net.name, net.vocab, arg_name,
                                          type_str(model_.obs[a.var])));
      return std::nullopt;
    }
    // The runtime gathers the network's inputs from the values it holds: variables, not
    // expressions of them (their gradient would need kernels of their own). It holds every
    // item's sequences, so an rnn reads one in the model's relations too (text as a covariate).
    const bool guide = s.kind() == ir::BlockKind::Guide;
    if (guide ? a.op != ir::Op::Obs && a.op != ir::Op::Data && a.op != ir::Op::Input
              : a.op != ir::Op::Latent && a.op != ir::Op::Param && a.op != ir::Op::Data &&
                    a.op != ir::Op::Input && !sequence) {
      error(e.args[k]->range, fmt::format(msg::net_argument_not_variable, net.name));
      return std::nullopt;
    }
    if (net.kind == "embedding") { // a token: an int variable within the vocabulary
      const ir::VarDecl* v = a.op == ir::Op::Latent  ? &model_.latents[a.var]
                             : a.op == ir::Op::Obs   ? &model_.obs[a.var]
                             : a.op == ir::Op::Input ? &model_.inputs[a.var]
                             : a.op == ir::Op::Data  ? &model_.data[a.var]
                                                     : nullptr;
      if (!v || !v->integer || !a.shape.is_scalar() || !(v->lower >= 0) ||
          !(v->upper <= net.vocab - 1)) {
        error(e.args[k]->range, fmt::format(msg::embedding_argument, net.name, net.vocab - 1,
                                            v ? type_str(*v) : std::string("a parameter")));
        return std::nullopt;
      }
    }
    size += a.shape.size();
    shapes.push_back(a.shape.str());
    node.args.push_back(*args[k]);
  }
  if (size != net.inputs) {
    error(e.range,
          fmt::format(msg::net_input_size, net.name, net.inputs, size, fmt::join(shapes, ", ")));
    return std::nullopt;
  }
  return emit(s, std::move(node), e.range);
}

Symbol* Lowering::density_net(const std::string& name) {
  Symbol* sym = lookup(name);
  return sym && sym->kind == Symbol::Kind::Net && sym->index >= 0 &&
                 model_.nets[sym->index].distribution()
             ? sym
             : nullptr;
}

// `z[n] ~ NET(context...)` with NET a density (or `c[n] ~ LM(context...)`, an rnn_lm over the
// sequence c): the relation is density(NET(target, context...)), the network's log p of its
// target given the context, which the runtime computes (vi).
std::optional<int> Lowering::lower_density_call(const ast::DistCall& d, Symbol& sym,
                                                ir::VarKind kind, int var, Scope& s,
                                                const std::string& target) {
  sym.used = true;
  const ir::NetDecl& net = model_.nets[sym.index];
  if (net.base_of >= 0) {
    error(d.name.range, fmt::format(msg::net_is_base, net.name, model_.nets[net.base_of].name));
    return std::nullopt;
  }
  const bool latent = kind == ir::VarKind::Latent;
  const ir::VarDecl& decl = latent ? model_.latents[var] : model_.obs[var];
  bool ok = sym.valid;
  for (const ast::NamedArg& a : d.named)
    error(a.name.range, fmt::format(msg::density_net_named_argument, net.name, a.name.name));
  if (!d.named.empty())
    return std::nullopt;
  if (net.over_sequences()) { // the caller gives a sequence
    if (decl.upper + 1 != net.vocab) {
      error(d.name.range,
            fmt::format(msg::sequence_vocabulary, net.name, net.vocab, target, type_str(decl)));
      ok = false;
    }
  } else if (decl.integer || decl.shape.rank() > 1 || decl.shape.size() != net.dim) {
    error(d.name.range,
          fmt::format(msg::density_net_target, net.name,
                      net.dim == 1 ? std::string("a real") : fmt::format("vector[{}]", net.dim),
                      target, decl.integer ? "an int" : decl.shape.str()));
    ok = false;
  }
  ir::Node call;
  call.op = ir::Op::Net;
  call.var = sym.index;
  call.shape = ir::Shape::vector(1);
  ir::Node self; // the target, read by the network itself (not by the relation's arguments)
  self.op = latent ? ir::Op::Latent : ir::Op::Obs;
  self.var = var;
  self.shape = decl.shape;
  call.args.push_back(emit(s, std::move(self), d.name.range));
  int size = 0;
  std::vector<std::string> shapes;
  std::vector<const ast::ExprPtr*> context;
  for (const ast::ExprPtr& a : d.args) // named arguments' values too (named_arguments.cpp)
    context.push_back(&a);
  for (const ast::ExprPtr* a : context) {
    const std::optional<int> id = lower(**a, s);
    if (!id) {
      ok = false;
      continue;
    }
    const ir::Node& n = s.block->nodes[*id];
    if (n.op != ir::Op::Latent && n.op != ir::Op::Param && n.op != ir::Op::Data &&
        n.op != ir::Op::Input) {
      error((*a)->range, fmt::format(msg::net_argument_not_variable, net.name));
      ok = false;
      continue;
    }
    size += n.shape.size();
    shapes.push_back(n.shape.str());
    call.args.push_back(*id);
  }
  const int context_size = net.over_sequences() ? net.inputs - 1 : net.inputs - net.dim;
  if (ok && size != context_size) {
    error(d.range,
          fmt::format(msg::density_net_context_size, net.name, context_size, size,
                      shapes.empty() ? "none" : fmt::format("{}", fmt::join(shapes, ", "))));
    ok = false;
  }
  if (!ok)
    return std::nullopt;
  return emit(s, std::move(call), d.range);
}

} // namespace ssm::frontend::lowering
