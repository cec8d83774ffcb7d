// `smooth`: per-t smoothing moments and the model's functionals by the smoother --method names
// (or `auto`'s choice), CSV per time step and a JSON summary.
#include "smoothing/smooth.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/output.h"
#include "core/series.h"
#include "smoothing/methods.h"

#include <fmt/format.h>

#include <sys/resource.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

namespace ssm::cli {

namespace {

// Below this share of accepted backward proposals, the backward kernel hardly works: mcmc moves
// stay at the ancestor, rejection falls back to exact O(N) draws.
constexpr double kLowAcceptance = 0.01;

// This program's peak resident memory in MB: VmHWM of its own address space. (getrusage's
// ru_maxrss carries the high-water mark of the process before exec, so a run started by a large
// parent, a Python benchmark holding a big CSV, would report the parent's.)
std::optional<double> peak_rss_mb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.starts_with("VmHWM:")) {
      char* end = nullptr;
      const double kb = std::strtod(line.c_str() + 6, &end);
      if (end != line.c_str() + 6)
        return kb / 1024.0;
    }
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) == 0)
    return static_cast<double>(usage.ru_maxrss) / 1024.0;
  return std::nullopt;
}

std::optional<std::string> acceptance_warning(const SmoothResult& r) {
  const nlohmann::json& d = r.details;
  if (!d.is_object() || !d.contains("acceptance_rate") || !d.contains("proposals") ||
      d.at("proposals").get<int64_t>() == 0)
    return std::nullopt;
  const double rate = d.at("acceptance_rate").get<double>();
  if (!(rate < kLowAcceptance))
    return std::nullopt;
  const std::string backward = d.value("backward", std::string("the backward kernel"));
  return fmt::format("smooth: the backward kernel ({}) accepted {:.2f}% of its {} proposals: {}; "
                     "try --backward exact, or more particles",
                     backward, 100 * rate, d.at("proposals").get<int64_t>(),
                     backward == "mcmc" ? "the backward draws barely move from the ancestors"
                                        : "most draws fell back to exact O(N) draws");
}

class Smooth : public TaskCommand {
public:
  Smooth(CLI::App* app, const Context& c)
      : TaskCommand(app, c, Task::Smooth,
                    {.data = "Data CSV, as for filter",
                     .json = "Print a JSON summary on standard output",
                     .method_type = "METHOD"}) {}

  // paris, unless the marginals are wanted (the default): then ffbsi when the model has a density
  // bound (smooth_auto_choice). A flag that only one of the two reads picks it, whatever the
  // rule: --backward-samples, --mcmc-steps or --backward mcmc paris, --trajectories ffbsi (when
  // it applies). The user asked for what it does. So do --backward mcmc, --mcmc-steps and
  // --start-estimates where auto passes over paris for bis (an SDE whose estimates have no
  // bound).
  const Method& auto_choice(const Context& c, const ssm_model& model,
                            const ModelInfo& info) const override {
    const Method& first = c.registry.choose(task_, model, info);
    const Method* paris = c.registry.find(task_, "paris");
    if (paris && !paris->why_not(model, info) && !paris->auto_may_choose(model, info) &&
        (options_.word("--backward") == "mcmc" || app_->count("--mcmc-steps") > 0 ||
         app_->count("--start-estimates") > 0))
      return *paris;
    const Method& rule =
        smooth_auto_choice(c.registry, model, info, options_.toggle("--marginals").value_or(true));
    const Method* ffbsi = c.registry.find(task_, "ffbsi");
    const std::optional<SmoothMethod> id = parse_smooth_method(first.name);
    if (!ffbsi || !id || !is_online(*id) || ffbsi->why_not(model, info))
      return rule; // no choice between an online smoother and ffbsi here
    auto asks_for = [&](const Method& m, const Method& other) {
      for (const std::string& flag : m.options)
        if (app_->count(flag) > 0 && std::ranges::count(other.options, flag) == 0)
          return true;
      return false;
    };
    if (options_.word("--backward") == "mcmc" || asks_for(first, *ffbsi))
      return first;
    if (asks_for(*ffbsi, first))
      return *ffbsi;
    return rule;
  }

  void run(const Context& c, const ParamValues& values) override {
    const Method& m = method(c);
    MethodRun run = start(c);
    select_functionals(c.info, options_.names("--functional"));
    const std::vector<double> theta = assemble_fixed(c, values);
    const ObsData data = read_data(c, data_);
    run.fixed = &theta;
    run.data = &data;
    if (m.check)
      m.check(run); // before any work
    check_output_path(out_);
    const SmoothResult r = run_method(c, run, "smooth", [&](const MethodRun& one) {
      return m.fits_to_data ? m.smooth(one) : smooth_each_series(m, one);
    });
    if (write_csv())
      write_output(c, out_, smooth_csv(c.info, r));
    // The method's own warnings (in its details) and the backward acceptance's.
    std::vector<std::string> warnings;
    if (r.details.contains("warnings"))
      warnings = r.details["warnings"].get<std::vector<std::string>>();
    if (const std::optional<std::string> low_acceptance = acceptance_warning(r))
      warnings.push_back(*low_acceptance);
    for (const std::string& w : warnings)
      warn(c, w);
    if (json_) {
      nlohmann::json j = m.smooth_json(run, r);
      if (j.contains("details") && j["details"].is_object())
        j["details"].erase("warnings"); // lifted to the top level
      if (!warnings.empty())
        j["warnings"] = warnings;
      j["threads"] = c.globals.threads;
      if (const std::optional<double> peak = peak_rss_mb())
        j["peak_rss_mb"] = *peak;
      if (run.automatic)
        j["chosen_by"] = "auto";
      print_json(c, j, data);
    }
  }
};

} // namespace

std::unique_ptr<Command> add_smooth(CLI::App& app, const Context& c) {
  CLI::App* sub = app.add_subcommand(
      "smooth", "Smoothing: per-t smoothing mean and variance of each state component and the "
                "model's functionals. CSV t,mean_<col>,var_<col>...,<per-t functionals>");
  return std::make_unique<Smooth>(sub, c);
}

} // namespace ssm::cli
