// A simulator's `abc`: approximate Bayesian computation (lfi/abc.h), the likelihood-free
// baselines: rejection ABC and SMC-ABC, given an observation; draws in Stan's CSV layout with each
// draw's distance, a JSON summary with the tolerance schedule and the simulations spent.
#include "lfi/abc.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/output.h"

#include <fmt/format.h>

#include <chrono>

namespace ssm::cli {

namespace {

class Abc : public Command {
public:
  explicit Abc(CLI::App* app) : Command(app) {
    app->add_option("--observed", observed_,
                    "JSON file mapping each observation's name to its observed value")
        ->required()
        ->type_name("FILE.json");
    app->add_option("--method", options_.method,
                    "rejection: keep the closest --quantile of --simulations prior simulations; "
                    "smc: population Monte Carlo ABC with adaptive tolerances")
        ->check(CLI::IsMember({"rejection", "smc"}))
        ->default_str(options_.method);
    app->add_option("--simulations", options_.simulations, "The simulation budget")
        ->check(positive_int())
        ->default_str(std::to_string(options_.simulations));
    app->add_option("--quantile", options_.quantile, "rejection: the fraction of draws kept")
        ->check(CLI::Range(1e-9, 1.0))
        ->default_str("0.01");
    app->add_option("--population", options_.population, "smc: particles per generation")
        ->check(CLI::Range(int64_t{2}, int64_t{1} << 24))
        ->default_str(std::to_string(options_.population));
    app->add_option("--alpha", options_.alpha,
                    "smc: each tolerance is this quantile of the previous generation's distances")
        ->check(CLI::Range(0.01, 0.99))
        ->default_str("0.5");
    app->add_option("--min-acceptance", options_.min_acceptance,
                    "smc: stop after a generation that accepted fewer of its simulations")
        ->check(CLI::Range(0.0, 1.0))
        ->default_str("0.02");
    app->add_option("--out", out_, "Draws in Stan's CSV layout, with distance__")
        ->type_name("FILE.csv");
    app->add_flag("--json", json_, "Print a JSON summary on standard output");
  }

  void run(const Context& c, const ParamValues& values) override {
    const lfi::Simulator sim(c.model, c.info, assemble_fixed(c, values));
    const std::vector<double> x_obs = read_observation_values(c.info, observed_);
    check_output_path(out_, {observed_, c.globals.params_file, c.globals.data_values_file});
    options_.seed = c.globals.seed;
    options_.threads = c.globals.threads;
    const auto start = std::chrono::steady_clock::now();
    const lfi::AbcResult r = lfi::abc(sim, x_obs, options_);
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const int64_t P = r.n_params, n = static_cast<int64_t>(r.distance.size());
    const std::vector<std::string> names = simulator_stan_columns(c.info);
    if (!out_.empty()) {
      std::vector<double> log_prior(n);
      sim.log_prior(r.theta.data(), n, log_prior.data());
      fmt::memory_buffer csv;
      auto put = [&]<typename... A>(fmt::format_string<A...> f, A&&... args) {
        fmt::format_to(std::back_inserter(csv), f, std::forward<A>(args)...);
      };
      put("# model = {}\n# method = sample (Default)\n#   sample\n#     num_samples = {}\n",
          c.info.name, n);
      put("#     num_warmup = 0\n#     algorithm = abc {} (epsilon {}, {} simulations)\n",
          options_.method, format_double(r.epsilon), r.simulations);
      put("# id = 1\n# random\n#   seed = {}\n# data\n#   file = {}\n", c.globals.seed, observed_);
      put("lp__,accept_stat__,distance__");
      for (const std::string& name : names)
        put(",{}", name);
      put("\n");
      for (int64_t i = 0; i < n; ++i) {
        put("{},1,{}", format_double(log_prior[i]), format_double(r.distance[i]));
        for (int64_t k = 0; k < P; ++k)
          put(",{}", format_double(r.theta[i * P + k]));
        put("\n");
      }
      write_output(c, out_, fmt::to_string(csv));
    }
    if (r.dropped > 0)
      warn(c, fmt::format("{} simulations gave a non-finite observation: none was accepted",
                          r.dropped));
    if (!json_)
      return;
    nlohmann::json summary = nlohmann::json::object();
    for (int64_t k = 0; k < P; ++k) {
      double mean = 0, sq = 0;
      for (int64_t i = 0; i < n; ++i)
        mean += r.theta[i * P + k] / static_cast<double>(n);
      for (int64_t i = 0; i < n; ++i)
        sq += (r.theta[i * P + k] - mean) * (r.theta[i * P + k] - mean);
      summary[names[k]] = {{"mean", mean},
                           {"sd", n > 1 ? std::sqrt(sq / static_cast<double>(n - 1)) : 0.0}};
    }
    auto finite_or_null = [](double v) {
      return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
    };
    nlohmann::json epsilons = nlohmann::json::array();
    for (double e : r.epsilons)
      epsilons.push_back(finite_or_null(e));
    nlohmann::json j = {
        {"model", c.info.name}, {"method", options_.method},    {"draws", n},
        {"epsilon", r.epsilon}, {"simulations", r.simulations}, {"dropped", r.dropped},
        {"summary", summary},   {"elapsed_s", elapsed},         {"threads", c.globals.threads}};
    if (options_.method == "smc") {
      j["epsilons"] = epsilons;
      j["acceptance_rate"] = r.acceptance;
      j["generation_simulations"] = r.generation_simulations;
      j["generations"] = r.epsilons.size();
      j["ess"] = r.ess;
    }
    print_json(c, j);
  }

private:
  std::string observed_, out_;
  bool json_ = false;
  lfi::AbcOptions options_;
};

} // namespace

std::unique_ptr<Command> add_abc(CLI::App& app, const Context&) {
  return std::make_unique<Abc>(app.add_subcommand(
      "abc", "Approximate Bayesian computation given an observation: rejection or SMC-ABC "
             "(the baselines); draws in Stan's CSV layout"));
}

} // namespace ssm::cli
