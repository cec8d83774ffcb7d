// The backward kernel B(j, i) proportional to W_{t-1}^i f(x_t^j | x_{t-1}^i), written once for the
// smoothers that draw from it (ffbsi, paris) or weight by it (online, bis): the transition density
// on particle pairs, exact draws, rejection draws with the exact fallback, and the batched
// proposals and Metropolis-Hastings moves of a block of particles. The random streams are those
// of kSiteBackward; each caller passes its own stream index and draw counters.
#pragma once

#include "sde/euler_step.h"
#include "smoothing/smoothers.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace ssm {

// The key of the streams of the estimates rejection sampling draws with an estimated density
// (mixed with the seed and the particle; high bits apart from the random-weight filter's key).
inline constexpr uint64_t kBackwardEstimateKey = 0xB15A000000000000ull;
// ... and of the exact-bridge estimates of the score's SDE term for pairs drawn from the backward
// kernel (paris), mixed with the seed.
inline constexpr uint64_t kBackwardScoreKey = 0xB15C000000000000ull;

// Pairs (x_prev^{i_p}, x_cur^{j_p}) gathered into compact arrays of stride P, so that one kernel
// call evaluates the transition density, or the functionals' terms, of many pairs.
class PairBatch {
public:
  void gather(int64_t ns, int64_t stride, const double* x_prev, const double* x_cur,
              const int64_t* i, const int64_t* j, int64_t P);
  int64_t size() const { return size_; }
  const double* prev() const { return prev_.data(); }
  const double* cur() const { return cur_.data(); }
  // The functionals' terms of the pairs, row c at [c * size()]: writable, for the estimated
  // terms that the kernel leaves out (the SDE's term of the score, BackwardDensity::pairs).
  double* terms(const ssm_model& model, const double* frame, int64_t t, const double* y,
                int64_t nf);

private:
  int64_t size_ = 0;
  std::vector<double> prev_, cur_, out_;
};

// The transition density on (previous, current) particle pairs, as the backward samplers see it:
// the one place they evaluate it, so that a positive unbiased estimate can replace it for models
// whose transition density is intractable (bis needs nothing else).
class BackwardDensity {
public:
  BackwardDensity(const ssm_model& model, int64_t ns, int64_t stride)
      : model_(model), ns_(ns), stride_(stride) {}
  // out[i] = log f(x_cur^j | x_prev^i) for every i in [0, N); bc is scratch (ns x stride).
  void all(const double* frame, int64_t t, int64_t N, const double* x_prev, const double* x_cur,
           int64_t j, double* bc, double* out) const {
    backward_logpdf(model_, frame, t, N, stride_, ns_, x_prev, x_cur, j, bc, out);
  }
  // out[m] = log f(x_cur^j | x_prev^{idx[m]}) for m in [0, count), in one kernel call; bc (ns x
  // stride) and anc (stride) are scratch, count <= stride. With an estimator, the log of a
  // positive estimate, proposal m's draws keyed by (seed, t, first_id + m).
  void some(const double* frame, int64_t t, const double* x_prev, const double* x_cur, int64_t j,
            const int64_t* idx, int64_t count, double* bc, int64_t* anc, double* out,
            uint64_t seed = 0, uint64_t first_id = 0) const;
  // The log of a bound of the density (of its estimates, with an estimator) over x_prev at t, or
  // inf; the exact density's is the model's transition_log_bound kernel's (smoother_support.h).
  double estimate_log_bound(const double* frame, int64_t t) const;
  // out[p] = log f(cur_p | prev_p) for the batch's pairs. With an estimator (use_estimator), the
  // log of a positive estimate, made positive together within sets of `per` consecutive pairs
  // (one particle's backward draws), pair p's draws keyed by (seed, t, first_id + p).
  // With `score` when adds_score_terms(): the SDE's term of the score of each pair, row k (theta
  // component k) at (*score)[k * P + p], for a caller that weighs the pairs by these estimates
  // (bis): an unbiased estimate of d/dtheta log f from exact diffusion bridges where psi is
  // bounded above (PoissonEstimator::gradient), else the estimate's own derivative over the
  // estimate, which the weights turn into an unbiased estimate of f's derivative.
  void pairs(const double* frame, int64_t t, const PairBatch& batch, std::vector<double>& out,
             uint64_t seed = 0, uint64_t first_id = 0, int64_t per = 1,
             std::vector<double>* score = nullptr) const;
  // For pairs drawn from the backward kernel (paris), with adds_score_terms(): the SDE's term of
  // the score of each pair, row k (theta component k) at out[k * P + p], an unbiased estimate of
  // d/dtheta log f from exact diffusion bridges, pair p's draws keyed by (seed, t, first_id + p).
  // Throws Error naming the step where psi has no upper bound at these parameters (no exact
  // bridges: only bis's weighted estimate applies).
  void drawn_score_terms(const double* frame, int64_t t, const PairBatch& batch, uint64_t seed,
                         uint64_t first_id, std::vector<double>& out) const;
  // For a transition without a density (an SDE): pairs() and some() estimate it (sde/); throws
  // Error when no estimator applies, or when the score needs a gradient the estimator does not
  // give. all() keeps the exact kernel: only bis (pairs) and paris's rejection (some) may use
  // this.
  void use_estimator(const ModelInfo& info);
  bool estimated() const { return info_ != nullptr; }
  // With an estimator, when the functionals are the score and their kernel leaves out the SDE's
  // term (ModelInfo::functionals_lack_sde_term): pairs() gives that term.
  bool adds_score_terms() const { return info_ && info_->functionals_lack_sde_term; }
  const ssm_model& model() const { return model_; }
  int64_t n_state() const { return ns_; }
  int64_t sde_offset() const { return sde_offset_; } // the estimated SDE state's first component
  int64_t stride() const { return stride_; }

private:
  const ssm_model& model_;
  int64_t ns_, stride_;
  const ModelInfo* info_ = nullptr; // with an estimator of the SDE state's transition density
  int64_t sde_offset_ = 0;          // that state's component
};

