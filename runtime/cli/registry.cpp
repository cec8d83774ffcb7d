// The method registry of the executable: every room registers its methods here, in the order
// --help lists them (particle filters, then exact filters; smoothers, the variational one last;
// decoders; learning methods; variational methods).
#include "cli/command.h"
#include "exact/methods.h"
#include "learning/methods.h"
#include "smc/filter_methods.h"
#include "smoothing/methods.h"
#include "vi/methods.h"
#include "vsmooth/variational_smoother.h"

namespace ssm::cli {

const MethodRegistry& method_registry() {
  // Built in place: registrations keep the registry's address (the smoothers ask it for the
  // forward pass's particle filter).
  static MethodRegistry registry;
  static const bool registered = [] {
    register_particle_filters(registry);
    register_exact_filters(registry);
    register_smoothers(registry); // after the particle filters: its forward pass is one
    register_variational_smoother(registry);
    register_exact_decoders(registry);
    register_learning_methods(registry);
    register_variational_methods(registry);
    return true;
  }();
  (void)registered;
  return registry;
}

} // namespace ssm::cli
