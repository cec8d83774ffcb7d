// A plugin built for an older plugin API: ssmc must refuse it before running any of its code.
#include "passes/plugin.h"

#include <cstdlib>

SSMC_PLUGIN_EXPORT const ssm::passes::PluginAbi ssmc_plugin_abi = {SSMC_PLUGIN_API_VERSION - 1,
                                                                   ssm::passes::plugin_layout()};
SSMC_PLUGIN_EXPORT void ssmc_register_passes() {
  std::abort();
}
