// The variational methods' registration: the `vi` task's guide families (meanfield, fullrank),
// their options and entry point. LibTorch-free; linked, with the vi room, only into the
// executables of models that variational inference serves (vi/main.cpp).
#pragma once

#include "core/method_registry.h"

namespace ssm {

void register_variational_methods(MethodRegistry& registry);

} // namespace ssm
