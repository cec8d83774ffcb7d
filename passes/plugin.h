// The interface of a pass plugin: a shared library that `ssmc --load-pass=PATH` loads to add passes
// to the registry (docs/passes.md). A plugin defines its entry point with SSMC_PASS_PLUGIN:
//
//   #include <ssmc/passes/plugin.h>
//   SSMC_PASS_PLUGIN() {
//     ssm::passes::register_pass("my-pass", [] { return std::make_unique<MyPass>(); });
//   }
//
// The plugin is C++ compiled against these headers and calls into ssmc directly (the IR types,
// register_pass, the printer), so ssmc only loads a plugin built for the same interface: the API
// version below and the sizes of the IR and pass types, checked before any plugin code runs.
#pragma once

#include "pass.h"

#include <cstdint>

// Incremented whenever a change to pass.h or ir/ir.h (or another header a plugin may use) breaks
// plugins compiled against the previous headers.
#define SSMC_PLUGIN_API_VERSION 1

namespace ssm::passes {

// What a plugin was compiled against. Its layout never changes, so any ssmc can read any plugin's.
struct PluginAbi {
  std::uint32_t api_version;
  std::uint32_t layout; // a hash of the sizes of the types a plugin shares with ssmc
};

namespace detail {
constexpr std::uint32_t mix(std::uint32_t h, std::size_t v) {
  return (h ^ static_cast<std::uint32_t>(v)) * 16777619u; // FNV-1a step
}
} // namespace detail

// Catches a header that changed without a version bump (a field added to a struct, say): such a
// plugin would otherwise read ssmc's objects with the wrong layout.
constexpr std::uint32_t plugin_layout() {
  std::uint32_t h = 2166136261u;
  for (std::size_t size :
       {sizeof(ir::Shape), sizeof(ir::Node), sizeof(ir::Relation), sizeof(ir::Block),
        sizeof(ir::ParamDecl), sizeof(ir::VarDecl), sizeof(ir::ConstDecl), sizeof(ir::Model),
        sizeof(RelationReads), sizeof(MarkovStructure), sizeof(PassContext), sizeof(Pass),
        sizeof(PassFactory), sizeof(std::string), sizeof(std::vector<int>)})
    h = detail::mix(h, size);
  return h;
}

inline constexpr PluginAbi plugin_abi{SSMC_PLUGIN_API_VERSION, plugin_layout()};

} // namespace ssm::passes

// The two symbols ssmc looks up in a plugin: `ssmc_plugin_abi` (checked first) and the entry point
// `void ssmc_register_passes(void)`, which calls register_pass for each of the plugin's passes.
#define SSMC_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))
#define SSMC_PASS_PLUGIN()                                                                         \
  SSMC_PLUGIN_EXPORT const ::ssm::passes::PluginAbi ssmc_plugin_abi = ::ssm::passes::plugin_abi;   \
  SSMC_PLUGIN_EXPORT void ssmc_register_passes()
