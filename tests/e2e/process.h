// Running a child process (ssmc or a generated executable) and capturing its standard output,
// standard error and exit status, for the end-to-end tests.
#pragma once

#include <string>
#include <vector>

namespace e2e {

struct ProcessResult {
  int exit_code = -1; // the exit status, or -1 when the child was killed by a signal
  int signal = 0;     // the signal that killed the child, 0 if it exited
  std::string out, err;

  // For test failure messages: the command, its status and what it printed.
  std::string describe() const;
  std::string command;
};

// Runs argv[0] (a path, not searched in PATH) with the given arguments, standard input from
// /dev/null. With terminate_after_ms >= 0 the child is sent SIGTERM after that long if it is still
// running. Throws std::runtime_error when the process cannot be started.
ProcessResult run_process(const std::vector<std::string>& argv, int terminate_after_ms = -1);

} // namespace e2e
