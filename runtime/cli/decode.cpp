// `decode`: a state path of a finite-state model by the method --method names (Viterbi's most
// probable path, or the most probable state at each t), CSV t,<state columns>[,probability] per
// time step and a JSON summary.
#include "cli/command.h"
#include "core/output.h"
#include "core/series.h"

#include <fmt/format.h>

#include <numeric>

namespace ssm::cli {

namespace {

class Decode : public TaskCommand {
public:
  Decode(CLI::App* app, const Context& c)
      : TaskCommand(app, c, Task::Decode,
                    {.data = "Data CSV, as for filter",
                     .json = "Print a JSON summary (log joint density of the path, "
                             "log-likelihood)"}) {}

  void run(const Context& c, const ParamValues& values) override {
    const Method& m = method(c);
    const std::vector<double> theta = assemble_fixed(c, values);
    const ObsData data = read_data(c, data_);
    MethodRun run = start(c);
    if (m.check)
      m.check(run);
    check_output_path(out_);
    run.fixed = &theta;
    run.data = &data;
    const Decoding d = decode_each_series(m, run);
    if (write_csv())
      write_output(c, out_, path_csv(c.info, d, data.T));
    if (json_) {
      nlohmann::json j = {{"model", c.info.name},
                          {"method", m.name},
                          {"chosen_by", run.automatic ? "auto" : "user"},
                          {"T", data.T},
                          {"states", d.states},
                          {"log_joint", d.log_joint}, // null: the path is impossible
                          {"log_likelihood", d.log_likelihood}};
      if (!d.probability.empty()) // the expected number of correctly decoded steps
        j["expected_correct"] = std::accumulate(d.probability.begin(), d.probability.end(), 0.0);
      print_json(c, j, data);
    }
  }

private:
  static std::string path_csv(const ModelInfo& info, const Decoding& d, int64_t T) {
    const std::vector<std::string> cols = state_columns(info);
    fmt::memory_buffer csv;
    const bool probability = !d.probability.empty();
    fmt::format_to(std::back_inserter(csv), "{}{},{}{}\n", series_header(d.series), info.step,
                   fmt::join(cols, ","), probability ? ",probability" : "");
    for (int64_t t = 0; t < T; ++t) {
      fmt::format_to(std::back_inserter(csv), "{}", step_cells(d.series, t));
      for (size_t k = 0; k < cols.size(); ++k)
        fmt::format_to(std::back_inserter(csv), ",{}",
                       format_double(d.path[t * info.n_state + static_cast<int64_t>(k)]));
      if (probability)
        fmt::format_to(std::back_inserter(csv), ",{}", format_double(d.probability[t]));
      fmt::format_to(std::back_inserter(csv), "\n");
    }
    return fmt::to_string(csv);
  }
};

} // namespace

std::unique_ptr<Command> add_decode(CLI::App& app, const Context& c) {
  return std::make_unique<Decode>(
      app.add_subcommand("decode", fmt::format("Decoding of a finite-state model: {}. CSV "
                                               "t,<state columns>[,probability] per time step",
                                               c.registry.method_list(Task::Decode))),
      c);
}

} // namespace ssm::cli
