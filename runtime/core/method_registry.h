// The method registry: every inference method (filters, smoothers, decoding, and whatever comes
// later) registers its name, the task it serves, when it applies to a model, its rank for `auto`,
// the command-line options it reads and its entry point. The command line, `info`, `--help`, the
// refusals and the JSON's `chosen_by` read it, so a method is declared in one place: its
// registration (smc/filter_methods.cpp, exact/methods.cpp, smoothing/methods.cpp).
#pragma once

#include "core/csv.h"
#include "core/metadata.h"
#include "core/results.h"
#include "core/thread_pool.h"
#include "kernel/abi.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ssm {

// What a method computes; each task is a subcommand of the command line.
enum class Task { Filter, Smooth, Decode, Optimize, Sample, Vi, Rml };

// The value of one option: an integer, a real, a word (a choice or a file), a switch that may
// be left unset (--marginals / --no-marginals) or a repeatable list of names.
using OptionValue =
    std::variant<int64_t, double, std::string, std::optional<bool>, std::vector<std::string>>;

// One command-line option, declared once by the room whose methods read it; the command line
// generates the option, its --help line and its parsing from this.
struct MethodOption {
  enum class Check { None, Positive, Fraction }; // Positive: >= 1; Fraction: in [0, 1]
  std::string flag{};                            // "--lag", "--marginals,!--no-marginals"
  std::string help{};
  // Whether its help starts with the names of the methods that read it ("paris, bis: ...").
  bool users_in_help = false;
  OptionValue default_value{};
  Check check = Check::None;
  std::string type_name{};            // empty: the parser's own ("INT", "FLOAT")
  std::vector<std::string> choices{}; // a word among these
  bool show_default = true;
  // Its help where another task's methods read it (the particle filter's options, read by the
  // smoothers' forward pass); empty: the same help.
  std::string help_elsewhere{};

  // Its key in OptionValues: its first name ("--marginals" of "--marginals,!--no-marginals").
  std::string key() const { return flag.substr(0, flag.find(',')); }
};

// The options' values after parsing, by flag (the first name of MethodOption::flag).
class OptionValues {
public:
  OptionValue& slot(const std::string& flag) { return values_[flag]; }
  bool has(const std::string& flag) const { return values_.contains(flag); }
  int64_t integer(const std::string& flag) const { return std::get<int64_t>(values_.at(flag)); }
  double real(const std::string& flag) const { return std::get<double>(values_.at(flag)); }
  const std::string& word(const std::string& flag) const {
    return std::get<std::string>(values_.at(flag));
  }
  std::optional<bool> toggle(const std::string& flag) const {
    return std::get<std::optional<bool>>(values_.at(flag));
  }
  const std::vector<std::string>& names(const std::string& flag) const {
    return std::get<std::vector<std::string>>(values_.at(flag));
  }
  const OptionValue& value(const std::string& flag) const { return values_.at(flag); }

private:
  std::map<std::string, OptionValue> values_; // nodes never move: the parser writes into them
};

class MethodRegistry;
class PriorDensity; // learning/prior_density.h

// Everything a method needs: its checks, the model and options; its entry point, the data too.
struct MethodRun {
  const ssm_model& model;
  const ModelInfo& info;
  const OptionValues& options;
  uint64_t seed = 1;
  bool automatic = false;                     // chosen by `auto`
  int threads = 1;                            // --threads
  const std::vector<double>* fixed = nullptr; // parameters, then data values
  const ObsData* data = nullptr;
  ThreadPool* pool = nullptr; // with `threads` threads, while the entry point runs
  std::function<void(int64_t, int64_t)> progress{}; // (t, T) after each step; may be empty
  // Names the phase that `progress` reports from then on ("backward pass"); may be empty.
  std::function<void(const char*)> progress_phase{};
  const MethodRegistry* registry = nullptr; // the methods a refusal may point to
  // The caller reads only the log-likelihood (PMMH): a filter may skip its per-step outputs.
  bool likelihood_only = false;
  // --prior: a density over the learned parameters' unconstrained coordinates that replaces
  // their priors in the model (sample, optimize --map); may be null.
  const PriorDensity* prior = nullptr;

  // The particle filter `auto` would choose for this model: what a refusal of an exact method
  // suggests instead ("auto" without a registry).
  std::string particle_choice() const;
};

// Why a method does not apply to a model; nullopt when it does.
using Refusal = std::optional<std::string>;

// Why a task other than `vi` cannot run the model, when it calls networks: the kernels read a
// network's output from the state, and only `vi` computes it so far.
inline Refusal networks_refusal(const ModelInfo& info) {
  if (!info.density_calls_networks()) // a guide's networks serve vi alone
    return std::nullopt;
  return "the model calls networks, which only vi evaluates so far";
}

