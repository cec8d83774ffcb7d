// The learning methods' registration: see methods.h.
#include "learning/methods.h"
#include "core/error.h"
#include "exact/finite_state.h"
#include "learning/em.h"
#include "learning/gibbs.h"
#include "learning/information.h"
#include "learning/log_posterior.h"
#include "learning/monte_carlo_em.h"
#include "learning/optimize.h"
#include "learning/pmmh.h"
#include "learning/rml.h"
#include "learning/score.h"
#include "learning/smc2.h"
#include "learning/stochastic_gradient.h"
#include "smoothing/methods.h"

#include <fmt/format.h>

namespace ssm {

namespace {

OptimizeOptions optimize_options(const MethodRun& run) {
  OptimizeOptions opt;
  opt.fixed = run.options.names("--fix");
  opt.inits = run.options.integer("--inits");
  opt.max_iterations = run.options.integer("--max-iterations");
  opt.tolerance = run.options.real("--tolerance");
  opt.map = run.options.toggle("--map").value_or(false);
  opt.sde_estimates = run.options.integer("--sde-estimates");
  return opt;
}

// Runs `entry` (lbfgs or em) with the exact smoother of the score and gives its optimum the
// standard errors from the observed information there.
template <class Entry>
Optimum with_exact_score(const MethodRun& run, const char* method, const Entry& entry) {
  const ScoreModel sm = score_model(run.model, run.info);
  const Method& smoother = run.registry->choose(Task::Smooth, sm.model, sm.info);
  if (smoother.particles)
    throw Error(fmt::format("optimize --method {}: no exact smoother applies to the score of "
                            "model '{}'",
                            method, run.info.name));
  const OptionValues smooth_defaults = run.registry->default_options(Task::Smooth);
  MethodRun at{sm.model, sm.info, smooth_defaults, run.seed, false, run.threads};
  at.registry = run.registry;
  at.fixed = run.fixed;
  at.data = run.data;
  at.pool = run.pool;
  at.prior = run.prior;
  const OptimizeOptions options = optimize_options(run);
  Optimum best = entry(smoother, at, options);
  std::vector<double> fixed = *run.fixed;
  std::copy(best.theta.begin(), best.theta.end(), fixed.begin());
  at.fixed = &fixed;
  best.standard_errors =
      standard_errors(smoother, at, ParameterSpace(run.info, options.fixed), options.map);
  return best;
}

Optimum run_lbfgs(const MethodRun& run) {
  return with_exact_score(
      run, kLbfgsName, [](const Method& smoother, const MethodRun& at, const OptimizeOptions& o) {
        return maximize_likelihood(smoother, at, o);
      });
}

// The smoothing options a learning method's run gives: the smoothers' defaults, with the values
// of the flags its task declares for them (copy_smoothing_options).
OptionValues smoothing_values(const MethodRegistry& registry, const OptionValues& rml) {
  OptionValues values = registry.default_options(Task::Smooth);
  for (const MethodOption& o : registry.options(Task::Smooth))
    if (rml.has(o.key()))
      values.slot(o.key()) = rml.value(o.key());
  return values;
}

std::vector<std::string> forward_pass_flags() {
  return {"--filter", "--particles", "--ess-threshold", "--resampling"};
}

// Declares for `task` the smoothing task's options that the online smoothers and their forward
// pass read, and `extra` ones (copies of the smoothing room's declarations, so that --help and
// the parser see them there too); returns their flags.
std::vector<std::string> copy_smoothing_options(MethodRegistry& registry, Task task,
                                                const std::vector<std::string>& extra = {}) {
  std::vector<std::string> flags = forward_pass_flags();
  flags.insert(flags.end(), extra.begin(), extra.end());
  for (const Smoother& sm : smoothers())
    if (sm.online)
      for (const std::string& flag : sm.options)
        if (std::find(flags.begin(), flags.end(), flag) == flags.end())
          flags.push_back(flag);
  for (const MethodOption& o : registry.options(Task::Smooth))
    if (std::find(flags.begin(), flags.end(), o.key()) != flags.end())
      registry.add_option(task, o);
  return flags;
}

// Whether em's E-step is the particle one: --e-step ffbsi, paris or bis, or auto on a model
// without an exact smoother.
bool monte_carlo_e_step(const MethodRun& run) {
  const std::string& e_step = run.options.word("--e-step");
  return e_step != "exact" && (e_step != "auto" || exact_em_refusal(run.info));
}

// The smoother of em's particle E-step: --e-step's, or for auto ffbsi, except for an SDE
// transition (no density for ffbsi's draws): what smooth's auto picks there (paris, or bis where
// the estimates have no bound).
std::string em_e_step_smoother(const MethodRegistry& registry, const MethodRun& run) {
  const std::string& e_step = run.options.word("--e-step");
  if (e_step != "auto")
    return e_step;
  if (run.info.sde && !run.info.transition_tractable)
    return registry.choose(Task::Smooth, run.model, run.info, true).name;
  return "ffbsi";
}

// The options of em's particle E-step, from the flags of the optimize run.
SmoothOptions em_smoothing(const MethodRegistry& registry, const MethodRun& run) {
  const OptionValues values = smoothing_values(registry, run.options);
  MethodRun at{run.model, run.info, values, run.seed, false, run.threads};
  at.registry = &registry;
  return smooth_options(registry, em_e_step_smoother(registry, run), at);
}

// optimize --method adam: the score by the particle smoother `auto` picks (paris).
Optimum run_adam(const MethodRun& run) {
  const ScoreModel sm = score_model(run.model, run.info);
  const OptionValues values = smoothing_values(*run.registry, run.options);
  MethodRun at{sm.model, sm.info, values, run.seed, false, run.threads};
  at.registry = run.registry;
  at.fixed = run.fixed;
  at.data = run.data;
  at.pool = run.pool;
  at.prior = run.prior;
  at.progress = run.progress; // per step (maximize_stochastic), not per smoother pass
  const Method& smoother = run.registry->choose(Task::Smooth, sm.model, sm.info, true);
  AdamOptions adam;
  adam.learning_rate = run.options.real("--learning-rate");
  return maximize_stochastic(smoother, at, optimize_options(run), adam);
}

// --prior, for `task`: the command reads its density file (cli/command.h, read_prior) and hands
// it to the methods as MethodRun::prior.
void add_prior_option(MethodRegistry& registry, Task task, const std::string& what) {
  registry.add_option(task, {.flag = "--prior",
                             .help = "A density over the learned parameters' unconstrained "
                                     "coordinates (saved by vi --save-guide or `ssmc density "
                                     "fit`) that replaces their priors in the model" +
                                     what,
                             .default_value = std::string(),
                             .type_name = "FILE.pt",
                             .show_default = false});
}

// A method that reads no --prior refuses one, rather than ignore it when `auto` chose it.
void refuse_prior(const MethodRun& run, const std::string& who, const std::string& instead) {
  if (const std::string& file = run.options.word("--prior"); !file.empty())
    throw Error(fmt::format("{}: --prior {} is not read by this method ({}); {}", who, file,
                            "its updates use the model's priors in closed form", instead));
}

// What every MCMC method of `sample` reads: --fix, --chains, --warmup, --iterations.
SampleOptions chain_options(const MethodRun& run) {
  SampleOptions opt;
  opt.fixed = run.options.names("--fix");
  opt.chains = run.options.integer("--chains");
  opt.warmup = run.options.integer("--warmup");
  opt.iterations = run.options.integer("--iterations");
  return opt;
}

Posterior run_pmmh(const MethodRun& run) {
  SampleOptions opt = chain_options(run);
  opt.particles = run.options.integer("--particles");
  opt.filter = run.options.word("--filter");
  return sample_pmmh(run, opt);
}

void register_sampling(MethodRegistry& registry) {
  const SampleOptions defaults;
  std::vector<std::string> filters = {"auto"}; // registered before the learning methods
  for (const std::string& name : registry.names(Task::Filter))
    filters.push_back(name);
  registry.add_option(Task::Sample, {.flag = "--fix",
                                     .help = "Keep this parameter at its value (repeatable); every "
                                             "other parameter with a prior is sampled",
                                     .default_value = std::vector<std::string>{},
                                     .type_name = "NAME"});
  registry.add_option(Task::Sample, {.flag = "--chains",
                                     .help = "Chains, run in parallel on the --threads",
                                     .default_value = defaults.chains,
                                     .check = MethodOption::Check::Positive});
  registry.add_option(Task::Sample, {.flag = "--warmup",
                                     .help = "Warmup iterations per chain (the random walk adapts; "
                                             "not kept), as CmdStan's num_warmup",
                                     .default_value = defaults.warmup});
  registry.add_option(Task::Sample, {.flag = "--iterations",
                                     .help = "Draws kept per chain, as CmdStan's num_samples",
                                     .default_value = defaults.iterations,
                                     .check = MethodOption::Check::Positive});
  registry.add_option(Task::Sample,
                      {.flag = "--filter",
                       .help = "The filter whose log-likelihood drives the chain: auto (the exact "
                               "one when the structure allows) or a filter's name",
                       .default_value = defaults.filter,
                       .type_name = "FILTER",
                       .choices = filters});
  registry.add_option(Task::Sample,
                      {.flag = "--particles",
                       .help = "Particles of a particle filter; 0: chosen by a pilot run at the "
                               "starting values so that the log-likelihood's sd is about 1.2 "
                               "(pmmh), 100 at the start (smc2, which doubles them when its "
                               "moves' acceptance collapses)",
                       .default_value = defaults.particles});
  add_prior_option(registry, Task::Sample, "");
  Method pmmh;
  pmmh.name = kPmmhName;
  pmmh.title = "particle marginal Metropolis-Hastings";
  pmmh.task = Task::Sample;
  pmmh.rank = 1;
  pmmh.auto_help = "{}";
  pmmh.options = {"--fix",    "--chains",    "--warmup", "--iterations",
                  "--filter", "--particles", "--prior"};
  pmmh.sample = run_pmmh;
  registry.add(std::move(pmmh));

  const Smc2Options smc2_defaults;
  registry.add_option(Task::Sample, {.flag = "--theta-particles",
                                     .help = "smc2: parameter particles of each run (also its "
                                             "draws)",
                                     .default_value = smc2_defaults.theta_particles,
                                     .check = MethodOption::Check::Positive});
  registry.add_option(Task::Sample, {.flag = "--moves",
                                     .help = "smc2: PMMH moves of every parameter particle at "
                                             "each resample-move step",
                                     .default_value = smc2_defaults.moves,
                                     .check = MethodOption::Check::Positive});
  Method smc2;
  smc2.name = kSmc2Name;
  smc2.title = "SMC^2: a particle filter per parameter particle, with the log evidence";
  smc2.task = Task::Sample;
  smc2.rank = 2;
  smc2.options = {"--fix",   "--chains", "--filter", "--particles", "--theta-particles",
                  "--moves", "--prior"};
  smc2.sample = [](const MethodRun& run) {
    Smc2Options opt;
    opt.fixed = run.options.names("--fix");
    opt.chains = run.options.integer("--chains");
    opt.theta_particles = run.options.integer("--theta-particles");
    opt.moves = run.options.integer("--moves");
    if (const int64_t n = run.options.integer("--particles"); n > 0)
      opt.particles = n;
    else if (n < 0)
      throw Error(fmt::format("sample --method smc2: --particles must be at least 1 (0: start at "
                              "{}; got {})",
                              opt.particles, n));
    opt.filter = run.options.word("--filter");
    return sample_smc2(run, opt);
  };
  registry.add(std::move(smc2));

  Method gibbs;
  gibbs.name = kGibbsName;
  gibbs.title = "Gibbs sampling from conjugate full conditionals, with the latent values the "
                "data does not give (plate models; time series with exact path draws)";
  gibbs.task = Task::Sample;
  gibbs.rank = 3;
  gibbs.applies = gibbs_refusal;
  gibbs.options = {"--fix", "--chains", "--warmup", "--iterations"};
  gibbs.check = [](const MethodRun& run) {
    refuse_prior(run, "sample --method gibbs", "--method pmmh or smc2 read it");
  };
  gibbs.sample = [](const MethodRun& run) { return sample_gibbs(run, chain_options(run)); };
  registry.add(std::move(gibbs));
}

RmlOptions rml_options(const MethodRun& run) {
  RmlOptions opt;
  opt.fixed = run.options.names("--fix");
  opt.step_size = run.options.real("--step-size");
  opt.step_hold = run.options.integer("--step-hold");
  opt.step_decay = run.options.real("--step-decay");
  opt.average_from = run.options.integer("--average-from");
  opt.clip = run.options.real("--clip");
  return opt;
}

// rml's options: its own, then those of the online smoothers and their forward pass, declared
// by the smoothing room (copied, so that --help and the parser see them under rml).
void register_rml(MethodRegistry& registry) {
  const RmlOptions defaults;
  registry.add_option(Task::Rml, {.flag = "--fix",
                                  .help = "Keep this parameter at its value (repeatable); every "
                                          "other parameter with a default or a prior is learned",
                                  .default_value = std::vector<std::string>{},
                                  .type_name = "NAME"});
  registry.add_option(Task::Rml,
                      {.flag = "--step-size",
                       .help = "gamma_0: the step size of the first --step-hold observations, "
                               "on the unconstrained scale",
                       .default_value = defaults.step_size});
  registry.add_option(Task::Rml, {.flag = "--step-hold",
                                  .help = "n_0: observations at gamma_0; then gamma_k = gamma_0 "
                                          "(k - n_0)^(-kappa)",
                                  .default_value = defaults.step_hold});
  registry.add_option(Task::Rml, {.flag = "--step-decay",
                                  .help = "kappa, in (0.5, 1] for convergence",
                                  .default_value = defaults.step_decay});
  registry.add_option(Task::Rml,
                      {.flag = "--average-from",
                       .help = "The estimate is the average of the parameters after observations "
                               "k >= this (Polyak averaging); 0: n_0 + 1",
                       .default_value = defaults.average_from});
  registry.add_option(Task::Rml,
                      {.flag = "--clip",
                       .help = "The largest move of one unconstrained coordinate in one step "
                               "(0: none)",
                       .default_value = defaults.clip});
  copy_smoothing_options(registry, Task::Rml);
  const MethodRegistry* reg = &registry;
  int rank = 0;
  for (const Smoother& sm : smoothers()) {
    if (!sm.online)
      continue;
    Method m;
    m.name = sm.name;
    m.title = sm.id == SmoothMethod::Online  ? "exact backward sums, O(N^2) per observation"
              : sm.id == SmoothMethod::Paris ? "backward draws, O(N)"
                                             : "backward importance sampling, O(N K), no bound";
    m.task = Task::Rml;
    m.rank = sm.id == SmoothMethod::Paris ? 0 : ++rank;
    m.auto_help = sm.id == SmoothMethod::Paris ? "{}" : "";
    m.particles = true;
    m.options = {"--fix",  "--step-size", "--step-hold", "--step-decay",    "--average-from",
                 "--clip", "--filter",    "--particles", "--ess-threshold", "--resampling"};
    m.options.insert(m.options.end(), sm.options.begin(), sm.options.end());
    m.applies = [applies = sm.applies, id = sm.id](const ssm_model& model,
                                                   const ModelInfo& info) -> Refusal {
      if (Refusal why = score_refusal(model, info))
        return why;
      ModelInfo as_score = info; // the smoother sees the score's terms (ScoreModel)
      as_score.functionals_lack_sde_term = info.score_lacks_sde_term;
      if (Refusal why = sde_score_refusal(id, as_score))
        return why;
      return applies ? applies(model, info) : std::nullopt;
    };
    if (sm.auto_passes_over) // as for smoothing the score (an SDE's: bis)
      m.auto_passes_over = [passes = sm.auto_passes_over](const ssm_model& model,
                                                          const ModelInfo& info) -> Refusal {
        ModelInfo as_score = info;
        as_score.functionals_lack_sde_term = info.score_lacks_sde_term;
        return passes(model, as_score);
      };
    m.check = [reg, name = sm.name](const MethodRun& run) {
      if (Refusal why = score_refusal(run.model, run.info))
        throw Error(fmt::format("rml: {}", *why));
      const ScoreModel score = score_model(run.model, run.info);
      const OptionValues values = smoothing_values(*reg, run.options);
      MethodRun at{score.model, score.info, values, run.seed, run.automatic, run.threads};
      at.registry = reg;
      check_smooth_method(score.model, score.info, smooth_options(*reg, name, at), "rml");
      check_rml_options(rml_options(run));
    };
    m.rml = [reg, name = sm.name](const MethodRun& run, const ParameterTrace& trace) {
      const OptionValues values = smoothing_values(*reg, run.options);
      MethodRun smoothing{run.model, run.info, values, run.seed, run.automatic, run.threads};
      smoothing.registry = reg;
      smoothing.progress = run.progress;
      return recursive_maximum_likelihood(run, smooth_options(*reg, name, smoothing),
                                          rml_options(run), trace);
    };
    registry.add(std::move(m));
  }
}

} // namespace

void register_learning_methods(MethodRegistry& registry) {
  register_sampling(registry);
  register_rml(registry);
  const OptimizeOptions defaults;
  registry.add_option(Task::Optimize,
                      {.flag = "--fix",
                       .help = "Keep this parameter at its value (repeatable); every other "
                               "parameter with a default or a prior is learned",
                       .default_value = std::vector<std::string>{},
                       .type_name = "NAME"});
  registry.add_option(Task::Optimize,
                      {.flag = "--inits",
                       .help = "Starts: the given values, then K - 1 random ones, uniform(-2, 2) "
                               "around them on the unconstrained scale; the best one is reported",
                       .default_value = defaults.inits,
                       .check = MethodOption::Check::Positive,
                       .type_name = "K"});
  registry.add_option(Task::Optimize, {.flag = "--max-iterations",
                                       .help = "Iterations of each start",
                                       .default_value = defaults.max_iterations,
                                       .check = MethodOption::Check::Positive});
  registry.add_option(Task::Optimize,
                      {.flag = "--tolerance",
                       .help = "lbfgs: stop when the gradient norm is below this times max(1, "
                               "|x|) on the unconstrained scale; em with an exact E-step: when an "
                               "iteration raises the objective by less than this times max(1, "
                               "|objective|)",
                       .default_value = defaults.tolerance});

  registry.add_option(Task::Optimize,
                      {.flag = "--map",
                       .help = "The posterior mode: maximise the log-likelihood plus the log "
                               "prior density (of the parameters that have a prior; no Jacobian, "
                               "as Stan's optimize)",
                       .default_value = std::optional<bool>{},
                       .show_default = false});
  add_prior_option(registry, Task::Optimize, " (with --map)");
  Method lbfgs;
  lbfgs.name = kLbfgsName;
  lbfgs.title = "L-BFGS with the exact score";
  lbfgs.note = "linear-Gaussian or finite-state models";
  lbfgs.task = Task::Optimize;
  lbfgs.rank = 1;
  lbfgs.auto_help = "{} for an exact likelihood";
  lbfgs.options = {"--fix", "--inits", "--max-iterations", "--tolerance", "--map", "--prior"};
  lbfgs.applies = exact_score_refusal;
  lbfgs.check = [](const MethodRun& run) {
    if (Refusal why = exact_score_refusal(run.model, run.info))
      throw Error(fmt::format("optimize ({}): {}; for a particle model, --method {} climbs "
                              "the particle smoother's score",
                              kLbfgsName, *why, kAdamName));
  };
  lbfgs.optimize = run_lbfgs;
  registry.add(std::move(lbfgs));

  const std::vector<std::string> smoothing =
      copy_smoothing_options(registry, Task::Optimize, {"--trajectories"});
  registry.add_option(Task::Optimize,
                      {.flag = "--e-step",
                       .help = "em: the E-step: exact (forward-backward or the Kalman smoother), "
                               "ffbsi (Monte Carlo EM: a particle filter and --trajectories drawn "
                               "backward at each iteration, the iterates of the second half "
                               "averaged), paris or bis (the trajectories picked among their "
                               "backward draws: an SDE's estimated density), or auto (exact when "
                               "the structure allows, else ffbsi, or for an SDE smooth's choice)",
                       .default_value = std::string("auto"),
                       .type_name = "auto|exact|ffbsi|paris|bis",
                       .choices = {"auto", "exact", "ffbsi", "paris", "bis"}});
  registry.add_option(Task::Optimize,
                      {.flag = "--sde-estimates",
                       .help = "em with an SDE transition: estimates of each pair's density whose "
                               "mean's log is its term of Q (the same draws for every parameter "
                               "the M-step tries)",
                       .default_value = defaults.sde_estimates,
                       .check = MethodOption::Check::Positive,
                       .type_name = "R"});
  Method em;
  em.name = kEmName;
  em.title = "expectation-maximisation: E-step exact (forward-backward or Kalman smoother) or by "
             "backward trajectories (Monte Carlo EM); M-step in closed form for conjugate "
             "pieces, by L-BFGS otherwise";
  em.note = "models with a transition density, or an SDE's estimated one";
  em.task = Task::Optimize;
  em.rank = 3;
  em.auto_help = "else {}";
  em.options = {"--fix", "--inits", "--max-iterations", "--tolerance", "--map", "--e-step"};
  for (const std::string& flag : forward_pass_flags())
    em.options.push_back(flag);
  em.options.insert(em.options.end(), {"--trajectories", "--backward", "--max-trials",
                                       "--backward-samples", "--mcmc-steps", "--start-estimates",
                                       "--backward-proposal", "--sde-estimates"});
  em.applies = em_refusal;
  const MethodRegistry* reg = &registry;
  em.check = [reg](const MethodRun& run) {
    if (Refusal why = em_refusal(run.model, run.info))
      throw Error(fmt::format("optimize ({}): {}", kEmName, *why));
    refuse_prior(run, fmt::format("optimize ({})", kEmName),
                 fmt::format("--method {} or {} read it", kLbfgsName, kAdamName));
    if (run.options.word("--e-step") == "exact")
      if (Refusal why = exact_em_refusal(run.info))
        throw Error(fmt::format("optimize --method {} --e-step exact: {} (--e-step {} runs "
                                "Monte Carlo EM)",
                                kEmName, *why,
                                run.info.sde && !run.info.transition_tractable
                                    ? "paris or bis, on the SDE's estimated density,"
                                    : "ffbsi"));
    if (!monte_carlo_e_step(run))
      return;
    check_smooth_method(run.model, without_functionals(run.info), em_smoothing(*reg, run),
                        "optimize --method em", "--e-step");
    check_monte_carlo_em_options(optimize_options(run));
  };
  em.optimize = [reg](const MethodRun& run) {
    if (monte_carlo_e_step(run))
      return run_monte_carlo_em(run, optimize_options(run), em_smoothing(*reg, run));
    if (score_refusal(run.model, run.info)) // every M-step closed-form: no standard errors
      return run_em(run, optimize_options(run));
    return with_exact_score(
        run, kEmName,
        [&](const Method&, const MethodRun&, const OptimizeOptions& o) { return run_em(run, o); });
  };
  registry.add(std::move(em));

  const AdamOptions adam_defaults;
  registry.add_option(Task::Optimize, {.flag = "--learning-rate",
                                       .help = "adam: the step size on the unconstrained scale",
                                       .default_value = adam_defaults.learning_rate});
  Method adam;
  adam.name = kAdamName;
  adam.title = "stochastic gradient ascent on the particle smoother's score, iterates averaged";
  adam.note = "models with a score; the likelihood estimated";
  adam.task = Task::Optimize;
  adam.rank = 2;
  adam.auto_help = "else {} for a model with a score";
  adam.particles = true;
  adam.options = {"--fix", "--inits", "--max-iterations", "--map", "--learning-rate", "--prior"};
  for (const std::string& flag : smoothing)
    if (flag != "--trajectories")
      adam.options.push_back(flag);
  adam.applies = score_refusal;
  adam.check = [](const MethodRun& run) {
    if (Refusal why = score_refusal(run.model, run.info))
      throw Error(fmt::format("optimize ({}): {}", kAdamName, *why));
    if (!(run.options.real("--learning-rate") > 0))
      throw Error(fmt::format("optimize --method {}: --learning-rate must be positive (got {})",
                              kAdamName, run.options.real("--learning-rate")));
    if (run.options.integer("--max-iterations") < kAdamMinSteps)
      throw Error(fmt::format("optimize --method {}: --max-iterations must be at least {} (the "
                              "estimate averages the second half of the steps)",
                              kAdamName, kAdamMinSteps));
  };
  adam.optimize = run_adam;
  registry.add(std::move(adam));
}

} // namespace ssm
