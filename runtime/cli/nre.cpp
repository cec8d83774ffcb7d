// A simulator's `nre`: neural ratio estimation. A classifier of (parameters, observation) pairs,
// joint against shuffled (NRE-A) or against contrastive atoms (NRE-B), trained on simulated pairs
// (--pairs FILE, or --n fresh simulations) and saved for `posterior --ratio FILE`. LibTorch runs
// in the module the lfi room's loader opens (lfi/ratio_loader.h).
#include "cli/command.h"
#include "core/error.h"
#include "core/output.h"
#include "lfi/ratio_loader.h"
#include "lfi/simulator.h"

#include <fmt/format.h>

namespace ssm::cli {

namespace {

class Nre : public Command {
public:
  explicit Nre(CLI::App* app) : Command(app) {
    auto* pairs = app->add_option("--pairs", pairs_,
                                  "Simulated pairs: a CSV file with the simulator's parameter and "
                                  "observation columns (simulate --out writes one)")
                      ->type_name("FILE.csv");
    app->add_option("--n,-n", n_, "Simulate this many pairs instead of reading --pairs")
        ->check(positive_int())
        ->excludes(pairs);
    app->add_option("--save", save_, "Where to save the trained ratio")
        ->required()
        ->type_name("FILE");
    app->add_option("--variant", options_.variant,
                    "a: binary classification of joint against shuffled pairs (NRE-A); b: "
                    "contrastive, the pair's parameters among --atoms (NRE-B)")
        ->check(CLI::IsMember({"a", "b"}))
        ->default_str(options_.variant);
    app->add_option("--atoms", options_.atoms, "b: parameters contrasted per observation")
        ->check(CLI::Range(int64_t{2}, int64_t{1000}))
        ->default_str(std::to_string(options_.atoms));
    app->add_option("--hidden", options_.hidden, "Widths of the classifier's hidden layers")
        ->delimiter(',')
        ->check(positive_int())
        ->default_str("32,32,32");
    app->add_option("--activation", options_.activation, "The hidden layers' activation")
        ->check(CLI::IsMember({"silu", "relu", "tanh", "gelu"}))
        ->default_str(options_.activation);
    app->add_option("--batch-size", options_.batch_size,
                    fmt::format("Pairs per Adam step (by default 50, or more to keep an epoch "
                                "to {} steps)",
                                options_.max_epoch_steps))
        ->check(CLI::Range(int64_t{2}, int64_t{1} << 24))
        ->default_str("auto");
    app->add_option("--learning-rate", options_.learning_rate, "Adam's step size")
        ->check(CLI::PositiveNumber)
        ->default_str("0.001");
    app->add_option("--validation", options_.validation_fraction,
                    "Fraction of the pairs held out for early stopping")
        ->check(CLI::Range(0.01, 0.5))
        ->default_str("0.1");
    app->add_option("--patience", options_.patience,
                    "Epochs without a better validation loss before the step size is halved or "
                    "training stops")
        ->check(positive_int())
        ->default_str(std::to_string(options_.patience));
    app->add_option("--patience-steps", options_.patience_steps,
                    "The patience is at least this many Adam steps (small sets of pairs have "
                    "short epochs)")
        ->check(CLI::NonNegativeNumber)
        ->default_str(std::to_string(options_.patience_steps));
    app->add_option("--decays", options_.decays,
                    "Times a plateau halves the step size before training stops")
        ->check(CLI::Range(int64_t{0}, int64_t{20}))
        ->default_str(std::to_string(options_.decays));
    app->add_option("--epochs", options_.max_epochs, "Most epochs")
        ->check(positive_int())
        ->default_str(std::to_string(options_.max_epochs));
    app->add_flag("--json", json_, "Print a JSON summary of the training on standard output");
  }

  void run(const Context& c, const ParamValues& values) override {
    if (pairs_.empty() && n_ == 0)
      throw UsageError("nre: give the training pairs with --pairs FILE.csv, or --n N to simulate "
                       "them");
    const lfi::Simulator sim(c.model, c.info, assemble_fixed(c, values));
    lfi::require_parameters(sim, "nre");
    check_output_path(save_, {pairs_});
    const lfi::SimulatedPairs pairs =
        pairs_.empty() ? lfi::simulate_pairs(sim, n_, c.globals.seed, c.globals.threads)
                       : lfi::read_pairs(sim, pairs_);
    if (pairs.dropped > 0)
      warn(c, fmt::format("{} pairs with a non-finite observation were dropped (the first: {} "
                          "{})",
                          pairs.dropped, pairs_.empty() ? "draw" : pairs_ + " line",
                          pairs.first_dropped));
    lfi::RatioTrainingData data{pairs.theta.data(), pairs.x.data(), pairs.n,
                                sim.n_params(),     sim.n_obs(),    sim.param_columns(),
                                sim.obs_columns(),  c.info.name,    sim.data_values()};
    options_.seed = c.globals.seed;
    options_.threads = c.globals.threads;
    Progress progress(c, "nre");
    options_.progress = [&](int64_t epoch, int64_t total) { progress(epoch, total); };
    const lfi::RatioTrainingReport report = lfi::train_ratio_loaded(c.info, data, options_);
    progress.finish();
    OutputFile out(save_);
    out.write(report.bytes);
    out.commit();
    if (json_)
      print_json(c, {{"model", c.info.name},
                     {"variant", options_.variant == "a" ? "NRE-A" : "NRE-B"},
                     {"pairs", pairs.n},
                     {"dropped", pairs.dropped},
                     {"train_rows", report.train_rows},
                     {"validation_rows", report.validation_rows},
                     {"epochs", report.epochs},
                     {"best_epoch", report.best_epoch},
                     {"stopped_early", report.stopped_early},
                     {"steps", report.steps},
                     {"batch_size", report.batch_size},
                     {"patience_epochs", report.patience_epochs},
                     {"decays", report.decays},
                     {"final_learning_rate", report.final_learning_rate},
                     {"train_loss", report.train_loss},
                     {"validation_loss", report.validation_loss},
                     {"validation_accuracy", report.validation_accuracy},
                     {"hidden", options_.hidden},
                     {"elapsed_s", report.elapsed_s},
                     {"saved", save_},
                     {"threads", c.globals.threads}});
  }

private:
  std::string pairs_, save_;
  int64_t n_ = 0;
  bool json_ = false;
  lfi::RatioTrainingOptions options_;
};

} // namespace

std::unique_ptr<Command> add_nre(CLI::App& app, const Context&) {
  return std::make_unique<Nre>(app.add_subcommand(
      "nre", "Neural ratio estimation: train a classifier of simulated (parameters, observation) "
             "pairs whose logit estimates log p(x | parameters) / p(x), for posterior --ratio"));
}

} // namespace ssm::cli
