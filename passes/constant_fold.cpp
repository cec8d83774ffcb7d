// constant-fold: evaluates every node whose operands are all constants, and simplifies the
// algebraic identities x+0, x-0, x*1, x/1, x^1 and a select on a constant condition. Folding before
// CSE lets equal constants merge, and before codegen keeps parameter-free arithmetic out of the
// kernels.
#include "passes.h"

#include "ir/evaluate.h"
#include "ir/rewrite.h"

#include <algorithm>
#include <cmath>

namespace ssm::passes {

namespace {

bool is_scalar_const(const ir::Node& n, double value) {
  return n.op == ir::Op::Const && n.shape.is_scalar() && n.values[0] == value;
}

class ConstantFold : public Pass {
public:
  std::string_view name() const override { return "constant-fold"; }
  std::string_view description() const override {
    return "evaluate constant subexpressions and drop algebraic identities";
  }

  void run(ir::Model& model, PassContext&) override {
    model.for_each_block([](ir::Block& block) { fold(block); });
  }

private:
  static void fold(ir::Block& block) {
    std::vector<int> replacement(block.nodes.size());
    for (size_t i = 0; i < block.nodes.size(); ++i) {
      replacement[i] = static_cast<int>(i);
      ir::Node& node = block.nodes[i];
      if (node.op == ir::Op::Const || node.args.empty())
        continue;
      if (all_const(block, node)) {
        std::vector<std::vector<double>> values;
        std::vector<ir::Shape> shapes;
        for (int a : node.args) {
          values.push_back(block.nodes[a].values);
          shapes.push_back(block.nodes[a].shape);
        }
        std::vector<double> folded = ir::evaluate(node, values, shapes);
        node = ir::Node{ir::Op::Const, node.shape, {}, std::move(folded), {}, {}, -1, 0, node.loc};
        continue;
      }
      if (int same = identity_operand(block, node); same >= 0)
        replacement[i] = same;
    }
    ir::replace_and_compact(block, replacement);
  }

  static bool all_const(const ir::Block& block, const ir::Node& node) {
    for (int a : node.args)
      if (block.nodes[a].op != ir::Op::Const)
        return false;
    return true;
  }

  // The operand this node equals, if it is an identity such as x * 1; -1 otherwise. The result must
  // keep the node's shape, so a scalar operand cannot stand for a broadcast result.
  static int identity_operand(const ir::Block& block, const ir::Node& node) {
    auto keeps = [&](int id) { return block.nodes[id].shape == node.shape ? id : -1; };
    if (node.op == ir::Op::Select) {
      if (node.args[1] == node.args[2])
        return keeps(node.args[1]);
      const ir::Node& cond = block.nodes[node.args[0]];
      if (cond.op != ir::Op::Const)
        return -1;
      bool all = std::all_of(cond.values.begin(), cond.values.end(), [](double c) { return c; });
      bool none = std::none_of(cond.values.begin(), cond.values.end(), [](double c) { return c; });
      return all ? keeps(node.args[1]) : none ? keeps(node.args[2]) : -1;
    }
    if (node.args.size() != 2)
      return -1;
    int lhs = node.args[0], rhs = node.args[1];
    const ir::Node& l = block.nodes[lhs];
    const ir::Node& r = block.nodes[rhs];
    auto keeps_shape = [&](int id) { return block.nodes[id].shape == node.shape ? id : -1; };
    switch (node.op) {
    case ir::Op::Add:
      if (is_scalar_const(r, 0))
        return keeps_shape(lhs);
      if (is_scalar_const(l, 0))
        return keeps_shape(rhs);
      return -1;
    case ir::Op::Sub:
      return is_scalar_const(r, 0) ? keeps_shape(lhs) : -1;
    case ir::Op::Mul:
      if (is_scalar_const(r, 1))
        return keeps_shape(lhs);
      if (is_scalar_const(l, 1))
        return keeps_shape(rhs);
      return -1;
    case ir::Op::Div:
    case ir::Op::Pow:
      return is_scalar_const(r, 1) ? keeps_shape(lhs) : -1;
    default:
      return -1;
    }
  }
};

} // namespace

std::unique_ptr<Pass> create_constant_fold() {
  return std::make_unique<ConstantFold>();
}

} // namespace ssm::passes
