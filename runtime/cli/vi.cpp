// `vi`: variational inference by the family --method names (the vi room's methods, which load
// LibTorch when they run: vi/loader.h). For a plate model, a guide per item: the trained
// parameters and the bounds on log p(x) as JSON, per item as CSV (--out), the parameters as a
// --params file (--save). For a state-space model, a density fitted to its parameters'
// posterior: draws in Stan's CSV layout as CmdStan's `variational` writes them (--out), the ELBO,
// the draws' summaries and importance diagnostics as JSON, the draws' means as a --params file.
#include "cli/command.h"
#include "core/error.h"
#include "core/output.h"
#include "core/series.h"
#include "learning/diagnostics.h"
#include "smc/resample.h"
#include "vi/variational.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ssm::cli {

namespace {

// The random stream of --psis-resample's draws (kernel/rng.h's site), apart from q's own.
constexpr uint32_t kResampleSite = 0x5053;

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
    if (c.info.step != "n")
      return run_parameters(c, values, m, run);
    const std::vector<double> fixed = assemble_fixed(c, values);
    const ObsData data = read_data(c, data_);
    const std::string save_guide = options_.word("--save-guide");
    const std::string save_nets = options_.word("--save-nets");
    check_output_path(options_.word("--save-density")); // written by the vi module
    const std::string param_draws = options_.word("--param-draws");
    const std::string save_param_guide = options_.word("--save-param-guide");
    const std::string test_out = options_.word("--test-out");
    if (!test_out.empty() && options_.word("--test").empty())
      throw Error("vi: --test-out writes the held-out items' rows: give them with --test FILE");
    check_output_path(test_out);
    check_output_path(out_);
    check_output_path(save_);
    check_output_path(save_guide);
    check_output_path(save_nets);
    check_output_path(param_draws);
    check_output_path(save_param_guide);
    run.fixed = &fixed;
    run.data = &data;
    const auto start_time = std::chrono::steady_clock::now();
    VariationalFit fit = run_method(c, run, "vi", m.vi); // theta: the draws' mean, if drawn
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
    // --param-guide: the parameters' draws, their diagnostics, and (--save) their means.
    std::optional<ParameterDraws> drawn;
    if (fit.parameters) {
      drawn = parameter_draws(c, *fit.parameters, run.seed);
    }
    const nlohmann::json params = params_json(c.info, fit.theta);
    if (!save_.empty()) // after a failure too: the last finite iteration's parameters
      write_output(c, save_, params.dump(2) + "\n");
    if (!save_nets.empty() && !fit.nets_state.empty()) // likewise
      write_output(c, save_nets, fit.nets_state);
    for (const std::string& w : fit.warnings) // a collapse may be what led to a failure
      warn(c, w);
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
    if (!test_out.empty() && fit.test)
      write_output(c, test_out, items_csv(c.info, *fit.test));
    if (drawn) {
      if (!save_param_guide.empty())
        write_output(c, save_param_guide, fit.parameters->guide_state);
      if (!param_draws.empty())
        write_output(
            c, param_draws,
            draws_csv(c, options_.word("--param-guide"), 1, *fit.parameters, drawn->columns));
      for (const std::string& w : fit.parameters->warnings)
        warn(c, w);
    }
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
                          {"elapsed_s", elapsed},
                          {"warnings", fit.warnings}};
      j.update(bounds_json(fit.train));
      if (!fit.network_weights.empty()) {
        nlohmann::json w = nlohmann::json::object();
        for (const auto& [net, count] : fit.network_weights)
          w[net] = count;
        j["weights"] = w; // each network's number of weights
      }
      if (std::any_of(fit.estimators.begin(), fit.estimators.end(),
                      [](const VariationalFit::Estimator& e) { return e.estimator == "gumbel"; }))
        j["temperature"] = fit.temperature; // where the annealing ended
      if (const std::optional<double> ll = exact_log_likelihood(c, run, fit.theta, fixed, data))
        j["log_likelihood"] = *ll / static_cast<double>(data.T);
      if (fit.test)
        j["test"] = bounds_json(*fit.test);
      if (drawn)
        j["parameters"] =
            parameters_json(c, options_.word("--param-guide"), *fit.parameters, *drawn, elapsed);
      print_json(c, j);
    }
    if (!fit.test_failure.empty()) // after the training's outputs, which stand
      throw Error(fit.test_failure);
  }

