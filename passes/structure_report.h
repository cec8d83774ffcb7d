// The structure report: what the analyses (markov-structure, linear-gaussian, finite-state,
// density) found, as text for `ssmc check` and as JSON for `ssmc check --format=json` and the
// compiled model's metadata. The JSON schema is documented in docs/compiler.md.
#pragma once

#include "pass.h"

#include <nlohmann/json.hpp>

#include <string>

namespace ssm::passes {

// Runs the structure analyses the pipeline did not run, so every report is complete whatever
// --passes= says.
void run_missing_structure_analyses(ir::Model& model, PassContext& context);

// The Markov report and one line per other analysis: `ssmc check`, and `info` of a compiled model.
std::string structure_summary(const PassContext& context);
// Every analysis in full: `ssmc check --structure`.
std::string structure_report(const ir::Model& model, const PassContext& context);
// {"model", "source", "n_state", "n_obs", "n_theta", "markov", "linear_gaussian",
//  "finite_state", "density", "sde", "functionals", "em_steps", "guide" (state_guide_json)}; an
//  analysis that did not run is null. A simulator adds
// "model_kind" and "static_model" (static_model_json), and its state-space analyses are null; a
// plate model made into items (passes/plate_items.cpp) has "items": "n".
nlohmann::json structure_json(const ir::Model& model, const PassContext& context);

// A state-space model's `guide x[t] ~ backward(...)`, the family `smooth --method variational`
// fits, as a line for `ssmc check`: the statement, where it is, and its encoder; "" without one.
std::string state_guide_report(const ir::Model& model);
// The same as JSON (structure_json's "guide"): {"state", "encoder": "mlp" or "linear", "network"
// (null for a linear encoder), "reads", "loc"}, or null.
nlohmann::json state_guide_json(const ir::Model& model);

// "inputs (--inputs FILE.csv): u : real\ndata items (--data-file FILE.json): n : int\n": what
// the executable will ask for besides the observations (`ssmc check`); empty when nothing.
std::string declared_inputs_report(const ir::Model& model);

// What a plate model or a simulator is, its relations and what they read: `ssmc check` of such a
// model, before a plate model is made into items. For a simulator, also that the state-space
// analyses do not apply. Empty for a state-space model.
std::string static_model_report(const ir::Model& model);
// The same as JSON: {"plate": "n" or null, "n_latent", "latents", "relations",
// "inference_available"}.
nlohmann::json static_model_json(const ir::Model& model);

} // namespace ssm::passes