// Accepts with probability min(1, exp(log_ratio)) given u ~ U(0, 1): log u < log_ratio, without
// the logarithm when the ratio is at least 1 (an accepted uphill move). NaN rejects.
inline bool accept(double u, double log_ratio) {
  return log_ratio >= 0 || u < std::exp(log_ratio);
}

// The same decision without a branch on the outcome, for loops where about half the moves are
// accepted and a mispredicted branch would cost more than the exponential. NaN rejects.
inline bool accept_branch_free(double u, double log_ratio) {
  return u < std::exp(std::min(log_ratio, 0.0));
}

// The draws' bookkeeping for the JSON details, one slot per parallel block so that blocks never
// share a counter; totals are summed in block order.
struct BackwardCounts {
  std::vector<int64_t> tries, accepts, exact;
  int64_t total_tries = 0, total_accepts = 0, total_exact = 0;
  void reset(int64_t blocks) {
    tries.assign(blocks, 0);
    accepts.assign(blocks, 0);
    exact.assign(blocks, 0);
  }
  void collect() {
    for (size_t b = 0; b < tries.size(); ++b) {
      total_tries += tries[b];
      total_accepts += accepts[b];
      total_exact += exact[b];
    }
  }
  double acceptance_rate() const {
    return total_tries > 0 ? double(total_accepts) / double(total_tries) : 0.0;
  }
};

// Throws: no particle at t-1 can be the parent of particle j at t (`support_hint` adds advice
// on the transition's support to the message).
[[noreturn]] void throw_no_parent(int64_t t, int64_t j, bool support_hint);

// The exact backward kernel of particle j at t: l (size >= N) receives the cumulative weights
// W_{t-1}^i exp(log f - max), bc is scratch (ns x stride). Throws when no particle can be the
// parent (`support_hint` adds advice on the transition's support to the message).
void exact_backward_cumulative(const BackwardDensity& density, const double* frame, int64_t t,
                               int64_t N, const double* x_prev, const double* x_cur, int64_t j,
                               const double* W, double* bc, double* l, bool support_hint);

// The exact backward kernel's expectations of the functionals' terms, unnormalised: for the
// components k < nsum + nper of the layout (the sum_t ones, then the per-t ones),
// out[k] = sum over b_i > 0 of b_i psi(x_prev^i, x_cur^j), from the terms the model writes into
// `terms` (nf x stride) for the pairs (x_prev^i, bc^i), bc holding x_cur^j repeated (as
// BackwardDensity::all leaves it). A non-finite sum is an error (check_terms says which).
void backward_term_sums(const ssm_model& model, const ModelInfo& info, const StatLayout& lay,
                        const double* frame, int64_t t, int64_t N, int64_t stride,
                        const double* x_prev, const double* bc, const double* y, const double* b,
                        double* terms, double* out);

// Inverse-CDF draw from cumulative weights cum[0, N) (cum[N-1] > 0) with u in (0, 1).
inline int64_t draw_cumulative(const double* cum, int64_t N, double u) {
  return std::min<int64_t>(std::upper_bound(cum, cum + N, u * cum[N - 1]) - cum, N - 1);
}

// What the backward kernel at t reads: the particles at t-1 and t, the filter weights at t-1
// (normalised or not), their alias table for proposals, the density's log bound (not finite:
// no rejection at this step) and the runtime seed.
struct BackwardStep {
  const double* frame = nullptr;
  int64_t t = 0, N = 0;
  const double *x_prev = nullptr, *x_cur = nullptr, *W = nullptr;
  const AliasTable* from_weights = nullptr;
  double log_bound = NAN;
  uint64_t seed = 0;
};