struct Method {
  std::string name;
  Task task = Task::Filter;
  // Its entry in --method's help: the name, then `title` (what the name stands for) and `note`
  // (what it needs), each in parentheses when given.
  std::string title, note;
  // `auto`: the applicable method of least rank is chosen, and --help says how: `auto_help` is
  // a format string of the name ("{} for a finite-state one", "else {}"); empty: not mentioned.
  int rank = 0;
  std::string auto_help;
  bool particles = false; // a particle method (the smoothers' forward pass is one)
  std::function<Refusal(const ssm_model&, const ModelInfo&)> applies; // empty: always
  // A particle filter whose log-likelihood estimate is not unbiased for this model says why (the
  // random-weight filter with estimates made positive by Wald's identity): `auto` does not choose
  // it, and PMMH and SMC^2 refuse it. Empty: unbiased wherever it applies.
  std::function<Refusal(const ssm_model&, const ModelInfo&)> biased_likelihood;
  // Why `auto` passes over a method that applies to the model, when a better one does too (paris
  // with density estimates that have no bound: bis). Empty: never.
  std::function<Refusal(const ssm_model&, const ModelInfo&)> auto_passes_over;
  std::vector<std::string> options; // the flags it reads
  // Refuses, before any work (no data in the run yet), with a message of its own (throws
  // ssm::Error); may be empty.
  std::function<void(const MethodRun&)> check;
  // A method that fits something of its own to the data (the variational smoother's guide):
  // other commands that run its task's methods (score's smoothers) refuse it, and its task
  // gives it every series at once (one fit over them all; it combines its results itself).
  bool fits_to_data = false;
  // The entry point of its task, and its part of the JSON summary.
  std::function<FilterResult(const MethodRun&)> filter;
  std::function<SmoothResult(const MethodRun&)> smooth;
  std::function<Decoding(const MethodRun&)> decode;
  std::function<Optimum(const MethodRun&)> optimize;
  std::function<Posterior(const MethodRun&)> sample;
  std::function<VariationalFit(const MethodRun&)> vi;
  // `vi` on a model that is not over a plate: variational inference of its parameters.
  std::function<ParameterVariationalFit(const MethodRun&)> vi_parameters;
  std::function<RecursiveFit(const MethodRun&, const ParameterTrace&)> rml;
  std::function<nlohmann::json(const MethodRun&, const FilterResult&)> filter_json;
  std::function<nlohmann::json(const MethodRun&, const SmoothResult&)> smooth_json;

  Refusal likelihood_bias(const ssm_model& model, const ModelInfo& info) const {
    return biased_likelihood ? biased_likelihood(model, info) : std::nullopt;
  }
  // Whether `auto` may choose it where it applies.
  bool auto_may_choose(const ssm_model& model, const ModelInfo& info) const {
    return !likelihood_bias(model, info) && !(auto_passes_over && auto_passes_over(model, info));
  }

  Refusal why_not(const ssm_model& model, const ModelInfo& info) const {
    if (task != Task::Vi)
      if (Refusal why = networks_refusal(info))
        return why;
    return applies ? applies(model, info) : std::nullopt;
  }
};

class MethodRegistry {
public:
  void add(Method method) { methods_.push_back(std::move(method)); }
  // Options are listed in --help in the order they are added.
  void add_option(Task task, MethodOption option) { options_[task].push_back(std::move(option)); }

  // In registration order (the order of --help).
  std::vector<const Method*> methods(Task task) const;
  std::vector<std::string> names(Task task) const;
  const Method* find(Task task, std::string_view name) const;
  // In auto's order (rank, then registration).
  std::vector<const Method*> ranked(Task task) const;
  // The methods that apply to the model, `auto`'s choice first (rank order).
  std::vector<const Method*> applicable(Task task, const ssm_model& model,
                                        const ModelInfo& info) const;
  // `auto`'s choice: the applicable method of least rank (among particle methods only when
  // `particles`). Throws ssm::Error when none applies.
  const Method& choose(Task task, const ssm_model& model, const ModelInfo& info,
                       bool particles = false) const;
  const std::vector<MethodOption>& options(Task task) const;
  // Every option of the task at its default: what a method runs with when another task's method
  // calls it (optimize's exact smoother).
  OptionValues default_options(Task task) const;

  // Help texts: "a, b (note) or c" (`particles`: the particle methods only, "a, b, c", without
  // titles), and what `auto` does ("x for ..., else y").
  std::string method_list(Task task) const;
  std::string particle_list(Task task) const;
  std::string auto_help(Task task, bool particles = false) const;
  // An option's help, with the names of the methods that read it when it says so.
  std::string option_help(Task task, const MethodOption& option) const;

private:
  std::vector<Method> methods_;
  std::map<Task, std::vector<MethodOption>> options_;
};

// A network's hidden layers as --hidden gives them: widths separated by commas ("64,64"), or ""
// for none. Throws ssm::Error, prefixed by `who`, for anything else.
std::vector<int64_t> parse_layer_widths(const std::string& text, const std::string& who);

} // namespace ssm
