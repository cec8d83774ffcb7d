// cse: merges nodes that compute the same value (same op, operands, shape and attributes), so
// e.g. `x[t-1] - mu` written twice in a relation is computed once per particle.
#include "passes.h"

#include "ir/rewrite.h"

#include <bit>
#include <cstdint>
#include <map>
#include <tuple>

namespace ssm::passes {

namespace {

class CommonSubexpressionElimination : public Pass {
public:
  std::string_view name() const override { return "cse"; }
  std::string_view description() const override {
    return "merge nodes that compute the same value";
  }

  void run(ir::Model& model, PassContext&) override {
    model.for_each_block([](ir::Block& block) { eliminate(block); });
  }

private:
  using Key = ir::NodeKey;

  static void eliminate(ir::Block& block) {
    std::map<Key, int> seen;
    std::vector<int> replacement(block.nodes.size());
    for (size_t i = 0; i < block.nodes.size(); ++i) {
      ir::Node& node = block.nodes[i];
      for (int& a : node.args)
        a = replacement[a]; // operands are canonical before the node is keyed
      auto [it, inserted] = seen.emplace(ir::node_key(node), static_cast<int>(i));
      replacement[i] = it->second;
    }
    ir::replace_and_compact(block, replacement);
  }
};

} // namespace

std::unique_ptr<Pass> create_cse() {
  return std::make_unique<CommonSubexpressionElimination>();
}

} // namespace ssm::passes
