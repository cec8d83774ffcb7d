// `vi`: variational inference for a plate model by the guide family --method names (the vi
// room's methods, which load LibTorch when they run: vi/loader.h): the trained parameters and the
// bounds on log p(x) as JSON, per item as CSV (--out), the parameters as a --params file
// (--save).
#include "cli/command.h"
#include "core/error.h"
#include "core/output.h"
#include "core/series.h"
#include "vi/variational.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <numeric>

namespace ssm::cli {

namespace {

double mean(const std::vector<double>& v) {
  return v.empty() ? NAN : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// The standard error of the mean over the items of independent estimates with these errors.
double mean_se(const std::vector<double>& se) {
  double ss = 0;
  for (double s : se)
    ss += s * s;
  return se.empty() ? NAN : std::sqrt(ss) / static_cast<double>(se.size());
}

nlohmann::json bounds_json(const VariationalFit::Bounds& b) {
  return {{"elbo", mean(b.elbo)},  {"elbo_se", mean_se(b.elbo_se)}, {"kl", mean(b.kl)},
          {"iwae", mean(b.iwae)},  {"iwae_se", mean_se(b.iwae_se)}, {"iwae_samples", b.samples},
          {"items", b.elbo.size()}};
}

class Vi : public TaskCommand {
public:
  Vi(CLI::App* app, const Context& c)
      : TaskCommand(app, c, Task::Vi,
                    {.data = "Data CSV, one row per item; observation columns are found by name",
                     .json = "Print a JSON summary on standard output"}) {
    app->add_option("--save", save_,
                    "Write the trained parameters as a --params file ({\"name\": value, ...})")
        ->type_name("FILE.json");
  }

  void run(const Context& c, const ParamValues& values) override {
    const Method& m = method(c);
    MethodRun run = start(c);
    if (m.check)
      m.check(run);
    const std::vector<double> fixed = assemble_fixed(c, values);
    const ObsData data = read_data(c, data_);
    const std::string save_guide = options_.word("--save-guide");
    const std::string save_nets = options_.word("--save-nets");
    check_output_path(out_);
    check_output_path(save_);
    check_output_path(save_guide);
    check_output_path(save_nets);
    run.fixed = &fixed;
    run.data = &data;
    const auto start_time = std::chrono::steady_clock::now();
    const VariationalFit fit = run_method(c, run, "vi", m.vi);
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
    const nlohmann::json params = params_json(c.info, fit.theta);
    if (!save_.empty()) // after a failure too: the last finite iteration's parameters
      write_output(c, save_, params.dump(2) + "\n");
    if (!save_nets.empty() && !fit.nets_state.empty()) // likewise
      write_output(c, save_nets, fit.nets_state);
    if (!fit.failure.empty()) {
      std::vector<std::string> kept;
      for (const std::string& file : {save_, save_nets})
        if (!file.empty())
          kept.push_back(file);
      throw Error(kept.empty() ? fit.failure
                               : fmt::format("{}; the parameters of the last finite iteration "
                                             "are in {}",
                                             fit.failure, fmt::join(kept, " and ")));
    }
    if (!save_guide.empty())
      write_output(c, save_guide, fit.guide_state);
    if (write_csv())
      write_output(c, out_, items_csv(c.info, fit.train));
    if (json_) {
      nlohmann::json estimators = nlohmann::json::object();
      for (const VariationalFit::Estimator& e : fit.estimators)
        estimators[e.latent] = {{"estimator", e.estimator}, {"why", e.why}};
      nlohmann::json trace = nlohmann::json::array();
      for (const VariationalFit::TracePoint& p : fit.trace)
        trace.push_back({p.iteration, p.objective});
      nlohmann::json j = {{"model", c.info.name},
                          {"method", m.name},
                          {"objective", fit.objective},
                          {"samples", fit.samples},
                          {"estimators", estimators},
                          {"learned", fit.learned},
                          {"params", params},
                          {"iterations", fit.iterations},
                          {"trace", trace},
                          {"train_s", fit.train_seconds},
                          {"elapsed_s", elapsed}};
      j.update(bounds_json(fit.train));
      if (const std::optional<double> ll = exact_log_likelihood(c, run, fit.theta, fixed, data))
        j["log_likelihood"] = *ll / static_cast<double>(data.T);
      if (fit.test)
        j["test"] = bounds_json(*fit.test);
      print_json(c, j);
    }
    if (!fit.test_failure.empty()) // after the training's outputs, which stand
      throw Error(fit.test_failure);
  }

private:
  std::string save_;

  // The exact log-likelihood at the trained parameters where a filter gives it (Kalman, the
  // forward algorithm): what the bounds are bounds on.
  static std::optional<double> exact_log_likelihood(const Context& c, const MethodRun& vi_run,
                                                    const std::vector<double>& theta,
                                                    std::vector<double> fixed,
                                                    const ObsData& data) {
    const std::vector<const Method*> filters = c.registry.applicable(Task::Filter, c.model, c.info);
    if (filters.empty() || filters.front()->particles)
      return std::nullopt;
    std::copy(theta.begin(), theta.end(), fixed.begin());
    const OptionValues options = c.registry.default_options(Task::Filter);
    MethodRun run{c.model, c.info, options, vi_run.seed, true, vi_run.threads};
    run.registry = &c.registry;
    run.fixed = &fixed;
    run.data = &data;
    ThreadPool pool(vi_run.threads);
    run.pool = &pool;
    return filter_each_series(*filters.front(), run).log_likelihood;
  }

  // One row per item: n, the bounds and their standard errors, the guide's moments.
  static std::string items_csv(const ModelInfo& info, const VariationalFit::Bounds& b) {
    fmt::memory_buffer csv;
    fmt::format_to(std::back_inserter(csv), "{},elbo,elbo_se,kl,iwae,iwae_se,{}\n", info.step,
                   fmt::join(b.guide_columns, ","));
    for (size_t n = 0; n < b.elbo.size(); ++n) {
      fmt::format_to(std::back_inserter(csv), "{},{},{},{},{},{}", n, format_double(b.elbo[n]),
                     format_double(b.elbo_se[n]), format_double(b.kl[n]), format_double(b.iwae[n]),
                     format_double(b.iwae_se[n]));
      for (double v : b.guide[n])
        fmt::format_to(std::back_inserter(csv), ",{}", format_double(v));
      fmt::format_to(std::back_inserter(csv), "\n");
    }
    return fmt::to_string(csv);
  }
};

} // namespace

std::unique_ptr<Command> add_vi(CLI::App& app, const Context& c) {
  if (variational_refusal(c.model, c.info))
    return nullptr; // a state-space model
  CLI::App* sub = app.add_subcommand(
      "vi", fmt::format("Variational inference for a model over a plate: a guide q(z_n) per item "
                        "and the parameters trained by Adam on the ELBO or the IWAE bound; {}. "
                        "JSON: the parameters, the bounds per item averaged and the estimators "
                        "chosen; CSV: per item n, elbo, kl, iwae and the guide's moments",
                        c.registry.method_list(Task::Vi)));
  return std::make_unique<Vi>(sub, c);
}

} // namespace ssm::cli
