// Warnings: legal but probably not what was meant.
#include "lowering.h"

#include <cmath>

namespace ssm::frontend::lowering {

// A state that no observation depends on, directly or through the states it drives, is not
// informed by the data: its filtering distribution is its prior dynamics.
void Lowering::warn_states_without_influence() {
  if (model_.obs.empty())
    return; // said already: the model declares no observation
  std::vector<const PendingRelation*> relations;
  for (ir::BlockKind kind : {ir::BlockKind::Initial, ir::BlockKind::Transition})
    for (const PendingRelation& p : pending_[kind])
      relations.push_back(&p);
  const std::vector<bool> influential =
      reaching_observations(model_.states.size(), pending_[ir::BlockKind::Observation], relations,
                            &PendingRelation::states_read);
  for (std::size_t x = 0; x < model_.states.size(); ++x)
    if (!influential[x])
      diags_.warning(model_.states[x].loc,
                     fmt::format("state '{}' does not influence any observation, directly or "
                                 "through other states: the data say nothing about it",
                                 model_.states[x].name));
}

// A latent variable that no observation reads, directly or through other latents, is not
// informed by the data.
void Lowering::warn_latents_without_influence() {
  if (model_.obs.empty())
    return;
  std::vector<const PendingRelation*> relations;
  for (const PendingRelation& p : pending_latents_)
    relations.push_back(&p);
  const std::vector<bool> influential = reaching_observations(
      model_.latents.size(), pending_[static_block()], relations, &PendingRelation::latents_read);
  for (std::size_t z = 0; z < model_.latents.size(); ++z)
    if (!influential[z])
      diags_.warning(model_.latents[z].loc,
                     fmt::format("latent variable '{}' does not influence any observation, "
                                 "directly or through other latent variables: the data say "
                                 "nothing about it",
                                 model_.latents[z].name));
}

// Which of n variables (states, or latents) an observation depends on: those the observations'
// relations read (`reads` of each), then, to a fixed point, those read by the relations of
// variables already found.
std::vector<bool> Lowering::reaching_observations(std::size_t n,
                                                  const std::vector<PendingRelation>& observations,
                                                  const std::vector<const PendingRelation*>& rels,
                                                  std::set<int> PendingRelation::*reads) {
  std::vector<bool> found(n, false);
  for (const PendingRelation& p : observations)
    for (int v : p.*reads)
      found[v] = true;
  for (bool changed = true; changed;) {
    changed = false;
    for (const PendingRelation* p : rels)
      if (found[p->rel.var])
        for (int v : (*p).*reads)
          if (!found[v])
            found[v] = changed = true;
  }
  return found;
}

// A prior whose support reaches outside the declared bounds real(lo, hi).
void Lowering::warn_priors_outside_bounds() {
  for (const ir::Relation& rel : model_.prior.relations) {
    const ir::ParamDecl& p = model_.params[rel.var];
    if (p.lower == -INFINITY && p.upper == INFINITY)
      continue;
    const ir::DistInfo& info = ir::dist_info(rel.dist);
    double lo = info.lower, hi = info.upper;
    if (rel.dist == ir::Dist::Uniform || rel.dist == ir::Dist::TruncatedNormal) {
      const ir::Node& a = model_.prior.nodes[rel.args[rel.args.size() - 2]];
      const ir::Node& b = model_.prior.nodes[rel.args[rel.args.size() - 1]];
      if (a.shape.is_scalar() && b.shape.is_scalar())
        lo = a.values[0], hi = b.values[0];
    }
    if (lo < p.lower || hi > p.upper)
      diags_.warning(rel.loc, fmt::format("the prior {} of '{}' has support [{}, {}], which "
                                          "reaches outside its declared bounds [{}, {}]",
                                          info.name, p.name, lo, hi, p.lower, p.upper));
  }
}

} // namespace ssm::frontend::lowering
