// The warning for a latent variable that no observation depends on (model_warnings.h).
#include "model_warnings.h"

#include "messages.h"

#include "frontend.h"

#include <fmt/format.h>

namespace ssm::frontend {

// Such a latent variable is not informed by the data.
void warn_latents_without_influence(const ir::Model& model, DiagnosticEngine& diags) {
  if (model.obs.empty())
    return;
  const std::vector<bool> influential =
      reaching_observations(model.latents.size(), ir::Op::Latent, {&model.plate, &model.simulator},
                            ir::VarKind::Obs, ir::VarKind::Latent);
  for (std::size_t z = 0; z < model.latents.size(); ++z)
    if (!influential[z])
      diags.warning(model.latents[z].loc,
                    fmt::format(msg::latent_without_influence, model.latents[z].name));
}

} // namespace ssm::frontend
