// Smoothing: the per-t smoothing moments of the state and the model's functionals, by exact
// methods where the structure allows (rts, forward-backward) and by particle smoothers otherwise.
// Every method fills the same SmoothResult, written by smooth_csv and smooth_json.
#pragma once

#include "core/csv.h"
#include "core/metadata.h"
#include "core/results.h"
#include "core/thread_pool.h"
#include "exact/weighted_points.h"
#include "kernel/abi.h"
#include "smc/filter.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ssm {

// The registered names (smoothing/methods.cpp).
const char* smooth_method_name(SmoothMethod m);
std::optional<SmoothMethod> parse_smooth_method(std::string_view name);
bool is_online(SmoothMethod m); // O(N) memory whatever T

// How ffbsi and paris draw backward indices: `exact` computes the N backward weights of each draw
// (O(N) per draw); `rejection` proposes from the filter weights and accepts with probability
// p(x_{t+1} | x_t^i) / bound, falling back to an exact draw after `max_trials` rejections (the
// hybrid scheme); `auto` is rejection when the model has a density bound (the
// transition_log_bound kernel), exact otherwise. A step where the bound is not finite (its
// condition fails for these parameters) draws exactly. `mcmc` (paris only) starts each draw at the
// particle's ancestor in the filter and makes `mcmc_steps` independent Metropolis-Hastings moves
// with proposals from the filter weights, which leave the backward kernel invariant (Bunch &
// Godsill 2013; Dau & Chopin 2023): O(1) per draw, no bound needed, draws not independent.
// With an SDE's estimated density the moves are pseudo-marginal (Martin 2022, 7.3.3): a state
// keeps the estimate it was accepted with, and the chains start from the ancestor with one of
// `start_estimates` estimates of its density, drawn in proportion to them (after a filter other
// than the bootstrap one, from one of as many proposals, drawn in proportion to their importance
// weights).
enum class BackwardSampling { Automatic, Exact, Rejection, Mcmc };

// Where bis (and paris's mcmc moves, as their independent proposals) draws its backward indices
// for particle j at t: from the filter weights W_{t-1}^i
// (`filter`, the thesis's bis), or from W_{t-1}^i m(x_t^j | x_{t-1}^i), m the density of one
// Euler-Maruyama step over dt of an SDE transition (`euler`, O(N) per particle and step), the
// weights becoming estimate / m. Euler draws seldom pick pairs far apart, whose signed parametrix
// estimates have a spread of hundreds of times their mean and can keep Wald's loop from ending.
// `auto`: euler for an SDE transition whose density is estimated, filter otherwise.
enum class BackwardProposal { Automatic, Filter, Euler };

struct SmoothOptions {
  SmoothMethod method = SmoothMethod::Ffbsm;
  FilterOptions filter;         // particles, resampling, seed (and progress)
  int64_t lag = 10;             // fixed-lag
  int64_t trajectories = 0;     // ffbsi: M (0: as many as particles)
  int64_t backward_samples = 2; // paris, bis: Ñ (smooth_options: ceil(N^0.6) for bis if not given)
  BackwardSampling backward = BackwardSampling::Automatic;
  BackwardProposal backward_proposal = BackwardProposal::Automatic; // bis, paris's mcmc
  int64_t max_trials = 32;      // rejection sampling: tries before the exact fallback
  int64_t mcmc_steps = 1;       // mcmc: Metropolis-Hastings moves per draw
  int64_t start_estimates = 10; // mcmc with an estimated density: the start's candidates
  // Per-t smoothing moments and per-t functionals. Offline methods always compute them; online
  // methods only when asked, since they then carry O(T) statistics per particle.
  bool marginals = true;
  // Names the phase that filter.progress reports from then on ("backward pass"): the backward
  // passes report their steps through filter.progress too. May be empty.
  std::function<void(const char*)> progress_phase;
};

// Refuses, before any computation, a method that the model's structure cannot support or that
// cannot estimate one of its functionals: the message gives the reason and, for `smooth`, the
// methods that apply. `command` is the subcommand that runs the smoother ("rml" for its
// increments), named in the message with `method_flag`, the flag that chose the smoother
// ("optimize --method em --e-step ffbsi: ...").
void check_smooth_method(const ssm_model& model, const ModelInfo& info,
                         const SmoothOptions& options, std::string_view command = "smooth",
                         std::string_view method_flag = "--method");

// An online smoother's running estimates, for methods that act as the data arrive (recursive
// maximum likelihood): called after each step with the filter, whose parameters it may change
// for the steps that follow, and the estimates so far of the `sum_t` functionals, E[sum_{s<=t}
// psi_s | y_{0:t}] (n_functional values in the functionals' layout; per-t components NaN).
using OnlineObserver = std::function<void(ParticleFilter& filter, const double* sums)>;

// Runs the chosen method on data.T time steps. `fixed` is the parameters followed by the data
// values (the frame's fixed part). An observer is only for the online methods (is_online).
// Throws ssm::Error.
SmoothResult smooth(const ssm_model& model, const ModelInfo& info, const std::vector<double>& fixed,
                    const ObsData& data, const SmoothOptions& options, ThreadPool& pool,
                    const OnlineObserver& observer = {});

// M trajectories (options.trajectories, default as many as particles) over a particle filter
// run with options.filter, as each step's points of weight 1/M (exact/weighted_points.h): the
// Monte Carlo E-step of EM (learning/monte_carlo_em.h). With options.method paris or bis, picked
// among that pass's backward draws (backward_trace.h: an SDE's estimated density); otherwise by
// ffbsi. The model's functionals take no part (without_functionals). `log_likelihood` receives
// the filter's estimate. The caller checks the options first (check_smooth_method with the
// method and without_functionals(info)); throws ssm::Error when the filter fails.
std::vector<StepPoints> trajectory_points(const ssm_model& model, const ModelInfo& info,
                                          const std::vector<double>& fixed, const ObsData& data,
                                          const SmoothOptions& options, ThreadPool& pool,
                                          double& log_likelihood);
// The model as trajectory_points smooths it: no functionals (their kernel is never called), so
// that a functional an online smoother cannot carry does not refuse paris or bis there.
ModelInfo without_functionals(const ModelInfo& info);

// CSV `t,mean_<col>,var_<col>...,<per-t functional columns>`, one row per time step (only when
// the result has marginals).
std::string smooth_csv(const ModelInfo& info, const SmoothResult& result);
// The `sum_t` functionals' estimates as JSON: {NAME: value, NAME_se: its standard error}.
nlohmann::json functionals_json(const ModelInfo& info, const SmoothResult& result);
// The JSON summary: method, options, log-likelihood, sums of the additive functionals, timings.
nlohmann::json smooth_json(const ModelInfo& info, const SmoothResult& result,
                           const SmoothOptions& options);

} // namespace ssm
