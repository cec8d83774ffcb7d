// The learning methods' registration: see methods.h.
#include "learning/methods.h"
#include "core/error.h"
#include "exact/finite_state.h"
#include "learning/em.h"
#include "learning/optimize.h"
#include "learning/pmmh.h"
#include "learning/score.h"

#include <fmt/format.h>

namespace ssm {

namespace {

// Why the score of the model is not exact, or nullopt: lbfgs needs an exact gradient.
Refusal exact_score_refusal(const ssm_model& model, const ModelInfo& info) {
  if (Refusal why = score_refusal(model, info))
    return why;
  if (!(info.linear_gaussian && model.linear_gaussian) && !info.finite_state)
    return "the likelihood is not exact (the model is neither linear-Gaussian nor finite-state; "
           "see `info`)";
  return std::nullopt;
}

OptimizeOptions optimize_options(const MethodRun& run) {
  OptimizeOptions opt;
  opt.fixed = run.options.names("--fix");
  opt.inits = run.options.integer("--inits");
  opt.max_iterations = run.options.integer("--max-iterations");
  opt.tolerance = run.options.real("--tolerance");
  opt.map = run.options.toggle("--map").value_or(false);
  return opt;
}

Optimum run_lbfgs(const MethodRun& run) {
  const ScoreModel sm = score_model(run.model, run.info);
  const Method& smoother = run.registry->choose(Task::Smooth, sm.model, sm.info);
  if (smoother.particles)
    throw Error(fmt::format("optimize --method {}: no exact smoother applies to the score of "
                            "model '{}'",
                            kLbfgsName, run.info.name));
  const OptionValues smooth_defaults = run.registry->default_options(Task::Smooth);
  MethodRun at{sm.model, sm.info, smooth_defaults, run.seed, false, run.threads};
  at.registry = run.registry;
  at.fixed = run.fixed;
  at.data = run.data;
  at.pool = run.pool;
  return maximize_likelihood(smoother, at, optimize_options(run));
}

// Why EM does not apply, or nullopt: its E-step enumerates the states, its M-step needs the score.
Refusal em_refusal(const ssm_model& model, const ModelInfo& info) {
  if (!enumerable(info))
    return "the model is not finite-state (EM's E-step enumerates the states; see `info`)";
  return score_refusal(model, info);
}

Posterior run_pmmh(const MethodRun& run) {
  SampleOptions opt;
  opt.fixed = run.options.names("--fix");
  opt.chains = run.options.integer("--chains");
  opt.warmup = run.options.integer("--warmup");
  opt.iterations = run.options.integer("--iterations");
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
                               "starting values so that the log-likelihood's sd is about 1.2",
                       .default_value = defaults.particles});
  Method pmmh;
  pmmh.name = kPmmhName;
  pmmh.title = "particle marginal Metropolis-Hastings";
  pmmh.task = Task::Sample;
  pmmh.rank = 1;
  pmmh.auto_help = "{}";
  pmmh.options = {"--fix", "--chains", "--warmup", "--iterations", "--filter", "--particles"};
  pmmh.sample = run_pmmh;
  registry.add(std::move(pmmh));
}

} // namespace

void register_learning_methods(MethodRegistry& registry) {
  register_sampling(registry);
  const OptimizeOptions defaults;
  registry.add_option(Task::Optimize,
                      {.flag = "--fix",
                       .help = "Keep this parameter at its value (repeatable); every other "
                               "parameter with a value or a prior is learned",
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
                               "|x|) on the unconstrained scale; em: when an iteration raises the "
                               "objective by less than this times max(1, |objective|)",
                       .default_value = defaults.tolerance});

  registry.add_option(Task::Optimize,
                      {.flag = "--map",
                       .help = "The posterior mode: maximise the log-likelihood plus the log "
                               "prior density (of the parameters that have a prior; no Jacobian, "
                               "as Stan's optimize)",
                       .default_value = std::optional<bool>{},
                       .show_default = false});
  Method lbfgs;
  lbfgs.name = kLbfgsName;
  lbfgs.title = "L-BFGS with the exact score";
  lbfgs.note = "linear-Gaussian or finite-state models";
  lbfgs.task = Task::Optimize;
  lbfgs.rank = 1;
  lbfgs.auto_help = "{}";
  lbfgs.options = {"--fix", "--inits", "--max-iterations", "--tolerance", "--map"};
  lbfgs.applies = exact_score_refusal;
  lbfgs.check = [](const MethodRun& run) {
    if (Refusal why = exact_score_refusal(run.model, run.info))
      throw Error(fmt::format("optimize ({}): {}; for a particle model, stochastic gradients "
                              "and EM are not available yet",
                              kLbfgsName, *why));
  };
  lbfgs.optimize = run_lbfgs;
  registry.add(std::move(lbfgs));

  Method em;
  em.name = kEmName;
  em.title = "expectation-maximisation, exact E-step (forward-backward), M-step by L-BFGS";
  em.note = "finite-state models: hidden Markov models, mixtures";
  em.task = Task::Optimize;
  em.rank = 2;
  em.auto_help = "{}";
  em.options = {"--fix", "--inits", "--max-iterations", "--tolerance", "--map"};
  em.applies = em_refusal;
  em.check = [](const MethodRun& run) {
    if (Refusal why = em_refusal(run.model, run.info))
      throw Error(fmt::format("optimize ({}): {}", kEmName, *why));
  };
  em.optimize = [](const MethodRun& run) { return run_em(run, optimize_options(run)); };
  registry.add(std::move(em));
}

} // namespace ssm
