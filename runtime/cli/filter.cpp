// `filter`: the log-likelihood and filtering moments by the method --method names (or `auto`'s
// choice), CSV per time step and a JSON summary.
#include "cli/command.h"
#include "core/error.h"
#include "core/output.h"
#include "core/series.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace ssm::cli {

namespace {

// Below this effective sample size the particle system has collapsed onto about one particle:
// the estimates that follow are not wrong, but rest on a single path.
constexpr double kCollapsedEss = 1.5;

// The warning for a particle filter whose ESS fell to about one particle, or nothing.
std::optional<std::string> collapse_warning(const Context& c, const FilterResult& r,
                                            const ObsData& data) {
  if (r.particles <= 1 || r.ess.empty())
    return std::nullopt;
  const auto lowest = std::min_element(r.ess.begin(), r.ess.end());
  if (!(*lowest < kCollapsedEss))
    return std::nullopt;
  const auto step = static_cast<int64_t>(lowest - r.ess.begin());
  return fmt::format("filter: the effective sample size fell to {:.2f} of {} particles at step {} "
                     "({}): from there the estimates rest on about one particle; try more "
                     "particles (--particles) or a proposal (--method guided)",
                     *lowest, r.particles, step, data_row_text(c.info, data, step));
}

class Filter : public TaskCommand {
public:
  Filter(CLI::App* app, const Context& c)
      : TaskCommand(app, c, Task::Filter,
                    {.data = "Data CSV with a header; observation columns are found by name, one "
                             "row per time step; empty or NA = missing",
                     .json = "Print a JSON summary on standard output"}) {}

  void run(const Context& c, const ParamValues& values) override {
    const Method& m = method(c);
    MethodRun run = start(c);
    if (m.check)
      m.check(run);
    if (!c.model.init_sample || !c.model.transition_sample || !c.model.obs_logpdf)
      throw Error("the model table lacks a kernel needed by filter");
    const std::vector<double> theta = assemble_fixed(c, values);
    const ObsData data = read_data(c, data_);
    check_output_path(out_); // the file itself is created after filtering, as for simulate
    run.fixed = &theta;
    run.data = &data;
    const FilterResult r = run_method(
        c, run, "filter", [&](const MethodRun& one) { return filter_each_series(m, one); });
    if (write_csv())
      write_output(c, out_, filter_csv(c.info, r));
    const std::optional<std::string> collapse = collapse_warning(c, r, data);
    if (collapse)
      warn(c, *collapse);
    if (json_) {
      nlohmann::json j = {{"log_likelihood", r.log_likelihood},
                          {"method", m.name},
                          {"chosen_by", run.automatic ? "auto" : "user"},
                          {"T", r.T},
                          {"elapsed_s", r.elapsed_s},
                          {"model", c.info.name}};
      if (m.filter_json)
        j.update(m.filter_json(run, r));
      if (collapse)
        j["warnings"] = {*collapse};
      print_json(c, j, data);
    }
  }
};

} // namespace

std::unique_ptr<Command> add_filter(CLI::App& app, const Context& c) {
  CLI::App* sub = app.add_subcommand(
      "filter", fmt::format("Filtering: log-likelihood and filtering moments by the method "
                            "--method names; auto chooses {}. CSV "
                            "t,mean_<col>,var_<col>...[,ess],loglik_increment per time step",
                            c.registry.auto_help(Task::Filter)));
  return std::make_unique<Filter>(sub, c);
}

} // namespace ssm::cli
