// The smoothers' registration (smoothing/methods.h): the table of smoothing methods, the options
// they read, and their entry point, smooth().
#include "smoothing/methods.h"
#include "core/error.h"
#include "exact/finite_state.h"
#include "exact/methods.h"
#include "sde/density_estimator.h"
#include "smc/filter_methods.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

namespace ssm {

namespace {

Refusal rts_applies(const ssm_model& model, const ModelInfo& info) {
  if (!info.linear_gaussian)
    return "the model is not linear-Gaussian (see `info` for the reason)";
  if (!model.linear_gaussian)
    return "the model table has no linear_gaussian kernel (rebuild the model with this ssmc)";
  return std::nullopt;
}

// (check_smooth_method refuses first a state the compiler did not find finite.)
Refusal finite_applies(const ssm_model&, const ModelInfo& info) {
  if (!enumerable(info)) {
    try {
      enumerate_states(info);
    } catch (const Error& e) {
      return e.what();
    }
  }
  return std::nullopt;
}

// Whether bis can weigh the SDE transition by the run's estimator of its density, else why not.
Refusal estimator_applies(const ssm_model& model, const ModelInfo& info) {
  std::string why = density_estimator_problem(model, info);
  return why.empty() ? Refusal() : Refusal(std::move(why));
}

Refusal density_applies(const ssm_model& model, const ModelInfo& info) {
  if (!info.transition_tractable) {
    std::string out = fmt::format("it evaluates the transition density, and the model's "
                                  "transition is sample-only ({})",
                                  info.sample_only_reason);
    if (info.sde && !estimator_applies(model, info))
      out += "; bis and paris use unbiased estimates of the density (--method bis)";
    return out;
  }
  if (!model.transition_logpdf)
    return "the model table has no transition_logpdf kernel";
  return std::nullopt;
}

// bis needs the density only in its self-normalised weights: an SDE's estimate will do.
Refusal bis_applies(const ssm_model& model, const ModelInfo& info) {
  if (!info.transition_tractable && info.sde) {
    if (Refusal why = estimator_applies(model, info))
      return fmt::format("the transition {} is an SDE and no estimator of its density applies: "
                         "{}",
                         info.sde->relation, *why);
    return std::nullopt;
  }
  return density_applies(model, info);
}

// paris draws from the backward kernel; for an SDE with a fresh estimate per proposal: by
// rejection where the estimates are bounded, else by pseudo-marginal Metropolis-Hastings moves.
Refusal paris_applies(const ssm_model& model, const ModelInfo& info) {
  if (!info.transition_tractable && info.sde)
    return bis_applies(model, info);
  return density_applies(model, info);
}

// Where an SDE's estimates have no bound, paris's draws are Metropolis-Hastings moves, exact only
// as the chains run (their start is drawn among a few estimates or proposals): bis, whose bias is
// O(1/K), is auto's choice; and for the score, whose SDE term bis weighs at a lower cost.
Refusal paris_auto_passes_over(const ssm_model&, const ModelInfo& info) {
  if (info.transition_tractable || !info.sde)
    return std::nullopt;
  if (info.functionals_lack_sde_term) // the score's SDE term: paris draws K pairs and K bridges
    return fmt::format("bis weighs K estimates of the density of the SDE {} and their score "
                       "terms where paris adds exact-bridge estimates to its draws at a higher "
                       "cost",
                       info.sde->relation);
  if (sde_estimates_bounded(info))
    return std::nullopt;
  return fmt::format("the density estimates of the SDE {} have no bound: paris would draw by "
                     "Metropolis-Hastings moves (--backward mcmc), bis weighs by the estimates",
                     info.sde->relation);
}

const std::array<std::pair<BackwardSampling, const char*>, 4> kBackwardNames = {
    {{BackwardSampling::Automatic, "auto"},
     {BackwardSampling::Exact, "exact"},
     {BackwardSampling::Rejection, "rejection"},
     {BackwardSampling::Mcmc, "mcmc"}}};

const std::array<std::pair<BackwardProposal, const char*>, 3> kProposalNames = {
    {{BackwardProposal::Automatic, "auto"},
     {BackwardProposal::Filter, "filter"},
     {BackwardProposal::Euler, "euler"}}};

// The options the smoothers read beyond the particle filter's, in --help order.
std::vector<MethodOption> smoother_options() {
  const SmoothOptions defaults;
  std::vector<std::string> backward;
  for (const auto& [b, name] : kBackwardNames)
    backward.push_back(name);
  std::vector<std::string> proposals;
  for (const auto& [p, name] : kProposalNames)
    proposals.push_back(name);
  using Check = MethodOption::Check;
  return {
      {.flag = "--lag", .help = "the lag L", .users_in_help = true, .default_value = defaults.lag},
      {.flag = "--trajectories",
       .help = "backward trajectories M (default: as many as particles)",
       .users_in_help = true,
       .default_value = defaults.trajectories,
       .check = Check::Positive,
       .show_default = false},
      {.flag = "--backward-samples",
       .help = "backward draws per particle (default: 2 for paris, whose draws are exact; "
               "ceil(N^0.6) for bis, whose bias decreases like 1 / K: Martin 2022, figure 7.3)",
       .users_in_help = true,
       .default_value = int64_t{0},
       .check = Check::Positive,
       .show_default = false},
      {.flag = "--backward",
       .help = "backward draws by rejection (needs the model's density bound), exact, mcmc "
               "(paris: Metropolis-Hastings moves from the filter ancestor), or auto (paris "
               "after the bootstrap filter: mcmc; else rejection when a bound exists, else "
               "exact)",
       .users_in_help = true,
       .default_value = backward.front(),
       .type_name = fmt::format("{}", fmt::join(backward, "|")),
       .choices = backward},
      {.flag = "--backward-proposal",
       .help = "backward indices (paris: of its mcmc moves) drawn from the filter weights, "
               "or from the filter weights times an SDE's one-step Euler density (bis's weights "
               "and the moves' ratios then use estimate / Euler density; pairs far apart, whose "
               "estimates are the least reliable, seldom drawn), or auto (euler for an SDE "
               "transition)",
       .users_in_help = true,
       .default_value = proposals.front(),
       .type_name = fmt::format("{}", fmt::join(proposals, "|")),
       .choices = proposals},
      {.flag = "--mcmc-steps",
       .help = "--backward mcmc: Metropolis-Hastings moves per backward draw",
       .default_value = defaults.mcmc_steps,
       .check = Check::Positive},
      {.flag = "--start-estimates",
       .help = "--backward mcmc with an SDE's estimated density: the candidates for the "
               "chains' start, estimates of the ancestor's pair (after the bootstrap filter) or "
               "proposals (after another), one drawn in proportion to its estimate (over the "
               "proposal density); one fresh estimate biases the moves",
       .default_value = defaults.start_estimates,
       .check = Check::Positive},
      {.flag = "--max-trials",
       .help =
           "rejection sampling: proposals before an exact draw (an SDE's: a self-normalised one)",
       .default_value = defaults.max_trials,
       .check = Check::Positive},
      {.flag = "--marginals,!--no-marginals",
       .help = "Per-t smoothing moments and per-t functionals (default: on, except for the "
               "online methods, whose memory then grows with T)",
       .default_value = std::optional<bool>()},
      {.flag = "--functional",
       .help = "Estimate only this functional of the model (repeatable; default: all)",
       .default_value = std::vector<std::string>(),
       .type_name = "NAME"},
  };
}

// --filter: the particle filter of the forward pass, `auto` or a registered particle filter.
MethodOption forward_pass_option(const MethodRegistry& registry) {
  std::vector<std::string> choices = {"auto"};
  for (const Method* m : registry.methods(Task::Filter))
    if (m->particles)
      choices.push_back(m->name);
  return {.flag = "--filter",
          .help = fmt::format("The particle filter of the forward pass: {}, or auto ({})",
                              registry.particle_list(Task::Filter),
                              registry.auto_help(Task::Filter, true)),
          .default_value = choices.front(),
          .type_name = fmt::format("{}", fmt::join(choices, "|")),
          .choices = choices};
}

} // namespace

const std::vector<Smoother>& smoothers() {
  static const std::vector<Smoother> all = {
      {.id = SmoothMethod::Rts,
       .name = kRtsName,
       .rank = 1,
       .exact = true,
       .auto_help = "exact when the structure allows",
       .applies = rts_applies},
      {.id = SmoothMethod::ForwardBackward,
       .name = kForwardBackwardName,
       .rank = 2,
       .exact = true,
       .applies = finite_applies},
      {.id = SmoothMethod::Genealogy, .name = "genealogy", .rank = 5},
      {.id = SmoothMethod::FixedLag, .name = "fixed-lag", .rank = 6, .options = {"--lag"}},
      {.id = SmoothMethod::Ffbsm, .name = "ffbsm", .rank = 7, .applies = density_applies},
      {.id = SmoothMethod::Ffbsi,
       .name = "ffbsi",
       .rank = 8,
       .rejection = true,
       .options = {"--trajectories", "--backward", "--max-trials"},
       .applies = density_applies},
      {.id = SmoothMethod::Online,
       .name = "online",
       .rank = 9,
       .online = true,
       .applies = density_applies},
      {.id = SmoothMethod::Paris,
       .name = "paris",
       .rank = 3,
       .online = true,
       .rejection = true,
       .mcmc = true,
       .auto_help = "else {}",
       .options = {"--backward-samples", "--backward", "--mcmc-steps", "--start-estimates",
                   "--max-trials", "--backward-proposal"},
       .applies = paris_applies,
       .auto_passes_over = paris_auto_passes_over},
      // After paris, which applies wherever bis does but which auto passes over for SDE
      // transitions whose density estimates have no bound: auto's choice for those.
      {.id = SmoothMethod::Bis,
       .name = "bis",
       .rank = 4,
       .online = true,
       .auto_help = "{} for an SDE transition whose density estimates have no bound",
       .options = {"--backward-samples", "--backward-proposal"},
       .applies = bis_applies},
  };
  return all;
}

bool sde_estimates_bounded(const ModelInfo& info) {
  return info.sde && info.sde->estimator == "gpe" && info.sde->gpe_bounded;
}

bool sde_score_by_exact_bridges(const ModelInfo& info) {
  return info.sde && info.sde->estimator == "gpe" && info.sde->exact_bridges;
}

Refusal sde_score_refusal(SmoothMethod m, const ModelInfo& info) {
  if (!info.functionals_lack_sde_term || m == SmoothMethod::Bis)
    return std::nullopt;
  if (m == SmoothMethod::Paris && sde_score_by_exact_bridges(info))
    return std::nullopt;
  return fmt::format("the score's term of the SDE transition {} has no closed form; bis adds "
                     "unbiased estimates of it (--method bis){}",
                     info.sde ? info.sde->relation : "",
                     m == SmoothMethod::Paris
                         ? ", and paris adds them only from exact diffusion bridges (the General "
                           "Poisson estimator with psi bounded above by the compiler's bounds, "
                           "not the model's psi_lower or psi_upper, and a diffusion coefficient "
                           "that reads neither the path nor the parameters)"
                         : "");
}

const Smoother& smoother(SmoothMethod m) {
  for (const Smoother& s : smoothers())
    if (s.id == m)
      return s;
  throw Error("unknown smoothing method");
}

const char* smooth_method_name(SmoothMethod m) {
  if (m == SmoothMethod::Variational) // registered by the vsmooth room
    return "variational";
  return smoother(m).name.c_str();
}

std::optional<SmoothMethod> parse_smooth_method(std::string_view name) {
  for (const Smoother& s : smoothers())
    if (s.name == name)
      return s.id;
  return std::nullopt;
}

bool is_online(SmoothMethod m) {
  return smoother(m).online;
}

SmoothOptions smooth_options(const MethodRegistry& registry, const std::string& name,
                             const MethodRun& run) {
  const OptionValues& v = run.options;
  SmoothOptions opt;
  opt.method = *parse_smooth_method(name);
  opt.marginals = v.toggle("--marginals").value_or(!is_online(opt.method) || run.automatic);
  for (const auto& [b, backward] : kBackwardNames)
    if (v.word("--backward") == backward)
      opt.backward = b;
  for (const auto& [p, proposal] : kProposalNames)
    if (v.word("--backward-proposal") == proposal)
      opt.backward_proposal = p;
  const std::string& filter = v.word("--filter");
  const std::string& forward_pass =
      filter == "auto" ? registry.choose(Task::Filter, run.model, run.info, true).name : filter;
  opt.filter = particle_filter_options(forward_pass, v, run.seed);
  opt.filter.progress = run.progress;
  opt.progress_phase = run.progress_phase;
  opt.lag = v.integer("--lag");
  opt.trajectories = v.integer("--trajectories");
  opt.backward_samples = v.integer("--backward-samples");
  if (opt.backward_samples == 0) // not given: the method's default
    opt.backward_samples =
        opt.method == SmoothMethod::Bis
            ? std::max<int64_t>(2, static_cast<int64_t>(std::ceil(
                                       std::pow(static_cast<double>(opt.filter.particles), 0.6))))
            : SmoothOptions().backward_samples;
  opt.max_trials = v.integer("--max-trials");
  opt.mcmc_steps = v.integer("--mcmc-steps");
  opt.start_estimates = v.integer("--start-estimates");
  return opt;
}

const Method& smooth_auto_choice(const MethodRegistry& registry, const ssm_model& model,
                                 const ModelInfo& info, bool marginals) {
  const Method& chosen = registry.choose(Task::Smooth, model, info);
  const std::optional<SmoothMethod> id = parse_smooth_method(chosen.name);
  if (!marginals || !id || !is_online(*id))
    return chosen;
  if (!model.transition_log_bound)
    return chosen;
  const Method* offline = registry.find(Task::Smooth, smooth_method_name(SmoothMethod::Ffbsi));
  return offline && !offline->why_not(model, info) ? *offline : chosen;
}

void select_functionals(ModelInfo& info, const std::vector<std::string>& names) {
  if (names.empty())
    return;
  std::vector<FunctionalInfo> chosen;
  for (const std::string& name : names) {
    auto it = std::find_if(info.functionals.begin(), info.functionals.end(),
                           [&](const FunctionalInfo& f) { return f.name == name; });
    if (it == info.functionals.end()) {
      std::vector<std::string> declared;
      for (const FunctionalInfo& f : info.functionals)
        declared.push_back(f.name);
      throw Error(fmt::format("--functional {}: the model has no such functional ({})", name,
                              declared.empty()
                                  ? std::string("it declares none")
                                  : "it declares " + fmt::format("{}", fmt::join(declared, ", "))));
    }
    chosen.push_back(*it);
  }
  info.functionals = std::move(chosen); // n_functional still sizes the kernel's output
}

void register_smoothers(MethodRegistry& registry) {
  std::vector<std::string> forward_pass = {"--filter"};
  registry.add_option(Task::Smooth, forward_pass_option(registry));
  for (MethodOption& o : particle_filter_options()) {
    if (!o.help_elsewhere.empty())
      o.help = o.help_elsewhere;
    forward_pass.push_back(o.flag);
    registry.add_option(Task::Smooth, std::move(o));
  }
  for (MethodOption& o : smoother_options())
    registry.add_option(Task::Smooth, std::move(o));
  const MethodRegistry* reg = &registry;
  for (const Smoother& s : smoothers()) {
    Method m;
    m.name = s.name;
    m.task = Task::Smooth;
    m.rank = s.rank;
    m.auto_help = s.auto_help;
    if (s.auto_passes_over)
      m.auto_passes_over = s.auto_passes_over;
    m.applies = [applies = s.applies, id = s.id](const ssm_model& model,
                                                 const ModelInfo& info) -> Refusal {
      if (Refusal why = sde_score_refusal(id, info))
        return why;
      return applies ? applies(model, info) : std::nullopt;
    };
    m.particles = !s.exact;
    if (m.particles)
      m.options = forward_pass;
    m.options.insert(m.options.end(), s.options.begin(), s.options.end());
    m.check = [reg, name = s.name](const MethodRun& run) {
      check_smooth_method(run.model, run.info, smooth_options(*reg, name, run));
    };
    m.smooth = [reg, name = s.name](const MethodRun& run) {
      return smooth(run.model, run.info, *run.fixed, *run.data, smooth_options(*reg, name, run),
                    *run.pool);
    };
    m.smooth_json = [reg, name = s.name](const MethodRun& run, const SmoothResult& r) {
      return smooth_json(run.info, r, smooth_options(*reg, name, run));
    };
    registry.add(std::move(m));
  }
}

} // namespace ssm
