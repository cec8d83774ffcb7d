// Pass plugin loading: see plugin_loader.h.
#include "plugin_loader.h"

#include "plugin.h"

#include <fmt/format.h>

#include <algorithm>
#include <dlfcn.h>
#include <filesystem>
#include <map>
#include <system_error>

namespace fs = std::filesystem;

namespace ssm::passes {

namespace {

struct Loaded {
  std::string path;
  std::vector<std::string> passes;
};

// Keyed by dlopen's handle, which is the same for two paths to one file.
std::map<void*, Loaded>& loaded_plugins() {
  static std::map<void*, Loaded> plugins;
  return plugins;
}

// Which plugin registered a pass, for the message about a name clash.
std::string owner_of(const std::string& pass) {
  if (std::optional<std::string> plugin = plugin_of(pass))
    return fmt::format("the plugin '{}'", *plugin);
  return "a built-in pass of ssmc";
}

} // namespace

std::optional<std::string> plugin_of(std::string_view pass) {
  for (const auto& [handle, plugin] : loaded_plugins())
    if (std::find(plugin.passes.begin(), plugin.passes.end(), pass) != plugin.passes.end())
      return plugin.path;
  return std::nullopt;
}

std::vector<std::string> load_plugin(const std::string& path) {
  auto fail = [&](std::string_view why) {
    return PassError(fmt::format("cannot load pass plugin '{}': {}", path, why));
  };
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw fail("no such file");
  if (fs::is_directory(path, ec))
    throw fail("it is a directory");
  // dlopen searches the library path for a name without a slash; a plugin is a file.
  std::string file = path.find('/') == std::string::npos ? "./" + path : path;
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    throw fail(dlerror());
  if (auto it = loaded_plugins().find(handle); it != loaded_plugins().end()) {
    dlclose(handle); // dlopen counts references: keep one
    return it->second.passes;
  }

  // Nothing of the plugin runs before its interface is known to match: its entry point would use
  // the IR types with its own idea of their layout.
  auto* abi = static_cast<const PluginAbi*>(dlsym(handle, "ssmc_plugin_abi"));
  auto* entry = reinterpret_cast<void (*)()>(dlsym(handle, "ssmc_register_passes"));
  if (!entry || !abi) {
    dlclose(handle);
    throw fail(fmt::format("it does not define {} (is it an ssmc pass plugin? its entry point is "
                           "defined with SSMC_PASS_PLUGIN from ssmc/passes/plugin.h)",
                           !entry ? "the entry point 'ssmc_register_passes'"
                                  : "'ssmc_plugin_abi', the interface version it was built for"));
  }
  if (abi->api_version != plugin_abi.api_version || abi->layout != plugin_abi.layout) {
    std::string why =
        abi->api_version != plugin_abi.api_version
            ? fmt::format("it was built for plugin API version {}, this ssmc implements version {}",
                          abi->api_version, plugin_abi.api_version)
            : fmt::format("it was built against other headers of plugin API version {} (the "
                          "layout of the IR types differs)",
                          abi->api_version);
    dlclose(handle);
    throw fail(why + "; rebuild the plugin against this ssmc's headers");
  }

  std::vector<std::string> before = registered_passes();
  // On failure the passes registered before it stay registered, so the library stays loaded.
  try {
    entry();
  } catch (const DuplicatePassError& e) {
    bool own = !std::binary_search(before.begin(), before.end(), e.pass());
    throw fail(fmt::format("it registers the pass '{}', a name already taken by {}", e.pass(),
                           own ? "another pass of the same plugin" : owner_of(e.pass())));
  } catch (const PassError& e) {
    throw fail(e.what());
  }
  Loaded plugin{path, {}};
  for (const std::string& name : registered_passes())
    if (!std::binary_search(before.begin(), before.end(), name))
      plugin.passes.push_back(name);
  loaded_plugins().emplace(handle, plugin);
  return plugin.passes;
}

} // namespace ssm::passes