// Draws from B(j, .) by rejection with the exact fallback: proposals from the filter weights at
// t-1 (the alias table), accepted with probability f / bound. Proposal `trial` of a draw uses the
// uniforms of counter draw_base + trial (the index, then the acceptance), the fallback those of
// draw_base + max_trials. Proposals are evaluated in growing batches (one kernel call each) and
// scanned in order, so the draw is that of one-at-a-time rejection. Once a draw of particle j
// falls back, its backward weights are kept: j's later draws use them directly, since a particle
// that rejected max_trials proposals is unlikely to accept the next ones. With an estimated
// density each proposal gets a fresh estimate (accepted with probability q^ / bound, so with
// probability q / bound on average: pseudo-marginal PaRIS), and the fallback self-normalises
// fresh estimates over all N (no exact draw exists).
class RejectionSampler {
public:
  RejectionSampler(const BackwardDensity& density, int64_t max_trials, bool support_hint);
  void next_particle() { have_weights_ = false; } // before the first draw of each particle
  // One draw for particle j whose random stream has index `index`.
  int64_t draw(const BackwardStep& s, uint32_t index, uint32_t draw_base, int64_t j, int64_t& tries,
               int64_t& accepts, int64_t& exact);

private:
  const BackwardDensity& density_;
  int64_t max_trials_;
  bool support_hint_, have_weights_ = false;
  std::vector<double> bc_, l_, u_, cum_;
  std::vector<int64_t> idx_, anc_;
};

// The batched draws of a block of particles [jb, je) at t (paris mcmc, bis), fixed before anything
// is evaluated so that the whole block's pairs go through one kernel call: per particle, `per`
// pairs (i, j) at [(j - jb) per + m] with their log densities. The uniforms come first, in a loop
// of their own, then the indices: the alias lookups then overlap instead of each waiting on its
// Philox block. Draw d of particle j is at [d nj + j - jb]: index_u picks a proposal, move_u
// decides the move to it.
struct BackwardBlock {
  std::vector<int64_t> pi, pj, idx, qj;
  std::vector<double> index_u, move_u, lp, w, log_ratio, ratio, used;
  // Per particle, the slot its chains start from (mcmc), and the uniforms that pick it.
  std::vector<int64_t> start;
  std::vector<double> start_u, spare_u;
  // With an Euler proposal: the log Euler density of each proposed pair (0 for a particle whose
  // draws fell back to the filter weights), else empty; and its scratch.
  std::vector<double> lm, euler_all, cum;
  // The SDE's term of the score of each proposed pair, row k at [k nj per + p], when the
  // density adds it (BackwardDensity::adds_score_terms) to proposals weighed by their estimates
  // (bis: no chain start), else empty; paris's drawn pairs get theirs in update_from_block.
  std::vector<double> score;
  PairBatch pairs;
  int64_t nj = 0, per = 0, starts = 0, first_drawn = 0;
  // Draws `draws` proposals per particle from the filter weights at t-1, after `starts` slots
  // (0: none) for the chains' start: the particle's ancestor (`ancestors`, null for the
  // identity; a draw from the backward kernel after the bootstrap filter), or, without
  // `start_at_ancestor`, proposals like the others.
  // An estimated density gives each slot an estimate of its own: mcmc() then starts the chains
  // from one of the `starts` slots drawn with probability proportional to its importance weight
  // (the estimate, over the Euler density with Euler proposals), so that the start follows (as
  // starts grows) the pseudo-marginal chain's invariant law, which favours large estimates; the
  // ancestor with one fresh estimate does not, and the moves from it are biased (fewer
  // rejections than at stationarity; measured in bench/README.md, "SDEs"). With
  // `euler` (the laws from every particle at t-1 of an estimated SDE state), proposals for j are
  // drawn with probability proportional to W_{t-1}^i m(x_t^j | x_{t-1}^i), m the Euler density,
  // whose log goes to lm: a particle's importance weights are then estimate / m.
  void propose(const BackwardDensity& density, const BackwardStep& s, int64_t jb, int64_t je,
               int64_t draws, int64_t starts, const int64_t* ancestors,
               const EulerStep* euler = nullptr, bool start_at_ancestor = true);
  // bis's weights: per particle, its Nt proposals' self-normalised importance weights into w
  // (their indices into idx), the target W_i f and the proposal W_i (or W_i m, lm) giving log
  // weight lp - lm. A particle none of whose draws can be its parent gets uniform weights, which
  // keep the estimate defined (only with a bounded-support transition density and few draws).
  void importance_weights(int64_t Nt);
  // Independent Metropolis-Hastings chains from a start slot (propose's `starts`), S moves per
  // draw, Nt draws per particle: idx and w (uniform 1 / Nt) receive the draws, tries and accepts
  // the moves. Each state keeps the density (estimate) it was accepted with. With Euler
  // proposals (lm) the target is W_i f and the proposal W_i m: lp becomes lp - lm.
  void mcmc(int64_t Nt, int64_t S, int64_t& tries, int64_t& accepts);

private:
  // propose()'s Euler draws for particle j into row[starts + d] and the log Euler densities of
  // its row (the start slots' too: from the ancestor) into row_lm; false (nothing drawn) when no
  // particle at t-1 has both weight and an Euler law.
  bool draw_by_euler(const EulerStep& euler, const BackwardDensity& density, const BackwardStep& s,
                     int64_t j, int64_t jb, int64_t starts, int64_t draws, int64_t* row,
                     double* row_lm);
};

} // namespace ssm
