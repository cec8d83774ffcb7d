// The bootstrap particle filter over a compiled model's kernels.
#pragma once

#include "core/csv.h"
#include "core/metadata.h"
#include "core/results.h"
#include "core/thread_pool.h"
#include "kernel/abi.h"
#include "smc/resample.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ssm {

class Proposal;
class RangeCheck;
struct ProposalStep;

// Particles are processed in blocks of this many, with block boundaries at multiples of it: a
// particle always takes the same path through the kernels (vector body or remainder loop) and
// partial sums are combined in block order, whatever the thread count.
inline constexpr int64_t kParticleBlock = 4096;

// Runtime random stream of the resampling uniforms: counters (k, t, kSiteResample, 0), k = 0, 1,
// ... as resample() documents for each scheme (systematic uses the single block k = 0).
inline constexpr uint32_t kSiteResample = 0xFFFF0001u;

// The auxiliary particle filter's simulated look-ahead draws use the model's transition sampler
// with the seed XOR this key, so they never share a Philox stream with the filter's own draws.
inline constexpr uint64_t kLookaheadSeedKey = 0x9E3779B97F4A7C15ull;
inline constexpr int64_t kLookaheadDraws = 4; // simulated look-ahead: draws per particle

// How the auxiliary particle filter predicts each particle's next state for its first-stage
// weights p(y_t | prediction): the model's own `lookahead` predictions (lookahead kernel), else
// the transition's mean (gaussian_moments kernel), else the average of p(y_t | x~) over
// kLookaheadDraws draws from the transition.
enum class Lookahead { User, Mean, Simulated };
const char* lookahead_name(Lookahead kind); // "user", "mean", "simulated"
Lookahead lookahead_for(const ssm_model& model);

struct FilterOptions {
  int64_t particles = 1000;
  double ess_threshold = 0.5; // resample at t > 0 when ESS < r N; r >= 1: every step
  Resampling resampling = Resampling::Systematic;
  // Auxiliary particle filter (Pitt & Shephard 1999): at each t > 0, resample with the weights
  // times p(y_t | a prediction of x_t from each particle), then correct by that factor.
  bool auxiliary = false;
  // Guided filter: at each t > 0 with y_t fully observed, propose from the model's `proposal`
  // (proposal_sample kernel) and weight by p(y_t | x_t) p(x_t | x_{t-1}) / q(x_t | x_{t-1}, y_t);
  // a step with a missing observation proposes from the transition.
  bool guided = false;
  // Random-weight filter, for an SDE transition: at each t > 0, propose from the model's proposal
  // (y_t observed) or one Euler step, and weight by an estimate of the transition density times
  // p(y_t | x_t) over the proposal's density; signed estimates made positive by Wald's identity
  // over the step's particles (smc/random_weight_proposal.cpp).
  bool random_weight = false;
  uint64_t seed = 1;
  // Keep the per-step moments, ESS and increments of every step (FilterResult); without history
  // they hold the last step only, so memory does not grow with T (the online smoothers).
  bool history = true;
  // The weighted means and variances of the state at each step (FilterResult::mean, var; NaN
  // without them). A caller that reads only the log-likelihood (PMMH, SMC^2) skips their two
  // passes over the particles.
  bool moments = true;
  // Called after each time step with (t, T); may be empty.
  std::function<void(int64_t, int64_t)> progress;
};

// The particle filter (bootstrap, guided or auxiliary) one step at a time, for the smoothers that
// work alongside it. After step() has processed time t, the particles at t, their ancestors at t-1
// and their weights are readable until the next step(); buffers are structure-of-arrays with stride
// stride().
class ParticleFilter {
public:
  // `fixed` is theta followed by the data values. Throws ssm::Error on inconsistent inputs.
  ParticleFilter(const ssm_model& model, const ModelInfo& info, const std::vector<double>& fixed,
                 const ObsData& data, const FilterOptions& options, ThreadPool& pool);
  ~ParticleFilter();
  ParticleFilter(const ParticleFilter&) = delete;
  ParticleFilter& operator=(const ParticleFilter&) = delete;

  // Processes the next time step; false when all data.T steps are done. Throws ssm::Error if the
  // weights collapse.
  bool step();
  int64_t t() const { return t_; } // the step last processed (-1 before the first)
  // The parameters (n_theta numbers) of the steps after the current one, which keep their
  // particles and weights: recursive maximum likelihood moves them as the data arrive.
  void set_parameters(const double* theta);
  // A copy of the filter as it stands after step t(), whose later steps draw from `seed`'s
  // streams (the same seed would repeat this filter's draws), running its loops on `pool`. What
  // SMC^2 gives a parameter particle that resampling duplicated.
  std::unique_ptr<ParticleFilter> clone(uint64_t seed, ThreadPool& pool) const;
  int64_t T() const { return data_.T; }
  int64_t particles() const { return N_; }
  int64_t stride() const { return stride_; }
  const double* x() const { return cur_; }       // particles at t
  const double* x_prev() const { return prev_; } // particles at t-1 (t > 0)
  // a_n: the particle at t-1 that particle n at t descends from; null means a_n = n.
  const int64_t* ancestors() const { return resampled_ ? anc_.data() : nullptr; }
  // Unnormalised weights at t, exp(log-weight - max), and their sum.
  const double* weights() const { return w_.data(); }
  double weight_sum() const { return weight_sum_; }
  const double* frame() const { return frame_values_; } // the kernels' frame at t
  const double* y() const { return data_.at(t_); }
  ThreadPool& pool() const { return pool_; }
  // Moments, ESS and log-likelihood so far; elapsed_s is set when the last step is done.
  const FilterResult& result() const { return res_; }
  FilterResult take_result() { return std::move(res_); }

  Lookahead lookahead_kind() const { return lookahead_; } // the auxiliary filter's predictions

private:
  struct Buffers;
  // Draws the particles at t, weights them and returns the largest log-weight (finite).
  double propagate(const ProposalStep& ps, Proposal* proposal, bool flat_prev);
  // Shifts the log-weights by m into weights and stores the moments at `slot`; S and S2 receive
  // the sums of the weights and of their squares.
  void weigh(double m, int64_t slot, double& S, double& S2);
  const ssm_model& model_;
  const ModelInfo& info_;
  const ObsData& data_;
  FilterOptions opt_;
  ThreadPool& pool_;
  int64_t N_, stride_, nb_, t_ = -1;
  std::unique_ptr<Buffers> buf_;
  double *prev_, *cur_;
  std::vector<double> lw_, inc_, w_, bmax_, bsum_, bsum2_, bx_, bvar_, mean_;
  std::vector<int64_t> anc_;
  std::unique_ptr<RangeCheck> ranges_; // the int[lo..hi] state components' check
  std::unique_ptr<Proposal> proposal_; // chosen once per run from the options
  Lookahead lookahead_ = Lookahead::Mean;
  bool resampled_ = false;
  double weight_sum_ = 0, log_sum_prev_ = 0, ess_prev_ = 0;
  const double* frame_values_ = nullptr;
  FilterResult res_;
  std::chrono::steady_clock::time_point start_;
};

// Runs the filter on data.T time steps. `theta` is the parameters followed by the data values.
// Throws ssm::Error if the weights collapse.
FilterResult bootstrap_filter(const ssm_model& model, const ModelInfo& info,
                              const std::vector<double>& theta, const ObsData& data,
                              const FilterOptions& options, ThreadPool& pool);

} // namespace ssm
