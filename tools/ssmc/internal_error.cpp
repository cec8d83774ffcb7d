// Internal compiler errors: see internal_error.h.
#include "internal_error.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <iostream>
#include <vector>

namespace ssm::tools {

namespace {
std::string current_activity = "reading the command line";
} // namespace

void set_activity(std::string activity) {
  current_activity = std::move(activity);
}

const std::string& activity() {
  return current_activity;
}

int internal_compiler_error(const std::string& what, int argc, char** argv) {
  const std::vector<std::string> command(argv, argv + argc);
  fmt::print(std::cerr,
             "ssmc: internal compiler error while {}: {}\n"
             "ssmc: note: this is a bug in ssmc, not in the model; please report it with the "
             "model and this command: {}\n",
             current_activity, what, fmt::join(command, " "));
  return kInternalErrorStatus;
}

int plugin_fault(const std::string& plugin, const std::string& what) {
  fmt::print(std::cerr,
             "ssmc: error: the plugin '{}' failed while {}: {}\n"
             "ssmc: note: this is a bug in the plugin, not in ssmc or the model; please report it "
             "to the plugin's authors\n",
             plugin, current_activity, what);
  return kInternalErrorStatus;
}

} // namespace ssm::tools
