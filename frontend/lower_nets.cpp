// Networks: `net NAME : mlp(inputs = I, outputs = O, hidden = [...], activation = A);` declares
// a multilayer perceptron, and `NAME(a, b, ...)` in a relation applies it to variables. The
// compiler checks the sizes; the runtime evaluates and trains the network (LibTorch), and
// passes/net_outputs.cpp turns each call into a hidden state that the kernels read.
#include "lowering.h"
#include "messages.h"

#include <algorithm>

namespace ssm::frontend::lowering {

namespace {

// The activations of runtime/nn/mlp.cpp (mlp_activations), which checks them again.
const std::vector<std::string> activations = {"tanh", "relu", "silu", "gelu"};

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
  if (model_.kind != ir::ModelKind::Plate)
    reject(d.name.range, fmt::format(msg::net_outside_plate_model, name));
  if (d.kind.name != "mlp")
    reject(d.kind.range, fmt::format(msg::net_unknown_kind, d.kind.name));
  ir::NetDecl net;
  net.name = name;
  net.kind = d.kind.name;
  net.hidden = {64};
  net.loc = loc(d.name.range);
  std::set<std::string> seen;
  for (const ast::NamedArg& o : d.options) {
    const std::string& key = o.name.name;
    if (!seen.insert(key).second) {
      reject(o.name.range, fmt::format(msg::net_option_twice, key, name));
      continue;
    }
    const std::string what = fmt::format("option '{}' of network '{}'", key, name);
    if (key == "inputs" || key == "outputs") {
      std::optional<int> n = eval_dimension(*o.value, what);
      if (n && *n == 0)
        reject(o.value->range, fmt::format(msg::net_size_zero, what));
      (key == "inputs" ? net.inputs : net.outputs) = n.value_or(0);
      ok = ok && n.has_value();
    } else if (key == "hidden") {
      net.hidden.clear();
      if (o.value->kind == EKind::Name && o.value->name == "none")
        continue; // no hidden layer: an affine map
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
    } else if (key == "activation") {
      if (o.value->kind != EKind::Name ||
          std::find(activations.begin(), activations.end(), o.value->name) == activations.end())
        reject(o.value->range,
               fmt::format(msg::net_unknown_activation, name, fmt::join(activations, ", ")));
      else
        net.activation = o.value->name;
    } else {
      reject(o.name.range, fmt::format(msg::net_unknown_option, key, name));
    }
  }
  for (const char* required : {"inputs", "outputs"})
    if (!seen.count(required))
      reject(d.name.range, fmt::format(msg::net_option_missing, name, required));
  sym->index = static_cast<int>(model_.nets.size());
  sym->valid = ok;
  model_.nets.push_back(std::move(net));
}

std::optional<int> Lowering::call_net(const Expr& e, Symbol& sym, Scope& s) {
  if (sym.index < 0)
    return std::nullopt; // its declaration was rejected
  if (s.fn) {
    error(e.range, fmt::format(msg::net_in_function, e.name));
    return std::nullopt;
  }
  std::vector<std::optional<int>> args;
  for (const ast::ExprPtr& a : e.args)
    args.push_back(lower(*a, s));
  if (!sym.valid || std::any_of(args.begin(), args.end(), [](auto& a) { return !a; }))
    return std::nullopt;
  const ir::NetDecl& net = model_.nets[sym.index];
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
    // The runtime gathers the network's inputs from the values it holds: variables, not
    // expressions of them (their gradient would need kernels of their own).
    const bool guide = s.kind() == ir::BlockKind::Guide;
    if (guide ? a.op != ir::Op::Obs && a.op != ir::Op::Data && a.op != ir::Op::Input
              : a.op != ir::Op::Latent && a.op != ir::Op::Param && a.op != ir::Op::Data &&
                    a.op != ir::Op::Input) {
      error(e.args[k]->range, fmt::format(msg::net_argument_not_variable, net.name));
      return std::nullopt;
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

} // namespace ssm::frontend::lowering
