// ssmc: the compiler driver.
//
//   ssmc build MODEL.ssm [-o OUT] [--emit=exe|obj|llvm|ir] [--passes=...] [--print-after=P]
//                        [--time-passes] [--load-pass=PLUGIN.so]...
//   ssmc run MODEL.ssm [--passes=...] [--print-after=P] [--time-passes] [--load-pass=...] -- ARGS
//   ssmc check MODEL.ssm [--structure] [--format=text|json] [--passes=...]
//                        [--load-pass=PLUGIN.so]...
//   ssmc opt FILE.ir --passes=... [-o OUT] [--print-after=P] [--time-passes]
//                    [--load-pass=PLUGIN.so]...
//   ssmc passes [--load-pass=PLUGIN.so]...
//   ssmc cache [--clear]                 (the compile cache: build_cache.h)
//   ssmc density fit|sample|logpdf ...   (density estimation on data: module_commands.h)
//   ssmc c2st A.csv B.csv [--json]       (the classifier two-sample test: module_commands.h)
//
// build: frontend -> passes -> LLVM kernels -> object -> linked with the runtime into an
// executable. run: the same kernels compiled in memory (ORC JIT) and the executable's command line
// (the runtime, linked into ssmc) run in this process with ARGS. check: diagnostics and the
// structure report, without generating code. opt: textual IR in, the passes, textual IR out (as
// LLVM's opt), to test a pass on the IR it is given.
//
// Exit status: 0, 1 for an error in the model or its environment, 2 for a usage error, 70 for an
// internal compiler error (a bug in ssmc, reported as such, never as the model's fault).
#include "build_cache.h"
#include "internal_error.h"
#include "linker.h"
#include "module_commands.h"

#include "cli/usage_errors.h"
#include "codegen/backend.h"
#include "codegen/jit.h"
#include "codegen/kernel_codegen.h"
#include "codegen/model_metadata.h"
#include "core/output.h"
#include "frontend/frontend.h"
#include "ir/printer.h"
#include "ir/reader.h"
#include "ir/verifier.h"
#include "kernel/abi.h"
#include "passes/pass_manager.h"
#include "passes/passes.h"
#include "passes/plugin_loader.h"
#include "passes/structure_report.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <new>
#include <sstream>

namespace fs = std::filesystem;

