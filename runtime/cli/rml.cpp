// `rml`: recursive maximum likelihood over the observations as a stream (learning/rml.h), the
// score increments from the online smoother --method names: the averaged estimate as JSON (and,
// with --save, as a --params file), the parameters after each observation as CSV (--out),
// written as the run goes so that memory does not grow with the stream.
#include "cli/command.h"
#include "core/error.h"
#include "core/output.h"
#include "core/params.h"
#include "learning/parameter_space.h"
#include "smc/proposal.h"

#include <fmt/format.h>

#include <optional>

namespace ssm::cli {

namespace {

class Rml : public TaskCommand {
public:
  Rml(CLI::App* app, const Context& c)
      : TaskCommand(app, c, Task::Rml,
                    {.data = "Data CSV, as for filter: the stream, series after series",
                     .json = "Print a JSON summary on standard output",
                     .method_type = "SMOOTHER"}) {
    app->add_option("--save", save_,
                    "Write the averaged estimate as a --params file ({\"name\": value, ...})")
        ->type_name("FILE.json");
    app->add_option("--thin", thin_, "--out: a row every K observations (and the last one)")
        ->check(positive_int())
        ->type_name("K")
        ->capture_default_str();
  }

  void run(const Context& c, const ParamValues& values) override {
    const Method& m = method(c);
    MethodRun run = start(c);
    if (Refusal why = m.why_not(c.model, c.info))
      throw Error(fmt::format("rml --method {}: {}", m.name, *why));
    if (m.check)
      m.check(run);
    const std::vector<double> theta = assemble_fixed(c, values);
    const ObsData data = read_data(c, data_);
    const std::vector<std::string> inputs = {data_, c.globals.params_file,
                                             c.globals.data_values_file};
    check_output_path(out_, inputs);
    check_output_path(save_, inputs);
    run.fixed = &theta;
    run.data = &data;

    if (!out_.empty() && !save_.empty() && same_file(out_, save_))
      throw Error(fmt::format("rml: --out and --save name the same file, {}", out_));
    // The trajectory streams into the output file, renamed into place only when the run
    // succeeds; on standard output its rows appear as they are computed.
    std::optional<OutputFile> trajectory;
    std::vector<std::pair<int64_t, int64_t>> columns; // (theta offset, component), learned
    if (write_csv()) {
      trajectory.emplace(out_, c.out);
      std::vector<std::string> header;
      const ParameterSpace space(c.info, options_.names("--fix"));
      for (const LearnedParam& l : space.learned()) {
        const ParamInfo& p = c.info.params[l.index];
        const std::vector<std::string> names = column_names(p.name, p.shape);
        for (int64_t k = 0; k < p.size; ++k) {
          header.push_back(csv_name(names[k]));
          columns.push_back({p.offset, k});
        }
      }
      trajectory->write(fmt::format("observation,{}{},step_size,{}\n", series_header(data.series),
                                    c.info.step, fmt::join(header, ",")));
    }
    const bool several = !data.series.start.empty();
    auto write_row = [&](int64_t k, int64_t series, int64_t t, double step, const double* th) {
      fmt::memory_buffer row;
      fmt::format_to(std::back_inserter(row), "{},{}{},{}", k,
                     several ? data.series.names[series] + "," : std::string(), t,
                     format_double(step));
      for (const auto& [offset, comp] : columns)
        fmt::format_to(std::back_inserter(row), ",{}", format_double(th[offset + comp]));
      row.push_back('\n');
      trajectory->write({row.data(), row.size()});
    };
    // The last step is written whatever --thin: kept until the next one replaces it.
    struct Step {
      int64_t k = 0, series = 0, t = 0;
      double step = 0;
      std::vector<double> theta;
    } unwritten;
    const ParameterTrace trace = [&](int64_t k, int64_t series, int64_t t, double step,
                                     const double* th) {
      if (!trajectory)
        return;
      if (k % thin_ == 0) {
        write_row(k, series, t, step, th);
        unwritten.k = 0;
      } else {
        unwritten.k = k;
        unwritten.series = series;
        unwritten.t = t;
        unwritten.step = step;
        unwritten.theta.assign(th, th + c.info.n_theta);
      }
    };
    const RecursiveFit fit =
        run_method(c, run, "rml", [&](const MethodRun& one) { return m.rml(one, trace); });
    if (trajectory && unwritten.k > 0)
      write_row(unwritten.k, unwritten.series, unwritten.t, unwritten.step, unwritten.theta.data());
    if (trajectory)
      trajectory->commit();
    std::vector<double> averaged = theta, last = theta;
    std::copy(fit.averaged.begin(), fit.averaged.end(), averaged.begin());
    std::copy(fit.theta.begin(), fit.theta.end(), last.begin());
    const nlohmann::json params = params_json(c.info, averaged);
    if (!save_.empty())
      write_output(c, save_, params.dump(2) + "\n");
    // A step bounded by --clip at most observations: the step size is too large for the
    // parameters' scale, and they drift by --clip a step.
    std::vector<std::string> warnings;
    if (fit.observations >= 20 && 2 * fit.clipped > fit.observations)
      warnings.push_back(fmt::format(
          "rml: the step was clipped (--clip {:g}) at {} of {} observations, so the "
          "parameters moved by --clip a step: --step-size {:g} is likely too large "
          "for their scale",
          options_.real("--clip"), fit.clipped, fit.observations, options_.real("--step-size")));
    if (fit.averaged_over == 0)
      warnings.push_back(fmt::format("rml: the stream ended before observation {} "
                                     "(--average-from), so the estimate is the last iterate, not "
                                     "an average",
                                     fit.average_from));
    if (json_) {
      nlohmann::json j = {{"model", c.info.name},
                          {"method", fit.smoother},
                          {"chosen_by", run.automatic ? "auto" : "user"},
                          {"filter", fit.filter},
                          {"particles", fit.particles},
                          {"backward_samples", fit.backward_samples},
                          {"params", params},
                          {"last", params_json(c.info, last)},
                          {"learned", fit.learned},
                          {"observations", fit.observations},
                          {"average_from", fit.average_from},
                          {"averaged_over", fit.averaged_over},
                          {"clip", options_.real("--clip")},
                          {"clipped_steps", fit.clipped},
                          {"step_size",
                           {{"gamma0", options_.real("--step-size")},
                            {"hold", options_.integer("--step-hold")},
                            {"decay", options_.real("--step-decay")}}},
                          {"log_likelihood", fit.log_likelihood},
                          {"T", data.T},
                          {"elapsed_s", fit.elapsed_s},
                          {"filter_s", fit.filter_s},
                          {"threads", c.globals.threads}};
      if (!warnings.empty())
        j["warnings"] = warnings;
      add_random_weight_caveat(j, c.info, fit.filter == "random-weight");
      print_json(c, j, data);
    }
    for (const std::string& w : warnings)
      warn(c, w);
  }

private:
  std::string save_;
  int64_t thin_ = 1;
};

} // namespace

std::unique_ptr<Command> add_rml(CLI::App& app, const Context& c) {
  CLI::App* sub = app.add_subcommand(
      "rml", fmt::format("Recursive maximum likelihood: one pass over the observations, the "
                         "parameters moved after each by a step along the gradient of its "
                         "predictive log-likelihood, estimated by an online smoother in memory "
                         "that does not grow with the stream: {}. JSON: the averaged estimate; "
                         "CSV: the parameters after each observation",
                         c.registry.method_list(Task::Rml)));
  return std::make_unique<Rml>(sub, c);
}

} // namespace ssm::cli