private:
  std::string save_;

  // A state-space model: a density fitted to its parameters' posterior, and draws from it.
  void run_parameters(const Context& c, const ParamValues& values, const Method& m,
                      MethodRun& run) {
    const std::vector<double> fixed = assemble_fixed(c, values);
    const ObsData data = read_data(c, data_);
    const std::string save_guide = options_.word("--save-guide");
    check_output_path(out_);
    check_output_path(save_);
    check_output_path(save_guide);
    run.fixed = &fixed;
    run.data = &data;
    const auto start_time = std::chrono::steady_clock::now();
    ParameterVariationalFit fit = run_method(c, run, "vi", m.vi_parameters);
    const ParameterDraws drawn = parameter_draws(c, fit, run.seed);
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
    if (!save_.empty())
      write_output(c, save_, params_json(c.info, draws_mean(fit, drawn.columns)).dump(2) + "\n");
    if (!save_guide.empty())
      write_output(c, save_guide, fit.guide_state);
    if (write_csv())
      write_output(c, out_,
                   draws_csv(c, m.name, options_.integer("--samples"), fit, drawn.columns));
    for (const std::string& w : fit.warnings)
      warn(c, w);
    if (json_)
      print_json(c, parameters_json(c, m.name, fit, drawn, elapsed), data);
  }

  // The parameters' draws' columns and importance diagnostics (of q's own draws), after
  // --psis-resample when given.
  struct ParameterDraws {
    std::vector<std::pair<const ParamInfo*, int64_t>> columns;
    ImportanceDiagnostics is;
    bool resampled = false;
  };
  ParameterDraws parameter_draws(const Context& c, ParameterVariationalFit& fit,
                                 uint64_t seed) const {
    ParameterDraws d;
    std::vector<double> log_w(fit.log_p.size());
    for (size_t i = 0; i < log_w.size(); ++i)
      log_w[i] = fit.log_p[i] - fit.log_q[i];
    d.is = importance_diagnostics(log_w);
    d.resampled = options_.toggle("--psis-resample").value_or(false);
    if (d.resampled)
      psis_resample(fit, log_w, seed, d.is.pareto_k);
    d.columns = param_components(c.info, fit.learned);
    return d;
  }

  // The whole parameter vector at the draws' means (over those that did not overflow), the
  // fixed parameters at their values.
  static std::vector<double>
  draws_mean(const ParameterVariationalFit& fit,
             const std::vector<std::pair<const ParamInfo*, int64_t>>& columns) {
    std::vector<double> mean = fit.mean_theta;
    for (auto& [p, k] : columns) {
      double sum = 0, count = 0;
      for (const std::vector<double>& th : fit.theta)
        if (std::isfinite(th[p->offset + k])) {
          sum += th[p->offset + k];
          ++count;
        }
      mean[p->offset + k] = sum / count;
    }
    return mean;
  }

  // Replaces q's draws by as many drawn from them with their Pareto-smoothed importance weights
  // (multinomially, as Stan's Pathfinder resamples), so that they follow the posterior where q's
  // tails cover it (k-hat below 0.7; a warning otherwise).
  static void psis_resample(ParameterVariationalFit& fit, const std::vector<double>& log_w,
                            uint64_t seed, double pareto_k) {
    const std::vector<double> smoothed = psis_log_weights(log_w);
    const double top = *std::max_element(smoothed.begin(), smoothed.end());
    if (!std::isfinite(top)) { // q's draws are kept, and so are its other outputs
      fit.warnings.push_back("--psis-resample: the log posterior is not finite at any draw; the "
                             "draws are q's own");
      return;
    }
    std::vector<double> w(smoothed.size());
    for (size_t i = 0; i < w.size(); ++i)
      w[i] = std::exp(smoothed[i] - top);
    const auto n = static_cast<int64_t>(w.size());
    std::vector<int64_t> pick(w.size());
    resample(Resampling::Multinomial, w.data(), n, seed, 0, kResampleSite, pick.data());
    std::vector<std::vector<double>> theta;
    std::vector<double> log_p, log_q;
    for (int64_t i : pick) {
      theta.push_back(fit.theta[i]);
      log_p.push_back(fit.log_p[i]);
      log_q.push_back(fit.log_q[i]);
    }
    fit.theta = std::move(theta);
    fit.log_p = std::move(log_p);
    fit.log_q = std::move(log_q);
    if (std::isnan(pareto_k))
      fit.warnings.push_back("--psis-resample: Pareto k-hat could not be estimated (under 21 "
                             "finite weights, or a constant tail); the draws were resampled with "
                             "their raw weights");
    else if (!(pareto_k < 0.7))
      fit.warnings.push_back(fmt::format("--psis-resample: Pareto k-hat is {:.2f} (0.7 or more): "
                                         "q misses part of the posterior, and the resampled "
                                         "draws do not follow it",
                                         pareto_k));
  }

  // CmdStan's variational output: lp__ 0, log_p__ and log_g__ per draw, the first row the mean.
  // The ELBO is a comment above the header, where CmdStan's readers skip comments.
  std::string draws_csv(const Context& c, const std::string& family, int64_t grad_samples,
                        const ParameterVariationalFit& fit,
                        const std::vector<std::pair<const ParamInfo*, int64_t>>& columns) const {
    fmt::memory_buffer csv;
    auto put = [&]<typename... A>(fmt::format_string<A...> f, A&&... args) {
      fmt::format_to(std::back_inserter(csv), f, std::forward<A>(args)...);
    };
    put("# model = {}\n# method = variational\n#   variational\n#     algorithm = {} ({})\n",
        c.info.name, family, fit.family);
    put("#     iter = {}\n#     grad_samples = {}\n#     elbo_samples = {}\n", fit.iterations,
        grad_samples, fit.eval_samples);
    put("#     output_samples = {}\n#     likelihood = {}{}\n", fit.theta.size(), fit.likelihood,
        fit.likelihood.starts_with("estimated") ? "" : ", exact");
    put("# random\n#   seed = {}\n# data\n#   file = {}\n", c.globals.seed, data_);
    put("# ELBO = {} (se {})\n", format_double(fit.elbo), format_double(fit.elbo_se));
    put("lp__,log_p__,log_g__");
    for (const auto& [p, k] : columns)
      put(",{}", stan_name(p->name, p->shape, k));
    // CmdStan's two lines between the header and the mean, which its readers expect; eta is
    // Adam's step size here.
    put("\n# Stepsize adaptation complete.\n# eta = {}\n0,0,0",
        format_double(options_.real("--learning-rate")));
    for (const auto& [p, k] : columns)
      put(",{}", format_double(fit.mean_theta[p->offset + k]));
    put("\n");
    for (size_t i = 0; i < fit.theta.size(); ++i) {
      put("0,{},{}", format_double(fit.log_p[i]), format_double(fit.log_q[i]));
      for (const auto& [p, k] : columns)
        put(",{}", format_double(fit.theta[i][p->offset + k]));
      put("\n");
    }
    return fmt::to_string(csv);
  }

  static nlohmann::json parameters_json(const Context& c, const std::string& family,
                                        const ParameterVariationalFit& fit,
                                        const ParameterDraws& drawn, double elapsed) {
    const ImportanceDiagnostics& is = drawn.is;
    nlohmann::json summary = nlohmann::json::object();
    for (const auto& [p, k] : drawn.columns) {
      std::vector<double> draws;
      for (const std::vector<double>& th : fit.theta)
        draws.push_back(th[p->offset + k]);
      summary[column_names(p->name, p->shape)[k]] = draw_summary_json({draws});
    }
    nlohmann::json trace = nlohmann::json::array();
    for (const ParameterVariationalFit::TracePoint& p : fit.trace)
      trace.push_back({p.iteration, p.elbo});
    auto number = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nullptr; };
    nlohmann::json out = {{"model", c.info.name},
                          {"method", family},
                          {"family", fit.family},
                          {"family_parameters", fit.family_parameters},
                          {"learned", fit.learned},
                          {"likelihood", fit.likelihood},
                          {"elbo", fit.elbo},
                          {"elbo_se", number(fit.elbo_se)},
                          {"elbo_samples", fit.eval_samples},
                          {"draws", fit.theta.size()},
                          {"psis_resample", drawn.resampled},
                          {"summary", summary},
                          {"log_evidence", number(is.log_mean_weight)},
                          {"log_evidence_se", number(is.log_mean_weight_se)},
                          {"importance_ess", is.ess},
                          {"pareto_k", number(is.pareto_k)},
                          {"iterations", fit.iterations},
                          {"trace", trace},
                          {"warnings", fit.warnings},
                          {"train_s", fit.train_seconds},
                          {"elapsed_s", elapsed},
                          {"threads", c.globals.threads}};
    if (!fit.item_guide.empty())
      out["item_guide"] = fit.item_guide;
    return out;
  }

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
  CLI::App* sub = app.add_subcommand(
      "vi",
      variational_refusal(c.model, c.info)
          ? fmt::format("Variational inference of the parameters: a density q fitted to their "
                        "posterior by Adam on the ELBO (an exact likelihood); {}. CSV: draws in "
                        "Stan's layout, as CmdStan's variational; JSON: the ELBO, the draws' "
                        "summaries and their importance diagnostics (log evidence, Pareto k)",
                        c.registry.method_list(Task::Vi))
          : fmt::format("Variational inference for a model over a plate: a guide q(z_n) per item "
                        "and the parameters (point estimates, or with --param-guide a density "
                        "over them) trained by Adam on the ELBO or the IWAE bound; {}. "
                        "JSON: the parameters, the bounds per item averaged and the estimators "
                        "chosen; CSV: per item n, elbo, kl, iwae and the guide's moments",
                        c.registry.method_list(Task::Vi)));
  return std::make_unique<Vi>(sub, c);
}

} // namespace ssm::cli
