// The command line of a generated executable: global options (threads, seed, parameters) and the
// subcommands simulate, filter, smooth, decode and info. Usage errors exit with 2, other errors
// with 1, both printed as `<prog>: error: message`.
#include "cli/cli.h"
#include "core/csv.h"
#include "core/error.h"
#include "core/metadata.h"
#include "core/output.h"
#include "core/params.h"
#include "core/thread_pool.h"
#include "exact/finite_state.h"
#include "exact/kalman.h"
#include "smc/filter.h"
#include "smc/simulate.h"
#include "smoothing/smooth.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <optional>
#include <sstream>
#include <sys/resource.h>
#include <unistd.h>

using nlohmann::json;

namespace ssm {

namespace {

std::string program_name(int argc, char** argv) {
  if (argc < 1 || !argv[0] || !*argv[0])
    return "model";
  std::string p = argv[0];
  auto slash = p.find_last_of('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::string var_type(const VarInfo& v) {
  std::string scalar = "real";
  if (v.integer) {
    auto bound = [](double b) { return fmt::format("{}", static_cast<int64_t>(b)); };
    scalar = std::isfinite(v.lower) && std::isfinite(v.upper)
                 ? fmt::format("int[{}..{}]", bound(v.lower), bound(v.upper))
                 : "int";
  }
  if (v.shape.empty())
    return scalar;
  if (v.shape.size() == 1)
    return fmt::format("vector[{}] of {}", v.shape[0], scalar);
  return fmt::format("matrix[{}] of {}", fmt::join(v.shape, ","), scalar);
}

// The filter methods that apply to the model, `auto`'s choice first.
std::vector<std::string> filter_methods(const ssm_model& model, const ModelInfo& info) {
  std::vector<std::string> out;
  if (info.linear_gaussian && model.linear_gaussian)
    out.push_back("kalman");
  if (enumerable(info))
    out.push_back("forward");
  if (model.proposal_sample && info.transition_tractable)
    out.push_back("guided");
  out.insert(out.end(), {"bootstrap", "apf"});
  if (model.gaussian_jacobian)
    out.push_back("ekf");
  if (model.gaussian_moments)
    out.push_back("ukf");
  return out;
}

std::string params_footer(const ModelInfo& info) {
  std::string s =
      "Parameter values: --param name=value (repeatable), vectors as [1,2], matrices as "
      "[[1,2],[3,4]] (rows); --params FILE.json holds an object {\"name\": value, ...}. Later "
      "sources override earlier ones: model defaults < --params < --param.\n\n"
      "The global options --threads, --seed, --param and --params may be given before or "
      "after the subcommand.\n"
      "Results are bit-identical for every --threads value with the same --seed.\n";
  if (info.params.empty())
    return s;
  s += "\nParameters of this model:\n";
  for (const ParamInfo& p : info.params) {
    s += fmt::format("  {} : {}", p.name, type_string(p));
    if (!p.prior.empty())
      s += " ~ " + p.prior;
    s += p.default_value ? " = " + format_param_value(p, *p.default_value)
                         : std::string(" (no default: must be given)");
    s += "\n";
  }
  return s;
}

struct Globals {
  int threads = 1;
  uint64_t seed = 1;
  std::vector<std::string> params;
  std::string params_file;
};

void run_info(const ssm_model& model, const ModelInfo& info, const ParamValues& values,
              bool as_json, std::FILE* out) {
  const std::vector<std::string> filters = filter_methods(model, info),
                                 smoothers = smooth_methods(model, info);
  if (as_json) {
    json j;
    j["model"] = info.name;
    j["source"] = info.source;
    j["n_state"] = info.n_state;
    j["n_obs"] = info.n_obs;
    j["n_theta"] = info.n_theta;
    auto vars = [](const std::vector<VarInfo>& vs, bool obs) {
      json a = json::array();
      for (const VarInfo& v : vs) {
        if (v.hidden)
          continue;
        json e = {{"name", v.name},
                  {"shape", v.shape},
                  {"offset", v.offset},
                  {"size", v.size},
                  {"columns", column_names(v.name, v.shape)}};
        if (obs)
          e["joint"] = v.joint;
        a.push_back(e);
      }
      return a;
    };
    j["state"] = vars(info.state, false);
    j["obs"] = vars(info.obs, true);
    json ps = json::array();
    for (size_t i = 0; i < info.params.size(); ++i) {
      const ParamInfo& p = info.params[i];
      ps.push_back({{"name", p.name},
                    {"type", p.type},
                    {"shape", p.shape},
                    {"value", values[i] ? param_value_json(p, *values[i]) : json(nullptr)},
                    {"prior", p.prior},
                    {"lower", p.lower ? json(*p.lower) : json(nullptr)},
                    {"upper", p.upper ? json(*p.upper) : json(nullptr)}});
    }
    j["params"] = ps;
    j["structure"] = info.structure;
    j["methods"] = {{"filter", filters}, {"smooth", smoothers}, {"decode", enumerable(info)}};
    fmt::print(out, "{}\n", j.dump(2));
    return;
  }
  fmt::print(out, "model {}{}\n", info.name, info.source.empty() ? "" : " (" + info.source + ")");
  const int64_t shown = static_cast<int64_t>(state_columns(info).size());
  fmt::print(out, "state ({} component{}{}):\n", shown, shown == 1 ? "" : "s",
             shown < info.n_state
                 ? fmt::format(", and {} hidden that carry past values", info.n_state - shown)
                 : "");
  for (const VarInfo& v : info.state)
    if (!v.hidden)
      fmt::print(out, "  {} : {}\n", v.name, var_type(v));
  fmt::print(out, "observations ({} component{}):\n", info.n_obs, info.n_obs == 1 ? "" : "s");
  for (const VarInfo& v : info.obs)
    fmt::print(out, "  {} : {}{}\n", v.name, var_type(v),
               v.joint && v.size > 1 ? " (joint: all or none of its columns may be missing)" : "");
  fmt::print(out, "parameters ({} value{} in theta):\n", info.n_theta,
             info.n_theta == 1 ? "" : "s");
  for (size_t i = 0; i < info.params.size(); ++i) {
    const ParamInfo& p = info.params[i];
    fmt::print(out, "  {} : {} = {}{}\n", p.name, type_string(p),
               values[i] ? format_param_value(p, *values[i]) : std::string("(no value)"),
               p.prior.empty() ? "" : "  ~ " + p.prior);
  }
  if (!info.structure.empty()) {
    fmt::print(out, "structure:\n");
    std::istringstream lines(info.structure);
    for (std::string line; std::getline(lines, line);)
      fmt::print(out, "  {}\n", line);
  }
  fmt::print(out, "methods (auto's choice first):\n  filter: {}\n  smooth: {}\n  decode: {}\n",
             fmt::join(filters, ", "), fmt::join(smoothers, ", "),
             enumerable(info) ? "yes (Viterbi)" : "no (the state is not finite)");
}

// Progress on a terminal only, and only for runs long enough to need it.
struct Progress {
  std::FILE* err;
  std::string prog;
  bool enabled;
  const char* what; // "filter", "smooth (forward pass)"
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now(), last = start;
  bool shown = false;

  void operator()(int64_t t, int64_t T) {
    if (!enabled)
      return;
    auto now = std::chrono::steady_clock::now();
    if (now - start < std::chrono::seconds(1) || now - last < std::chrono::milliseconds(200))
      return;
    last = now;
    shown = true;
    fmt::print(err, "\r{} {}: t = {}/{} ({}%)", prog, what, t + 1, T, 100 * (t + 1) / T);
    std::fflush(err);
  }
  void finish() {
    if (shown)
      fmt::print(err, "\r\033[K");
  }
};

} // namespace

// The fixed part of the kernels' frame: parameters, then data values.
static std::vector<double> assemble_fixed(const ModelInfo& info, const ParamValues& values,
                                          const std::string& data_file) {
  std::vector<double> fixed = assemble_theta(info, values);
  std::vector<double> data = read_data_values(info, data_file);
  fixed.insert(fixed.end(), data.begin(), data.end());
  return fixed;
}

int run_cli(const ssm_model* model, int argc, char** argv, std::FILE* out, std::FILE* err) {
  const std::string prog = program_name(argc, argv);
  auto fail = [&](const std::string& msg) {
    fmt::print(err, "{}: error: {}\n", prog, msg);
    std::fflush(err);
    return 1;
  };
  if (!model)
    return fail("no model table");
  if (model->abi_version != SSM_ABI_VERSION)
    return fail(fmt::format("the model was compiled for runtime ABI version {}, this runtime is "
                            "version {}: rebuild the model with a matching ssmc",
                            model->abi_version, SSM_ABI_VERSION));
  ModelInfo info;
  try {
    info = parse_metadata(model->metadata_json ? model->metadata_json : "");
  } catch (const std::exception& e) {
    return fail(e.what());
  }

  // CLI::PositiveNumber's message spells out a range up to DBL_MAX; say what is expected.
  const CLI::Validator positive_int(
      [](std::string& v) {
        std::string_view s = v; // CLI11 itself accepts blanks around the number and a '+'
        while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
          s.remove_prefix(1);
        while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
          s.remove_suffix(1);
        if (!s.empty() && s.front() == '+')
          s.remove_prefix(1);
        int64_t x = 0;
        auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
        if (s.empty() || ec != std::errc() || end != s.data() + s.size() || x < 1)
          return fmt::format("expected a positive integer, got '{}'", v);
        return std::string();
      },
      "POSITIVE");

  Globals g;
  g.threads = default_threads();
  CLI::App app{fmt::format("{}: state-space model '{}'{}, compiled by ssmc.", prog, info.name,
                           info.source.empty() ? "" : " from " + info.source),
               prog};
  app.fallthrough(); // global options may also follow the subcommand
  app.require_subcommand(1);
  app.footer(params_footer(info));
  app.add_option("--threads", g.threads,
                 fmt::format("Worker threads (default: all cores, here {})", g.threads))
      ->check(positive_int);
  // Parsed by hand: CLI11 would wrap "-1" and saturate values above 2^64 - 1.
  std::string seed_text = "1";
  app.add_option("--seed", seed_text, "Random seed (unsigned 64-bit integer)")
      ->capture_default_str()
      ->type_name("UINT64")
      ->check(CLI::Validator(
          [](std::string& v) {
            uint64_t x;
            auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
            if (v.empty() || ec != std::errc() || end != v.data() + v.size())
              return fmt::format("expected an unsigned 64-bit integer, got '{}'", v);
            return std::string();
          },
          "UINT64"));
  app.add_option("--param", g.params,
                 "Set a parameter: name=value, [1,2] for a vector, [[1,2],[3,4]] for a matrix; "
                 "repeatable")
      ->allow_extra_args(false)
      ->type_name("NAME=VALUE");
  app.add_option("--params", g.params_file,
                 "JSON file with an object mapping parameter names to values")
      ->type_name("FILE.json");
  std::string data_values_file;
  app.add_option("--data-file", data_values_file,
                 "JSON file with an object mapping the model's data items to values")
      ->type_name("FILE.json");

  int64_t T = 0;
  std::string sim_out;
  CLI::App* sim = app.add_subcommand("simulate", "Simulate one trajectory of states and "
                                                 "observations; CSV t,<state>,<obs>");
  sim->add_option("--T,-T", T, "Number of time steps")->required()->check(positive_int);
  std::string sim_inputs;
  sim->add_option("--inputs", sim_inputs,
                  "CSV file with the model's input columns, one row per time step")
      ->type_name("FILE.csv");
  sim->add_option("--out", sim_out, "Output CSV file (default: standard output)")
      ->type_name("FILE.csv");

  std::string data_file, filter_out, filter_method = "auto";
  FilterOptions fopt;
  bool filter_json = false;
  CLI::App* flt = app.add_subcommand(
      "filter", "Filtering: log-likelihood and filtering moments, exact for a linear-Gaussian "
                "(Kalman) or finite-state (forward algorithm) model, by a particle filter "
                "otherwise (guided when the model has a proposal). CSV "
                "t,mean_<col>,var_<col>...[,ess],loglik_increment per time step");
  flt->add_option("--data", data_file,
                  "Data CSV with a header; observation columns are found by name, one row per "
                  "time step; empty or NA = missing")
      ->required()
      ->type_name("FILE.csv");
  flt->add_option("--method", filter_method,
                  "auto (kalman for a linear-Gaussian model, forward for a finite-state one, "
                  "guided for a model with a proposal, else bootstrap), bootstrap, guided (the "
                  "model's proposal), apf (auxiliary particle filter), kalman, forward, ekf or "
                  "ukf (extended / unscented Kalman filters, approximations for nonlinear models "
                  "with Gaussian noise)")
      ->type_name("auto|bootstrap|guided|apf|kalman|forward|ekf|ukf")
      ->capture_default_str()
      ->check(
          CLI::IsMember({"auto", "bootstrap", "guided", "apf", "kalman", "forward", "ekf", "ukf"}));
  flt->add_option("--particles", fopt.particles, "Number of particles")
      ->capture_default_str()
      ->check(positive_int);
  flt->add_option("--ess-threshold", fopt.ess_threshold,
                  "Resample when ESS < r * particles (1: every step, 0: never)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  std::string resampling = resampling_name(fopt.resampling);
  std::vector<std::string> resampling_names;
  for (Resampling r : kResamplingSchemes)
    resampling_names.push_back(resampling_name(r));
  flt->add_option("--resampling", resampling, "Resampling scheme")
      ->type_name("SCHEME")
      ->capture_default_str()
      ->check(CLI::IsMember(resampling_names));
  flt->add_option("--out", filter_out,
                  "Output CSV file (default: standard output, none with --json)")
      ->type_name("FILE.csv");
  flt->add_flag("--json", filter_json, "Print a JSON summary on standard output");

  // smooth: the filter's options, then the method's.
  std::string smooth_data, smooth_out, smooth_method = "auto", smooth_backward = "auto",
                                       smooth_filter = "auto";
  SmoothOptions sopt;
  bool smooth_json_flag = false;
  std::optional<bool> smooth_marginals;
  CLI::App* smo = app.add_subcommand(
      "smooth", "Smoothing: per-t smoothing mean and variance of each state component and the "
                "model's functionals. CSV t,mean_<col>,var_<col>...,<per-t functionals>");
  smo->add_option("--data", smooth_data, "Data CSV, as for filter")
      ->required()
      ->type_name("FILE.csv");
  std::vector<std::string> method_names = {"auto"};
  for (SmoothMethod m : kSmoothMethods)
    method_names.push_back(smooth_method_name(m));
  smo->add_option("--method", smooth_method,
                  "auto (exact when the structure allows, else paris), rts, forward-backward, "
                  "genealogy, fixed-lag, ffbsm, ffbsi, online, paris or bis")
      ->type_name("METHOD")
      ->capture_default_str()
      ->check(CLI::IsMember(method_names));
  smo->add_option("--filter", smooth_filter,
                  "The particle filter of the forward pass: bootstrap, guided (the model's "
                  "proposal), apf, or auto (guided for a model with a proposal, else bootstrap)")
      ->type_name("auto|bootstrap|guided|apf")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "bootstrap", "guided", "apf"}));
  smo->add_option("--particles", sopt.filter.particles, "Number of particles of the filter")
      ->capture_default_str()
      ->check(positive_int);
  smo->add_option("--ess-threshold", sopt.filter.ess_threshold,
                  "Resample when ESS < r * particles (1: every step, 0: never)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  std::string smooth_resampling = resampling_name(sopt.filter.resampling);
  smo->add_option("--resampling", smooth_resampling, "Resampling scheme")
      ->type_name("SCHEME")
      ->capture_default_str()
      ->check(CLI::IsMember(resampling_names));
  smo->add_option("--lag", sopt.lag, "fixed-lag: the lag L")->capture_default_str();
  smo->add_option("--trajectories", sopt.trajectories,
                  "ffbsi: backward trajectories M (default: as many as particles)")
      ->check(positive_int);
  smo->add_option("--backward-samples", sopt.backward_samples,
                  "paris, bis: backward draws per particle")
      ->capture_default_str()
      ->check(positive_int);
  smo->add_option("--backward", smooth_backward,
                  "ffbsi, paris: backward draws by rejection (needs the model's density bound), "
                  "exact, mcmc (paris: Metropolis-Hastings moves from the filter ancestor), or "
                  "auto (paris after the bootstrap filter: mcmc; else rejection when a bound "
                  "exists, else exact)")
      ->type_name("auto|exact|rejection|mcmc")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "exact", "rejection", "mcmc"}));
  smo->add_option("--mcmc-steps", sopt.mcmc_steps,
                  "--backward mcmc: Metropolis-Hastings moves per backward draw")
      ->capture_default_str()
      ->check(positive_int);
  smo->add_option("--max-trials", sopt.max_trials,
                  "rejection sampling: proposals before an exact draw")
      ->capture_default_str()
      ->check(positive_int);
  smo->add_flag("--marginals,!--no-marginals", smooth_marginals,
                "Per-t smoothing moments and per-t functionals (default: on, except for the "
                "online methods, whose memory then grows with T)");
  std::vector<std::string> smooth_functionals;
  smo->add_option("--functional", smooth_functionals,
                  "Estimate only this functional of the model (repeatable; default: all)")
      ->allow_extra_args(false)
      ->type_name("NAME");
  smo->add_option("--out", smooth_out,
                  "Output CSV file (default: standard output, none with --json)")
      ->type_name("FILE.csv");
  smo->add_flag("--json", smooth_json_flag, "Print a JSON summary on standard output");

  std::string decode_data, decode_out;
  bool decode_json = false;
  CLI::App* dec = app.add_subcommand(
      "decode", "Viterbi decoding of a finite-state model: the most probable state path given all "
                "the data. CSV t,<state columns> per time step");
  dec->add_option("--data", decode_data, "Data CSV, as for filter")
      ->required()
      ->type_name("FILE.csv");
  dec->add_option("--out", decode_out,
                  "Output CSV file (default: standard output, none with --json)")
      ->type_name("FILE.csv");
  dec->add_flag("--json", decode_json,
                "Print a JSON summary (log joint density of the path, log-likelihood)");

  bool info_json = false;
  CLI::App* inf = app.add_subcommand("info", "Model dimensions, parameters (current values and "
                                             "priors) and structure report");
  inf->add_flag("--json", info_json, "Print as JSON");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) { // --help
      std::ostringstream help;
      app.exit(e, help, help);
      fmt::print(out, "{}", help.str());
      std::fflush(out);
      return 0;
    }
    std::string what = e.what();
    // Without a subcommand CLI11 reports only that one is required, even when the user typed a
    // wrong one: name what was not understood.
    if (!sim->parsed() && !flt->parsed() && !smo->parsed() && !dec->parsed() && !inf->parsed() &&
        !app.remaining().empty()) {
      const std::string first = app.remaining().front();
      what =
          first.starts_with("-")
              ? fmt::format("unknown option '{}' (and no subcommand: simulate, filter, smooth, "
                            "decode or info)",
                            first)
              : fmt::format(
                    "unknown subcommand '{}' (expected simulate, filter, smooth, decode or info)",
                    first);
    }
    fmt::print(err, "{}: error: {}\nRun '{} --help' for usage.\n", prog, what, prog);
    std::fflush(err);
    return 2;
  }

  try {
    std::from_chars(seed_text.data(), seed_text.data() + seed_text.size(), g.seed);
    ParamValues values = resolve_params(info, g.params_file, g.params);
    if (inf->parsed()) {
      run_info(*model, info, values, info_json, out);
    } else if (sim->parsed()) {
      if (!model->init_sample || !model->transition_sample || !model->obs_sample)
        throw Error("the model table lacks a sampling kernel needed by simulate");
      std::vector<double> theta = assemble_fixed(info, values, data_values_file);
      std::optional<ObsData> inputs;
      if (!sim_inputs.empty())
        inputs = read_inputs_file(info, sim_inputs);
      // The output (and its temporary file) is created only once the results exist, so a run
      // interrupted by a signal leaves nothing behind; a bad path still fails before the work.
      check_output_path(sim_out);
      Simulation s = simulate(*model, info, theta, T, g.seed, inputs ? &*inputs : nullptr);
      OutputFile file(sim_out, out);
      file.write(simulation_csv(info, s));
      file.commit();
    } else if (smo->parsed()) {
      SmoothMethod method = SmoothMethod::Paris;
      if (smooth_method != "auto")
        method = *parse_smooth_method(smooth_method); // validated by IsMember
      else if (info.linear_gaussian && model->linear_gaussian)
        method = SmoothMethod::Rts;
      else if (enumerable(info))
        method = SmoothMethod::ForwardBackward;
      else if (!info.transition_tractable)
        method = SmoothMethod::Genealogy;
      sopt.method = method;
      sopt.marginals = smooth_marginals.value_or(!is_online(method) || smooth_method == "auto");
      sopt.backward = smooth_backward == "exact"       ? BackwardSampling::Exact
                      : smooth_backward == "rejection" ? BackwardSampling::Rejection
                      : smooth_backward == "mcmc"      ? BackwardSampling::Mcmc
                                                       : BackwardSampling::Automatic;
      sopt.filter.seed = g.seed;
      sopt.filter.resampling = *parse_resampling(smooth_resampling);
      sopt.filter.guided =
          smooth_filter == "guided" ||
          (smooth_filter == "auto" && model->proposal_sample && info.transition_tractable);
      sopt.filter.auxiliary = smooth_filter == "apf";
      if (!smooth_functionals.empty()) {
        std::vector<FunctionalInfo> chosen;
        for (const std::string& name : smooth_functionals) {
          auto it = std::find_if(info.functionals.begin(), info.functionals.end(),
                                 [&](const FunctionalInfo& f) { return f.name == name; });
          if (it == info.functionals.end()) {
            std::vector<std::string> names;
            for (const FunctionalInfo& f : info.functionals)
              names.push_back(f.name);
            throw Error(fmt::format("--functional {}: the model has no such functional ({})", name,
                                    names.empty() ? std::string("it declares none")
                                                  : "it declares " +
                                                        fmt::format("{}", fmt::join(names, ", "))));
          }
          chosen.push_back(*it);
        }
        info.functionals = std::move(chosen); // n_functional still sizes the kernel's output
      }
      std::vector<double> theta = assemble_fixed(info, values, data_values_file);
      ObsData data = read_observations_file(info, smooth_data);
      check_smooth_method(*model, info, sopt); // before any work
      const bool write_csv = !smooth_out.empty() || !smooth_json_flag;
      check_output_path(smooth_out);
      ThreadPool pool(g.threads);
      Progress progress{err, prog, ::isatty(::fileno(err)) == 1, "smooth (filter pass)"};
      sopt.filter.progress = [&](int64_t t, int64_t n) { progress(t, n); };
      SmoothResult r;
      try {
        r = smooth(*model, info, theta, data, sopt, pool);
      } catch (...) {
        progress.finish();
        throw;
      }
      progress.finish();
      if (write_csv) {
        OutputFile file(smooth_out, out);
        file.write(smooth_csv(info, r));
        file.commit();
      }
      if (smooth_json_flag) {
        json j = smooth_json(info, r, sopt);
        j["threads"] = g.threads;
        rusage usage{};
        if (::getrusage(RUSAGE_SELF, &usage) == 0)
          j["peak_rss_mb"] = static_cast<double>(usage.ru_maxrss) / 1024.0; // ru_maxrss is in KiB

        if (smooth_method == "auto")
          j["chosen_by"] = "auto";
        fmt::print(out, "{}\n", j.dump(2));
        std::fflush(out);
      }
    } else if (dec->parsed()) {
      std::vector<double> theta = assemble_fixed(info, values, data_values_file);
      ObsData data = read_observations_file(info, decode_data);
      if (!info.finite_state)
        throw Error(fmt::format("decode: the state of model '{}' is not finite (see `info` for "
                                "the reason); Viterbi decoding needs every state int[lo..hi]",
                                info.name));
      const StateSpace space = enumerate_states(info); // refuses one too large, before any work
      const bool write_csv = !decode_out.empty() || !decode_json;
      check_output_path(decode_out);
      const Decoding d = viterbi(*model, info, theta, data);
      if (write_csv) {
        fmt::memory_buffer csv;
        fmt::format_to(std::back_inserter(csv), "t,{}\n", fmt::join(state_columns(info), ","));
        for (int64_t t = 0; t < data.T; ++t) {
          fmt::format_to(std::back_inserter(csv), "{}", t);
          for (size_t c = 0; c < state_columns(info).size(); ++c)
            fmt::format_to(std::back_inserter(csv), ",{}",
                           format_double(d.path[t * info.n_state + static_cast<int64_t>(c)]));
          fmt::format_to(std::back_inserter(csv), "\n");
        }
        OutputFile file(decode_out, out);
        file.write(fmt::to_string(csv));
        file.commit();
      }
      if (decode_json) {
        json j = {{"model", info.name},
                  {"method", "viterbi"},
                  {"T", data.T},
                  {"states", space.size},
                  {"log_joint", d.log_joint},
                  {"log_likelihood", d.log_likelihood}};
        fmt::print(out, "{}\n", j.dump(2));
        std::fflush(out);
      }
    } else if (flt->parsed()) {
      const bool exact_lg = info.linear_gaussian && model->linear_gaussian;
      const std::string method = filter_method != "auto" ? filter_method
                                 : exact_lg              ? "kalman"
                                 : enumerable(info)      ? "forward"
                                 : model->proposal_sample && info.transition_tractable
                                     ? "guided"
                                     : "bootstrap";
      if (method == "forward")
        enumerate_states(info); // refuses a state space that is not finite, with the reason
      if (method == "kalman" && !exact_lg)
        throw Error(fmt::format(
            "filter --method kalman: the model is not linear-Gaussian ({}); use --method "
            "bootstrap",
            info.linear_gaussian ? "the model table has no linear_gaussian kernel"
                                 : "see `info` for the reason"));
      if (!model->init_sample || !model->transition_sample || !model->obs_logpdf)
        throw Error("the model table lacks a kernel needed by filter");
      std::vector<double> theta = assemble_fixed(info, values, data_values_file);
      ObsData data = read_observations_file(info, data_file);
      const bool write_csv = !filter_out.empty() || !filter_json;
      check_output_path(filter_out); // the file itself is created after filtering, as above
      ThreadPool pool(g.threads);
      Progress progress{err, prog, ::isatty(::fileno(err)) == 1, "filter"};
      fopt.seed = g.seed;
      fopt.resampling = *parse_resampling(resampling); // validated by IsMember
      fopt.auxiliary = method == "apf";
      fopt.guided = method == "guided";
      fopt.progress = [&](int64_t t, int64_t n) { progress(t, n); };
      FilterResult r;
      try {
        r = method == "kalman"    ? kalman_filter(*model, info, theta, data)
            : method == "forward" ? forward_filter(*model, info, theta, data)
            : method == "ukf"     ? unscented_kalman_filter(*model, info, theta, data)
            : method == "ekf"     ? extended_kalman_filter(*model, info, theta, data)
                                  : bootstrap_filter(*model, info, theta, data, fopt, pool);
        // bootstrap, guided and apf: the particle filter
      } catch (...) {
        progress.finish();
        throw;
      }
      progress.finish();
      if (write_csv) {
        OutputFile file(filter_out, out);
        file.write(filter_csv(info, r));
        file.commit();
      }
      if (filter_json) {
        json j = {{"log_likelihood", r.log_likelihood},
                  {"method", method},
                  {"chosen_by", filter_method == "auto" ? "auto" : "user"},
                  {"T", r.T},
                  {"elapsed_s", r.elapsed_s},
                  {"model", info.name}};
        if (method == "apf")
          j["lookahead"] = lookahead_name(lookahead_for(*model));
        if (method == "bootstrap" || method == "guided" || method == "apf") {
          j["particles"] = r.particles;
          j["resample_count"] = r.resample_count;
          j["resampling"] = resampling_name(fopt.resampling);
          j["ess_min"] = r.ess_min;
          j["seed"] = g.seed;
          j["threads"] = g.threads;
        }
        fmt::print(out, "{}\n", j.dump(2));
        std::fflush(out);
      }
    }
  } catch (const std::bad_alloc&) {
    return fail("out of memory (try fewer --particles)");
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  return 0;
}

} // namespace ssm

extern "C" int ssm_main(const ssm_model* model, int argc, char** argv) {
  try {
    return ssm::run_cli(model, argc, argv, stdout, stderr);
  } catch (...) { // nothing may cross the C boundary
    std::fputs("error: unexpected internal error\n", stderr);
    return 1;
  }
}
