// Smoothing: the per-t smoothing moments of the state and the model's functionals, by exact
// methods where the structure allows (rts, forward-backward) and by particle smoothers otherwise.
// Every method fills the same SmoothResult, written by smooth_csv and smooth_json.
#pragma once

#include "ssm/abi.h"
#include "ssm/csv.h"
#include "ssm/filter.h"
#include "ssm/metadata.h"
#include "ssm/thread_pool.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ssm {

enum class SmoothMethod {
  Rts,             // Kalman filter + Rauch-Tung-Striebel (linear-Gaussian models, exact)
  ForwardBackward, // finite-state models, exact
  Genealogy,       // the filter's surviving paths ("poor man's" smoother)
  FixedLag,        // each term estimated `lag` steps later through the genealogy
  Ffbsm,           // marginal forward-filtering backward-smoothing, O(N^2) per step
  Ffbsi,           // backward simulation of M trajectories
  Online,          // forward-only O(N^2) additive smoothing (Del Moral, Doucet & Singh)
  Paris,           // PaRIS (Olsson & Westerborn 2017)
  Bis,             // backward importance sampling (Martin, Le Corff et al. 2022)
};

inline constexpr std::array<SmoothMethod, 9> kSmoothMethods = {
    SmoothMethod::Rts,      SmoothMethod::ForwardBackward, SmoothMethod::Genealogy,
    SmoothMethod::FixedLag, SmoothMethod::Ffbsm,           SmoothMethod::Ffbsi,
    SmoothMethod::Online,   SmoothMethod::Paris,           SmoothMethod::Bis};

const char* smooth_method_name(SmoothMethod m); // "forward-backward", "fixed-lag", ...
std::optional<SmoothMethod> parse_smooth_method(std::string_view name);
bool is_online(SmoothMethod m); // online, paris, bis: O(N) memory whatever T

// How ffbsi and paris draw backward indices: `exact` computes the N backward weights of each draw
// (O(N) per draw); `rejection` proposes from the filter weights and accepts with probability
// p(x_{t+1} | x_t^i) / bound, falling back to an exact draw after `max_trials` rejections (the
// hybrid scheme); `auto` is rejection when the model has a density bound (the
// transition_log_bound kernel), exact otherwise. A step where the bound is not finite (its
// condition fails for these parameters) draws exactly. `mcmc` (paris only) starts each draw at the
// particle's ancestor in the filter and makes `mcmc_steps` independent Metropolis-Hastings moves
// with proposals from the filter weights, which leave the backward kernel invariant (Bunch &
// Godsill 2013; Dau & Chopin 2023): O(1) per draw, no bound needed, draws not independent.
enum class BackwardSampling { Automatic, Exact, Rejection, Mcmc };

struct SmoothOptions {
  SmoothMethod method = SmoothMethod::Ffbsm;
  FilterOptions filter;         // particles, resampling, seed (and progress)
  int64_t lag = 10;             // fixed-lag
  int64_t trajectories = 0;     // ffbsi: M (0: as many as particles)
  int64_t backward_samples = 2; // paris, bis: Ñ
  BackwardSampling backward = BackwardSampling::Automatic;
  int64_t max_trials = 32; // rejection sampling: tries before the exact fallback
  int64_t mcmc_steps = 1;  // mcmc: Metropolis-Hastings moves per draw
  // Per-t smoothing moments and per-t functionals. Offline methods always compute them; online
  // methods only when asked, since they then carry O(T) statistics per particle.
  bool marginals = true;
};

// One functional's estimate: `total` (its components) for a `sum_t` functional, `per_t`
// ([t * size + k]) for a quantity at each t; `se`, when the method gives one, is the Monte Carlo
// standard error of `total` (empty otherwise).
struct FunctionalEstimate {
  std::string name;
  bool sum = false;
  int64_t size = 1;
  std::vector<double> total, per_t, se;
};

struct SmoothResult {
  SmoothMethod method = SmoothMethod::Ffbsm;
  int64_t T = 0, n_state = 0, particles = 0;
  double log_likelihood = 0; // of the filter the method ran (exact for rts / forward-backward)
  bool has_marginals = false;
  // E[x_t | y_{0:T-1}] and Var[x_t | y_{0:T-1}] per component: [t * n_state + c].
  std::vector<double> mean, var;
  // rts only: Cov[x_t, x_{t-1} | y] as n_state x n_state row-major blocks per t (t >= 1; block 0
  // is zero).
  std::vector<double> lag_one_cov;
  std::vector<FunctionalEstimate> functionals;
  double filter_s = 0, smooth_s = 0; // wall time of the forward pass and of the rest
  nlohmann::json details;            // method-specific diagnostics (acceptance rates, ...)
};

// The smoothing methods that apply to the model, `auto`'s choice first (for `info`).
std::vector<std::string> smooth_methods(const ssm_model& model, const ModelInfo& info);

// Refuses, before any computation, a method that the model's structure cannot support or that
// cannot estimate one of its functionals: the message gives the reason and the methods that apply.
void check_smooth_method(const ssm_model& model, const ModelInfo& info,
                         const SmoothOptions& options);

// Runs the chosen method on data.T time steps. `fixed` is the parameters followed by the data
// values (the frame's fixed part). Throws ssm::Error.
SmoothResult smooth(const ssm_model& model, const ModelInfo& info, const std::vector<double>& fixed,
                    const ObsData& data, const SmoothOptions& options, ThreadPool& pool);

// CSV `t,mean_<col>,var_<col>...,<per-t functional columns>`, one row per time step (only when
// the result has marginals).
std::string smooth_csv(const ModelInfo& info, const SmoothResult& result);
// The JSON summary: method, options, log-likelihood, sums of the additive functionals, timings.
nlohmann::json smooth_json(const ModelInfo& info, const SmoothResult& result,
                           const SmoothOptions& options);

} // namespace ssm
