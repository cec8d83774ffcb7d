// `simulate`: one trajectory of states and observations, CSV t,<state>,<obs>,<inputs>; for a
// plate model that calls networks, its items through the vi module (vi/network_simulation.h),
// in long format (series, t: one row per token) when an observation is a sequence.
#include "smc/simulate.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/output.h"
#include "core/sequence_items.h"
#include "vi/loader.h"

#include <fmt/format.h>

#include <optional>

namespace ssm::cli {

namespace {

class Simulate : public Command {
public:
  explicit Simulate(CLI::App* app) : Command(app) {
    app->add_option("--T,-T", T_, "Number of time steps")->required()->check(positive_int());
    app->add_option("--inputs", inputs_,
                    "CSV file with the model's input columns, one row per time step")
        ->type_name("FILE.csv");
    app->add_option("--out", out_, "Output CSV file (default: standard output)")
        ->type_name("FILE.csv");
    app->add_option("--load-nets", load_nets_,
                    "A plate model that calls networks: their weights, as vi --save-nets wrote "
                    "them (default: their initialisation under --seed)")
        ->type_name("FILE.pt");
    app->add_option("--length", length_,
                    "A sequence a language model (rnn_lm) draws: at most this many tokens")
        ->check(positive_int());
    app->add_option("--end", end_,
                    "A sequence a language model draws ends after this token (the data's "
                    "convention, e.g. the token that ends every word; default: none, so every "
                    "sequence has --length tokens)")
        ->check(CLI::NonNegativeNumber);
  }

  void run(const Context& c, const ParamValues& values) override {
    if (!c.model.init_sample || !c.model.transition_sample || !c.model.obs_sample)
      throw Error("the model table lacks a sampling kernel needed by simulate");
    std::vector<double> theta = assemble_fixed(c, values);
    std::optional<ObsData> inputs;
    if (!inputs_.empty())
      inputs = read_inputs_file(c.info, inputs_);
    // The output (and its temporary file) is created only once the results exist, so a run
    // interrupted by a signal leaves nothing behind; a bad path still fails before the work.
    check_output_path(out_);
    if (c.info.density_calls_networks())
      return run_networks(c, theta, inputs ? &*inputs : nullptr);
    for (const auto& [flag, given] : {std::pair{"--load-nets", !load_nets_.empty()},
                                      {"--length", length_ > 0},
                                      {"--end", end_ >= 0}})
      if (given)
        throw Error(fmt::format("simulate {}: model '{}' calls no networks", flag, c.info.name));
    Simulation s =
        simulate(c.model, c.info, theta, T_, c.globals.seed, inputs ? &*inputs : nullptr);
    write_output(c, out_, simulation_csv(c.info, s));
  }

private:
  void run_networks(const Context& c, const std::vector<double>& theta, const ObsData* inputs) {
    if (c.info.step != "n")
      throw Error(fmt::format("simulate: model '{}' calls networks in a time series; simulate "
                              "serves networks in plate models (items n) only",
                              c.info.name));
    const bool sequences = has_sequences(c.info);
    if ((length_ > 0 || end_ >= 0) && !sequences)
      throw Error(fmt::format("simulate {}: model '{}' has no observation that is a sequence",
                              length_ > 0 ? "--length" : "--end", c.info.name));
    OptionValues none;
    MethodRun run{c.model, c.info, none, c.globals.seed, false, c.globals.threads};
    run.fixed = &theta;
    NetworkSimulationOptions o;
    o.items = T_;
    o.load_nets = load_nets_;
    o.max_length = length_ > 0 ? length_ : 100;
    o.end = end_;
    o.inputs = inputs;
    const NetworkSimulation s = simulate_networks_loaded(run, o);
    write_output(c, out_,
                 sequences ? sequence_simulation_csv(c.info, s.simulation, s.sequences)
                           : simulation_csv(c.info, s.simulation));
  }

  int64_t T_ = 0, length_ = 0, end_ = -1;
  std::string inputs_, out_, load_nets_;
};

} // namespace

std::unique_ptr<Command> add_simulate(CLI::App& app, const Context&) {
  return std::make_unique<Simulate>(app.add_subcommand(
      "simulate", "Simulate one trajectory of states and observations, or a plate model's items "
                  "(through its networks, --load-nets); CSV t,<state>,<obs>"));
}

} // namespace ssm::cli
