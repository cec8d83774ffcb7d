// A simulator's `simulate`: N draws of (parameters, observation) pairs, the parameters from their
// priors, in the kernels' batches on all threads; CSV with one column per scalar of each. Draw i
// is the same for any --threads. Draws whose observation is not finite are dropped and counted.
#include "cli/command.h"
#include "core/error.h"
#include "core/output.h"
#include "lfi/simulator.h"

#include <fmt/format.h>

#include <chrono>

namespace ssm::cli {

namespace {

class SimulatePairs : public Command {
public:
  explicit SimulatePairs(CLI::App* app) : Command(app) {
    app->add_option("--n,-n", n_, "Number of simulations")->required()->check(positive_int());
    app->add_option("--out", out_, "Output CSV file (default: standard output)")
        ->type_name("FILE.csv");
    app->add_flag("--json", json_, "Print a JSON summary (counts, timing) on standard output");
  }

  void run(const Context& c, const ParamValues& values) override {
    const lfi::Simulator sim(c.model, c.info, assemble_fixed(c, values));
    check_output_path(out_);
    const auto start = std::chrono::steady_clock::now();
    const lfi::SimulatedPairs pairs =
        lfi::simulate_pairs(sim, n_, c.globals.seed, c.globals.threads);
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (pairs.dropped > 0)
      warn(c, fmt::format("{} of {} simulations gave a non-finite observation and were dropped "
                          "(the first: draw {})",
                          pairs.dropped, n_, pairs.first_dropped));
    if (pairs.n == 0)
      throw Error(fmt::format("every one of the {} simulations gave a non-finite observation", n_));
    if (!out_.empty() || !json_)
      write_output(c, out_, lfi::pairs_csv(sim, pairs));
    if (json_)
      print_json(c,
                 {{"model", c.info.name},
                  {"simulations", n_},
                  {"kept", pairs.n},
                  {"dropped", pairs.dropped},
                  {"first_dropped", pairs.first_dropped >= 0 ? nlohmann::json(pairs.first_dropped)
                                                             : nlohmann::json(nullptr)},
                  {"parameters", sim.param_columns()},
                  {"observations", sim.obs_columns()},
                  {"elapsed_s", elapsed},
                  {"simulations_per_s", static_cast<double>(n_) / std::max(elapsed, 1e-9)},
                  {"threads", c.globals.threads}});
  }

private:
  int64_t n_ = 0;
  std::string out_;
  bool json_ = false;
};

} // namespace

std::unique_ptr<Command> add_simulate_pairs(CLI::App& app, const Context&) {
  return std::make_unique<SimulatePairs>(app.add_subcommand(
      "simulate", "Draw --n (parameters, observation) pairs: the parameters from their priors, "
                  "the observation from the simulator; CSV with a column per scalar"));
}

} // namespace ssm::cli
