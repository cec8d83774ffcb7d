// `filter`: the log-likelihood and filtering moments by the method --method names (or `auto`'s
// choice), CSV per time step and a JSON summary.
#include "cli/command.h"
#include "core/error.h"
#include "core/output.h"
#include "core/thread_pool.h"

namespace ssm::cli {

namespace {

class Filter : public Command {
public:
  Filter(CLI::App* app, const Context& c) : Command(app) {
    add_data_option(*app, data_,
                    "Data CSV with a header; observation columns are found by name, one row per "
                    "time step; empty or NA = missing");
    add_method_option(*app, c.registry, Task::Filter, "", options_);
    add_method_options(*app, c.registry, Task::Filter, options_);
    add_output_options(*app, out_, json_, "Print a JSON summary on standard output");
  }

  void run(const Context& c, const ParamValues& values) override {
    const Method& method = chosen_method(c, Task::Filter, options_);
    MethodRun run{c.model, c.info, options_, c.globals.seed, options_.word("--method") == "auto"};
    if (method.check)
      method.check(run);
    if (!c.model.init_sample || !c.model.transition_sample || !c.model.obs_logpdf)
      throw Error("the model table lacks a kernel needed by filter");
    const std::vector<double> theta = assemble_fixed(c, values);
    const ObsData data = read_observations_file(c.info, data_);
    const bool write_csv = !out_.empty() || !json_;
    check_output_path(out_); // the file itself is created after filtering, as for simulate
    ThreadPool pool(c.globals.threads);
    Progress progress(c, "filter");
    run.fixed = &theta;
    run.data = &data;
    run.pool = &pool;
    run.progress = [&](int64_t t, int64_t n) { progress(t, n); };
    FilterResult r;
    try {
      r = method.filter(run);
    } catch (...) {
      progress.finish();
      throw;
    }
    progress.finish();
    if (write_csv)
      write_output(c, out_, filter_csv(c.info, r));
    if (json_) {
      nlohmann::json j = {{"log_likelihood", r.log_likelihood},
                          {"method", method.name},
                          {"chosen_by", run.automatic ? "auto" : "user"},
                          {"T", r.T},
                          {"elapsed_s", r.elapsed_s},
                          {"model", c.info.name}};
      if (method.filter_json)
        j.update(method.filter_json(run, r));
      print_json(c, j);
    }
  }

private:
  std::string data_, out_;
  bool json_ = false;
  OptionValues options_;
};

} // namespace

std::unique_ptr<Command> add_filter(CLI::App& app, const Context& c) {
  CLI::App* sub = app.add_subcommand(
      "filter", "Filtering: log-likelihood and filtering moments, exact for a linear-Gaussian "
                "(Kalman) or finite-state (forward algorithm) model, by a particle filter "
                "otherwise (guided when the model has a proposal). CSV "
                "t,mean_<col>,var_<col>...[,ess],loglik_increment per time step");
  return std::make_unique<Filter>(sub, c);
}

} // namespace ssm::cli
