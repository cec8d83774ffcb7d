// Prints a model as declarations followed by one `block { ... }` per non-empty block. Each node is
// `%id = op operands : shape`; relations read `target ~ dist(%a, %b)`.
#include "Printer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ssm::ir {

namespace {

std::string time_index(BlockKind kind, int lag) {
  if (kind == BlockKind::Initial)
    return "[0]";
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

std::string node_str(const Model& model, BlockKind kind, const Node& node) {
  switch (node.op) {
  case Op::Const:
    return fmt::format("const {}", values_str(node.values, node.shape));
  case Op::Param:
    return fmt::format("param {}", model.params.at(node.var).name);
  case Op::State:
    return fmt::format("state {}{}", model.states.at(node.var).name, time_index(kind, node.lag));
  case Op::Obs:
    return fmt::format("obs {}{}", model.obs.at(node.var).name, time_index(kind, node.lag));
  case Op::Time:
    return "time";
  case Op::Data:
    return fmt::format("data {}", model.data.at(node.var).name);
  case Op::Input:
    return fmt::format("input {}{}", model.inputs.at(node.var).name, time_index(kind, node.lag));
  case Op::Call:
    return fmt::format("call {}({})", node.fn, operands(node.args));
  case Op::Index:
    return fmt::format("index {}[{}]", operands(node.args), fmt::join(node.index, ", "));
  default:
    return fmt::format("{} {}", op_name(node.op), operands(node.args));
  }
}

} // namespace

std::string print_relation_target(const Model& model, const Block& block, const Relation& rel) {
  const std::string& name = model.var_name(rel.kind, rel.var);
  return rel.kind == VarKind::Param ? name : fmt::format("{}{}", name, time_index(block.kind, 0));
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
  std::string out = fmt::format("model {}\n", model.name);
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
  auto decl = [&](std::string_view what, const VarDecl& v) {
    std::string type = v.shape.str();
    if (v.integer)
      type = v.lower > -INFINITY || v.upper < INFINITY
                 ? fmt::format("int[{}..{}]", v.lower, v.upper)
                 : "int";
    out += fmt::format("{} {} : {}\n", what, v.name, type);
  };
  for (const VarDecl& s : model.states)
    decl("state", s);
  for (const VarDecl& o : model.obs)
    decl("obs", o);
  for (const VarDecl& d : model.data)
    decl("data", d);
  for (const VarDecl& u : model.inputs)
    decl("input", u);
  model.for_each_block([&](const Block& block) {
    if (!block.nodes.empty() || !block.relations.empty() || !block.outputs.empty())
      out += fmt::format("\n{}", print(model, block));
  });
  return out;
}

} // namespace ssm::ir
