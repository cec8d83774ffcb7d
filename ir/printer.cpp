// Prints a model as declarations followed by one `block { ... }` per non-empty block. Each node is
// `%id = op operands : shape`; relations read `target ~ dist(%a, %b)`.
#include "printer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numbers>
#include <optional>

namespace ssm::ir {

namespace {

// How a block indexes its variables: by time, by the plate's item n, or not at all (simulator).
// A state-space model's guide reads by time (guide_indexing).
std::string time_index(BlockKind kind, int lag) {
  if (kind == BlockKind::Initial)
    return "[0]";
  if (kind == BlockKind::Plate || kind == BlockKind::Guide)
    return "[n]";
  if (kind == BlockKind::Simulator)
    return "";
  return lag == 0 ? "[t]" : fmt::format("[t-{}]", lag);
}

std::string values_str(const std::vector<double>& values, const Shape& shape) {
  if (shape.is_scalar())
    return fmt::format("{}", values.at(0));
  if (shape.rank() == 1)
    return fmt::format("[{}]", fmt::join(values, ", "));
  std::vector<std::string> rows;
  int cols = shape.dims[1];
  for (int r = 0; r < shape.dims[0]; ++r)
    rows.push_back(fmt::format(
        "[{}]", fmt::join(values.begin() + r * cols, values.begin() + (r + 1) * cols, ", ")));
  return fmt::format("[{}]", fmt::join(rows, ", "));
}

std::string operands(const std::vector<int>& args) {
  std::vector<std::string> names;
  for (int a : args)
    names.push_back(fmt::format("%{}", a));
  return fmt::format("{}", fmt::join(names, ", "));
}

std::string node_str(const Model& model, BlockKind block_kind, const Node& node) {
  const BlockKind kind = indexing_kind(model, block_kind);
  switch (node.op) {
  case Op::Const:
    return fmt::format("const {}", values_str(node.values, node.shape));
  case Op::Param:
    return fmt::format("param {}", model.params.at(node.var).name);
  case Op::State:
    return fmt::format("state {}{}", model.states.at(node.var).name, time_index(kind, node.lag));
  case Op::Obs:
    return fmt::format("obs {}{}", model.obs.at(node.var).name, time_index(kind, node.lag));
  case Op::Latent:
    return fmt::format("latent {}{}", model.latents.at(node.var).name, time_index(kind, 0));
  case Op::Time:
    return "time";
  case Op::Data:
    return fmt::format("data {}", model.data.at(node.var).name);
  case Op::Input:
    return fmt::format("input {}{}", model.inputs.at(node.var).name, time_index(kind, node.lag));
  case Op::Call:
    return fmt::format("call {}({})", node.fn, operands(node.args));
  case Op::Net:
    return fmt::format("net {}({})", model.nets.at(node.var).name, operands(node.args));
  case Op::Index:
    return fmt::format("index {}[{}]", operands(node.args), fmt::join(node.index, ", "));
  case Op::Ode: // ode %y0, %rate at [t0, t_1, ...] steps [k_1, ...]
    return fmt::format("ode {} at [{}] steps [{}]", operands(node.args),
                       fmt::join(node.values, ", "), fmt::join(node.index, ", "));
  case Op::OdeTime:
  case Op::OdeState:
    return std::string(op_name(node.op));
  default:
    return fmt::format("{} {}", op_name(node.op), operands(node.args));
  }
}

} // namespace

std::string print_relation_target(const Model& model, const Block& block, const Relation& rel) {
  const std::string& name = model.var_name(rel.kind, rel.var);
  return rel.kind == VarKind::Param
             ? name
             : fmt::format("{}{}", name, time_index(indexing_kind(model, block.kind), 0));
}

std::string print(const Model& model, const Block& block) {
  std::string out = fmt::format("{} {{\n", block_name(block.kind));
  for (size_t i = 0; i < block.nodes.size(); ++i) {
    const Node& node = block.nodes[i];
    out += fmt::format("  %{} = {} : {}\n", i, node_str(model, block.kind, node), node.shape.str());
  }
  for (const Relation& rel : block.relations)
    out += fmt::format("  {} ~ {}({})\n", print_relation_target(model, block, rel),
                       dist_info(rel.dist).name, operands(rel.args));
  for (size_t i = 0; i < block.outputs.size(); ++i) {
    const FunctionalDecl* f = block.kind == BlockKind::Functional && i < model.functionals.size()
                                  ? &model.functionals[i]
                                  : nullptr;
    out += f ? fmt::format("  {} = {}%{}\n", f->name, f->additive ? "sum_t " : "", block.outputs[i])
             : fmt::format("  output %{}\n", block.outputs[i]);
  }
  out += "}\n";
  return out;
}

std::string print(const Model& model) {
  std::string out = fmt::format(
      "{} {}\n", model.kind == ModelKind::Simulator ? "simulator" : "model", model.name);
  if (model.kind == ModelKind::Plate)
    out += "plate n\n";
  if (model.items)
    out += "items n\n";
  if (model.simulation)
    out += fmt::format("simulation {}\n", model.simulation_params);
  for (const ConstDecl& c : model.consts)
    out +=
        fmt::format("const {} : {} = {}\n", c.name, c.shape.str(), values_str(c.values, c.shape));
  for (const ParamDecl& p : model.params) {
    std::string type =
        p.type == ParamType::CovMatrix ? fmt::format("cov_matrix[{}]", p.shape.dims.at(0))
        : p.type == ParamType::Simplex ? fmt::format("simplex[{}]", p.shape.dims.at(0))
                                       : p.shape.str();
    if (p.lower > -INFINITY || p.upper < INFINITY)
      type += fmt::format("({}, {})", p.lower, p.upper);
    out += fmt::format("param {} : {}", p.name, type);
    if (p.default_value)
      out += fmt::format(" = {}", values_str(*p.default_value, p.shape));
    out += "\n";
  }
  // Latents, observations and inputs of a plate model have one value per item: `obs x[n] : real`.
  const bool per_item = model.kind == ModelKind::Plate;
  auto decl = [&](std::string_view what, const VarDecl& v, bool plate = false) {
    out += fmt::format("{} {}{} : {}\n", what, v.name, plate ? "[n]" : "", type_str(v));
  };
  for (const VarDecl& s : model.states)
    decl("state", s);
  for (const VarDecl& z : model.latents)
    decl("latent", z, per_item);
  for (const VarDecl& o : model.obs)
    decl("obs", o, per_item);
  for (const VarDecl& d : model.data)
    decl("data", d);
  for (const VarDecl& u : model.inputs)
    decl("input", u, per_item);
  for (const NetDecl& n : model.nets)
    out += fmt::format(
        "net {} : {}(inputs = {}, outputs = {}, hidden = [{}], activation = {}{})\n", n.name,
        n.kind, n.inputs, n.outputs, fmt::join(n.hidden, ", "), n.activation,
        n.density()
            ? fmt::format(", dim = {}, components = {}, layers = {}{}{}", n.dim, n.components,
                          n.layers, n.kind == "dif" ? ", maps = " + n.maps : "",
                          n.base >= 0 ? ", base = " + model.nets.at(n.base).name : "")
        : n.over_sequences() ? fmt::format(", vocab = {}, embedding = {}, layers = {}, cell = {}",
                                           n.vocab, n.embedding, n.layers, n.cell)
        : n.kind == "embedding" ? fmt::format(", vocab = {}", n.vocab)
                                : "");
  for (const NetCall& c : model.net_calls) {
    std::vector<std::string> args;
    for (const Node& a : c.args)
      args.push_back(a.op == Op::Param   ? model.params.at(a.var).name
                     : a.op == Op::Data  ? model.data.at(a.var).name
                     : a.op == Op::Obs   ? model.obs.at(a.var).name
                     : a.op == Op::Input ? model.inputs.at(a.var).name
                                         : model.states.at(a.var).name);
    out += fmt::format("netcall {} = {}({})\n", model.states.at(c.state).name,
                       model.nets.at(c.net).name, fmt::join(args, ", "));
  }
  model.for_each_block([&](const Block& block) {
    if (!block.nodes.empty() || !block.relations.empty() || !block.outputs.empty())
      out += fmt::format("\n{}", print(model, block));
  });
  return out;
}

namespace {

// Prints expressions with the fewest parentheses the parser needs. Levels are binding strengths:
// 1 additive, 2 multiplicative, 3 unary minus, 4 power, 5 atoms (names, calls, literals, indexing).
class ExprPrinter {
public:
  ExprPrinter(const Model& model, const Block& block) : model_(model), block_(block) {}

