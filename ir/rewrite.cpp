// Use redirection and dead-node removal: see rewrite.h.
#include "rewrite.h"

namespace ssm::ir {

void replace_and_compact(Block& block, const std::vector<int>& replacement) {
  auto resolve = [&](int id) {
    while (replacement[id] != id)
      id = replacement[id];
    return id;
  };
  for (Node& node : block.nodes)
    for (int& a : node.args)
      a = resolve(a);
  for (Relation& rel : block.relations)
    for (int& a : rel.args)
      a = resolve(a);
  for (int& a : block.outputs)
    a = resolve(a);

  std::vector<bool> live(block.nodes.size(), false);
  for (const Relation& rel : block.relations)
    for (int a : rel.args)
      live[a] = true;
  for (int a : block.outputs)
    live[a] = true;
  for (int i = static_cast<int>(block.nodes.size()) - 1; i >= 0; --i)
    if (live[i])
      for (int a : block.nodes[i].args)
        live[a] = true;

  std::vector<int> new_id(block.nodes.size(), -1);
  std::vector<Node> kept;
  for (size_t i = 0; i < block.nodes.size(); ++i) {
    if (!live[i])
      continue;
    new_id[i] = static_cast<int>(kept.size());
    kept.push_back(std::move(block.nodes[i]));
    for (int& a : kept.back().args)
      a = new_id[a];
  }
  block.nodes = std::move(kept);
  for (Relation& rel : block.relations)
    for (int& a : rel.args)
      a = new_id[a];
  for (int& a : block.outputs)
    a = new_id[a];
}

void compact(Block& block) {
  std::vector<int> identity(block.nodes.size());
  for (size_t i = 0; i < identity.size(); ++i)
    identity[i] = static_cast<int>(i);
  replace_and_compact(block, identity);
}

} // namespace ssm::ir
