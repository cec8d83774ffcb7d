// Internal compiler errors: what the driver is doing, so that a broken invariant is reported as a
// bug in ssmc with its context and a status of its own, never as the model's fault.
#pragma once

#include <string>

namespace ssm::tools {

// The exit status of an internal compiler error (EX_SOFTWARE of sysexits.h), distinct from a
// model's errors (1) and usage errors (2).
inline constexpr int kInternalErrorStatus = 70;

// What the driver is doing, for the messages: "running the passes on m.ssm".
void set_activity(std::string activity);
const std::string& activity();

// Prints "ssmc: internal compiler error while <activity>: <what>" and the command to report;
// returns kInternalErrorStatus.
int internal_compiler_error(const std::string& what, int argc, char** argv);

// Prints "ssmc: error: the plugin 'P' failed while <activity>: <what>" and a note that the bug is
// the plugin's; returns kInternalErrorStatus.
int plugin_fault(const std::string& plugin, const std::string& what);

} // namespace ssm::tools
