// The built-in passes, one per file, and the default pipeline.
#pragma once

#include "pass.h"

namespace ssm::passes {

std::unique_ptr<Pass> create_augment_lags();         // augment_lags.cpp
std::unique_ptr<Pass> create_constant_fold();        // constant_fold.cpp
std::unique_ptr<Pass> create_cse();                  // cse.cpp
std::unique_ptr<Pass> create_markov_structure();     // markov_structure.cpp
std::unique_ptr<Pass> create_linear_gaussian();      // linear_gaussian.cpp
std::unique_ptr<Pass> create_finite_state();         // finite_state.cpp
std::unique_ptr<Pass> create_density();              // density.cpp
std::unique_ptr<Pass> create_additive_functionals(); // additive_functionals.cpp
std::unique_ptr<Pass> create_derivatives();          // derivatives.cpp
std::unique_ptr<Pass> create_plate_items();          // plate_items.cpp
std::unique_ptr<Pass> create_net_outputs();          // net_outputs.cpp
std::unique_ptr<Pass> create_simulator_draws();      // simulator_draws.cpp
std::unique_ptr<Pass> create_em_m_steps();           // em_m_steps.cpp
std::unique_ptr<Pass> create_sde_estimators();       // sde_estimators.cpp

// Carries reads of x[t-k], k >= 2, in hidden states (augment_lags.cpp). Code generation needs a
// first-order state, so the driver applies it after any pipeline; a no-op when already done.
void augment_lags(ir::Model& model);

// Makes a plate model a state-space model whose steps are its items (plate_items.cpp): the
// driver applies it before any pipeline, so that every analysis and kernel sees a state-space
// model; a no-op on other models.
void lower_plate_items(ir::Model& model);

// Makes a simulator a one-step state-space model whose states are its parameters, drawn from
// their priors, and its latent variables (simulator_draws.cpp): the driver applies it before any
// pipeline; a no-op on other models. A simulator's parameters must not be matrices.
void lower_simulator_draws(ir::Model& model);

// Makes each network call a hidden state that the runtime computes (net_outputs.cpp): the driver
// applies it after lower_plate_items, before any pipeline; a no-op on models without networks.
void hoist_net_calls(ir::Model& model);

// The passes `ssmc build` runs when no --passes= is given.
// The structure analyses come after constant-fold and cse, which they rely on to see `2 * 0.5 * x`
// as `x` and one node per value.
inline constexpr std::string_view default_pipeline =
    "augment-lags,constant-fold,cse,markov-structure,linear-gaussian,finite-state,density,"
    "additive-functionals,sde-estimators,em-m-steps";

} // namespace ssm::passes
