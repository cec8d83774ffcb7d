// What the unbiased estimators of an SDE transition's density q(x, y) share: batched estimates
// of many pairs in one call, each keyed by (seed, t, pair id) whatever the thread count, and
// Wald's identity, which makes signed estimates positive (Martin 2022, section 7.4.1): fresh
// estimates are added to every pair of a set until all the sums are positive, which keeps the
// set's estimates unbiased up to one common factor (a stopping time's expected length), so that
// weights normalised over the set stay right. The estimators: the General Poisson one
// (poisson_estimator.h) and the parametrix one (parametrix_estimator.h); make_density_estimator
// builds the one a run uses (ModelInfo::Sde::estimator, --estimator).
#pragma once

#include "core/metadata.h"
#include "core/thread_pool.h"
#include "kernel/abi.h"
#include "sde/diffusion_terms.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ssm {

// Wald's loop stops with an error after this many rounds without a positive sum for every pair.
inline constexpr int kMaxWaldRounds = 1000;
// estimate_one_set's pairs per block of work.
inline constexpr int64_t kEstimateBlock = 256;

struct EstimatorCounts {
  int64_t estimates = 0;        // single estimates drawn, over every round
  int64_t extra_rounds = 0;     // Wald rounds beyond the first (any set still not positive)
  int64_t bridge_points = 0;    // psi evaluations on bridges (General Poisson)
  int64_t bridge_proposals = 0; // the gradient's proposed bridges (accepted or not)
  int64_t skeleton_points = 0;  // points of the parametrix estimator's skeletons
};

class DensityEstimator {
public:
  virtual ~DensityEstimator() = default;

  // log of the estimates of q(prev_p, cur_p) for P pairs of the SDE state's values
  // (component-major, prev[c * P + p]), in sets of `per` consecutive pairs made positive together
  // (P a multiple of per). Pair p's draws are keyed by (seed, t, first_id + p). A pair with a
  // non-finite end (a diverged path) gets -inf.
  //
  // With `grad` (gradient_size() > 0), also d/dtheta_k log of each estimate, from the same draws,
  // into grad[k * P + p] (0 for a diverged pair): the draws do not depend on theta (the
  // estimator's constants are held at their values), so the estimate's derivative Q' is an
  // unbiased estimate of q', and Wald's sums of Q' share the common factor of the sums of Q.
  // grad = Q' / Q is not an unbiased estimate of d log q, but Q grad = Q' is one of q': the
  // gradient to weigh by the estimates themselves, as bis's self-normalised weights do.
  void estimate(const double* frame, int64_t t, const double* prev, const double* cur, int64_t P,
                int64_t per, uint64_t seed, uint64_t first_id, double* log_q,
                EstimatorCounts* counts = nullptr, double* grad = nullptr);

  // One round's estimates, not made positive: estimate = exp(log_base[p]) * factor[p]. For tests
  // of unbiasedness (`round` selects independent draws). With `grad`, the estimate's derivative
  // over the estimate, d/dtheta_k log |estimate|, into grad[k * P + p].
  void single(const double* frame, int64_t t, const double* prev, const double* cur, int64_t P,
              uint64_t seed, uint64_t first_id, int round, double* log_base, double* factor,
              EstimatorCounts* counts = nullptr, double* grad = nullptr);

  // single() for each round of `rounds` over the same pairs, the pairs prepared once (their
  // quadrature, frozen terms and the like cost more than a round of a General Poisson estimate):
  // take(r, log_base, factor, grad) gets what single() would fill for round r (grad null unless
  // `gradient`). The same values as single() round by round.
  using RoundSink =
      std::function<void(int r, const double* log_base, const double* factor, const double* grad)>;
  void single_rounds(const double* frame, int64_t t, const double* prev, const double* cur,
                     int64_t P, uint64_t seed, uint64_t first_id, const std::vector<int>& rounds,
                     bool gradient, const RoundSink& take);

  // The theta components whose derivatives estimate() can give: 0 when the compiler derived no
  // gradient rows (ModelInfo::Sde::gradient_reason says why).
  int gradient_size() const { return gradient_reason_.empty() ? terms_.gradient_size() : 0; }
  // Why gradient_size() is 0 (the model's reason, or this estimator's).
  const std::string& gradient_reason() const { return gradient_reason_; }

  // Whether the estimates at the last step were positive by construction (no Wald round needed,
  // hence each one unbiased on its own).
  virtual bool positive() const = 0;
  // The log of a bound of every estimate at step t whatever the pair, inf when there is none.
  virtual double log_bound(const double* /*frame*/, int64_t /*t*/) { return INFINITY; }
  const std::string& name() const { return name_; } // "General Poisson", "parametrix"

