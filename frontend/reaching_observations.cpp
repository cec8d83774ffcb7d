// Which states or latent variables the observations depend on, over the IR: the analysis behind
// warn_states_without_influence and warn_latents_without_influence (model_warnings.h).
#include "model_warnings.h"

#include <set>

namespace ssm::frontend {

namespace {

// The variables that a relation's arguments read, directly or through other nodes.
std::set<int> variables_read(const ir::Block& block, const ir::Relation& rel, ir::Op read) {
  const std::vector<bool> reached = ir::reached_from(block, rel.args);
  std::set<int> vars;
  for (std::size_t i = 0; i < reached.size(); ++i)
    if (reached[i] && block.nodes[i].op == read)
      vars.insert(block.nodes[i].var);
  return vars;
}

} // namespace

std::vector<bool> reaching_observations(std::size_t n, ir::Op read,
                                        const std::vector<const ir::Block*>& blocks,
                                        ir::VarKind observations, ir::VarKind drivers) {
  std::vector<bool> found(n, false);
  std::vector<std::pair<int, std::set<int>>> driving; // a driver's target, and what it reads
  for (const ir::Block* block : blocks)
    for (const ir::Relation& rel : block->relations) {
      if (rel.kind == observations)
        for (int v : variables_read(*block, rel, read))
          found[v] = true;
      else if (rel.kind == drivers)
        driving.emplace_back(rel.var, variables_read(*block, rel, read));
    }
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& [var, reads] : driving)
      if (found[var])
        for (int v : reads)
          if (!found[v])
            found[v] = changed = true;
  }
  return found;
}

} // namespace ssm::frontend
