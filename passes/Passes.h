// The built-in passes, one per file, and the default pipeline.
#pragma once

#include "Pass.h"

namespace ssm::passes {

std::unique_ptr<Pass> create_constant_fold();    // ConstantFold.cpp
std::unique_ptr<Pass> create_cse();              // CommonSubexpressionElimination.cpp
std::unique_ptr<Pass> create_markov_structure(); // MarkovStructure.cpp

// The passes `ssmc build` runs when no --passes= is given.
inline constexpr std::string_view default_pipeline = "constant-fold,cse,markov-structure";

} // namespace ssm::passes
