// The variational methods' registration: the `vi` task's guide families (meanfield, fullrank),
// their options and entry point, which loads the LibTorch part of the room on its first call
// (vi/loader.h). LibTorch-free: every executable links it.
#pragma once

#include "core/method_registry.h"

namespace ssm {

void register_variational_methods(MethodRegistry& registry);

} // namespace ssm
