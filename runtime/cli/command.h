// What the subcommands share: the context they run in, the interface each one implements (one
// file per subcommand: simulate.cpp, filter.cpp, smooth.cpp, decode.cpp, info.cpp), and the
// helpers that declare their common options and run their common steps.
#pragma once

#include "core/csv.h"
#include "core/metadata.h"
#include "core/method_registry.h"
#include "core/params.h"
#include "core/thread_pool.h"
#include "kernel/abi.h"
#include "learning/prior_density.h"

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace ssm::cli {

// The global options (given before or after the subcommand).
struct Globals {
  int threads = 1;
  uint64_t seed = 1;
  std::vector<std::string> params;
  std::string params_file;
  std::string data_values_file;  // --data-file
  std::string progress = "auto"; // auto (on a terminal, for runs over a second), always, never
};

struct Context {
  const ssm_model& model;
  ModelInfo& info; // smooth --functional narrows its functionals
  const MethodRegistry& registry;
  const Globals& globals;
  std::string prog;
  std::FILE* out;
  std::FILE* err;
};

// A usage error found after parsing (exit code 2, as CLI11's own).
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One subcommand: declares its options on its CLI11 app, then runs once they are parsed.
class Command {
public:
  explicit Command(CLI::App* app) : app_(app) {}
  virtual ~Command() = default;
  bool parsed() const { return app_->parsed(); }
  // `values`: the parameters' values (model defaults < --params < --param).
  virtual void run(const Context& c, const ParamValues& values) = 0;

protected:
  CLI::App* app_;
};

std::unique_ptr<Command> add_simulate(CLI::App& app, const Context& c);
std::unique_ptr<Command> add_filter(CLI::App& app, const Context& c);
std::unique_ptr<Command> add_smooth(CLI::App& app, const Context& c);
std::unique_ptr<Command> add_decode(CLI::App& app, const Context& c);
std::unique_ptr<Command> add_score(CLI::App& app, const Context& c);
std::unique_ptr<Command> add_optimize(CLI::App& app, const Context& c);
std::unique_ptr<Command> add_rml(CLI::App& app, const Context& c);
std::unique_ptr<Command> add_sample(CLI::App& app, const Context& c);
// Null for a model it does not serve (a state-space model).
std::unique_ptr<Command> add_vi(CLI::App& app, const Context& c);
std::unique_ptr<Command> add_info(CLI::App& app, const Context& c);
// transform.cpp: draws of the parameters to their unconstrained coordinates, and back.
std::unique_ptr<Command> add_unconstrain(CLI::App& app, const Context& c);
std::unique_ptr<Command> add_constrain(CLI::App& app, const Context& c);
// A simulator's subcommands: simulate_pairs.cpp (its `simulate`), nre.cpp, posterior.cpp,
// abc.cpp.
std::unique_ptr<Command> add_simulate_pairs(CLI::App& app, const Context& c);
std::unique_ptr<Command> add_nre(CLI::App& app, const Context& c);
std::unique_ptr<Command> add_posterior(CLI::App& app, const Context& c);
std::unique_ptr<Command> add_abc(CLI::App& app, const Context& c);

// Every registered method, in registration order (the order of --help).
const MethodRegistry& method_registry();

// CLI::PositiveNumber's message spells out a range up to DBL_MAX; this says what is expected.
const CLI::Validator& positive_int();

// The options of a task's methods, generated from their declarations (core/method_registry.h),
// parsed into `values`.
void add_method_options(CLI::App& app, const MethodRegistry& registry, Task task,
                        OptionValues& values);

// A subcommand of a task whose methods are registered: --data FILE.csv (required), --method
// (`auto` or a registered method; only when the task has more than one), the methods'
// options, --out FILE.csv and --json, in that order.
class TaskCommand : public Command {
public:
  struct Help {
    std::string data{}, json{};
    std::string method_type{}; // --method's type in --help; empty: its choices, '|'-separated
  };
  TaskCommand(CLI::App* app, const Context& c, Task task, const Help& help);

protected:
  // The method to run and its run, without data yet: on the model, or on a view of it that the
  // command runs the task's methods on (score's, whose functionals are the score terms).
  const Method& method(const Context& c) const { return method(c, c.model, c.info); }
  const Method& method(const Context& c, const ssm_model& model, const ModelInfo& info) const;
  MethodRun start(const Context& c) const { return start(c, c.model, c.info); }
  MethodRun start(const Context& c, const ssm_model& model, const ModelInfo& info) const;
  // A flag given on the command line that `chosen` does not read while another method of the
  // task does (optimize --method lbfgs --e-step ffbsi): a UsageError when the method was named,
  // a warning when `auto` chose it. Flags no method lists are the task's own and always read.
  void check_flags_read(const Context& c, const Method& chosen) const;
  // What `auto` runs: the registry's first applicable method, unless the command knows better
  // from its own options (smooth's --marginals).
  virtual const Method& auto_choice(const Context& c, const ssm_model& model,
                                    const ModelInfo& info) const {
    return c.registry.choose(task_, model, info);
  }
  // Whether to write the CSV: to --out, or to standard output without --json.
  bool write_csv() const { return !out_.empty() || !json_; }

  Task task_;
  std::string data_, out_;
  bool json_ = false;
  OptionValues options_;
};

// --prior's density (sample, optimize --map), over the coordinates of the parameters that
// --fix leaves learned, read by the vi module (which holds LibTorch); null when not given.
// Throws ssm::Error, prefixed by `who`, for a file that cannot be read or whose columns differ.
std::unique_ptr<PriorDensity> read_prior(const MethodRun& run, const std::string& who);

// The fixed part of the kernels' frame: parameters, then data values.
std::vector<double> assemble_fixed(const Context& c, const ParamValues& values);

// Stan's name of component k of a value of `shape`: `sigma`, `mu.2`, `A.1.3` (1-based,
// row-major).
std::string stan_name(const std::string& name, const std::vector<int64_t>& shape, int64_t k);
// A simulator's parameters' columns by Stan's names (its first states: lfi/simulator.h).
std::vector<std::string> simulator_stan_columns(const ModelInfo& info);
// The components of the parameters named, (parameter, component) in order: the columns of
// draws in Stan's CSV layout (`sample`, `vi` on a model's parameters).
std::vector<std::pair<const ParamInfo*, int64_t>>
param_components(const ModelInfo& info, const std::vector<std::string>& names);
// A scalar's draws summarised (learning/diagnostics.h) as `sample` and `posterior` print it: mean,
// sd, q5, q50, q95, rhat, ess_bulk, ess_tail, mcse_mean.
nlohmann::json draw_summary_json(const std::vector<std::vector<double>>& chains);

// FILE.csv for one chain, FILE_1.csv ... for several (CmdStan's naming).
std::string chain_path(const std::string& out, size_t chain, size_t chains);

// Writes `text` to the --out file (atomically) or to standard output.
void write_output(const Context& c, const std::string& path, const std::string& text);

// A data item's or input's type as the model declares it: "int[0..5]", "vector[3]",
// "real(0, inf)", "simplex[4]" (info, --help).
std::string type_string(const VarInfo& v);
// Prints "<program>: warning: <message>" on standard error, as errors are printed.
void warn(const Context& c, const std::string& message);
// Prints a JSON summary on standard output.
void print_json(const Context& c, const nlohmann::json& j);
// The same for a summary of a run on `data`: with several series, "series" lists their names.
void print_json(const Context& c, nlohmann::json j, const ObsData& data);

// The data file's observations (read_observations_file), with a warning when a plate model's
// data has columns named as its latent variables and the method does not read them
// (`reads_latents`: only sample's gibbs does): the others draw the latents as if the columns
// were not there, which a covariate written as a latent makes wrong.
ObsData read_data(const Context& c, const std::string& path, bool reads_latents = false);

// Progress on standard error (--progress): by default on a terminal only, and only for runs long
// enough to need it.
class Progress {
public:
  Progress(const Context& c, const char* what); // what: "filter", "smooth"
  void operator()(int64_t done, int64_t total); // `done` counts from 0: done + 1 steps are done
  void phase(const char* phase);                // the steps from now on: "backward pass"
  void finish();

private:
  std::FILE* err_;
  std::string prog_;
  // immediate_: from the first step (--progress always); tty_: redraw one line, else a line each
  bool tty_, enabled_, immediate_;
  const char* what_;
  std::string phase_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_ = start_;
  bool shown_ = false, fresh_ = true;
};

// Runs `entry` (a method's entry point) with a pool of --threads threads and progress on the
// terminal (`what`: "filter", "smooth"); the run's data must be set.
template <class Entry>
auto run_method(const Context& c, MethodRun& run, const char* what, const Entry& entry) {
  ThreadPool pool(c.globals.threads);
  Progress progress(c, what);
  run.pool = &pool;
  run.progress = [&](int64_t t, int64_t n) { progress(t, n); };
  run.progress_phase = [&](const char* phase) { progress.phase(phase); };
  try {
    auto result = entry(run);
    progress.finish();
    run.pool = nullptr;
    run.progress = nullptr;
    run.progress_phase = nullptr;
    return result;
  } catch (...) {
    progress.finish();
    run.pool = nullptr;
    run.progress = nullptr;
    run.progress_phase = nullptr;
    throw;
  }
}

} // namespace ssm::cli