namespace {

struct Failure {
  std::string message; // empty when diagnostics were already printed
};

struct BuildOptions {
  std::string input;
  std::string output;
  std::string emit = "exe";
  std::string passes{ssm::passes::default_pipeline};
  std::vector<std::string> print_after;
  bool time_passes = false;
  bool no_cache = false;
  std::vector<std::string> plugins;     // --load-pass, in order
  std::vector<std::string> import_dirs; // -I
  bool werror = false;                  // -Werror
};

// Wall time of the driver's phases, printed with the pass timings by --time-passes.
class PhaseTimer {
public:
  explicit PhaseTimer(bool enabled) : enabled_(enabled) {}
  void phase(std::string name) {
    static const std::map<std::string, std::string> activities = {
        // "frontend" and "passes": compile_frontend and run_pipeline name the file.
        {"cache lookup", "looking up the build cache"},
        {"derivatives", "differentiating the log-densities"},
        {"codegen", "generating the kernels"},
        {"optimize", "optimising the kernels (LLVM)"},
        {"object", "writing the object file"},
        {"link", "linking the executable"},
        {"jit", "compiling the kernels in memory"}};
    if (auto it = activities.find(name); it != activities.end())
      ssm::tools::set_activity(it->second);
    auto now = std::chrono::steady_clock::now();
    if (!current_.empty())
      phases_.emplace_back(current_, std::chrono::duration<double>(now - start_).count());
    current_ = std::move(name);
    start_ = now;
  }
  void report() {
    phase("");
    if (!enabled_)
      return;
    fmt::print(std::cerr, "phase timing\n");
    for (auto& [name, s] : phases_)
      fmt::print(std::cerr, "  {:>10.3f} ms  {}\n", s * 1e3, name);
  }

private:
  bool enabled_;
  std::string current_;
  std::chrono::steady_clock::time_point start_;
  std::vector<std::pair<std::string, double>> phases_;
};

std::string read_source(const std::string& path) {
  if (fs::is_directory(path))
    throw Failure{fmt::format("cannot read '{}': it is a directory", path)};
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Failure{fmt::format("cannot read '{}': {}", path, std::strerror(errno))};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// --load-pass: the plugins' passes join the registry before any pipeline is parsed.
void load_plugins(const std::vector<std::string>& paths) {
  for (const std::string& path : paths)
    ssm::passes::load_plugin(path);
}

// Whether a pass of the pipeline prints or writes a file, which a cached build would skip. An
// unknown name is reported when the pipeline is built.
bool pipeline_writes_output(std::string_view pipeline) {
  for (size_t start = 0; start <= pipeline.size();) {
    size_t end = std::min(pipeline.find(',', start), pipeline.size());
    auto pass = ssm::passes::create_pass(pipeline.substr(start, end - start));
    if (pass && pass->writes_output())
      return true;
    start = end + 1;
  }
  return false;
}

// Where `import` looks after the importing file's directory: -I directories, then the stdlib.
std::vector<std::string> import_path(const std::vector<std::string>& dirs) {
  std::vector<std::string> path = dirs;
  path.push_back(ssm::tools::find_toolchain().stdlib_dir);
  return path;
}

// `messages`, if given, receives what was printed (the warnings of a model that compiles).
ssm::ir::Model compile_frontend(const std::string& path, const std::vector<std::string>& dirs,
                                bool werror, std::string* messages = nullptr) {
  ssm::tools::set_activity(fmt::format("parsing and checking {}", path));
  std::string source = read_source(path);
  ssm::frontend::DiagnosticEngine diags(path, source);
  diags.set_warnings_as_errors(werror);
  auto model = ssm::frontend::compile_model(source, path, diags, import_path(dirs));
  std::ostringstream rendered;
  diags.render(rendered);
  std::cerr << rendered.str();
  if (messages)
    *messages = rendered.str();
  if (!model || diags.has_errors())
    throw Failure{};
  return std::move(*model);
}

// The pipeline of --passes, with --print-after and --time-passes.
ssm::passes::PassContext run_pipeline(ssm::ir::Model& model, const BuildOptions& options) {
  ssm::tools::set_activity(fmt::format("running the passes on {}", options.input));
  ssm::passes::PassManagerOptions pm_options;
  pm_options.print_after = options.print_after;
  pm_options.time_passes = options.time_passes;
  ssm::passes::PassManager pm(pm_options);
  ssm::passes::PassContext context;
  pm.add_pipeline(options.passes);
  pm.run(model, context, std::cerr);
  return context;
}

ssm::passes::PassContext run_passes(ssm::ir::Model& model, const BuildOptions& options) {
  ssm::passes::lower_simulator_draws(model); // every analysis and kernel sees a state-space model
  ssm::passes::lower_plate_items(model);
  ssm::passes::hoist_net_calls(model); // and no network call
  run_pipeline(model, options);
  // The structure report is part of every compiled model and the analyses' symbolic results
  // become kernels, so they must describe the final IR: a transform later in the pipeline than an
  // analysis would leave that analysis' result stale.
  ssm::passes::augment_lags(model); // the kernels need a first-order state
  ssm::passes::PassContext final_structure;
  ssm::passes::run_missing_structure_analyses(model, final_structure);
  return final_structure;
}

void write_text(const std::string& path, const std::string& text) {
  std::cout.flush(); // "-" goes to the C stream
  ssm::OutputFile out(path, stdout);
  out.write(text);
  out.commit();
}

// `ssmc build` says what it wrote, on standard error (standard output may be the IR itself):
// "ssmc: wrote sv (an executable: ./sv --help)". Nothing for standard output or a device.
void report_written(const std::string& path, const std::string& emit, bool from_cache) {
  std::error_code ec;
  if (path.empty() || path == "-" || !fs::is_regular_file(path, ec))
    return;
  const std::string shown =
      path.find('/') == std::string::npos && emit == "exe" ? "./" + path : path;
  const std::string what = emit == "exe"   ? fmt::format("an executable: {} --help", shown)
                           : emit == "obj" ? "an object file"
                           : emit == "ir"  ? "the IR"
                                           : "LLVM IR";
  fmt::print(std::cerr, "ssmc: wrote {} ({}{})\n", path, what,
             from_cache ? "; unchanged, from the build cache" : "");
}

// Fails before any work when `output` cannot be written where it is asked for, or is one of the
// files the command reads: the source and the modules it imports (for `ssmc opt`, the IR).
void check_output(const std::string& output, const BuildOptions& options, bool with_imports) {
  std::vector<std::string> inputs = {options.input};
  if (with_imports && !output.empty() && output != "-" && fs::exists(output)) {
    try {
      for (std::string& module : ssm::frontend::imported_files(
               read_source(options.input), options.input, import_path(options.import_dirs)))
        inputs.push_back(std::move(module));
    } catch (...) { // an unreadable or broken source is reported where it is compiled
    }
  }
  ssm::check_output_path(output, inputs);
}

// A capability in the structure report: {"available": true}, or false with the reason.
nlohmann::json availability(const std::string& why_not) {
  return why_not.empty() ? nlohmann::json{{"available", true}}
                         : nlohmann::json{{"available", false}, {"reason", why_not}};
}

// An optimised kernel module and the target machine it was optimised for.
struct OptimizedModule {
  std::unique_ptr<llvm::Module> module;
  std::unique_ptr<llvm::TargetMachine> target;
};

// The code generation shared by `build` and `run`: kernels for the model, optimised for the host.
OptimizedModule generate_module(const ssm::ir::Model& model,
                                const ssm::passes::PassContext& context, llvm::LLVMContext& ctx,
                                const ssm::tools::Toolchain& toolchain, PhaseTimer& timer) {
  timer.phase("derivatives");
  nlohmann::json structure = ssm::passes::structure_json(model, context);
  structure["report"] = model.simulation ? ssm::passes::structure_report(model, context)
                                         : ssm::passes::structure_summary(context);
  structure["gaussian_moments"] = availability(ssm::codegen::gaussian_moments_unsupported(model));
  // The derivatives analysis: the Gaussian Jacobians (for a Gaussian model) and the score terms.
  std::optional<ssm::passes::Derivatives> derivatives;
  std::string no_score, no_guide;
  if (model.is_state_space()) {
    ssm::passes::PassContext scratch;
    ssm::ir::Model copy = model;
    try {
      ssm::passes::create_derivatives()->run(copy, scratch);
      derivatives = std::move(scratch.derivatives);
      no_score = derivatives->score_why_not;
      if (no_score.empty()) // an SDE's term of the score is estimated at run time, or not
        no_score = ssm::passes::settle_sde_score(*derivatives, context.sde);
      using ssm::passes::kMaxScoreOperations;
      if (const int64_t size = derivatives->score_size();
          no_score.empty() && size > kMaxScoreOperations) {
        no_score = fmt::format("its score terms have {} operations written element by element, "
                               "more than the {} compiled (a model with large matrix parameters)",
                               size, kMaxScoreOperations);
        derivatives->score_terms.clear();
      }
      if (const int64_t size = std::max(derivatives->size(derivatives->state_gradient),
                                        derivatives->size(derivatives->prev_state_gradient));
          derivatives->state_gradient_why_not.empty() && size > kMaxScoreOperations) {
        derivatives->state_gradient_why_not =
            fmt::format("its state gradient has {} operations written element by element, more "
                        "than the {} compiled",
                        size, kMaxScoreOperations);
        derivatives->state_gradient.clear();
        derivatives->prev_state_gradient.clear();
      }
      // vi has no other way to a declared guide: a larger limit, for the encoders of wide latents.
      constexpr int64_t kMaxGuideOperations = 10 * kMaxScoreOperations;
      if (const int64_t size = derivatives->size(derivatives->guide_arguments);
          size > kMaxGuideOperations) {
        no_guide = fmt::format("its arguments and their Jacobian have {} operations written "
                               "element by element, more than the {} compiled",
                               size, kMaxGuideOperations);
        derivatives->guide_arguments.clear();
        derivatives->guide_jacobian.clear();
      }
    } catch (const ssm::passes::PassError& e) { // an operation without a derivative
      no_score = no_guide = e.what();
    }
  }
  timer.phase("codegen");
  auto module = ssm::codegen::load_kernel_library(ctx, toolchain.kernel_library);
  module->setModuleIdentifier(model.name);
  const std::string no_prior =
      !derivatives ? "no derivatives analysis" : derivatives->prior_why_not;
  structure["prior"] = availability(no_prior);
  structure["score"] =
      no_score.empty() && derivatives
          ? nlohmann::json{{"available", true},
                           {"sde_term", derivatives->score_lacks_sde_term ? "estimated" : "none"}}
          : nlohmann::json{{"available", false}, {"reason", no_score}};
  if (!model.guide.relations.empty()) // the guide_args kernel: where its Jacobian's entries are
    structure["guide"] =
        no_guide.empty() && derivatives
            ? nlohmann::json{{"available", true}, {"jacobian", derivatives->guide_jacobian}}
            : nlohmann::json{{"available", false},
                             {"reason", no_guide.empty() ? "no derivatives analysis" : no_guide}};
  const std::string no_state_gradient =
      !derivatives ? no_score : derivatives->state_gradient_why_not;
  structure["state_gradient"] = availability(no_state_gradient);
  std::string metadata =
      ssm::codegen::model_metadata_json(model, structure.dump(), toolchain.libdir);
  ssm::codegen::generate_kernels(model, metadata,
                                 {context.linear_gaussian ? &*context.linear_gaussian : nullptr,
                                  context.density ? &*context.density : nullptr,
                                  derivatives ? &*derivatives : nullptr,
                                  context.sde ? &*context.sde : nullptr},
                                 *module);
  timer.phase("optimize");
  auto target = ssm::codegen::create_host_target_machine();
  ssm::codegen::optimize_module(*module, *target);
  return {std::move(module), std::move(target)};
}

std::string default_output(const BuildOptions& options) {
  if (!options.output.empty())
    return options.output;
  return fs::path(options.input).stem().string() + (options.emit == "obj" ? ".o" : "");
}

// The cache key of an executable or object: see build_cache.h for what goes in and why.
std::string build_cache_key(const ssm::tools::BuildCache& cache, const BuildOptions& options,
                            const ssm::tools::Toolchain& toolchain) {
  std::vector<std::string> parts = {SSMC_VERSION,
                                    ssm::tools::file_identity("/proc/self/exe"), // this compiler
                                    options.input,
                                    read_source(options.input),
                                    options.emit,
                                    options.werror ? "-Werror" : "",
                                    options.passes,
                                    ssm::codegen::host_target_description(),
                                    toolchain.libdir,
                                    toolchain.cxx,
                                    SSMC_EXTRA_LINK_FLAG};
  parts.push_back(ssm::tools::file_identity(toolchain.kernel_library));
  for (const std::string& lib : ssm::tools::runtime_libraries())
    parts.push_back(ssm::tools::file_identity(fmt::format("{}/lib{}.a", toolchain.libdir, lib)));
  // A plugin's passes determine the output as the built-in ones do, so its whole file is hashed
  // (a rebuilt plugin can keep its size and, within a second, its modification time); where it
  // lies does not matter.
  for (const std::string& plugin : options.plugins)
    parts.push_back(read_source(plugin));
  for (const std::string& module : ssm::frontend::imported_files(
           read_source(options.input), options.input, import_path(options.import_dirs))) {
    parts.push_back(module);
    parts.push_back(read_source(module));
  }
  return cache.key(parts);
}

int build(const BuildOptions& options) {
  check_output(options.emit == "exe" || options.emit == "obj" ? default_output(options)
                                                              : options.output,
               options, true);
  PhaseTimer timer(options.time_passes);
  load_plugins(options.plugins);
  ssm::tools::Toolchain toolchain = ssm::tools::find_toolchain();
  // Cached: executables and objects, unless the IR is to be printed, or a pass writes something,
  // along the way.
  std::optional<ssm::tools::BuildCache> cache;
  std::string cache_key;
  if ((options.emit == "exe" || options.emit == "obj") && !options.no_cache &&
      options.print_after.empty() && !pipeline_writes_output(options.passes)) {
    timer.phase("cache lookup");
    cache = ssm::tools::BuildCache::open();
    if (cache) {
      cache_key = build_cache_key(*cache, options, toolchain);
      if (std::optional<std::string> messages = cache->fetch(cache_key, default_output(options))) {
        std::cerr << *messages; // the warnings, as when it was compiled
        timer.report();
        if (options.time_passes)
          fmt::print(std::cerr, "cache hit: {}/{}\n", cache->directory(), cache_key);
        report_written(default_output(options), options.emit, true);
        return 0;
      }
    }
  }
  timer.phase("frontend");
  std::string messages;
  ssm::ir::Model model =
      compile_frontend(options.input, options.import_dirs, options.werror, &messages);
  timer.phase("passes");
  ssm::passes::PassContext context = run_passes(model, options);
  if (options.emit == "ir") {
    write_text(options.output, ssm::ir::print(model));
    report_written(options.output, options.emit, false);
    return 0;
  }

  llvm::LLVMContext ctx;
  auto [module, target] = generate_module(model, context, ctx, toolchain, timer);
  if (options.emit == "llvm") {
    write_text(options.output, ssm::codegen::module_to_text(*module));
    timer.report();
    report_written(options.output, options.emit, false);
    return 0;
  }

  timer.phase("object");
  std::string output = default_output(options);
  // For an executable the object is an intermediate file beside the output, removed after linking.
  // An object asked for is renamed into place once complete; otherwise it is removed.
  ssm::TemporaryPath object(output, options.emit == "obj" ? "tmp" : "ssmc-o");
  ssm::codegen::write_object(*module, *target, object.path());
  if (options.emit == "obj") {
    object.commit();
  } else {
    timer.phase("link");
    ssm::tools::link_executable(toolchain, object.path(), output);
  }
  if (cache)
    cache->store(cache_key, output, messages);
  timer.report();
  report_written(output, options.emit, false);
  return 0;
}

// `ssmc run`: the build pipeline up to the optimised module, then the kernels are compiled in
// memory and the runtime's command line runs in this process, as the executable's `main` would.
int run(const BuildOptions& options, const std::vector<std::string>& args) {
  PhaseTimer timer(options.time_passes);
  load_plugins(options.plugins);
  timer.phase("frontend");
  ssm::ir::Model model = compile_frontend(options.input, options.import_dirs, options.werror);
  timer.phase("passes");
  ssm::passes::PassContext context = run_passes(model, options);
  auto ctx = std::make_unique<llvm::LLVMContext>();
  const ssm::tools::Toolchain toolchain = ssm::tools::find_toolchain();
  auto [module, target] = generate_module(model, context, *ctx, toolchain, timer);
  timer.phase("jit");
  ssm::codegen::Jit jit(std::move(ctx), std::move(module), *target);
  auto* table = static_cast<const ssm_model*>(jit.lookup("ssm_model_table"));
  timer.report();

  // argv[0] names the program in the runtime's messages: the executable `ssmc build` would write.
  std::vector<std::string> strings{fs::path(options.input).stem().string()};
  strings.insert(strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : strings)
    argv.push_back(s.data());
  argv.push_back(nullptr);
  return ssm_main(table, static_cast<int>(strings.size()), argv.data());
}

int check(const std::string& input, bool full_structure, BuildOptions options,
          const std::string& format) {
  load_plugins(options.plugins);
  ssm::ir::Model model = compile_frontend(input, options.import_dirs, options.werror);
  options.input = input;
  // A plate model is reported as written (its relations per item), then as its items.
  const std::string static_report = ssm::passes::static_model_report(model);
  const nlohmann::json static_json = ssm::passes::static_model_json(model);
  const std::string heading =
      model.is_state_space()
          ? ""
          : fmt::format("{} {}: {} latent variable(s), {} observation component(s){}, {} "
                        "parameter value(s)\n{}",
                        model.kind == ssm::ir::ModelKind::Plate ? "model" : "simulator", model.name,
                        model.latents.size(), model.obs_size(),
                        model.kind == ssm::ir::ModelKind::Plate ? " per item" : "",
                        model.theta_size(), static_report);
  const bool plate = model.kind == ssm::ir::ModelKind::Plate;
  const bool simulator = model.kind == ssm::ir::ModelKind::Simulator;
  ssm::passes::PassContext context = run_passes(model, options);
  if (format == "json") {
    nlohmann::json out = ssm::passes::structure_json(model, context);
    if (plate || simulator) {
      out["model_kind"] = plate ? "plate" : "simulator";
      out["static_model"] = static_json;
    }
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  if (!full_structure)
    fmt::print("{}: no errors\n", input);
  if (simulator) {
    fmt::print("{}", heading);
    return 0;
  }
  if (plate) {
    fmt::print("{}{}as a state-space model whose steps are the items (its latents the state, n "
               "the step):\n{}",
               heading, ssm::passes::declared_inputs_report(model),
               full_structure ? ssm::passes::structure_report(model, context)
                              : ssm::passes::structure_summary(context));
    return 0;
  }
  const std::string guide = ssm::passes::state_guide_report(model);
  fmt::print("model {}: {} state component(s), {} observation component(s), {} parameter "
             "value(s)\n{}{}{}{}",
             model.name, model.state_size(), model.obs_size(), model.theta_size(),
             ssm::passes::declared_inputs_report(model),
             full_structure ? ssm::passes::structure_report(model, context)
                            : ssm::passes::structure_summary(context),
             full_structure && !guide.empty() ? "\n" : "", guide);
  return 0;
}

// `ssmc opt`: the IR of `options.input`, verified, through the pipeline (verified after each pass)
// and printed. Bad IR is reported at its file, line and column.
int opt(const BuildOptions& options) {
  check_output(options.output, options, false);
  load_plugins(options.plugins);
  std::string text = read_source(options.input);
  ssm::ir::Model model;
  try {
    model = ssm::ir::read(text);
  } catch (const ssm::ir::ReadError& e) {
    fmt::print(std::cerr, "{}:{}:{}: error: {}\n", options.input, e.line(), e.column(),
               e.message());
    throw Failure{};
  }
  if (std::vector<std::string> errors = ssm::ir::verify(model); !errors.empty()) {
    for (const std::string& error : errors)
      fmt::print(std::cerr, "{}: error: invalid IR: {}\n", options.input, error);
    throw Failure{};
  }
  run_pipeline(model, options);
  write_text(options.output, ssm::ir::print(model));
  return 0;
}

// -Werror (CLI11 reads it as -W with the value "error").
void add_werror_option(CLI::App* cmd, bool& werror) {
  cmd->add_option_function<std::string>(
         "-W", [&werror](const std::string&) { werror = true; },
         "-Werror: treat warnings as errors")
      ->type_name("error")
      ->check(CLI::IsMember({"error"}));
}

void add_import_option(CLI::App* cmd, std::vector<std::string>& dirs) {
  cmd->add_option("-I,--import-path", dirs,
                  "a directory where 'import' looks for modules (repeatable; searched after the "
                  "model's own directory and before the standard library)")
      ->type_name("DIR")
      ->allow_extra_args(false);
}

// --load-pass=PATH, repeatable: one path per occurrence, so it never swallows the model's name.
void add_plugin_option(CLI::App* cmd, std::vector<std::string>& plugins) {
  cmd->add_option("--load-pass", plugins,
                  "load a pass plugin (a shared library) before running the passes; repeatable "
                  "(see docs/passes.md)")
      ->allow_extra_args(false);
}

// --passes, --print-after, --time-passes, --load-pass and -I, shared by build and run.
void add_pipeline_options(CLI::App* cmd, BuildOptions& options) {
  cmd->add_option(
      "--passes", options.passes,
      fmt::format("comma-separated pass pipeline (default: {})", ssm::passes::default_pipeline));
  cmd->add_option("--print-after", options.print_after,
                  "print the IR after this pass ('all' for every pass)")
      ->delimiter(',')
      ->allow_extra_args(false); // else it takes what follows, up to `ssmc run`'s `--` and beyond
  cmd->add_flag("--time-passes", options.time_passes,
                "print the time spent in each pass and phase");
  add_plugin_option(cmd, options.plugins);
  add_import_option(cmd, options.import_dirs);
  add_werror_option(cmd, options.werror);
}

} // namespace

int main(int argc, char** argv) {
  ssm::install_cleanup_handlers(); // an interrupted build leaves no temporary file
  if (argc > 1)                    // density, c2st: their own command line, in their module
    if (const ssm::tools::ModuleCommand* command = ssm::tools::find_module_command(argv[1]))
      return ssm::tools::run_module_command(*command, argc - 1, argv + 1);
  CLI::App app{"ssmc: a compiler for probabilistic state-space models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("ssmc ") + SSMC_VERSION);

  BuildOptions build_options;
  auto* build_cmd =
      app.add_subcommand("build", "compile a model to an executable (or IR, LLVM, object)");
  build_cmd->add_option("model", build_options.input, "the .ssm file")->required();
  build_cmd->add_option(
      "-o,--output", build_options.output,
      "output path (default: the model's name; '-' or none prints ir/llvm to stdout)");
  build_cmd->add_option("--emit", build_options.emit, "what to produce")
      ->check(CLI::IsMember({"exe", "obj", "llvm", "ir"}));
  add_pipeline_options(build_cmd, build_options);
  build_cmd->add_flag("--no-cache", build_options.no_cache,
                      "compile even if the compile cache holds this model (see docs/compiler.md)");

  BuildOptions run_options;
  std::vector<std::string> run_args;
  auto* run_cmd = app.add_subcommand(
      "run", "compile a model in memory and run it: ssmc run MODEL.ssm [options] -- ARGS");
  run_cmd->add_option("model", run_options.input, "the .ssm file")->required();
  run_cmd->add_option("args", run_args,
                      "the generated executable's command line (after --), e.g. -- info");
  add_pipeline_options(run_cmd, run_options);

  std::string check_input;
  bool full_structure = false;
  std::string check_format = "text";
  auto* check_cmd = app.add_subcommand(
      "check", "report diagnostics and the model's structure; no code is generated");
  check_cmd->add_option("model", check_input, "the .ssm file")->required();
  check_cmd->add_flag("--structure", full_structure,
                      "print the full structure report (every analysis in detail) instead of the "
                      "diagnostics line and one-line summaries");
  check_cmd
      ->add_option("--format", check_format,
                   "text, or json: the structure report as one JSON object (docs/compiler.md)")
      ->check(CLI::IsMember({"text", "json"}));
  BuildOptions check_options;
  check_cmd->add_option("--passes", check_options.passes,
                        "comma-separated pass pipeline to run before the report (default: the "
                        "default pipeline)");
  add_plugin_option(check_cmd, check_options.plugins);
  add_import_option(check_cmd, check_options.import_dirs);
  add_werror_option(check_cmd, check_options.werror);

  BuildOptions opt_options;
  opt_options.passes.clear();
  auto* opt_cmd = app.add_subcommand(
      "opt", "run passes on textual IR (as --emit=ir prints it) and print the resulting IR");
  opt_cmd->add_option("ir", opt_options.input, "the .ir file")->required();
  opt_cmd->add_option("-o,--output", opt_options.output,
                      "output path (default, or '-': stdout); never the input");
  opt_cmd->add_option("--passes", opt_options.passes,
                      "comma-separated pass pipeline (default: none, the IR is verified and "
                      "printed)");
  opt_cmd
      ->add_option("--print-after", opt_options.print_after,
                   "print the IR after this pass ('all' for every pass)")
      ->delimiter(',')
      ->allow_extra_args(false);
  opt_cmd->add_flag("--time-passes", opt_options.time_passes, "print the time spent in each pass");
  add_plugin_option(opt_cmd, opt_options.plugins);

  auto* passes_cmd = app.add_subcommand("passes", "list the available passes");
  bool clear_cache = false;
  auto* cache_cmd = app.add_subcommand(
      "cache", "show where the compile cache is, its size and limit (SSMC_CACHE_SIZE); --clear "
               "empties it (see docs/compiler.md)");
  cache_cmd->add_flag("--clear", clear_cache, "remove every entry");
  // Only listed here: run_module_command takes their command line before this parser.
  app.add_subcommand("density", "density estimation on data: fit, sample, logpdf (a DIF, a GMM, "
                                "MAF, RealNVP; see ssmc density --help)");
  app.add_subcommand("c2st", "the classifier two-sample test between two samples of draws, as "
                             "sbibm computes it (see ssmc c2st --help)");
  std::vector<std::string> passes_plugins;
  add_plugin_option(passes_cmd, passes_plugins);

  auto is_command = [&](const char* name) {
    for (const CLI::App* sub : app.get_subcommands({}))
      if (sub->get_name() == name)
        return true;
    return false;
  };
  if (argc > 1 && argv[1][0] != '-' && !is_command(argv[1])) {
    const std::optional<std::string> guess = ssm::closest_name(
        argv[1], {"build", "run", "check", "opt", "passes", "cache", "density", "c2st"});
    fmt::print(std::cerr, "ssmc: error: unknown command '{}'{} (see ssmc --help)\n", argv[1],
               guess ? fmt::format("; did you mean '{}'?", *guess)
                     : ": expected build, run, check, opt, passes, cache, density or c2st");
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) { // --help, --help-all, --version
    return app.exit(e);
  } catch (const CLI::ExtrasError& e) {
    // Usually an executable's option given to `ssmc run` before the `--`.
    if (*run_cmd)
      fmt::print(std::cerr,
                 "ssmc: error: {} (the executable's arguments go after '--': ssmc run MODEL.ssm "
                 "-- ARGS)\n",
                 e.what());
    else
      fmt::print(std::cerr, "ssmc: error: {} (see ssmc --help)\n",
                 ssm::cli::unknown_option(app, e).value_or(e.what()));
    return 2;
  } catch (const CLI::ParseError& e) {
    fmt::print(std::cerr, "ssmc: error: {} (see ssmc --help)\n",
               ssm::cli::repeated_option(e).value_or(e.what()));
    return 2;
  }
  try {
    if (*build_cmd)
      return build(build_options);
    if (*run_cmd)
      return run(run_options, run_args);
    if (*check_cmd)
      return check(check_input, full_structure, check_options, check_format);
    if (*opt_cmd)
      return opt(opt_options);
    if (*passes_cmd) {
      load_plugins(passes_plugins);
      for (const std::string& name : ssm::passes::registered_passes())
        fmt::print("{:<18} {}\n", name, ssm::passes::create_pass(name)->description());
      return 0;
    }
    if (*cache_cmd)
      return ssm::tools::show_cache(clear_cache);
  } catch (const Failure& f) {
    if (!f.message.empty())
      fmt::print(std::cerr, "ssmc: error: {}\n", f.message);
    return 1;
  } catch (const std::bad_alloc&) {
    fmt::print(std::cerr, "ssmc: error: out of memory while {}\n", ssm::tools::activity());
    return 1;
  } catch (const std::runtime_error& e) { // a problem of the input or the environment
    fmt::print(std::cerr, "ssmc: error: {}\n", e.what());
    return 1;
  } catch (const ssm::passes::PluginFault& e) { // a plugin's bug: never shown as ssmc's
    return ssm::tools::plugin_fault(e.plugin(), e.what());
  } catch (const std::exception& e) { // a broken invariant: never shown as the model's fault
    return ssm::tools::internal_compiler_error(e.what(), argc, argv);
  } catch (...) {
    return ssm::tools::internal_compiler_error("an exception of unknown type", argc, argv);
  }
  return 0;
}
