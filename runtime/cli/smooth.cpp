// `smooth`: per-t smoothing moments and the model's functionals by the smoother --method names
// (or `auto`'s choice), CSV per time step and a JSON summary.
#include "smoothing/smooth.h"
#include "cli/command.h"
#include "core/output.h"
#include "core/thread_pool.h"
#include "smoothing/methods.h"

#include <sys/resource.h>

namespace ssm::cli {

namespace {

class Smooth : public Command {
public:
  Smooth(CLI::App* app, const Context& c) : Command(app) {
    add_data_option(*app, data_, "Data CSV, as for filter");
    add_method_option(*app, c.registry, Task::Smooth, "METHOD", options_);
    add_method_options(*app, c.registry, Task::Smooth, options_);
    add_output_options(*app, out_, json_, "Print a JSON summary on standard output");
  }

  void run(const Context& c, const ParamValues& values) override {
    const Method& method = chosen_method(c, Task::Smooth, options_);
    MethodRun run{c.model, c.info, options_, c.globals.seed, options_.word("--method") == "auto"};
    select_functionals(c.info, options_.names("--functional"));
    const std::vector<double> theta = assemble_fixed(c, values);
    const ObsData data = read_observations_file(c.info, data_);
    if (method.check)
      method.check(run); // before any work
    const bool write_csv = !out_.empty() || !json_;
    check_output_path(out_);
    ThreadPool pool(c.globals.threads);
    Progress progress(c, "smooth (filter pass)");
    run.fixed = &theta;
    run.data = &data;
    run.pool = &pool;
    run.progress = [&](int64_t t, int64_t n) { progress(t, n); };
    SmoothResult r;
    try {
      r = method.smooth(run);
    } catch (...) {
      progress.finish();
      throw;
    }
    progress.finish();
    if (write_csv)
      write_output(c, out_, smooth_csv(c.info, r));
    if (json_) {
      nlohmann::json j = method.smooth_json(run, r);
      j["threads"] = c.globals.threads;
      rusage usage{};
      if (::getrusage(RUSAGE_SELF, &usage) == 0)
        j["peak_rss_mb"] = static_cast<double>(usage.ru_maxrss) / 1024.0; // ru_maxrss is in KiB
      if (run.automatic)
        j["chosen_by"] = "auto";
      print_json(c, j);
    }
  }

private:
  std::string data_, out_;
  bool json_ = false;
  OptionValues options_;
};

} // namespace

std::unique_ptr<Command> add_smooth(CLI::App& app, const Context& c) {
  CLI::App* sub = app.add_subcommand(
      "smooth", "Smoothing: per-t smoothing mean and variance of each state component and the "
                "model's functionals. CSV t,mean_<col>,var_<col>...,<per-t functionals>");
  return std::make_unique<Smooth>(sub, c);
}

} // namespace ssm::cli
