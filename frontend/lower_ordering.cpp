// What is missing (relations, observations that depend on no state) and the sampling order of the
// relations of each block, with the message for a circular dependency.
#include "lowering.h"
#include "messages.h"

#include <algorithm>

namespace ssm::frontend::lowering {

const PendingRelation* Lowering::relation_for(ir::BlockKind kind, int var) const {
  auto it = pending_.find(kind);
  if (it == pending_.end())
    return nullptr;
  for (const PendingRelation& p : it->second)
    if (p.rel.var == var)
      return &p;
  return nullptr;
}

void Lowering::check_completeness() {
  if (!model_.is_state_space()) {
    if (model_.obs.empty())
      error(ast_.name.range,
            fmt::format(msg::static_model_without_obs, ast_.is_simulator ? "simulator" : "model",
                        model_.name,
                        ast_.is_simulator ? "obs x = ...;" : "obs x[n] ~ normal(...);"));
    return;
  }
  // A proposal draws a state in place of its transition, which a deterministic state has not.
  for (const PendingRelation& p : pending_[ir::BlockKind::Proposal])
    if (const PendingRelation* t = relation_for(ir::BlockKind::Transition, p.rel.var);
        t && t->ok && t->rel.dist == ir::Dist::Dirac)
      error(p.range, fmt::format(msg::proposal_for_deterministic, model_.states[p.rel.var].name));
  if (model_.states.empty())
    error(ast_.name.range, fmt::format(msg::model_without_state, model_.name));
  if (model_.obs.empty())
    diags_.warning(loc(ast_.name.range), fmt::format(msg::model_without_obs, model_.name));
  for (const ast::VarDecl& v : ast_.vars) {
    Symbol* sym = declared(v.name);
    if (!sym || !sym->valid)
      continue;
    const std::string& name = v.name.name;
    if (v.kind == ast::VarDecl::Kind::State) {
      if (!relation_for(ir::BlockKind::Initial, sym->index))
        error(v.name.range, fmt::format(msg::missing_initial_relation, name));
      if (!relation_for(ir::BlockKind::Transition, sym->index))
        error(v.name.range, fmt::format(msg::missing_transition_relation, name));
    } else if (v.kind == ast::VarDecl::Kind::Obs) {
      if (!relation_for(ir::BlockKind::Observation, sym->index))
        error(v.name.range, fmt::format(msg::missing_obs_relation, name));
    }
  }
  check_obs_depend_on_states();
}

// An observation must depend on some state at time t, directly or through the observations
// its relation reads; otherwise it says nothing about the states.
void Lowering::check_obs_depend_on_states() {
  std::vector<PendingRelation>& obs = pending_[ir::BlockKind::Observation];
  std::map<int, bool> informative;
  for (const PendingRelation& p : obs)
    informative[p.rel.var] = !p.ok || p.reads_state; // a failed relation was reported already
  for (bool changed = true; changed;) {
    changed = false;
    for (const PendingRelation& p : obs)
      if (!informative[p.rel.var])
        for (int o : p.reads_now)
          if (informative.count(o) && informative[o]) {
            informative[p.rel.var] = changed = true;
            break;
          }
  }
  for (const PendingRelation& p : obs)
    if (!informative[p.rel.var])
      error(p.range, fmt::format(msg::obs_independent_of_states, model_.obs[p.rel.var].name));
}

void Lowering::order_relations(std::vector<PendingRelation>& rels, ir::Block& block) {
  std::set<int> sampled;
  std::vector<bool> placed(rels.size(), false);
  for (std::size_t done = 0; done < rels.size();) {
    bool progress = false;
    for (std::size_t i = 0; i < rels.size(); ++i) {
      if (placed[i] || !std::includes(sampled.begin(), sampled.end(), rels[i].reads_now.begin(),
                                      rels[i].reads_now.end()))
        continue;
      block.relations.push_back(rels[i].rel);
      sampled.insert(rels[i].rel.var);
      placed[i] = progress = true;
      ++done;
      break; // restart, so that source order decides among the ready ones
    }
    if (!progress) {
      report_cycle(rels, placed);
      return;
    }
  }
}

void Lowering::report_cycle(const std::vector<PendingRelation>& rels,
                            const std::vector<bool>& placed) {
  std::map<int, std::size_t> by_var;
  for (std::size_t i = 0; i < rels.size(); ++i)
    if (!placed[i])
      by_var[rels[i].rel.var] = i;
  // Every unplaced relation reads an unplaced one, so following reads must close a cycle.
  std::vector<std::size_t> path;
  std::size_t i = std::find(placed.begin(), placed.end(), false) - placed.begin();
  while (std::find(path.begin(), path.end(), i) == path.end()) {
    path.push_back(i);
    for (int v : rels[i].reads_now)
      if (by_var.count(v)) {
        i = by_var[v];
        break;
      }
  }
  path.erase(path.begin(), std::find(path.begin(), path.end(), i));
  std::rotate(path.begin(), std::min_element(path.begin(), path.end()), path.end());
  std::string chain = rels[path[0]].target + " reads " + rels[path[1 % path.size()]].target;
  for (std::size_t k = 1; k < path.size(); ++k)
    chain += ", which reads " + rels[path[(k + 1) % path.size()]].target;
  error(rels[path[0]].range, fmt::format(msg::circular_dependency, chain));
}

} // namespace ssm::frontend::lowering
