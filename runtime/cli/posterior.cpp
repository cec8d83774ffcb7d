// A simulator's `posterior`: draws from p(theta | x_o) by a sampler driven by a likelihood-to-
// evidence ratio (lfi/ratio_samplers.h), with the prior as the instrumental law. The ratio is a
// classifier trained by `nre` (a file) or, for a simulator whose likelihood is exact, the
// likelihood itself (`--ratio exact`). Draws in Stan's CSV layout (one file per chain), a JSON
// summary with acceptance, effective sample sizes and moments.
#include "cli/command.h"
#include "core/error.h"
#include "core/output.h"
#include "lfi/ratio_loader.h"
#include "lfi/ratio_samplers.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

namespace ssm::cli {

namespace {

class PosteriorCommand : public Command {
public:
  explicit PosteriorCommand(CLI::App* app) : Command(app) {
    app->add_option("--ratio", ratio_,
                    "The ratio: a classifier saved by nre --save, or 'exact' (the simulator's own "
                    "likelihood, where it has one)")
        ->required()
        ->type_name("FILE|exact");
    app->add_option("--observed", observed_,
                    "JSON file mapping each observation's name to its observed value")
        ->required()
        ->type_name("FILE.json");
    std::vector<std::string> names;
    std::string help = "The sampler:";
    for (const lfi::RatioSamplerInfo& s : lfi::ratio_samplers()) {
      names.emplace_back(s.name);
      help += fmt::format(" {} ({}),", s.name, s.title);
    }
    help.back() = '.';
    app->add_option("--sampler", options_.sampler, help)
        ->check(CLI::IsMember(names))
        ->default_str(options_.sampler);
    app->add_option("--draws", options_.draws, "Draws to keep (per chain)")
        ->check(positive_int())
        ->default_str(std::to_string(options_.draws));
    app->add_option("--chains", chains_, "imh, barker, mcmc: independent chains")
        ->check(positive_int())
        ->default_str(std::to_string(chains_));
    app->add_option("--warmup", options_.warmup, "imh, barker, mcmc: draws discarded per chain")
        ->check(CLI::NonNegativeNumber)
        ->default_str(std::to_string(options_.warmup));
    app->add_option("--pool", options_.pool,
                    "sir: prior draws to resample from (0: 20 x draws); smc: particles (0: the "
                    "larger of --draws and 2000)")
        ->check(CLI::NonNegativeNumber)
        ->default_str("0");
    app->add_option("--moves", options_.moves, "smc: Metropolis steps per tempering step")
        ->check(positive_int())
        ->default_str(std::to_string(options_.moves));
    app->add_option("--bound-draws", options_.bound_draws,
                    "ar: prior draws whose largest ratio starts the bound")
        ->check(positive_int())
        ->default_str(std::to_string(options_.bound_draws));
    app->add_option("--out", out_, "Draws in Stan's CSV layout (FILE_1.csv ... for chains)")
        ->type_name("FILE.csv");
    app->add_flag("--json", json_, "Print a JSON summary on standard output");
  }

  void run(const Context& c, const ParamValues& values) override {
    const lfi::Simulator sim(c.model, c.info, assemble_fixed(c, values));
    lfi::require_parameters(sim, "posterior");
    if (ratio_ == "exact" && !sim.has_likelihood())
      throw UsageError(fmt::format("--ratio exact: simulator '{}' has no exact likelihood: {}; "
                                   "train a ratio with nre",
                                   c.info.name, sim.no_likelihood_reason()));
    const std::vector<double> x_obs = read_observation_values(c.info, observed_);
    const bool chained =
        options_.sampler == "imh" || options_.sampler == "barker" || options_.sampler == "mcmc";
    options_.chains = chained ? chains_ : 1;
    for (int64_t k = 0; k < options_.chains; ++k)
      check_output_path(out_.empty() ? "" : chain_path(out_, k, options_.chains),
                        {observed_, ratio_, c.globals.params_file, c.globals.data_values_file});
    options_.seed = c.globals.seed;
    options_.threads = c.globals.threads;
    const auto start = std::chrono::steady_clock::now();
    lfi::LogRatio log_ratio;
    std::unique_ptr<lfi::LoadedRatio> loaded;
    if (ratio_ == "exact") {
      log_ratio = [&](const double* theta, int64_t n, double* out) {
        sim.log_likelihood(theta, n, x_obs.data(), out);
      };
    } else {
      loaded = lfi::load_ratio(c.info, ratio_, sim, c.globals.threads);
      for (const std::string& w : loaded->check_observation(x_obs))
        warn(c, w);
      log_ratio = [&](const double* theta, int64_t n, double* out) {
        loaded->log_ratio(theta, n, x_obs.data(), out);
      };
    }
    const lfi::RatioDraws draws = lfi::sample_with_ratio(sim, log_ratio, options_);
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!out_.empty())
      for (size_t k = 0; k < draws.chains.size(); ++k)
        write_output(c, chain_path(out_, k, draws.chains.size()), stan_csv(c, sim, draws, k));
    for (const std::string& w : draws.warnings)
      warn(c, w);
    if (json_)
      print_json(c, summary(c, sim, draws, elapsed));
  }

private:
  std::string stan_csv(const Context& c, const lfi::Simulator& sim, const lfi::RatioDraws& d,
                       size_t chain) const {
    const lfi::RatioDraws::Chain& ch = d.chains[chain];
    const int64_t P = d.n_params, n = static_cast<int64_t>(ch.log_ratio.size());
    std::vector<double> log_prior(n);
    sim.log_prior(ch.theta.data(), n, log_prior.data());
    fmt::memory_buffer csv;
    auto put = [&]<typename... A>(fmt::format_string<A...> f, A&&... args) {
      fmt::format_to(std::back_inserter(csv), f, std::forward<A>(args)...);
    };
    const bool weighted = !d.log_weight.empty();
    put("# model = {}\n# method = sample (Default)\n#   sample\n", c.info.name);
    put("#     num_samples = {}\n#     num_warmup = {}\n#     save_warmup = 0\n", n,
        options_.sampler == "imh" || options_.sampler == "barker" || options_.sampler == "mcmc"
            ? options_.warmup
            : 0);
    put("#     algorithm = {} (likelihood-free: ratio {})\n", options_.sampler, ratio_);
    put("# id = {}\n# random\n#   seed = {}\n# data\n#   file = {}\n", chain + 1, c.globals.seed,
        observed_);
    put("lp__,accept_stat__{}", weighted ? ",log_weight__" : "");
    for (const std::string& name : simulator_stan_columns(sim.info()))
      put(",{}", name);
    put("\n# Adaptation terminated\n");
    for (int64_t i = 0; i < n; ++i) {
      put("{},{}", format_double(log_prior[i] + ch.log_ratio[i]), format_double(ch.accept_stat[i]));
      if (weighted)
        put(",{}", format_double(d.log_weight[i]));
      for (int64_t k = 0; k < P; ++k)
        put(",{}", format_double(ch.theta[i * P + k]));
      put("\n");
    }
    return fmt::to_string(csv);
  }