  // estimate() with all P pairs in one set (the random-weight filter's weights at a step, whose
  // common factor cancels when they are normalised), each round computed in blocks of
  // kEstimateBlock pairs on `pool` by estimators of their own (make_density_estimator): the
  // same estimates whatever the pool's threads, a pair's draws being keyed by its id.
  static void estimate_one_set(const ssm_model& model, const ModelInfo& info, ThreadPool& pool,
                               const double* frame, int64_t t, const double* prev,
                               const double* cur, int64_t P, uint64_t seed, uint64_t first_id,
                               double* log_q, EstimatorCounts* counts = nullptr);

protected:
  DensityEstimator(const ssm_model& model, const ModelInfo& info, std::string name);

  // Before the rounds: every pair's deterministic factor into log_base_ (-inf for a pair in
  // bad_, a diverged one), from pairs component-major as estimate() takes them.
  virtual void prepare(const double* frame, int64_t t, const double* prev, const double* cur,
                       int64_t P) = 0;
  // Throws, with the reason, when the model has no gradient rows.
  void require_gradient(int64_t t) const;
  // prepare(), then with `gradient` prepare_gradient() into a fresh base_grad_; throws when the
  // gradient is asked of a model without gradient rows.
  void prepare_with_gradient(const double* frame, int64_t t, const double* prev, const double* cur,
                             int64_t P, bool gradient);
  // After prepare(), for estimates with their gradient: d/dtheta_k log_base_ of pair p into
  // base_grad_[p * gradient_size() + k] (before any round: prepare's evaluation is needed).
  virtual void prepare_gradient(const double* /*frame*/, int64_t /*t*/) {}
  // Round r's random factor of each pair in `pairs` (finite ones), as log|.| into log_abs[p] and
  // its sign into sign[p] (0 for a factor that is 0); with dlog (gradient_size() > 0), the
  // factor's d/dtheta_k log|.| into dlog[p * gradient_size() + k].
  virtual void round(const double* frame, int64_t t, const std::vector<int64_t>& pairs, int r,
                     uint64_t seed, uint64_t first_id, double* log_abs, double* sign,
                     EstimatorCounts* counts, double* dlog) = 0;

  // Marks the pairs with a non-finite end in bad_; P pairs of dim components.
  void find_bad(const double* prev, const double* cur, int64_t P);
  std::vector<int64_t> finite_pairs() const; // the pairs not in bad_, in order
  // "1.5" or "(1, 2)": the point whose components are x[0], x[stride], ...; for errors.
  std::string point_text(const double* x, int64_t stride) const;
  // "1.5 -> 2" or "(1, 2) -> (3, 4)": pair p, for errors.
  std::string pair_text(const double* prev, const double* cur, int64_t P, int64_t p) const;
  std::string error_prefix(int64_t t) const; // "the parametrix estimator for x[t] at t=3"
  // Throws when pairs first_id .. first_id + P - 1 would leave a step's 2^32 random streams.
  void check_ids(int64_t t, int64_t P, uint64_t first_id) const;

  DiffusionTerms terms_;
  std::string relation_;
  int dim_ = 1;
  // Why no gradient (ModelInfo::Sde's reason, or the estimator's own): empty when it has one.
  std::string gradient_reason_;
  std::vector<double> log_base_, base_grad_;
  std::vector<bool> bad_;
  bool with_gradient_ = false; // the last prepare() was for estimates with their gradient

private:
  // After prepare_with_gradient(): single()'s outputs for round r.
  void single_round(const double* frame, int64_t t, int64_t P, uint64_t seed, uint64_t first_id,
                    int r, double* log_base, double* factor, EstimatorCounts* counts, double* grad);

  std::string name_;
};

// Why the estimator ("gpe" or "parametrix"; the run's, ModelInfo::Sde::estimator, by default)
// cannot estimate the gradient of log q: the model's reason (ModelInfo::Sde::gradient_reason), or
// the parametrix estimator's with a coefficient that reads the parameters (its skeletons hold the
// coefficient fixed); empty when it can.
std::string density_gradient_problem(const ModelInfo& info, const std::string& estimator = "");
// Why the estimator a run uses (ModelInfo::Sde::estimator) cannot weigh the model's SDE
// transition; empty when it can.
std::string density_estimator_problem(const ssm_model& model, const ModelInfo& info);
// That estimator; throws Error with the reason when it does not apply.
std::unique_ptr<DensityEstimator> make_density_estimator(const ssm_model& model,
                                                         const ModelInfo& info);
// Checks --estimator's choice ("auto", "gpe" or "parametrix") against the model and records it
// in info.sde->estimator; throws Error naming the condition that fails and the estimator that
// applies.
void choose_density_estimator(ModelInfo& info, const std::string& choice);

} // namespace ssm
