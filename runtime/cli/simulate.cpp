// `simulate`: one trajectory of states and observations, CSV t,<state>,<obs>,<inputs>.
#include "smc/simulate.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/output.h"

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
    Simulation s =
        simulate(c.model, c.info, theta, T_, c.globals.seed, inputs ? &*inputs : nullptr);
    write_output(c, out_, simulation_csv(c.info, s));
  }

private:
  int64_t T_ = 0;
  std::string inputs_, out_;
};

} // namespace

std::unique_ptr<Command> add_simulate(CLI::App& app, const Context&) {
  return std::make_unique<Simulate>(app.add_subcommand(
      "simulate", "Simulate one trajectory of states and observations; CSV t,<state>,<obs>"));
}

} // namespace ssm::cli
