// Runs a pipeline of named passes, verifying the IR after each, with optional printing and timing
// (the driver's --passes=, --print-after= and --time-passes).
#pragma once

#include "pass.h"

#include <iosfwd>
#include <stdexcept>

namespace ssm::passes {

struct PassManagerOptions {
  std::vector<std::string> print_after; // pass names, or "all"
  bool time_passes = false;
  bool verify = true;
};

class PassError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// A pass of a plugin (--load-pass) failed other than by a PassError: a bug in the plugin, which the
// driver reports as such, naming the plugin, never as the model's fault or ssmc's.
class PluginFault : public std::logic_error {
public:
  PluginFault(const std::string& plugin, const std::string& pass, const std::string& what);
  const std::string& plugin() const { return plugin_; }

private:
  std::string plugin_;
};

// Thrown by register_pass for a name that is already registered.
class DuplicatePassError : public PassError {
public:
  explicit DuplicatePassError(const std::string& pass);
  const std::string& pass() const { return pass_; }

private:
  std::string pass_;
};

class PassManager {
public:
  explicit PassManager(PassManagerOptions options = {}) : options_(std::move(options)) {}

  // Parses "a,b,c"; throws PassError naming an unknown pass and listing the known ones.
  void add_pipeline(std::string_view names);
  void add(std::unique_ptr<Pass> pass) { passes_.push_back(std::move(pass)); }

  // Throws PassError if the verifier rejects the IR after a pass (a compiler bug).
  void run(ir::Model& model, PassContext& context, std::ostream& log);

private:
  PassManagerOptions options_;
  std::vector<std::unique_ptr<Pass>> passes_;
};

} // namespace ssm::passes
