// `sample`: posterior draws of the parameters by the method --method names (PMMH, SMC^2, Gibbs;
// Gibbs adds the values it imputes as generated quantities), in Stan's
// CSV layout (one file per chain, as CmdStan writes them), with a JSON summary: mean, sd,
// quantiles, rank-normalised split-R-hat and bulk and tail ESS per parameter component.
#include "cli/command.h"
#include "core/error.h"
#include "core/output.h"
#include "learning/methods.h"

#include <fmt/format.h>

#include <chrono>

namespace ssm::cli {

namespace {

class Sample : public TaskCommand {
public:
  Sample(CLI::App* app, const Context& c)
      : TaskCommand(app, c, Task::Sample,
                    {.data = "Data CSV, as for filter",
                     .json = "Print a JSON summary on standard output"}) {}

  void run(const Context& c, const ParamValues& values) override {
    if (out_.empty() && !json_)
      throw Error("sample: give --out FILE.csv for the draws and/or --json for the summary");
    const Method& m = method(c);
    MethodRun run = start(c);
    if (m.check)
      m.check(run);
    const std::vector<double> theta = assemble_fixed(c, values);
    const ObsData data = read_data(c, data_, m.name == kGibbsName);
    const int64_t chains = options_.integer("--chains");
    // FILE_1.csv ... are not --out itself: each is checked against the inputs here.
    for (int64_t k = 0; k < chains; ++k)
      check_output_path(out_.empty() ? "" : chain_path(out_, k, chains),
                        {data_, c.globals.params_file, c.globals.data_values_file});
    run.fixed = &theta;
    run.data = &data;
    const std::unique_ptr<PriorDensity> prior = read_prior(run, "sample");
    run.prior = prior.get();
    const auto start_time = std::chrono::steady_clock::now();
    const Posterior post = run_method(c, run, "sample", m.sample);
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
    const std::vector<std::pair<const ParamInfo*, int64_t>> columns =
        param_components(c.info, post.learned);
    if (!out_.empty())
      for (size_t k = 0; k < post.chains.size(); ++k)
        write_output(c, chain_path(out_, k, post.chains.size()), stan_csv(c, m, post, k, columns));
    for (const std::string& w : post.warnings)
      warn(c, w);
    if (json_)
      print_json(c, summary_json(c, m, post, columns, data.T, elapsed), data);
  }

private:
  std::string stan_csv(const Context& c, const Method& m, const Posterior& post, size_t chain,
                       const std::vector<std::pair<const ParamInfo*, int64_t>>& columns) const {
    fmt::memory_buffer csv;
    auto put = [&]<typename... A>(fmt::format_string<A...> f, A&&... args) {
      fmt::format_to(std::back_inserter(csv), f, std::forward<A>(args)...);
    };
    put("# model = {}\n# method = sample (Default)\n#   sample\n", c.info.name);
    put("#     num_samples = {}\n#     num_warmup = {}\n#     save_warmup = 0\n", post.iterations,
        post.warmup);
    put("#     algorithm = {} (likelihood: {}{})\n", m.name, post.likelihood,
        post.exact_likelihood ? ", exact"
                              : fmt::format(", {} particles{}", post.particles,
                                            post.details.is_null() ? "" : " at the start"));
    put("# id = {}\n# random\n#   seed = {}\n# data\n#   file = {}\n", chain + 1, c.globals.seed,
        data_);
    put("lp__,accept_stat__");
    for (const auto& [p, k] : columns)
      put(",{}", stan_name(p->name, p->shape, k));
    for (const std::string& name : post.imputed_names)
      put(",{}", name);
    put("\n# Adaptation terminated\n");
    const Posterior::Chain& ch = post.chains[chain];
    for (size_t i = 0; i < ch.theta.size(); ++i) {
      put("{},{}", format_double(ch.lp[i]), format_double(ch.accept_stat[i]));
      for (const auto& [p, k] : columns)
        put(",{}", format_double(ch.theta[i][p->offset + k]));
      if (!post.imputed_names.empty())
        for (double v : ch.imputed[i])
          put(",{}", format_double(v));
      put("\n");
    }
    return fmt::to_string(csv);
  }

  static nlohmann::json summary_json(const Context& c, const Method& m, const Posterior& post,
                                     const std::vector<std::pair<const ParamInfo*, int64_t>>& cols,
                                     int64_t T, double elapsed) {
    nlohmann::json summary = nlohmann::json::object();
    for (const auto& [p, k] : cols) {
      std::vector<std::vector<double>> draws;
      for (const Posterior::Chain& ch : post.chains) {
        draws.emplace_back();
        for (const std::vector<double>& th : ch.theta)
          draws.back().push_back(th[p->offset + k]);
      }
      summary[column_names(p->name, p->shape)[k]] = draw_summary_json(draws);
    }
    for (size_t k = 0; k < post.imputed_names.size(); ++k) { // gibbs's latent and missing values
      std::vector<std::vector<double>> draws;
      for (const Posterior::Chain& ch : post.chains) {
        draws.emplace_back();
        for (const std::vector<double>& v : ch.imputed)
          draws.back().push_back(v[k]);
      }
      summary[post.imputed_names[k]] = draw_summary_json(draws);
    }
    nlohmann::json acceptance = nlohmann::json::array();
    for (const Posterior::Chain& ch : post.chains)
      acceptance.push_back(ch.acceptance_rate);
    nlohmann::json j = {{"model", c.info.name},
                        {"method", m.name},
                        {"likelihood", post.likelihood},
                        {"exact_likelihood", post.exact_likelihood},
                        {"chains", post.chains.size()},
                        {"warmup", post.warmup},
                        {"iterations", post.iterations},
                        {"acceptance_rate", acceptance},
                        {"summary", summary},
                        {"learned", post.learned},
                        {"warnings", post.warnings},
                        {"T", T},
                        {"elapsed_s", elapsed},
                        {"threads", c.globals.threads}};
    if (post.log_evidence) {
      j["log_evidence"] = *post.log_evidence;
      j["log_evidence_se"] =
          post.log_evidence_se ? nlohmann::json(*post.log_evidence_se) : nlohmann::json(nullptr);
    }
    if (!post.details.is_null())
      j["details"] = post.details;
    if (!post.exact_likelihood) {
      j["particles"] = post.particles;
      if (post.details.is_null()) // pmmh; smc2 says what it did in its details
        j["particles_chosen_by"] = post.particles_chosen ? "pilot" : "user";
      if (post.particles_chosen)
        j["pilot_loglik_sd"] = post.pilot_loglik_sd;
    }
    return j;
  }
};

} // namespace

std::unique_ptr<Command> add_sample(CLI::App& app, const Context& c) {
  CLI::App* sub = app.add_subcommand(
      "sample", fmt::format("Bayesian inference of the parameters: {}. Draws in Stan's CSV layout "
                            "(FILE_1.csv ... per chain), JSON summary with R-hat and ESS",
                            c.registry.method_list(Task::Sample)));
  return std::make_unique<Sample>(sub, c);
}

} // namespace ssm::cli
