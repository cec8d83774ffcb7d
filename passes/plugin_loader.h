// Loading pass plugins (`--load-pass=PATH`): see plugin.h for what a plugin provides and
// docs/passes.md for how to write one.
#pragma once

#include "pass_manager.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ssm::passes {

// Loads the shared library at `path`, checks that it was built for this ssmc's plugin interface,
// and calls its entry point, which registers its passes. Loading the same file twice registers
// its passes once. Throws PassError, naming the path, if the file is missing or not a plugin, was
// built for another interface, or registers a pass whose name is taken. Returns the names of the
// passes it registered.
std::vector<std::string> load_plugin(const std::string& path);

// The path of the plugin that registered the pass `name`; nullopt for a built-in pass.
std::optional<std::string> plugin_of(std::string_view pass);

} // namespace ssm::passes