  nlohmann::json summary(const Context& c, const lfi::Simulator& sim, const lfi::RatioDraws& d,
                         double elapsed) const {
    const int64_t P = d.n_params;
    const std::vector<std::string> names = simulator_stan_columns(sim.info());
    nlohmann::json columns = nlohmann::json::object();
    for (int64_t k = 0; k < P; ++k) {
      if (!d.log_weight.empty()) { // weighted moments of the pool
        double mean = 0, sq = 0;
        const std::vector<double>& th = d.chains[0].theta;
        for (size_t i = 0; i < d.log_weight.size(); ++i)
          mean += std::exp(d.log_weight[i]) * th[i * P + k];
        for (size_t i = 0; i < d.log_weight.size(); ++i)
          sq += std::exp(d.log_weight[i]) * (th[i * P + k] - mean) * (th[i * P + k] - mean);
        columns[names[k]] = {{"mean", mean}, {"sd", std::sqrt(sq)}};
        continue;
      }
      std::vector<std::vector<double>> chains;
      for (const lfi::RatioDraws::Chain& ch : d.chains) {
        chains.emplace_back();
        for (size_t i = 0; i < ch.log_ratio.size(); ++i)
          chains.back().push_back(ch.theta[i * P + k]);
      }
      if (chains.front().size() < 4) {
        columns[names[k]] = nullptr;
        continue;
      }
      columns[names[k]] = draw_summary_json(chains);
    }
    nlohmann::json acceptance = nlohmann::json::array();
    for (const lfi::RatioDraws::Chain& ch : d.chains)
      acceptance.push_back(ch.acceptance_rate);
    nlohmann::json j = {{"model", c.info.name},
                        {"sampler", options_.sampler},
                        {"ratio", ratio_},
                        {"chains", d.chains.size()},
                        {"draws", d.chains[0].log_ratio.size()},
                        {"proposals", d.proposals},
                        {"ratio_evaluations", d.ratio_evaluations},
                        {"acceptance_rate", d.acceptance_rate},
                        {"chain_acceptance_rate", acceptance},
                        {"summary", columns},
                        {"warnings", d.warnings},
                        {"elapsed_s", elapsed},
                        {"threads", c.globals.threads}};
    if (options_.sampler == "is" || options_.sampler == "sir")
      j["importance_ess"] = d.importance_ess;
    if (options_.sampler == "ar") {
      j["log_bound"] = d.log_bound;
      j["accepted_under_lower_bound"] = d.accepted_under_lower_bound;
      j["bound_raises"] = d.bound_raises;
      j["log_bound_start"] = d.log_bound_start;
    }
    if (options_.sampler == "mcmc")
      j["step"] = d.step;
    if (options_.sampler == "smc") {
      j["temperatures"] = d.temperatures;
      j["log_evidence"] = d.log_evidence;
    }
    return j;
  }

  std::string ratio_, observed_, out_;
  int64_t chains_ = 4;
  bool json_ = false;
  lfi::RatioSamplerOptions options_;
};

} // namespace

std::unique_ptr<Command> add_posterior(CLI::App& app, const Context&) {
  return std::make_unique<PosteriorCommand>(app.add_subcommand(
      "posterior", "Posterior draws given an observation, by a sampler driven by a "
                   "likelihood-to-evidence ratio (nre's classifier, or the exact likelihood); "
                   "draws in Stan's CSV layout"));
}

} // namespace ssm::cli
