// `optimize`: maximum likelihood by the method --method names (L-BFGS with the exact score),
// from the current parameter values; the parameters found as JSON (and, with --save, as a
// --params file), the path of the objective as CSV.
#include "cli/command.h"
#include "core/error.h"
#include "core/output.h"
#include "core/params.h"
#include "learning/parameter_space.h"
#include "smc/proposal.h"

#include <fmt/format.h>

namespace ssm::cli {

namespace {

class Optimize : public TaskCommand {
public:
  Optimize(CLI::App* app, const Context& c)
      : TaskCommand(app, c, Task::Optimize,
                    {.data = "Data CSV, as for filter",
                     .json = "Print a JSON summary on standard output"}) {
    app->add_option("--save", save_,
                    "Write the parameters found as a --params file ({\"name\": value, ...})")
        ->type_name("FILE.json");
  }

  void run(const Context& c, const ParamValues& values) override {
    const Method& m = method(c);
    MethodRun run = start(c);
    if (m.check)
      m.check(run);
    const std::vector<double> theta = assemble_fixed(c, values);
    const ObsData data = read_data(c, data_);
    check_output_path(out_);
    check_output_path(save_);
    run.fixed = &theta;
    run.data = &data;
    if (!options_.word("--prior").empty() && !options_.toggle("--map").value_or(false))
      throw Error(fmt::format("optimize: --prior {} is the prior of the posterior mode: give "
                              "--map with it",
                              options_.word("--prior")));
    const std::unique_ptr<PriorDensity> prior = read_prior(run, "optimize");
    run.prior = prior.get();
    const auto start_time = std::chrono::steady_clock::now();
    const Optimum r = run_method(c, run, "optimize", m.optimize);
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
    const nlohmann::json params = params_json(c.info, r.theta);
    if (!save_.empty())
      write_output(c, save_, params.dump(2) + "\n");
    if (write_csv())
      write_output(c, out_, path_csv(c.info, r));
    if (json_) {
      nlohmann::json starts = nlohmann::json::array();
      for (const Optimum::Start& s : r.starts)
        starts.push_back({{"initial_objective", s.initial_objective},
                          {"objective", s.objective},
                          {"log_likelihood", s.log_likelihood},
                          {"converged", s.converged}});
      nlohmann::json j = {{"model", c.info.name},
                          {"method", m.name},
                          {"map", r.map},
                          {"params", params},
                          {"learned", r.learned},
                          {"log_likelihood", r.log_likelihood},
                          {"converged", r.converged},
                          {"message", r.message},
                          {"iterations", r.iterations},
                          {"evaluations", r.evaluations},
                          {"gradient_norm", r.gradient_norm},
                          {"starts", starts},
                          {"T", data.T},
                          {"elapsed_s", elapsed}};
      nlohmann::json se = nullptr; // the learned parameters', each in its shape
      if (!r.standard_errors.empty()) {
        const nlohmann::json all = params_json(c.info, r.standard_errors);
        se = nlohmann::json::object();
        for (const std::string& name : r.learned)
          se[name] = all[name];
      }
      j["standard_errors"] = se;
      if (!r.m_steps.empty()) { // em: how each parameter was updated
        nlohmann::json steps = nlohmann::json::object();
        for (const auto& [name, how] : r.m_steps)
          steps[name] = how;
        j["m_step"] = steps;
      }
      if (!r.e_step.empty())
        j["e_step"] = r.e_step;
      if (r.sde_estimates > 0)
        j["sde_estimates"] = r.sde_estimates;
      if (r.log_likelihood_se != 0) // a particle filter's estimate (adam)
        j["log_likelihood_se"] = r.log_likelihood_se;
      add_random_weight_caveat(j, c.info,
                               m.particles && run.options.has("--filter") &&
                                   run.options.word("--filter") == "random-weight");
      if (r.map) // log p(y, theta): the prior densities are normalised
        j["log_posterior"] = r.objective;
      print_json(c, j, data);
    }
    if (!r.converged)
      warn(c, "optimize did not converge: " + r.message);
  }

private:
  std::string save_;

  // One row per evaluation of the objective: start, log-likelihood, gradient norm, then every
  // learned parameter's components.
  static std::string path_csv(const ModelInfo& info, const Optimum& r) {
    std::vector<const ParamInfo*> learned;
    std::vector<std::string> columns;
    for (const std::string& name : r.learned) {
      learned.push_back(info.find_param(name));
      for (const std::string& col : column_names(name, learned.back()->shape))
        columns.push_back(csv_name(col));
    }
    fmt::memory_buffer csv;
    fmt::format_to(std::back_inserter(csv), "evaluation,start,log_likelihood,{}gradient_norm,{}\n",
                   r.map ? "log_posterior," : "", fmt::join(columns, ","));
    for (size_t e = 0; e < r.path.size(); ++e) {
      const Optimum::Evaluation& ev = r.path[e];
      fmt::format_to(std::back_inserter(csv), "{},{},{},", e, ev.start,
                     format_double(ev.log_likelihood));
      if (r.map)
        fmt::format_to(std::back_inserter(csv), "{},", format_double(ev.objective));
      fmt::format_to(std::back_inserter(csv), "{}", format_double(ev.gradient_norm));
      for (const ParamInfo* p : learned)
        for (int64_t k = 0; k < p->size; ++k)
          fmt::format_to(std::back_inserter(csv), ",{}", format_double(ev.theta[p->offset + k]));
      fmt::format_to(std::back_inserter(csv), "\n");
    }
    return fmt::to_string(csv);
  }
};

} // namespace

std::unique_ptr<Command> add_optimize(CLI::App& app, const Context& c) {
  CLI::App* sub = app.add_subcommand(
      "optimize", fmt::format("Maximum likelihood from the current parameter values, on the "
                              "parameters' unconstrained scale: {}. JSON: the parameters found "
                              "and the verdict; CSV: one row per evaluation of the objective",
                              c.registry.method_list(Task::Optimize)));
  return std::make_unique<Optimize>(sub, c);
}

} // namespace ssm::cli