  // The text of node `id`, parenthesised if it binds less tightly than `level`.
  std::string print(int id, int level) const {
    auto [text, own] = expr(id);
    return own < level ? "(" + text + ")" : text;
  }

private:
  const Model& model_;
  const Block& block_;

  static std::pair<std::string, int> scalar(double v) {
    if (v == std::numbers::pi)
      return {"pi", 5};
    for (int k = 2; k <= 4; ++k) // 2 * pi, as constant folding leaves it
      if (v == k * std::numbers::pi)
        return {fmt::format("{} * pi", k), 2};
    return {fmt::format("{}", v), v < 0 ? 3 : 5};
  }

  bool is_zero(int id) const {
    const Node& n = block_.nodes[id];
    return n.op == Op::Const && n.shape.is_scalar() && n.values[0] == 0;
  }

  // A square matrix (n > 1) whose off-diagonal elements are all zero, given its elements as
  // texts and zero flags: `eye(n)`, `c * eye(n)` or `diag([a, b])`.
  static std::optional<std::pair<std::string, int>>
  diagonal(const Shape& shape, const std::vector<std::pair<std::string, int>>& elems,
           const std::vector<bool>& zero) {
    if (shape.rank() != 2 || shape.dims[0] != shape.dims[1] || shape.dims[0] < 2)
      return std::nullopt;
    int n = shape.dims[0];
    bool equal = true;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        if (i != j && !zero[i * n + j])
          return std::nullopt;
        if (i == j && elems[i * n + j].first != elems[0].first)
          equal = false;
      }
    if (equal && elems[0].first == "1")
      return std::pair{fmt::format("eye({})", n), 5};
    if (equal) {
      const auto& [text, level] = elems[0];
      return std::pair{fmt::format("{} * eye({})", level < 2 ? "(" + text + ")" : text, n), 2};
    }
    std::vector<std::string> d;
    for (int i = 0; i < n; ++i)
      d.push_back(elems[i * n + i].first);
    return std::pair{fmt::format("diag([{}])", fmt::join(d, ", ")), 5};
  }

