// The subcommands' common options and steps (cli/command.h): options generated from the method
// registry's declarations, --data/--out/--json, the frame's fixed part, outputs and progress.
#include "cli/command.h"
#include "core/output.h"
#include "learning/diagnostics.h"
#include "learning/parameter_space.h"
#include "vi/loader.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <unistd.h>

namespace ssm::cli {

const CLI::Validator& positive_int() {
  static const CLI::Validator validator(
      [](std::string& v) {
        std::string_view s = v; // CLI11 itself accepts blanks around the number and a '+'
        while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
          s.remove_prefix(1);
        while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
          s.remove_suffix(1);
        if (!s.empty() && s.front() == '+')
          s.remove_prefix(1);
        int64_t x = 0;
        auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
        if (s.empty() || ec != std::errc() || end != s.data() + s.size() || x < 1)
          return fmt::format("expected a positive integer, got '{}'", v);
        return std::string();
      },
      "POSITIVE");
  return validator;
}

namespace {

CLI::Option* add_one(CLI::App& app, const std::string& help, const MethodOption& o,
                     OptionValue& slot) {
  slot = o.default_value;
  CLI::Option* opt = nullptr;
  // A flag given or negated (`--marginals`, `--no-marginals`) sets the value; one not given leaves
  // it empty, so that the method picks its default (bound directly, CLI11 writes false).
  if (auto* flag = std::get_if<std::optional<bool>>(&slot))
    return app.add_flag_function(
        o.flag, [flag](std::int64_t count) { *flag = count > 0; }, help);
  if (auto* names = std::get_if<std::vector<std::string>>(&slot))
    opt = app.add_option(o.flag, *names, help)->allow_extra_args(false);
  else if (auto* i = std::get_if<int64_t>(&slot))
    opt = app.add_option(o.flag, *i, help);
  else if (auto* x = std::get_if<double>(&slot))
    opt = app.add_option(o.flag, *x, help);
  else
    opt = app.add_option(o.flag, std::get<std::string>(slot), help);
  if (!o.type_name.empty())
    opt->type_name(o.type_name);
  if (o.show_default && !std::holds_alternative<std::vector<std::string>>(slot))
    opt->capture_default_str();
  if (o.check == MethodOption::Check::Positive)
    opt->check(positive_int());
  else if (o.check == MethodOption::Check::Fraction)
    opt->check(CLI::Range(0.0, 1.0));
  if (!o.choices.empty())
    opt->check(CLI::IsMember(o.choices));
  return opt;
}

} // namespace

void add_method_options(CLI::App& app, const MethodRegistry& registry, Task task,
                        OptionValues& values) {
  for (const MethodOption& o : registry.options(task))
    add_one(app, registry.option_help(task, o), o, values.slot(o.key()));
}

TaskCommand::TaskCommand(CLI::App* app, const Context& c, Task task, const Help& help)
    : Command(app), task_(task) {
  app->add_option("--data", data_, help.data)->required()->type_name("FILE.csv");
  if (c.registry.methods(task).size() > 1) { // a task with one method has no --method
    std::vector<std::string> choices = {"auto"};
    for (const std::string& name : c.registry.names(task))
      choices.push_back(name);
    const MethodOption o = {.flag = "--method",
                            .default_value = choices.front(),
                            .type_name = help.method_type.empty()
                                             ? fmt::format("{}", fmt::join(choices, "|"))
                                             : help.method_type,
                            .choices = choices};
    add_one(*app,
            fmt::format("auto ({}), {}", c.registry.auto_help(task), c.registry.method_list(task)),
            o, options_.slot(o.key()));
  }
  add_method_options(*app, c.registry, task, options_);
  app->add_option("--out", out_, "Output CSV file (default: standard output, none with --json)")
      ->type_name("FILE.csv");
  app->add_flag("--json", json_, help.json);
}

const Method& TaskCommand::method(const Context& c, const ssm_model& model,
                                  const ModelInfo& info) const {
  if (!options_.has("--method"))
    return *c.registry.methods(task_).front();
  const std::string& name = options_.word("--method");
  if (name == "auto") {
    // When none applies, the first in auto's order refuses with its own message (as
    // "decode: the state is not finite ..."), before the registry's generic one.
    if (c.registry.applicable(task_, model, info).empty())
      for (const Method* m : c.registry.ranked(task_))
        if (m->check) {
          m->check(start(c, model, info));
          break;
        }
    const Method& chosen = auto_choice(c, model, info);
    check_flags_read(c, chosen);
    return chosen;
  }
  const Method& named = *c.registry.find(task_, name); // a declared choice
  check_flags_read(c, named);
  return named;
}

void TaskCommand::check_flags_read(const Context& c, const Method& chosen) const {
  const bool automatic = options_.word("--method") == "auto";
  for (const MethodOption& o : c.registry.options(task_)) {
    const std::string key = o.key();
    if (app_->count(key) == 0 || std::ranges::count(chosen.options, key) > 0)
      continue;
    std::vector<std::string> readers;
    for (const Method* m : c.registry.methods(task_))
      if (std::ranges::count(m->options, key) > 0)
        readers.push_back(m->name);
    if (readers.empty()) // the task's own option
      continue;
    const std::string why = fmt::format("{} does not apply to --method {} (it applies to {})", key,
                                        chosen.name, fmt::join(readers, ", "));
    if (!automatic)
      throw UsageError(fmt::format("{}: {}", app_->get_name(), why));
    warn(c, fmt::format("{} {}, which auto chose for this model", app_->get_name(), why));
  }
}

MethodRun TaskCommand::start(const Context& c, const ssm_model& model,
                             const ModelInfo& info) const {
  const bool automatic = !options_.has("--method") || options_.word("--method") == "auto";
  MethodRun run{model, info, options_, c.globals.seed, automatic, c.globals.threads};
  run.registry = &c.registry;
  return run;
}

std::unique_ptr<PriorDensity> read_prior(const MethodRun& run, const std::string& who) {
  const std::string& path = run.options.word("--prior");
  if (path.empty())
    return nullptr;
  const ParameterSpace space(run.info, run.options.names("--fix"));
  if (space.dimension() == 0) // the method says there is nothing to infer
    return nullptr;
  return load_prior_density_loaded(run, path, space.coordinate_names(), who);
}

std::vector<double> assemble_fixed(const Context& c, const ParamValues& values) {
  std::vector<double> fixed = assemble_theta(c.info, values);
  std::vector<double> data = read_data_values(c.info, c.globals.data_values_file);
  fixed.insert(fixed.end(), data.begin(), data.end());
  return fixed;
}

std::string stan_name(const std::string& name, const std::vector<int64_t>& shape, int64_t k) {
  std::string out = name;
  int64_t rest = k, stride = 1;
  for (int64_t dim : shape)
    stride *= dim;
  for (int64_t dim : shape) {
    stride /= dim;
    out += fmt::format(".{}", rest / stride + 1);
    rest %= stride;
  }
  return out;
}

std::vector<std::string> simulator_stan_columns(const ModelInfo& info) {
  std::vector<std::string> out;
  for (int p = 0; p < info.simulation->params; ++p)
    for (int64_t k = 0; k < info.state[p].size; ++k)
      out.push_back(stan_name(info.state[p].name, info.state[p].shape, k));
  return out;
}

std::vector<std::pair<const ParamInfo*, int64_t>>
param_components(const ModelInfo& info, const std::vector<std::string>& names) {
  std::vector<std::pair<const ParamInfo*, int64_t>> out;
  for (const std::string& name : names) {
    const ParamInfo* p = info.find_param(name);
    for (int64_t k = 0; k < p->size; ++k)
      out.push_back({p, k});
  }
  return out;
}

nlohmann::json draw_summary_json(const std::vector<std::vector<double>>& chains) {
  const DrawSummary s = summarize_draws(chains);
  return {{"mean", s.mean},
          {"sd", s.sd},
          {"q5", s.q5},
          {"q50", s.q50},
          {"q95", s.q95},
          {"rhat", s.rhat},
          {"ess_bulk", s.ess_bulk},
          {"ess_tail", s.ess_tail},
          {"mcse_mean", s.mcse_mean}};
}

std::string chain_path(const std::string& out, size_t chain, size_t chains) {
  if (chains == 1)
    return out;
  const std::filesystem::path p(out);
  return (p.parent_path() /
          fmt::format("{}_{}{}", p.stem().string(), chain + 1, p.extension().string()))
      .string();
}

void write_output(const Context& c, const std::string& path, const std::string& text) {
  OutputFile file(path, c.out);
  file.write(text);
  file.commit();
}

void warn(const Context& c, const std::string& message) {
  fmt::print(c.err, "{}: warning: {}\n", c.prog, message);
}

ObsData read_data(const Context& c, const std::string& path, bool reads_latents) {
  ObsData data = read_observations_file(c.info, path);
  if (reads_latents || c.info.step != "n" || c.info.n_state == 0)
    return data;
  std::ifstream in(path);
  const CsvReader reader(in, path);
  std::vector<std::string> given;
  for (const VarInfo& v : c.info.state)
    for (const std::string& name : column_names(v.name, v.shape))
      if (std::find(reader.header().begin(), reader.header().end(), name) != reader.header().end())
        given.push_back(name);
  if (!given.empty())
    warn(c, fmt::format("{} has column{} {} named as latent variables of the model: only `sample "
                        "--method gibbs` reads them (labelled items, covariates); this method "
                        "draws the latents of every item",
                        path, given.size() > 1 ? "s" : "", fmt::join(given, ", ")));
  return data;
}

void print_json(const Context& c, const nlohmann::json& j) {
  fmt::print(c.out, "{}\n", j.dump(2));
  std::fflush(c.out);
}

void print_json(const Context& c, nlohmann::json j, const ObsData& data) {
  if (!data.series.start.empty())
    j["series"] = data.series.names;
  print_json(c, j);
}

Progress::Progress(const Context& c, const char* what)
    : err_(c.err), prog_(c.prog), tty_(::isatty(::fileno(c.err)) == 1),
      enabled_(c.globals.progress == "always" || (c.globals.progress == "auto" && tty_)),
      immediate_(c.globals.progress == "always"), what_(what) {}

void Progress::operator()(int64_t done, int64_t total) {
  if (!enabled_)
    return;
  auto now = std::chrono::steady_clock::now();
  // A phase's first and last steps are shown at once, the others at most every 200 ms.
  if ((!immediate_ && now - start_ < std::chrono::seconds(1)) ||
      (!fresh_ && done + 1 < total && now - last_ < std::chrono::milliseconds(200)))
    return;
  fresh_ = false;
  last_ = now;
  shown_ = true;
  fmt::print(err_, "{}{} {}{}: {}/{} ({}%){}", tty_ ? "\r\033[K" : "", prog_, what_, phase_,
             done + 1, total, 100 * (done + 1) / total, tty_ ? "" : "\n");
  std::fflush(err_);
}

void Progress::phase(const char* phase) {
  phase_ = fmt::format(" ({})", phase);
  fresh_ = true;
}

void Progress::finish() {
  if (shown_ && tty_)
    fmt::print(err_, "\r\033[K");
}

} // namespace ssm::cli
