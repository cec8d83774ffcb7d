// `score`: the gradient of the log-likelihood with respect to every parameter at the current
// values, by Fisher's identity over the smoother --method names (learning/score.h), with Monte
// Carlo standard errors for particle smoothers; CSV parameter,score,se and a JSON summary.
#include "learning/score.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/output.h"
#include "core/params.h"
#include "learning/information.h"
#include "smc/proposal.h"

#include <fmt/format.h>

namespace ssm::cli {

namespace {

class Score : public TaskCommand {
public:
  Score(CLI::App* app, const Context& c)
      : TaskCommand(app, c, Task::Smooth,
                    {.data = "Data CSV, as for filter",
                     .json = "Print a JSON summary on standard output",
                     .method_type = "METHOD"}) {
    app->add_option("--replicates", replicates_,
                    "Independent runs of a particle smoother, averaged; their spread gives the "
                    "standard errors")
        ->check(positive_int())
        ->capture_default_str();
    app->add_flag("--information", information_,
                  "Also the observed information, -d2 log p(y) / d theta2 over every parameter "
                  "component, by central differences of the exact score (exact smoothers only)");
  }

  void run(const Context& c, const ParamValues& values) override {
    const ScoreModel sm = score_model(c.model, c.info);
    const Method& m = method(c, sm.model, sm.info);
    MethodRun run = start(c, sm.model, sm.info);
    if (Refusal why = m.why_not(sm.model, sm.info))
      throw Error(fmt::format("score --method {}: {}", m.name, *why));
    if (m.fits_to_data)
      throw Error(fmt::format("score --method {}: it approximates the smoothing law by a guide "
                              "fitted to the data, and the score needs an exact or a particle "
                              "smoother",
                              m.name));
    if (m.check)
      m.check(run);
    const std::vector<double> theta = assemble_fixed(c, values);
    const ObsData data = read_data(c, data_);
    check_output_path(out_);
    run.fixed = &theta;
    run.data = &data;
    if (information_ && m.particles)
      throw Error(fmt::format("score --information: the observed information needs an exact "
                              "score, and --method {} is a particle smoother (the exact ones, "
                              "where the structure allows: rts, forward-backward)",
                              m.name));
    const ScoreResult r = run_method(
        c, run, "score", [&](const MethodRun& one) { return estimate_score(m, one, replicates_); });
    nlohmann::json info_json = nullptr;
    if (information_) {
      std::vector<int64_t> components;
      std::vector<std::string> names;
      for (const ParamInfo& p : c.info.params) {
        const std::vector<std::string> cols = column_names(p.name, p.shape);
        for (int64_t k = 0; k < p.size; ++k) {
          components.push_back(p.offset + k);
          names.push_back(cols[k]);
        }
      }
      ThreadPool pool(c.globals.threads);
      MethodRun at = run;
      at.pool = &pool;
      const Eigen::MatrixXd I = observed_information(m, at, components);
      nlohmann::json rows = nlohmann::json::array();
      for (Eigen::Index i = 0; i < I.rows(); ++i) {
        nlohmann::json row = nlohmann::json::array();
        for (Eigen::Index k = 0; k < I.cols(); ++k)
          row.push_back(I(i, k));
        rows.push_back(row);
      }
      info_json = {{"components", names}, {"matrix", rows}};
    }
    if (write_csv())
      write_output(c, out_, score_csv(c.info, r));
    if (json_) {
      nlohmann::json j = {{"model", c.info.name},
                          {"method", r.method},
                          {"chosen_by", run.automatic ? "auto" : "user"},
                          {"exact", r.exact},
                          {"replicates", r.replicates},
                          {"T", data.T},
                          {"log_likelihood", r.log_likelihood},
                          {"score", params_json(c.info, r.score)},
                          {"score_se", params_json(c.info, r.se)},
                          {"information", info_json},
                          {"elapsed_s", r.elapsed_s},
                          {"threads", c.globals.threads}};
      add_random_weight_caveat(j, c.info,
                               !r.exact && run.options.has("--filter") &&
                                   run.options.word("--filter") == "random-weight");
      print_json(c, j, data);
    }
  }

private:
  int64_t replicates_ = 5;
  bool information_ = false;

  static std::string score_csv(const ModelInfo& info, const ScoreResult& r) {
    fmt::memory_buffer csv;
    fmt::format_to(std::back_inserter(csv), "parameter,score,se\n");
    for (const ParamInfo& p : info.params) {
      const std::vector<std::string> names = column_names(p.name, p.shape);
      for (int64_t c = 0; c < p.size; ++c)
        fmt::format_to(std::back_inserter(csv), "{},{},{}\n", csv_name(names[c]),
                       format_double(r.score[p.offset + c]), format_double(r.se[p.offset + c]));
    }
    return fmt::to_string(csv);
  }
};

} // namespace

std::unique_ptr<Command> add_score(CLI::App& app, const Context& c) {
  CLI::App* sub = app.add_subcommand(
      "score", "The score: the gradient of the log-likelihood with respect to every parameter, "
               "by Fisher's identity over a smoother (exact for a linear-Gaussian or finite-state "
               "model), with Monte Carlo standard errors. CSV parameter,score,se");
  return std::make_unique<Score>(sub, c);
}

} // namespace ssm::cli
