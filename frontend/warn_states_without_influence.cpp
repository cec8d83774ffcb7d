// The warning for a state that no observation depends on (model_warnings.h).
#include "model_warnings.h"

#include "messages.h"

#include "frontend.h"

#include <fmt/format.h>

namespace ssm::frontend {

// Such a state is not informed by the data: its filtering distribution is its prior dynamics.
void warn_states_without_influence(const ir::Model& model, DiagnosticEngine& diags) {
  if (model.obs.empty())
    return; // said already: the model declares no observation
  std::vector<bool> influential = reaching_observations(
      model.states.size(), ir::Op::State, {&model.initial, &model.transition, &model.observation},
      ir::VarKind::Obs, ir::VarKind::State);
  // A deterministic state (`s[t] = ...`) that reads a state the data inform is informed too: it
  // is a function of it (a running total of a level).
  for (bool changed = true; changed;) {
    changed = false;
    for (const ir::Relation& rel : model.transition.relations) {
      if (rel.kind != ir::VarKind::State || rel.dist != ir::Dist::Dirac || influential[rel.var])
        continue;
      const std::vector<bool> reached = ir::reached_from(model.transition, rel.args);
      for (std::size_t i = 0; i < reached.size(); ++i) {
        const ir::Node& node = model.transition.nodes[i];
        if (reached[i] && node.op == ir::Op::State && node.var != rel.var &&
            influential[node.var]) {
          influential[rel.var] = changed = true;
          break;
        }
      }
    }
  }
  for (std::size_t x = 0; x < model.states.size(); ++x)
    if (!influential[x])
      diags.warning(model.states[x].loc,
                    fmt::format(msg::state_without_influence, model.states[x].name));
}

} // namespace ssm::frontend
