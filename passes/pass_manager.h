// Runs a pipeline of named passes, verifying the IR after each, with optional printing and timing
// (the driver's --passes=, --print-after= and --time-passes).
#pragma once

#include "pass.h"

#include <iosfwd>
#include <optional>
#include <stdexcept>
#include <string>

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
  // `plugin`: the file of the plugin that registered the pass, which a failure of it blames.
  void add(std::unique_ptr<Pass> pass, std::optional<std::string> plugin = std::nullopt) {
    passes_.push_back({std::move(pass), std::move(plugin)});
  }

  // Throws the pass's PassError (the user's problem), a PluginFault for a plugin's pass that
  // fails otherwise or leaves invalid IR, and an ir::InternalError for ssmc's own.
  void run(ir::Model& model, PassContext& context, std::ostream& log);

private:
  struct Entry {
    std::unique_ptr<Pass> pass;
    std::optional<std::string> plugin;
  };
  PassManagerOptions options_;
  std::vector<Entry> passes_;
};

} // namespace ssm::passes
