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
  const std::vector<bool> influential = reaching_observations(
      model.states.size(), ir::Op::State, {&model.initial, &model.transition, &model.observation},
      ir::VarKind::Obs, ir::VarKind::State);
  for (std::size_t x = 0; x < model.states.size(); ++x)
    if (!influential[x])
      diags.warning(model.states[x].loc,
                    fmt::format(msg::state_without_influence, model.states[x].name));
}

} // namespace ssm::frontend
