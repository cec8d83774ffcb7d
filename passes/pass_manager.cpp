// Pass registry and pipeline runner: see pass.h and pass_manager.h.
#include "pass_manager.h"

#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes.h"
#include "plugin_loader.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <new>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <system_error>

namespace ssm::passes {

namespace {
std::map<std::string, PassFactory, std::less<>>& registry() {
  static std::map<std::string, PassFactory, std::less<>> passes = [] {
    std::map<std::string, PassFactory, std::less<>> builtins;
    builtins["augment-lags"] = create_augment_lags;
    builtins["constant-fold"] = create_constant_fold;
    builtins["cse"] = create_cse;
    builtins["markov-structure"] = create_markov_structure;
    builtins["linear-gaussian"] = create_linear_gaussian;
    builtins["finite-state"] = create_finite_state;
    builtins["density"] = create_density;
    builtins["additive-functionals"] = create_additive_functionals;
    builtins["derivatives"] = create_derivatives;
    builtins["plate-items"] = create_plate_items;
    builtins["simulator-draws"] = create_simulator_draws;
    builtins["net-outputs"] = create_net_outputs;
    builtins["em-m-steps"] = create_em_m_steps;
    builtins["sde-estimators"] = create_sde_estimators;
    return builtins;
  }();
  return passes;
}

void verify_or_throw(const ir::Model& model, std::string_view after) {
  auto errors = ir::verify(model);
  if (!errors.empty())
    throw ir::InternalError(fmt::format("the IR is invalid after {}:\n  {}\n{}", after,
                                        fmt::join(errors, "\n  "), ir::print(model)));
}
} // namespace

PluginFault::PluginFault(const std::string& plugin, const std::string& pass,
                         const std::string& what)
    : std::logic_error(fmt::format("in pass '{}': {}", pass, what)), plugin_(plugin) {}

DuplicatePassError::DuplicatePassError(const std::string& pass)
    : PassError(fmt::format("a pass named '{}' is already registered", pass)), pass_(pass) {}

void register_pass(std::string name, PassFactory factory) {
  // Names are the pipeline's syntax: "a,b,c".
  if (name.empty() || name.find_first_of(", \t\n") != std::string::npos)
    throw PassError(fmt::format("invalid pass name '{}': a pass name is not empty and has no "
                                "comma or space",
                                name));
  if (!factory)
    throw PassError(fmt::format("pass '{}' is registered without a factory", name));
  auto [it, inserted] = registry().try_emplace(name, std::move(factory));
  if (!inserted)
    throw DuplicatePassError(name);
}

std::unique_ptr<Pass> create_pass(std::string_view name) {
  auto it = registry().find(name);
  return it == registry().end() ? nullptr : it->second();
}

std::vector<std::string> registered_passes() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : registry())
    names.push_back(name);
  return names;
}

void PassManager::add_pipeline(std::string_view names) {
  size_t start = 0;
  while (start <= names.size()) {
    size_t end = std::min(names.find(',', start), names.size());
    std::string_view name = names.substr(start, end - start);
    if (!name.empty()) {
      auto pass = create_pass(name);
      if (!pass)
        throw PassError(fmt::format("unknown pass '{}'; known passes: {}", name,
                                    fmt::join(registered_passes(), ", ")));
      add(std::move(pass), plugin_of(name)); // by the name it was registered under
    }
    start = end + 1;
  }
}

void PassManager::run(ir::Model& model, PassContext& context, std::ostream& log) {
  using clock = std::chrono::steady_clock;
  if (options_.verify)
    verify_or_throw(model, "the frontend");
  std::vector<std::pair<std::string, double>> times;
  for (auto& [pass, plugin] : passes_) {
    const std::string name(pass->name());
    // A broken invariant: the plugin's bug, or ssmc's.
    auto fault = [&](const std::string& what) {
      if (plugin)
        throw PluginFault(*plugin, name, what);
      throw ir::InternalError(fmt::format("in pass '{}': {}", name, what));
    };
    auto start = clock::now();
    try {
      pass->run(model, context);
    } catch (const PassError&) {
      throw; // a pass's own error for the user
    } catch (const std::system_error&) {
      throw; // the environment's (a file a pass writes, std::filesystem)
    } catch (const std::bad_alloc&) {
      throw;
    } catch (const std::exception& e) {
      // A plugin reports the user's problems with any std::runtime_error (docs/passes.md); ssmc's
      // own passes use PassError, so that another std::runtime_error (std::range_error) of theirs
      // is a bug, as is any other exception (std::out_of_range) of either.
      if (plugin && dynamic_cast<const std::runtime_error*>(&e))
        throw;
      fault(e.what());
    } catch (...) {
      fault("an exception of unknown type");
    }
    times.emplace_back(name, std::chrono::duration<double>(clock::now() - start).count());
    if (options_.verify) {
      try {
        verify_or_throw(model, fmt::format("pass '{}'", name));
      } catch (const ir::InternalError& e) {
        if (plugin) // the plugin's transform broke the IR
          throw PluginFault(*plugin, name, e.what());
        throw;
      }
    }
    const auto& pa = options_.print_after;
    if (std::find(pa.begin(), pa.end(), name) != pa.end() ||
        std::find(pa.begin(), pa.end(), "all") != pa.end())
      fmt::print(log, "; IR after {}\n{}\n", name, ir::print(model));
  }
  if (options_.time_passes) {
    double total = 0;
    for (auto& [name, s] : times)
      total += s;
    fmt::print(log, "pass timing (total {:.3f} ms)\n", total * 1e3);
    for (auto& [name, s] : times)
      fmt::print(log, "  {:>10.3f} ms  {:5.1f}%  {}\n", s * 1e3, total > 0 ? 100 * s / total : 0.0,
                 name);
  }
}

} // namespace ssm::passes
