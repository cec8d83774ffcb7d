// The command line of a generated executable: the global options (threads, seed, parameters),
// then one subcommand (simulate, filter, smooth, decode, info; one file each). Usage errors exit
// with 2, other errors with 1, both printed as `<prog>: error: message`.
#include "cli/cli.h"
#include "cli/command.h"
#include "cli/usage_errors.h"
#include "core/error.h"
#include "core/output.h"
#include "core/thread_pool.h"
#include "sde/density_estimator.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <optional>
#include <sstream>

namespace ssm {

namespace {

std::string program_name(int argc, char** argv) {
  if (argc < 1 || !argv[0] || !*argv[0])
    return "model";
  std::string p = argv[0];
  auto slash = p.find_last_of('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

// Every file the run reads (--data, --inputs, --params, --data-file, --test, --load-guide,
// --load-nets, --pairs, --observed, --ratio, --prior, --from) against every file it writes (--out,
// --save, --save-guide, --save-nets, --save-density, --online-out, --param-draws,
// --save-param-guide): one
// spelling of an input as an output, or two outputs that are one file, is refused before anything
// runs.
void check_outputs_are_not_inputs(const CLI::App& app) {
  std::vector<std::string> inputs, outputs;
  auto collect = [&](const CLI::App& a) {
    for (const CLI::Option* o : a.get_options())
      if (o->count() > 0)
        for (const char* name :
             {"data",       "inputs",       "params",     "data-file",   "test",
              "load-guide", "load-nets",    "pairs",      "observed",    "ratio",
              "prior",      "from",         "out",        "save",        "save-guide",
              "save-nets",  "save-density", "online-out", "param-draws", "save-param-guide"})
          if (o->check_lname(name)) {
            const std::string_view n = name;
            const bool output = n == "out" || n == "save" || n == "save-guide" ||
                                n == "save-nets" || n == "save-density" || n == "online-out" ||
                                n == "param-draws" || n == "save-param-guide";
            for (const std::string& value : o->results())
              (output ? outputs : inputs).push_back(value);
          }
  };
  collect(app);
  for (const CLI::App* sub : app.get_subcommands())
    collect(*sub);
  for (size_t k = 0; k < outputs.size(); ++k) {
    check_output_path(outputs[k], inputs);
    for (size_t l = k + 1; l < outputs.size(); ++l)
      if (!outputs[k].empty() && outputs[k] != "-" && same_file(outputs[k], outputs[l]))
        throw Error(fmt::format("refusing to write '{}' twice: two outputs of the run are that "
                                "file ('{}')",
                                outputs[k], outputs[l]));
  }
}

// The kernels read a network's output from the state; only `vi` computes it (runtime/vi) so far.
void refuse_networks_outside_vi(const CLI::App& app, const ModelInfo& info) {
  if (!info.density_calls_networks()) // a guide's networks serve vi alone
    return;
  for (const CLI::App* sub : app.get_subcommands())
    if (sub->get_name() != "vi" && sub->get_name() != "simulate" && sub->get_name() != "info" &&
        sub->get_name() != "unconstrain" && sub->get_name() != "constrain") {
      std::vector<std::string> names;
      for (const NetInfo& n : info.nets)
        if (n.base_of < 0) // a cascade's stages are part of one network
          names.push_back(n.name);
      throw Error(fmt::format("model '{}' calls networks ({}): only 'vi' and 'simulate' "
                              "evaluate them so far, so '{}' is not available for it",
                              info.name, fmt::join(names, ", "), sub->get_name()));
    }
}

std::string params_footer(const ModelInfo& info) {
  std::string s =
      "Parameter values: --param name=value (repeatable), vectors as [1,2], matrices as "
      "[[1,2],[3,4]] (rows); --params FILE.json holds an object {\"name\": value, ...}. Later "
      "sources override earlier ones: model defaults < --params < --param.\n\n"
      "The global options --threads, --seed, --param and --params may be given before or "
      "after the subcommand.\n"
      "Results are bit-identical for every --threads value with the same --seed.\n";
  if (!info.inputs.empty()) {
    s += info.step == "n" ? "\nCovariates per item of this model (columns of --data; simulate: "
                            "--inputs FILE.csv):\n"
                          : "\nInputs of this model (--inputs FILE.csv, a value per time step):\n";
    for (const VarInfo& v : info.inputs)
      s += fmt::format("  {} : {}\n", v.name, cli::type_string(v));
  }
  if (!info.data.empty()) {
    s += "\nData items of this model (--data-file FILE.json):\n";
    for (const VarInfo& v : info.data)
      s += fmt::format("  {} : {}\n", v.name, cli::type_string(v));
  }
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

// Parsed by hand: CLI11 would wrap "-1" and saturate values above 2^64 - 1.
const CLI::Validator& uint64_text() {
  static const CLI::Validator validator(
      [](std::string& v) {
        uint64_t x;
        auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
        if (v.empty() || ec != std::errc() || end != v.data() + v.size())
          return fmt::format("expected an unsigned 64-bit integer, got '{}'", v);
        return std::string();
      },
      "UINT64");
  return validator;
}

void add_global_options(CLI::App& app, cli::Globals& g, std::string& seed_text) {
  app.add_option("--threads", g.threads,
                 fmt::format("Worker threads (default: all cores, here {})", g.threads))
      ->check(cli::positive_int());
  app.add_option("--seed", seed_text, "Random seed (unsigned 64-bit integer)")
      ->capture_default_str()
      ->type_name("UINT64")
      ->check(uint64_text());
  app.add_option("--param", g.params,
                 "Set a parameter: name=value, [1,2] for a vector, [[1,2],[3,4]] for a matrix; "
                 "repeatable")
      ->allow_extra_args(false)
      ->type_name("NAME=VALUE");
  app.add_option("--params", g.params_file,
                 "JSON file with an object mapping parameter names to values")
      ->type_name("FILE.json");
  app.add_option("--data-file", g.data_values_file,
                 "JSON file with an object mapping the model's data items to values")
      ->type_name("FILE.json");
  app.add_option("--progress", g.progress,
                 "Progress of long runs on standard error: auto (on a terminal, once a run "
                 "takes over a second), always (from the first step, wherever standard error "
                 "goes), never")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "always", "never"}));
}

// A parse error's message; without a subcommand CLI11 reports only that one is required, even
// when the user typed a wrong one: name what was not understood.
std::string usage_error(const CLI::App& app, const CLI::ParseError& e, bool subcommand) {
  if (std::optional<std::string> repeated = cli::repeated_option(e))
    return *repeated;
  if (dynamic_cast<const CLI::ExtrasError*>(&e))
    if (std::optional<std::string> unknown = cli::unknown_option(app, e))
      return *unknown;
  if (subcommand || app.remaining().empty())
    return e.what();
  std::vector<std::string> commands;
  for (const CLI::App* sub : app.get_subcommands({}))
    commands.push_back(sub->get_name());
  const std::string list = fmt::format("{}", fmt::join(commands, ", "));
  const std::string first = app.remaining().front();
  if (first.starts_with("-"))
    return fmt::format("unknown option '{}' (and no subcommand: {})", first, list);
  std::string message = fmt::format("unknown subcommand '{}'", first);
  if (std::optional<std::string> guess = closest_name(first, commands))
    return message + fmt::format("; did you mean '{}'?", *guess);
  return message + fmt::format(" (expected one of {})", list);
}

// "out of memory in simulate (it was asked for --T 100000000000: try a smaller value)": the
// sizes the user gave to the subcommand that ran.
std::string out_of_memory(const CLI::App& app) {
  static const char* const sizes[] = {
      "--particles", "--T",     "--trajectories", "--iterations", "--warmup", "--chains",
      "--samples",   "--draws", "--eval-samples", "--batch-size", "--starts"};
  for (const CLI::App* sub : app.get_subcommands()) {
    std::vector<std::string> given;
    for (const char* name : sizes)
      if (const CLI::Option* o = sub->get_option_no_throw(name); o && o->count() > 0)
        given.push_back(fmt::format("{} {}", name, o->as<std::string>()));
    return given.empty()
               ? fmt::format("out of memory in {}", sub->get_name())
               : fmt::format("out of memory in {} (it was asked for {}: try smaller values)",
                             sub->get_name(), fmt::join(given, ", "));
  }
  return "out of memory";
}

int fail(const std::string& prog, std::FILE* err, const std::string& msg) {
  fmt::print(err, "{}: error: {}\n", prog, msg);
  std::fflush(err);
  return 1;
}

} // namespace

int run_cli(const ssm_model* model, int argc, char** argv, std::FILE* out, std::FILE* err) {
  const std::string prog = program_name(argc, argv);
  if (!model)
    return fail(prog, err, "no model table");
  if (model->abi_version != SSM_ABI_VERSION)
    return fail(prog, err,
                fmt::format("the model was compiled for runtime ABI version {}, this runtime is "
                            "version {}: rebuild the model with a matching ssmc",
                            model->abi_version, SSM_ABI_VERSION));
  ModelInfo info;
  try {
    info = parse_metadata(model->metadata_json ? model->metadata_json : "");
  } catch (const std::exception& e) {
    return fail(prog, err, e.what());
  }

  cli::Globals g;
  g.threads = default_threads();
  CLI::App app{fmt::format("{}: {} '{}'{}, compiled by ssmc.", prog,
                           info.simulation ? "simulator" : "state-space model", info.name,
                           info.source.empty() ? "" : " from " + info.source),
               prog};
  app.fallthrough(); // global options may also follow the subcommand
  app.require_subcommand(1);
  app.footer(params_footer(info));
  std::string seed_text = "1";
  add_global_options(app, g, seed_text);
  std::string estimator = "auto";
  if (info.sde)
    app.add_option("--estimator", estimator,
                   fmt::format("The unbiased estimator of the density of the SDE {}: auto (gpe "
                               "where it applies, else parametrix), gpe (General Poisson: a "
                               "scalar SDE, psi bounded below; in Lamperti's coordinate "
                               "where the coefficient reads the path), parametrix (any SDE; "
                               "signed, made positive by Wald's identity)",
                               info.sde->relation))
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "gpe", "parametrix"}));
  const cli::Context c{*model, info, cli::method_registry(), g, prog, out, err};
  std::vector<std::unique_ptr<cli::Command>> commands;
  using Add = std::unique_ptr<cli::Command> (*)(CLI::App&, const cli::Context&);
  // A simulator runs likelihood-free inference; the other subcommands read a likelihood.
  const std::vector<Add> adds =
      info.simulation
          ? std::vector<Add>{cli::add_simulate_pairs, cli::add_nre, cli::add_posterior,
                             cli::add_abc, cli::add_info}
          : std::vector<Add>{cli::add_simulate,    cli::add_filter,    cli::add_smooth,
                             cli::add_decode,      cli::add_score,     cli::add_optimize,
                             cli::add_rml,         cli::add_sample,    cli::add_vi,
                             cli::add_unconstrain, cli::add_constrain, cli::add_info};
  for (Add add : adds)
    if (std::unique_ptr<cli::Command> command = add(app, c))
      commands.push_back(std::move(command));

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
    bool subcommand = false;
    for (const auto& command : commands)
      subcommand = subcommand || command->parsed();
    fmt::print(err, "{}: error: {}\nRun '{} --help' for usage.\n", prog,
               usage_error(app, e, subcommand), prog);
    std::fflush(err);
    return 2;
  }

  try {
    std::from_chars(seed_text.data(), seed_text.data() + seed_text.size(), g.seed);
    if (g.threads > max_threads()) { // threads beyond this only add switching and memory
      fmt::print(err, "{}: note: --threads {} capped at {} ({} per core)\n", prog, g.threads,
                 max_threads(), kMaxThreadsPerCore);
      g.threads = max_threads();
    }
    check_outputs_are_not_inputs(app);
    refuse_networks_outside_vi(app, info);
    try {
      choose_density_estimator(info, estimator);
    } catch (const Error& e) { // a choice the model does not allow: a usage error
      throw cli::UsageError(e.what());
    }
    const ParamValues values = resolve_params(info, g.params_file, g.params);
    for (const auto& command : commands)
      if (command->parsed())
        command->run(c, values);
  } catch (const cli::UsageError& e) {
    fmt::print(err, "{}: error: {}\nRun '{} --help' for usage.\n", prog, e.what(), prog);
    std::fflush(err);
    return 2;
  } catch (const std::bad_alloc&) {
    return fail(prog, err, out_of_memory(app));
  } catch (const std::exception& e) {
    return fail(prog, err, e.what());
  }
  return 0;
}

} // namespace ssm

extern "C" int ssm_main(const ssm_model* model, int argc, char** argv) {
  try {
    ssm::install_cleanup_handlers();
    return ssm::run_cli(model, argc, argv, stdout, stderr);
  } catch (...) { // nothing may cross the C boundary
    std::fputs("error: unexpected internal error\n", stderr);
    return 1;
  }
}
