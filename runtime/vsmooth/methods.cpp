// `smooth --method variational`: its registration and options, and the loader of the LibTorch
// module that fits the guide (variational_smoother.h). LibTorch-free: linked into every executable.
#include "core/error.h"
#include "core/output.h"
#include "core/params.h"
#include "core/runtime_module.h"
#include "learning/parameter_space.h"
#include "smoothing/smooth.h"
#include "vsmooth/variational_smoother.h"

#include <fmt/format.h>

namespace ssm {

namespace {

constexpr const char* kName = "variational";

constexpr RuntimeModule kVsmoothModule{"libssm_vsmooth.so", "SSMC_VSMOOTH_LIBRARY",
                                       "the variational smoothing runtime", kVsmoothLayoutSymbol};

// The state must be a real vector for a Gaussian guide: no discrete component, and no hidden lag
// copy (a Gaussian over x[t-1] and its copy would not know they are equal).
Refusal variational_applies(const ssm_model& model, const ModelInfo& info) {
  if (info.simulation)
    return "it smooths the states of a state-space model";
  if (info.n_state == 0)
    return "the model has no state";
  for (const VarInfo& v : info.state) {
    if (v.integer)
      return fmt::format("its guide is Gaussian, and the state '{}' is discrete", v.name);
    if (v.hidden)
      return fmt::format("its guide is Gaussian over x[t] given x[t+1], and the model reads a "
                         "state further back than x[t-1] ({})",
                         v.name);
  }
  if (!info.transition_tractable) // a deterministic state too: a Gaussian guide has no mass there
    return fmt::format("its guide is a full-rank Gaussian and it evaluates the transition "
                       "density, and the model's transition has none ({})",
                       info.sample_only_reason);
  if (!model.transition_logpdf || !model.obs_logpdf || !model.init_logpdf)
    return "the model table lacks a log-density kernel";
  return std::nullopt;
}

VariationalSmoothOptions options_of(const MethodRun& run) {
  const OptionValues& v = run.options;
  VariationalSmoothOptions o;
  o.online = v.toggle("--online").value_or(false);
  o.epochs = v.integer("--epochs");
  o.online_out = v.word("--online-out");
  o.step_hold = v.integer("--step-hold");
  o.step_decay = v.real("--step-decay");
  o.clip = v.real("--clip");
  o.marginals = !o.online || v.toggle("--marginals").value_or(false);
  o.learn_params = v.toggle("--learn-params").value_or(false);
  o.fixed = v.names("--fix");
  o.param_learning_rate = v.real("--param-learning-rate");
  o.gradient = v.word("--gradient");
  if (o.gradient == "auto") // the exact gradient, else the one of least variance that applies
    o.gradient = o.online                                                    ? "score"
                 : run.info.linear_gaussian && run.model.linear_gaussian     ? "analytic"
                 : run.model.state_gradient && run.model.prev_state_gradient ? "pathwise"
                                                                             : "score";
  o.encoder = v.word("--encoder"); // auto is resolved by the fit, which may load a guide
  o.hidden_given = v.word("--hidden") != "auto";
  o.hidden = parse_layer_widths(o.hidden_given ? v.word("--hidden") : "100", "smooth");
  o.init = v.word("--init");
  o.family = v.word("--family");
  o.optimizer = v.word("--optimizer");
  if (o.optimizer == "auto") // the parameters' gradient is always a Monte Carlo estimate
    o.optimizer = o.gradient == "analytic" && !o.learn_params ? "lbfgs" : "adam";
  o.iterations = v.integer("--iterations");
  if (o.online)
    o.iterations = 0; // updates are per observation
  else if (o.iterations < 0)
    o.iterations = o.optimizer == "lbfgs" ? 200 : 2000;
  o.learning_rate = v.real("--learning-rate");
  if (o.learning_rate == 0)
    o.learning_rate = o.optimizer == "lbfgs" ? 1.0 : o.optimizer == "sgd" ? 0.05 : 1e-2;
  o.samples = v.integer("--samples");
  o.draws = v.integer("--draws");
  o.load_guide = v.word("--load-guide");
  o.seed = run.seed;
  o.threads = run.threads;
  o.progress = run.progress;
  return o;
}

void check(const MethodRun& run) {
  const VariationalSmoothOptions d; // the defaults
  if (Refusal why = variational_applies(run.model, run.info))
    throw Error(fmt::format("smooth --method variational: {}", *why));
  const VariationalSmoothOptions o = options_of(run);
  if (run.info.backward_guide && (o.encoder != "auto" || o.hidden_given))
    throw Error(fmt::format(
        "smooth --method variational: the model declares its guide ({}), "
        "whose encoder is {}; --encoder and --hidden choose the encoder of a "
        "model without one",
        run.info.backward_guide->where,
        run.info.backward_guide->encoder == "mlp"
            ? fmt::format("network '{}'", run.info.nets.at(run.info.backward_guide->net).name)
            : std::string("linear")));
  if (o.encoder == "free" && o.online)
    throw Error("smooth --method variational --online: the free encoder's parameters grow with "
                "the series, one step's each, and the online recursions keep memory flat; use "
                "--encoder linear or mlp, or drop --online");
  // What reads one series: the free encoder's steps, the per-step file.
  if (run.data && run.data->series.count() > 1) {
    struct OneSeries {
      const char *flag, *why, *instead;
    };
    const OneSeries one =
        o.encoder == "free" ? OneSeries{"--encoder free",
                                        "a non-amortised guide's parameters are one series' steps",
                                        " (or an amortised encoder, linear or mlp)"}
        : !o.online_out.empty()
            ? OneSeries{"--online-out", "the per-step moments are written for one", ""}
            : OneSeries{nullptr, nullptr, nullptr};
    if (one.flag)
      throw Error(fmt::format("smooth --method variational {}: the data has {} series, and {}: "
                              "give one series per run{}",
                              one.flag, run.data->series.count(), one.why, one.instead));
  }
  if (o.gradient == "analytic" && !(run.info.linear_gaussian && run.model.linear_gaussian))
    throw Error("smooth --method variational --gradient analytic: the ELBO has a closed form only "
                "for a linear-Gaussian model, and this one is not (see `info`); use --gradient "
                "score");
  if (o.learning_rate < 0)
    throw Error("smooth: --learning-rate must be positive");
  if (o.gradient == "score" && o.samples < 2)
    throw Error("smooth --method variational --gradient score: --samples must be at least 2 (the "
                "recursions' baselines are means over the other draws)");
  if (o.gradient == "pathwise" && !(run.model.state_gradient && run.model.prev_state_gradient))
    throw Error(fmt::format("smooth --method variational --gradient pathwise: it differentiates "
                            "the model's log-density in the states, and the model has no state "
                            "gradient ({}); use --gradient score",
                            run.info.no_state_gradient_reason.empty()
                                ? "its kernels predate it: rebuild the model"
                                : run.info.no_state_gradient_reason));
  if (o.gradient != "analytic" && o.optimizer == "lbfgs")
    throw Error(fmt::format("smooth --method variational: --optimizer lbfgs needs the ELBO "
                            "itself, and --gradient {} gives a noisy estimate of its gradient: "
                            "use adam",
                            o.gradient));
  if (o.online) {
    if (o.gradient != "score")
      throw Error(fmt::format("smooth --method variational --online: the online recursions are "
                              "the score-function ones; --gradient {} differentiates the whole "
                              "series (use --gradient score, or drop --online)",
                              o.gradient));
    if (o.epochs < 0)
      throw Error("smooth --method variational --online: --epochs must be 0 or more");
    if (run.options.integer("--iterations") >= 0)
      throw Error("smooth --method variational --online: there is one update per observation; "
                  "--epochs sets the passes over the series, not --iterations");
    if (!o.marginals)
      for (const FunctionalInfo& f : run.info.functionals)
        if (!f.sum)
          throw Error(fmt::format(
              "smooth --method variational --online: the functional '{}' is per-t, which an "
              "online run estimates only with --marginals (its memory then grows with T); or "
              "leave it out with --functional",
              f.name));
    if (o.optimizer == "sgd") {
      if (!(o.step_decay > 0.5 && o.step_decay <= 1))
        throw Error(fmt::format("smooth: --step-decay must be in (0.5, 1], where the step sizes "
                                "satisfy the Robbins-Monro conditions (got {})",
                                o.step_decay));
      if (!(o.clip >= 0))
        throw Error(fmt::format("smooth: --clip must be at least 0 (0: no clip; got {})", o.clip));
      if (o.step_hold < 0)
        throw Error(fmt::format("smooth: --step-hold must be at least 0 (got {})", o.step_hold));
    }
  } else if (o.optimizer == "sgd") {
    throw Error("smooth --method variational: --optimizer sgd is --online's (its steps follow "
                "recursive maximum likelihood's schedule)");
  } else if (run.options.integer("--epochs") != d.epochs) {
    throw Error("smooth --method variational: --epochs is --online's");
  }
  if (o.online_out == "-")
    throw Error("smooth --method variational: --online-out must be a file (standard output "
                "carries the smoothing CSV or the JSON)");
  if (o.optimizer != "sgd" && !(o.online && o.learn_params) &&
      (o.step_hold != d.step_hold || o.step_decay != d.step_decay || o.clip != d.clip))
    throw Error("smooth --method variational: --step-hold, --step-decay and --clip are "
                "--online --optimizer sgd's and --online --learn-params's");
  if (o.learn_params) {
    if (o.optimizer == "lbfgs")
      throw Error("smooth --method variational --learn-params: the parameters' gradient is a "
                  "Monte Carlo estimate over trajectories of the guide, which L-BFGS cannot "
                  "use: use adam");
    if (!run.model.score_terms)
      throw Error(fmt::format("smooth --method variational --learn-params: the parameters' "
                              "gradient is the model's score terms at trajectories of the guide, "
                              "and the model has none ({})",
                              run.info.no_score_reason));
    if (o.param_learning_rate < 0)
      throw Error("smooth: --param-learning-rate must be positive (0: --learning-rate's)");
    const ParameterSpace space(run.info, o.fixed); // an unknown --fix name is an error here
    space.require_some("smooth --method variational --learn-params");
    if (run.fixed) // a value outside its support, named
      space.unconstrain({run.fixed->data(), static_cast<size_t>(run.info.n_theta)});
  } else if (!o.fixed.empty() || run.options.real("--param-learning-rate") != 0 ||
             !run.options.word("--save").empty()) {
    throw Error("smooth --method variational: --fix, --param-learning-rate and --save are "
                "--learn-params's");
  }
  check_output_path(run.options.word("--save-guide"), {o.load_guide});
  check_output_path(run.options.word("--save"), {o.load_guide});
  check_output_path(o.online_out, {o.load_guide});
}

SmoothResult smooth_variational(const MethodRun& run) {
  const VariationalSmoothOptions o = options_of(run);
  void* handle = open_runtime_module(run.info, run.threads, kVsmoothModule, vsmooth_layout());
  const auto fit_fn = reinterpret_cast<VsmoothFitFn>(
      runtime_module_symbol(handle, kVsmoothModule, kVsmoothFitSymbol));
  VariationalSmoothFit fit;
  std::string error;
  if (fit_fn(&run, &o, &fit, &error) != 0)
    throw Error(error);
  const std::string& save = run.options.word("--save-guide");
  if (!save.empty() && !fit.guide.empty()) { // after a failure too: the last finite guide
    OutputFile out(save);
    out.write(fit.guide);
    out.commit();
  }
  const std::string& save_params = run.options.word("--save");
  if (!save_params.empty() && !fit.theta.empty()) { // as a --params file; the last finite too
    OutputFile out(save_params);
    out.write(params_json(run.info, fit.theta).dump(2) + "\n");
    out.commit();
  }
  if (!fit.failure.empty()) {
    std::string message = fit.failure;
    if (!save.empty())
      message += fmt::format("; the guide of the last finite iteration is in {}", save);
    if (!save_params.empty() && !fit.theta.empty())
      message += fmt::format("; its parameters are in {}", save_params);
    throw Error(message);
  }
  return std::move(fit.result);
}

void add_options(MethodRegistry& registry) {
  const VariationalSmoothOptions d;
  const Task smooth = Task::Smooth;
  registry.add_option(smooth, {.flag = "--gradient",
                               .help = "The ELBO's gradient: analytic (its closed form, "
                                       "linear-Gaussian models), pathwise (trajectories of the "
                                       "guide differentiated through; models with a state "
                                       "gradient), score (the score-function recursions, any "
                                       "model with densities) or auto (the first that applies; "
                                       "score with --online)",
                               .users_in_help = true,
                               .default_value = d.gradient,
                               .choices = {"auto", "analytic", "pathwise", "score"}});
  registry.add_option(smooth, {.flag = "--encoder",
                               .help = "How y[t] enters the guide: linear (a Kalman update with "
                                       "learned B, d, R), mlp (a network of y[t]), free (each "
                                       "step's natural parameters its own: non-amortised, for "
                                       "the one series trained on), or auto (the model's guide "
                                       "statement's; else linear for a linear-Gaussian model, "
                                       "mlp otherwise)",
                               .users_in_help = true,
                               .default_value = std::string("auto"),
                               .choices = {"auto", "linear", "mlp", "free"}});
  registry.add_option(smooth, {.flag = "--hidden",
                               .help = "--encoder mlp: hidden widths, as 100 or 64,64 (auto: "
                                       "100)",
                               .default_value = std::string("auto"),
                               .type_name = "WIDTHS"});
  registry.add_option(smooth, {.flag = "--family",
                               .help = "The guide's transition and covariances: full (a dense A, "
                                       "Cholesky factors), diagonal (diagonal A, Q, R and prior "
                                       "covariance, as the thesis's code), or auto (full, or the "
                                       "loaded guide's)",
                               .users_in_help = true,
                               .default_value = d.family,
                               .choices = {"auto", "full", "diagonal"}});
  registry.add_option(smooth, {.flag = "--init",
                               .help = "The starting guide: model (a linear-Gaussian model's own "
                                       "matrices: with the full family and the linear encoder, "
                                       "its exact smoothing law when time-invariant; for other "
                                       "models their linear-Gaussian fit by simulation, the "
                                       "network encoder fitted to it) or random (the prior N(0, "
                                       "I), A = 0.9 I, Q = 0.1 I, B small and random)",
                               .users_in_help = true,
                               .default_value = d.init,
                               .choices = {"model", "random"}});
  registry.add_option(smooth, {.flag = "--optimizer",
                               .help = "lbfgs, adam, sgd (--online: recursive maximum "
                                       "likelihood's steps), or auto (lbfgs for the analytic "
                                       "gradient, adam for the score)",
                               .users_in_help = true,
                               .default_value = d.optimizer,
                               .choices = {"auto", "lbfgs", "adam", "sgd"}});
  registry.add_option(smooth, {.flag = "--iterations",
                               .help = "Optimiser steps (default: 200 for lbfgs, 2000 for adam; 0 "
                                       "applies the starting guide as it is)",
                               .users_in_help = true,
                               .default_value = d.iterations,
                               .show_default = false});
  registry.add_option(smooth, {.flag = "--learning-rate",
                               .help = "The optimiser's step size (0: 1 for lbfgs, 0.01 for "
                                       "adam, 0.05 for sgd)",
                               .users_in_help = true,
                               .default_value = d.learning_rate,
                               .type_name = "RATE"});
  registry.add_option(smooth, {.flag = "--samples",
                               .help = "--gradient score: draws from q_t per time step (N); "
                                       "pathwise: trajectories per gradient step",
                               .default_value = d.samples,
                               .check = MethodOption::Check::Positive});
  registry.add_option(smooth, {.flag = "--draws",
                               .help = "Trajectories drawn from the guide for the functionals "
                                       "and the ELBO's Monte Carlo error",
                               .users_in_help = true,
                               .default_value = d.draws,
                               .check = MethodOption::Check::Positive});
  registry.add_option(smooth, {.flag = "--online",
                               .help = "Train online: the score recursions forward, one update "
                                       "per observation (4.13), in memory that does not grow "
                                       "with T (default: offline, whole-series steps)",
                               .users_in_help = true,
                               .default_value = std::optional<bool>()});
  registry.add_option(smooth, {.flag = "--epochs",
                               .help = "--online: passes over the series (1: streaming; more: "
                                       "the recursive updates within epochs, 4.15; 0: one pass "
                                       "without updates, the guide applied as it is)",
                               .users_in_help = true,
                               .default_value = d.epochs});
  registry.add_option(smooth, {.flag = "--step-hold",
                               .help = "--online --optimizer sgd: updates at the full step before "
                                       "it decays",
                               .default_value = d.step_hold});
  registry.add_option(smooth, {.flag = "--step-decay",
                               .help = "--online --optimizer sgd: the step after the hold is "
                                       "RATE (k - hold)^-DECAY",
                               .default_value = d.step_decay});
  registry.add_option(smooth, {.flag = "--clip",
                               .help = "--online --optimizer sgd: the largest move of a "
                                       "coordinate in one update (0: no clip)",
                               .default_value = d.clip});
  registry.add_option(smooth, {.flag = "--online-out",
                               .help = "Write the per-step filtering and one-step smoothing "
                                       "moments to this CSV (--online: the last pass's, with its "
                                       "running ELBO; offline: the trained guide's)",
                               .users_in_help = true,
                               .default_value = std::string(),
                               .type_name = "FILE"});
  registry.add_option(smooth, {.flag = "--learn-params",
                               .help = "Learn the model's parameters with the guide, by the "
                                       "ELBO (variational EM; default: smooth under the "
                                       "parameters given)",
                               .users_in_help = true,
                               .default_value = std::optional<bool>()});
  registry.add_option(smooth, {.flag = "--fix",
                               .help = "--learn-params: keep this parameter at its value "
                                       "(repeatable)",
                               .default_value = std::vector<std::string>{},
                               .type_name = "NAME"});
  registry.add_option(smooth, {.flag = "--param-learning-rate",
                               .help = "--learn-params: the parameters' step: Adam's (0: "
                                       "--learning-rate's); online, the first of rml's decaying "
                                       "steps (0: 0.05)",
                               .default_value = d.param_learning_rate,
                               .type_name = "RATE"});
  registry.add_option(smooth, {.flag = "--save",
                               .help = "--learn-params: write the learned parameters to this "
                                       "file (a --params file)",
                               .default_value = std::string(),
                               .type_name = "FILE.json"});
  registry.add_option(smooth, {.flag = "--save-guide",
                               .help = "Write the trained guide to this file",
                               .users_in_help = true,
                               .default_value = std::string(),
                               .type_name = "FILE"});
  registry.add_option(smooth, {.flag = "--load-guide",
                               .help = "Start from a guide saved by --save-guide (with "
                                       "--iterations 0: apply it as it is, to new data too)",
                               .users_in_help = true,
                               .default_value = std::string(),
                               .type_name = "FILE"});
}

} // namespace

std::string vsmooth_layout() {
  // The build time of this file, which the executable and the module each link, tells a module
  // rebuilt since the executable was linked even where the sizes agree.
  return fmt::format("abi {}; run {}; model info {}; options {}; fit {}; data {}; built {} {}",
                     SSM_ABI_VERSION, sizeof(MethodRun), sizeof(ModelInfo),
                     sizeof(VariationalSmoothOptions), sizeof(VariationalSmoothFit),
                     sizeof(ObsData), __DATE__, __TIME__);
}

void register_variational_smoother(MethodRegistry& registry) {
  add_options(registry);
  Method m;
  m.name = kName;
  m.task = Task::Smooth;
  m.title = "a backward-factorised Gaussian guide fitted by its ELBO";
  m.note = "LibTorch";
  m.rank = 100; // never auto's choice: it trains a guide
  m.applies = variational_applies;
  m.options = {"--family",       "--init",          "--gradient",
               "--encoder",      "--hidden",        "--optimizer",
               "--iterations",   "--learning-rate", "--samples",
               "--draws",        "--save-guide",    "--load-guide",
               "--online",       "--epochs",        "--online-out",
               "--step-hold",    "--step-decay",    "--clip",
               "--learn-params", "--fix",           "--param-learning-rate",
               "--save"};
  // --marginals and --functional are the smooth task's own options, read by every smoother.
  m.check = check;
  m.fits_to_data = true;
  m.smooth = smooth_variational;
  // As the other smoothers' (smooth_json), with the fit's ELBO and diagnostics.
  m.smooth_json = [](const MethodRun& run, const SmoothResult& r) {
    nlohmann::json j = {{"model", run.info.name},
                        {"method", kName},
                        {"T", r.T},
                        {"functionals", functionals_json(run.info, r)},
                        {"marginals", r.has_marginals},
                        {"fit_s", r.filter_s},
                        {"smooth_s", r.smooth_s},
                        {"seed", run.seed}};
    for (const auto& [key, value] : r.details.items())
      j[key] = value;
    return j;
  };
  registry.add(std::move(m));
}

} // namespace ssm