  // Row-major elements as a vector or matrix literal, or a shorter equivalent.
  static std::pair<std::string, int> literal(const Shape& shape,
                                             const std::vector<std::pair<std::string, int>>& elems,
                                             const std::vector<bool>& zero) {
    if (shape.rank() == 1 && shape.dims[0] > 1 &&
        std::all_of(zero.begin(), zero.end(), [](bool z) { return z; }))
      return {fmt::format("zeros({})", shape.dims[0]), 5};
    if (auto d = diagonal(shape, elems, zero))
      return *d;
    std::vector<std::string> texts;
    for (const auto& e : elems)
      texts.push_back(e.first);
    if (shape.rank() == 1)
      return {fmt::format("[{}]", fmt::join(texts, ", ")), 5};
    std::vector<std::string> rows;
    int cols = shape.dims[1];
    for (int r = 0; r < shape.dims[0]; ++r)
      rows.push_back(fmt::format(
          "[{}]", fmt::join(texts.begin() + r * cols, texts.begin() + (r + 1) * cols, ", ")));
    return {fmt::format("[{}]", fmt::join(rows, ", ")), 5};
  }

  std::string args(const Node& n) const {
    std::vector<std::string> texts;
    for (int a : n.args)
      texts.push_back(print(a, 0));
    return fmt::format("{}", fmt::join(texts, ", "));
  }

  std::pair<std::string, int> expr(int id) const {
    const Node& n = block_.nodes.at(id);
    auto binary = [&](std::string_view op, int lhs_level, int rhs_level, int level) {
      return std::pair{
          fmt::format("{}{}{}", print(n.args[0], lhs_level), op, print(n.args[1], rhs_level)),
          level};
    };
    switch (n.op) {
    case Op::Const: {
      if (n.shape.is_scalar())
        return scalar(n.values[0]);
      std::vector<std::pair<std::string, int>> elems;
      std::vector<bool> zero;
      for (double v : n.values) {
        elems.push_back(scalar(v));
        zero.push_back(v == 0);
      }
      return literal(n.shape, elems, zero);
    }
    case Op::Param:
      return {model_.params.at(n.var).name, 5};
    case Op::State:
      return {model_.states.at(n.var).name + time_index(indexing_kind(model_, block_.kind), n.lag),
              5};
    case Op::Obs:
      return {model_.obs.at(n.var).name + time_index(indexing_kind(model_, block_.kind), n.lag), 5};
    case Op::Latent:
      return {model_.latents.at(n.var).name + time_index(block_.kind, 0), 5};
    case Op::Time:
      return {"t", 5};
    case Op::Neg:
      return {"-" + print(n.args[0], 4), 3};
    case Op::Add:
      return binary(" + ", 1, 2, 1);
    case Op::Sub:
      return binary(" - ", 1, 2, 1);
    case Op::Mul:
    case Op::MatMul:
      return binary(" * ", 2, 3, 2);
    case Op::Div:
      return binary(" / ", 2, 3, 2);
    case Op::Pow:
      return binary("^", 5, 4, 4);
    case Op::Call:
      return {fmt::format("{}({})", n.fn, args(n)), 5};
    case Op::Net:
      return {fmt::format("{}({})", model_.nets.at(n.var).name, args(n)), 5};
    case Op::Index:
      return {fmt::format("{}[{}]", print(n.args[0], 5), fmt::join(n.index, ", ")), 5};
    case Op::Ode: // the rate as a function of ode.t and ode.y
      return {fmt::format("ode_rk4(ode.y' = {}, ode.y({}) = {}, at [{}])", print(n.args[1], 0),
                          n.values[0], print(n.args[0], 0),
                          fmt::join(n.values.begin() + 1, n.values.end(), ", ")),
              5};
    case Op::OdeTime:
      return {"ode.t", 5};
    case Op::OdeState:
      return {"ode.y", 5};
    case Op::Build: {
      std::vector<std::pair<std::string, int>> elems;
      std::vector<bool> zero;
      for (int a : n.args) {
        elems.push_back(expr(a));
        zero.push_back(is_zero(a));
      }
      return literal(n.shape, elems, zero);
    }
    default:
      return {fmt::format("{}({})", op_name(n.op), args(n)), 5};
    }
  }
};

} // namespace

std::string print_expr(const Model& model, const Block& block, int id) {
  return ExprPrinter(model, block).print(id, 0);
}

} // namespace ssm::ir
