// The SDE transition's term of EM's Q at the E-step's pairs (em_steps.h), for a transition whose
// density has no closed form: each pair's log q is the log of the mean of R unbiased estimates
// (sde/density_estimator.h's rounds), their draws keyed by the E-step's seed, so that every theta
// the M-step tries sees the same draws (common random numbers: Q becomes a function of theta that
// L-BFGS can climb, as the thesis's evolution strategy climbed its estimate of Q, Martin 2022,
// 7.5.4). Its gradient, sum_r Q'_r / sum_r Q_r (the estimates' derivatives in theta over their
// sum), estimates d/dtheta log q consistently in R. The log of a mean is biased low by about
// Var(estimate) / (2 R q^2) (Jensen), and the estimators' own constants (Poisson rates, hazards)
// move with theta, so Q is only piecewise smooth: the M-step keeps the best point it met
// (a generalised EM step). A pair whose R estimates sum to a nonpositive value (signed parametrix
// estimates) gets further rounds until the sum is positive.
#pragma once

#include "core/metadata.h"
#include "core/thread_pool.h"
#include "exact/weighted_points.h"
#include "kernel/abi.h"

#include <cstdint>
#include <vector>

namespace ssm {

// The most estimates per pair: with the further rounds a nonpositive sum takes, a pair's rounds
// stay below Wald's bound (kMaxWaldRounds), within the estimators' random streams.
inline constexpr int64_t kMaxSdeEstimates = 500;

// sum_{t >= 1} sum_p w_p log((1/R) sum_r qhat_r(prev_p, cur_p)) over the points of one series,
// at the parameters in `frames` (one frame per step, results.h's all_frames), R = `estimates`;
// pair p of step t's round r keyed by (seed, t, p, r); 1 <= estimates <= kMaxSdeEstimates. With
// `gradient` (theta components, the estimator's gradient rows), adds sum_p w_p sum_r Q'_r / sum_r
// Q_r into it. Steps run in parallel on `pool`, summed in order (the same value whatever the
// threads). Throws Error naming the step and the pair when a pair's estimates stay nonpositive
// after Wald's bound of rounds (pairs of weight 0 take no part).
double sde_q_term(const ssm_model& model, const ModelInfo& info, const std::vector<double>& frames,
                  const std::vector<StepPoints>& steps, int64_t estimates, uint64_t seed,
                  ThreadPool& pool, std::vector<double>* gradient);

} // namespace ssm
