// The smoothers' registration: every smoothing method (the exact rts and forward-backward too,
// since the dispatch smooth() is this room's) with its name, applicability, rank for `auto` and
// options, and the translation of parsed options into SmoothOptions.
#pragma once

#include "core/method_registry.h"
#include "smoothing/smooth.h"

#include <string>
#include <vector>

namespace ssm {

// One smoothing method as registered.
struct Smoother {
  SmoothMethod id{};
  std::string name{};
  int rank{};                         // auto: exact methods first, then paris, bis, genealogy
  bool exact = false;                 // no particles (rts, forward-backward)
  bool online = false;                // O(N) memory whatever T
  bool rejection = false;             // may draw backward indices by rejection (--backward)
  bool mcmc = false;                  // may draw them by MCMC moves (--backward mcmc)
  std::string auto_help{};            // see Method::auto_help
  std::vector<std::string> options{}; // beyond the forward pass's
  // Why it does not apply to the model (nullopt when it does).
  Refusal (*applies)(const ssm_model&, const ModelInfo&) = nullptr;
  // Why `auto` passes over it where it applies (Method::auto_passes_over); null: never.
  Refusal (*auto_passes_over)(const ssm_model&, const ModelInfo&) = nullptr;
};

const std::vector<Smoother>& smoothers();
const Smoother& smoother(SmoothMethod m);

// Whether an SDE transition's density estimates have a bound (the General Poisson estimator
// with psi and the drift bounded): paris then draws from the pseudo-marginal backward kernel by
// rejection.
bool sde_estimates_bounded(const ModelInfo& info);

// Whether the score's SDE term has unbiased estimates from exact diffusion bridges (the General
// Poisson estimator with psi bounded above), which paris adds to the pairs it draws.
bool sde_score_by_exact_bridges(const ModelInfo& info);

// Why smoother m cannot smooth functionals whose kernel leaves out an SDE's score term
// (ModelInfo::functionals_lack_sde_term): every smoother but bis, which adds its estimate, and
// paris where exact bridges give one.
Refusal sde_score_refusal(SmoothMethod m, const ModelInfo& info);

// Registers the smoothers and their options for Task::Smooth (after the particle filters, whose
// options the forward pass reads).
void register_smoothers(MethodRegistry& registry);

// The options of smoother `name` from the parsed values (the forward pass's filter chosen by
// `auto` when asked).
SmoothOptions smooth_options(const MethodRegistry& registry, const std::string& name,
                             const MethodRun& run);

// `auto`'s smoother for `smooth`: the registry's choice, except when the per-t marginals are
// wanted (`marginals`, the default) and that choice is online (paris). An online smoother's
// marginals carry O(T) statistics per particle, O(N T^2) time in all (165 s for T = 2000 and
// N = 1000 against ffbsi's 1 s, docs/cli.md), so ffbsi runs instead when it applies and the model
// has a density bound: O(N T) by rejection. (Without one, ffbsi's exact draws cost O(N^2 T),
// worse than paris's O(N T^2) when N > T.)
const Method& smooth_auto_choice(const MethodRegistry& registry, const ssm_model& model,
                                 const ModelInfo& info, bool marginals);

// Keeps only the functionals named by --functional (all when none is named). Throws ssm::Error
// naming an unknown one.
void select_functionals(ModelInfo& info, const std::vector<std::string>& names);

} // namespace ssm
