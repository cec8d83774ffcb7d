// The learning methods' registration: their names, when they apply, their options and entry
// points (optimize's lbfgs, em and adam, sample's pmmh, smc2 and gibbs, rml's smoothers).
#pragma once

#include "core/method_registry.h"

namespace ssm {

inline constexpr const char* kLbfgsName = "lbfgs";
inline constexpr const char* kEmName = "em";
inline constexpr const char* kAdamName = "adam";
inline constexpr const char* kPmmhName = "pmmh";
inline constexpr const char* kSmc2Name = "smc2";
inline constexpr const char* kGibbsName = "gibbs";

void register_learning_methods(MethodRegistry& registry);

} // namespace ssm
