// The learning methods' registration: their names, when they apply, their options and entry
// points (optimize's lbfgs today).
#pragma once

#include "core/method_registry.h"

namespace ssm {

inline constexpr const char* kLbfgsName = "lbfgs";

void register_learning_methods(MethodRegistry& registry);

} // namespace ssm
