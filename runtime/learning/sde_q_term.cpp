// The SDE transition's term of EM's Q by averaged estimates: see sde_q_term.h.
#include "learning/sde_q_term.h"

#include "core/error.h"
#include "sde/density_estimator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

namespace ssm {

namespace {

// One step's term and gradient (grad: K entries, zeroed here).
double step_term(DensityEstimator& estimator, const ModelInfo& info, const double* frame, int64_t t,
                 const StepPoints& s, int64_t R, uint64_t seed, double* grad) {
  const int64_t P = s.count;
  const int64_t offset = info.state.at(info.sde->state).offset;
  const int K = grad ? estimator.gradient_size() : 0;
  std::fill_n(grad, K, 0.0);
  // The SDE state's components of the pairs (the SDE is the whole transition; other states are
  // the guide's).
  const double* prev = s.prev.data() + offset * P;
  const double* cur = s.cur.data() + offset * P;
  std::vector<double> log_base(P);
  // Per pair: the sums of the estimates and of their derivatives (over exp(log_base)).
  std::vector<double> sum(P, 0.0), dsum(static_cast<size_t>(K) * P, 0.0);
  // Round r of pair p: the estimator's round r, pair id p (draws keyed by (seed, t, p)), added to
  // the pairs `redraw` marks (all without it; a round's draws are keyed per pair, so the others'
  // are computed and dropped). The pairs are prepared once per call, for all its rounds.
  std::vector<int64_t> count(P, 0);
  auto add_rounds = [&](const std::vector<int>& rounds, const std::vector<char>* redraw) {
    estimator.single_rounds(frame, t, prev, cur, P, seed, 0, rounds, K > 0,
                            [&](int, const double* base, const double* factor, const double* g) {
                              std::copy_n(base, P, log_base.begin());
                              for (int64_t p = 0; p < P; ++p) {
                                if (redraw && !(*redraw)[p])
                                  continue;
                                ++count[p];
                                sum[p] += factor[p];
                                for (int k = 0; k < K; ++k)
                                  dsum[k * P + p] +=
                                      factor[p] * g[k * P + p]; // Q'_r / exp(log_base)
                              }
                            });
  };
  if (R < 1 || R > kMaxSdeEstimates)
    throw Error(fmt::format("internal error: {} estimates per pair", R));
  std::vector<int> first(R);
  std::iota(first.begin(), first.end(), 0);
  add_rounds(first, nullptr);
  int r = static_cast<int>(R);
  // Further rounds for the pairs of positive weight whose sum is not positive.
  std::vector<char> redraw(P);
  for (;; ++r) {
    bool pending = false;
    for (int64_t p = 0; p < P; ++p) {
      redraw[p] = s.weight[p] != 0 && std::isfinite(log_base[p]) && !(sum[p] > 0);
      pending |= redraw[p] != 0;
    }
    if (!pending)
      break;
    if (r >= kMaxWaldRounds) {
      const auto p = std::find(redraw.begin(), redraw.end(), 1) - redraw.begin();
      throw Error(fmt::format("optimize (em): at t={} the {} estimates of the density of "
                              "trajectory {}'s pair still sum to a nonpositive value after {} "
                              "rounds",
                              t, info.sde->relation, p, kMaxWaldRounds));
    }
    add_rounds({r}, &redraw);
  }
  // The log of the mean, not corrected for its bias (-Var / (2 n q^2) to first order): a
  // correction by the estimates' sample variance rewards the parameters whose estimates vary
  // most, which the M-step then seeks (on an OU SDE it drove the estimates' sums negative).
  double q = 0;
  for (int64_t p = 0; p < P; ++p) {
    const double w = s.weight[p];
    if (w == 0)
      continue;
    q += w * (log_base[p] + std::log(sum[p] / static_cast<double>(count[p])));
    for (int k = 0; k < K; ++k)
      grad[k] += w * dsum[k * P + p] / sum[p];
  }
  return q;
}

} // namespace

double sde_q_term(const ssm_model& model, const ModelInfo& info, const std::vector<double>& frames,
                  const std::vector<StepPoints>& steps, int64_t estimates, uint64_t seed,
                  ThreadPool& pool, std::vector<double>* gradient) {
  const auto T = static_cast<int64_t>(steps.size());
  const int K = gradient ? make_density_estimator(model, info)->gradient_size() : 0;
  if (gradient && K != static_cast<int>(gradient->size()))
    throw Error("internal error: the SDE's gradient rows do not match the score's");
  std::vector<double> per_step(T, 0.0), grads(static_cast<size_t>(K) * T, 0.0);
  pool.parallel_for(T - 1, [&](int64_t i) {
    const int64_t t = i + 1;
    if (steps[t].count == 0)
      return;
    // Per task: an estimator's buffers are its thread's.
    const std::unique_ptr<DensityEstimator> estimator = make_density_estimator(model, info);
    per_step[t] = step_term(*estimator, info, frames.data() + t * info.n_frame, t, steps[t],
                            estimates, seed, K > 0 ? &grads[t * K] : nullptr);
  });
  double q = 0;
  for (int64_t t = 1; t < T; ++t) {
    q += per_step[t];
    for (int k = 0; k < K; ++k)
      (*gradient)[k] += grads[t * K + k];
  }
  return q;
}

} // namespace ssm
