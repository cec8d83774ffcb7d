// Posterior sampling with a likelihood-to-evidence ratio r(theta) = p(x_o | theta) / p(x_o) and
// the prior as the instrumental law, which needs only to be simulated (Argouarc'h 2024, ch. 2:
// the ratio is the odds d / (1 - d) of a classifier d, or the exact likelihood in tests). The
// samplers read log r, known up to an additive constant:
//   ar      accept-reject with the running bound C of Algorithm 2: C starts at the largest ratio
//           among prior draws and rises to each proposal's ratio before its test; accept with
//           probability r(theta') / C. Exact once C >= sup r; a draw accepted before C rose was
//           tested against a bound too low, which the result counts;
//   imh     independent Metropolis-Hastings: accept with min(1, r(theta*) / r(theta_t)) (2.14);
//   barker  the same proposals with Barker's acceptance r(theta*) / (r(theta*) + r(theta_t));
//   is      importance sampling: the prior draws, weighted by r (self-normalised, 2.15);
//   sir     sampling importance resampling: draws from the weighted pool, with replacement;
//   mcmc    random-walk Metropolis on prior x ratio (what sbi does with a ratio), the step scaled
//           during warmup towards acceptance 0.234;
//   smc     a tempered SMC sampler: particles from the prior move through prior x ratio^beta,
//           beta from 0 to 1 in steps that keep the incremental weights' ESS at half the
//           particles, each step resampled and moved by random-walk Metropolis steps (Gaussian of
//           the particles' covariance), which reaches narrow and multimodal posteriors that
//           prior proposals and a single random walk miss; it estimates log E_prior[r] too.
#pragma once

#include "lfi/simulator.h"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace ssm::lfi {

// out[i] = log r(theta_i) for the rows of theta (n x n_params), up to a constant.
using LogRatio = std::function<void(const double* theta, int64_t n, double* out)>;

struct RatioSamplerInfo {
  std::string_view name, title;
};
// The samplers, in the order --help lists them.
const std::vector<RatioSamplerInfo>& ratio_samplers();

struct RatioSamplerOptions {
  std::string sampler = "ar";
  int64_t draws = 1000;  // per chain
  int64_t chains = 1;    // imh, barker, mcmc: independent chains
  int64_t warmup = 1000; // imh, barker, mcmc: per chain, discarded
  int64_t pool = 0;      // is, sir: prior draws weighted (0: 20 x draws); smc: particles (0: the
                         // larger of draws and 2000)
  int64_t moves = 5;     // smc: Metropolis steps per tempering step
  int64_t bound_draws = 10000;       // ar: prior draws whose largest ratio starts C
  int64_t max_proposals = 100000000; // ar: give up beyond this many proposals
  uint64_t seed = 1;
  int threads = 1;
};

struct RatioDraws {
  int64_t n_params = 0;
  // Per chain (one for ar, is and sir): the kept draws (row-major, draws x n_params), their log r
  // and Stan's accept_stat__ (the acceptance probability of the move that led there; 1 for ar,
  // is and sir).
  struct Chain {
    std::vector<double> theta, log_ratio, accept_stat;
    double acceptance_rate = 0;
  };
  std::vector<Chain> chains;
  std::vector<double> log_weight; // is: each draw's normalised log weight
  int64_t proposals = 0;          // prior draws or moves proposed, warmup included
  int64_t ratio_evaluations = 0;
  double acceptance_rate = 0;             // accepted / proposed (ar, imh, barker, mcmc)
  double importance_ess = 0;              // is, sir: Kish's (sum w)^2 / sum w^2 over the pool
  double log_bound = 0;                   // ar: the final log C
  int64_t accepted_under_lower_bound = 0; // ar: draws accepted before C reached its final value
  // ar: the proposals that raised C (each accepted with probability 1, not r / C), and the log C
  // that --bound-draws set: only parameters with a ratio above it are over-represented.
  int64_t bound_raises = 0;
  double log_bound_start = 0;
  double step = 0; // mcmc: the random-walk scale after warmup, per prior sd
  // smc: the tempering schedule (beta per step) and log E_prior[r(theta)] (with the exact
  // likelihood, log p(x_o)).
  std::vector<double> temperatures;
  double log_evidence = 0;
  std::vector<std::string> warnings;
};

// Throws ssm::Error naming the sampler and what failed (a ratio that is NaN, an acceptance too
// low for max_proposals).
RatioDraws sample_with_ratio(const Simulator& sim, const LogRatio& log_ratio,
                             const RatioSamplerOptions& options);

} // namespace ssm::lfi
