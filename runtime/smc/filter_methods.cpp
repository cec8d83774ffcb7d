// The particle filters' registration: their names, when `auto` picks them, their options and
// their entry point (bootstrap_filter with the guided, auxiliary or random-weight variant).
#include "smc/filter_methods.h"
#include "core/error.h"
#include "smc/proposal.h"

#include <fmt/format.h>

namespace ssm {

namespace {

// One particle filter: the variant of FilterOptions it runs.
struct ParticleFilterKind {
  std::string name;
  bool guided, auxiliary, random_weight;
};

const std::vector<ParticleFilterKind>& kinds() {
  static const std::vector<ParticleFilterKind> all = {{"bootstrap", false, false, false},
                                                      {"guided", true, false, false},
                                                      {"apf", false, true, false},
                                                      {"random-weight", false, false, true}};
  return all;
}

const ParticleFilterKind& kind(std::string_view name) {
  for (const ParticleFilterKind& k : kinds())
    if (k.name == name)
      return k;
  throw Error(fmt::format("{} is not a particle filter", name));
}

nlohmann::json filter_json(std::string_view name, const MethodRun& run, const FilterResult& r) {
  const FilterOptions opt = particle_filter_options(name, run.options, run.seed);
  nlohmann::json j = {{"particles", r.particles},
                      {"resample_count", r.resample_count},
                      {"resampling", resampling_name(opt.resampling)},
                      {"ess_min", r.ess_min},
                      {"seed", run.seed},
                      {"threads", run.threads}};
  if (opt.auxiliary)
    j["lookahead"] = lookahead_name(lookahead_for(run.model));
  if (opt.random_weight) {
    j["transition_density"] =
        r.likelihood_caveat.empty()
            ? "estimated (General Poisson, positive by construction)"
            : fmt::format("estimated ({}, made positive by Wald's identity over each step's "
                          "particles)",
                          run.info.sde->estimator == "gpe" ? "General Poisson" : "parametrix");
    if (!r.likelihood_caveat.empty())
      j["log_likelihood_caveat"] = r.likelihood_caveat;
    j["proposal"] = random_weight_proposal_name(run.model, run.info);
  }
  return j;
}

} // namespace

std::vector<MethodOption> particle_filter_options() {
  const FilterOptions defaults;
  std::vector<std::string> schemes;
  for (Resampling r : kResamplingSchemes)
    schemes.push_back(resampling_name(r));
  return {
      {.flag = "--particles",
       .help = "Number of particles",
       .default_value = defaults.particles,
       .check = MethodOption::Check::Positive,
       .help_elsewhere = "Number of particles of the filter"},
      {.flag = "--ess-threshold",
       .help = "Resample when ESS < r * particles (1: every step, 0: never)",
       .default_value = defaults.ess_threshold,
       .check = MethodOption::Check::Fraction},
      {.flag = "--resampling",
       .help = "Resampling scheme",
       .default_value = std::string(resampling_name(defaults.resampling)),
       .type_name = "SCHEME",
       .choices = schemes},
  };
}

FilterOptions particle_filter_options(std::string_view name, const OptionValues& values,
                                      uint64_t seed) {
  const ParticleFilterKind& k = kind(name);
  FilterOptions opt;
  opt.particles = values.integer("--particles");
  opt.ess_threshold = values.real("--ess-threshold");
  opt.resampling = *parse_resampling(values.word("--resampling")); // a declared choice
  opt.guided = k.guided;
  opt.auxiliary = k.auxiliary;
  opt.random_weight = k.random_weight;
  opt.seed = seed;
  return opt;
}

const std::string& particle_filter_name(const FilterOptions& options) {
  for (const ParticleFilterKind& k : kinds())
    if (k.guided == options.guided && k.auxiliary == options.auxiliary &&
        k.random_weight == options.random_weight)
      return k.name;
  throw Error("internal error: no particle filter has these options");
}

bool is_bootstrap_filter(const FilterOptions& options) {
  return particle_filter_name(options) == particle_filter_name(FilterOptions{});
}

void register_particle_filters(MethodRegistry& registry) {
  std::vector<std::string> flags;
  for (MethodOption& o : particle_filter_options()) {
    flags.push_back(o.flag);
    registry.add_option(Task::Filter, std::move(o));
  }
  for (const ParticleFilterKind& k : kinds()) {
    Method m;
    m.name = k.name;
    m.task = Task::Filter;
    m.particles = true;
    m.options = flags;
    if (k.guided) {
      m.note = "the model's proposal";
      m.rank = 3;
      m.auto_help = "{} for a model with a proposal";
      m.applies = [](const ssm_model& model, const ModelInfo& info) -> Refusal {
        if (model.proposal_sample && info.transition_tractable)
          return std::nullopt;
        return "the model has no proposal, or its transition has no density";
      };
    } else if (k.random_weight) {
      m.title = "random-weight particle filter";
      m.note = "SDE transitions, exact";
      m.rank = 2;
      m.auto_help = "{} for an SDE transition whose density estimates are positive by "
                    "construction";
      m.applies = [](const ssm_model& model, const ModelInfo& info) -> Refusal {
        std::string why = random_weight_problem(model, info);
        return why.empty() ? Refusal() : Refusal(std::move(why));
      };
      m.biased_likelihood = [](const ssm_model&, const ModelInfo& info) -> Refusal {
        std::string why = random_weight_likelihood_caveat(info);
        return why.empty() ? Refusal() : Refusal(std::move(why));
      };
    } else if (k.auxiliary) {
      m.title = "auxiliary particle filter";
      m.rank = 5;
    } else {
      m.rank = 4;
      m.auto_help = "else {}";
    }
    m.filter = [name = k.name](const MethodRun& run) {
      FilterOptions opt = particle_filter_options(name, run.options, run.seed);
      opt.progress = run.progress;
      opt.history = opt.moments = !run.likelihood_only;
      return bootstrap_filter(run.model, run.info, *run.fixed, *run.data, opt, *run.pool);
    };
    m.filter_json = [name = k.name](const MethodRun& run, const FilterResult& r) {
      return filter_json(name, run, r);
    };
    registry.add(std::move(m));
  }
}

} // namespace ssm
