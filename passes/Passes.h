// The built-in passes, one per file, and the default pipeline.
#pragma once

#include "Pass.h"

namespace ssm::passes {

std::unique_ptr<Pass> create_augment_lags();         // AugmentLags.cpp
std::unique_ptr<Pass> create_constant_fold();        // ConstantFold.cpp
std::unique_ptr<Pass> create_cse();                  // CommonSubexpressionElimination.cpp
std::unique_ptr<Pass> create_markov_structure();     // MarkovStructure.cpp
std::unique_ptr<Pass> create_linear_gaussian();      // LinearGaussian.cpp
std::unique_ptr<Pass> create_finite_state();         // FiniteState.cpp
std::unique_ptr<Pass> create_density();              // TransitionDensity.cpp
std::unique_ptr<Pass> create_additive_functionals(); // AdditiveFunctionals.cpp
std::unique_ptr<Pass> create_derivatives();          // Differentiate.cpp

// Carries reads of x[t-k], k >= 2, in hidden states (AugmentLags.cpp). Code generation needs a
// first-order state, so the driver applies it after any pipeline; a no-op when already done.
void augment_lags(ir::Model& model);

// The passes `ssmc build` runs when no --passes= is given.
// The structure analyses come after constant-fold and cse, which they rely on to see `2 * 0.5 * x`
// as `x` and one node per value.
inline constexpr std::string_view default_pipeline =
    "augment-lags,constant-fold,cse,markov-structure,linear-gaussian,finite-state,density,"
    "additive-functionals";

} // namespace ssm::passes
