// What the forward-only smoothers (online, paris, bis) share: the statistics tau_t^j that each
// particle carries (their layout, start at t = 0, update from a backward sample, final estimates)
// and the driver that runs the filter and calls one method per step. See online_stats.cpp.
#pragma once

#include "smoothing/backward_kernel.h"
#include "smoothing/backward_trace.h"

#include <memory>
#include <optional>
#include <string_view>

namespace ssm {

constexpr int64_t kOnlineBlock = 64; // particles per parallel task; fixed for reproducibility

// What a method needs for the whole run.
struct OnlineContext {
  const ssm_model& model;
  const ModelInfo& info;
  const SmoothOptions& opt;
  ThreadPool& pool;
  const StatLayout& lay;
  const BackwardDensity& density;
  int64_t N, ns, stride, nf, nper, Nt;
  double inv_Nt;
  int64_t blocks() const { return (N + kOnlineBlock - 1) / kOnlineBlock; }
};

// One step t > 0: the backward kernel's inputs, the filter's current weights and ancestors, and
// the statistics: D components of tau (component c of particle n at [c N + n]) to update into
// tau_next, whose step-t quantities (with --marginals) go to components [slot, slot + per_step).
struct OnlineStep {
  BackwardStep back;
  const double* y;
  const double* w_cur;
  const int64_t* ancestors;
  int64_t D, slot;
  const double* tau;
  double* tau_next;
  BackwardTrace* trace = nullptr; // keeps the step's draws (EM's E-step), when there is one
};

// One forward-only method: called once per step t > 0, it updates tau_next for all particles.
class OnlineMethod {
public:
  virtual ~OnlineMethod() = default;
  // The transition density's log bound at t when the method samples by rejection, else NaN.
  virtual double log_bound(const double* /*frame*/, int64_t /*t*/, const double* /*x_prev*/) {
    return NAN;
  }
  virtual bool draws_from_weights() const { return true; } // needs the alias table
  virtual void step(const OnlineStep& s) = 0;
  virtual void details(SmoothResult& r) const = 0;
};

std::unique_ptr<OnlineMethod> make_online_exact(const OnlineContext& ctx); // online_smoother.cpp
std::unique_ptr<OnlineMethod> make_paris(const OnlineContext& ctx);        // paris_smoother.cpp
std::unique_ptr<OnlineMethod> make_bis(const OnlineContext& ctx);          // bis_smoother.cpp

// tau_next^j = sum_k w_jk (tau^{i_jk} + psi(i_jk, j)) for the particles j in [jb, je), from the
// batched methods' draws: particle j's indices i_jk and weights w_jk at [(j - jb) Nt + k], the
// functionals' terms psi (nf rows of stride nj Nt, null when there are none). One component at a
// time over the block, so the loops carry no per-particle dispatch; the sums add in the order of
// the one-particle path (for each k, the statistic then its term), so results do not change.
void add_backward_sample_block(const StatLayout& lay, int64_t D, int64_t N, int64_t jb, int64_t je,
                               int64_t Nt, const int64_t* idx, const double* w, const double* psi,
                               const double* x, int64_t stride, int64_t slot, double* tau_next,
                               const double* tau, std::vector<double>& step_q);

// The batched methods' end of a block: the functionals' terms of the drawn pairs (idx, w in
// `block`, Nt per particle), then add_backward_sample_block.
void update_from_block(const OnlineContext& ctx, const OnlineStep& s, int64_t jb, int64_t je,
                       BackwardBlock& block, std::vector<double>& step_q);

// Scratch of the one-particle path: the psi terms of one pair at a time.
struct SampleScratch {
  std::vector<int64_t> anc;
  std::vector<double> terms, step_q;
  explicit SampleScratch(const OnlineContext& ctx)
      : anc(ctx.stride), terms(std::max<int64_t>(ctx.nf, 1) * ctx.stride),
        step_q(std::max<int64_t>(ctx.lay.per_step, 1)) {}
};

// The one-step Euler laws of an SDE state from every particle at t-1, for backward proposals
// drawn from W_{t-1}^i times the Euler density (bis, and paris's moves): built when the run's
// backward proposal asks for them, else absent.
class EulerLaws {
public:
  EulerLaws(const OnlineContext& ctx, bool moves);
  // The laws at step s (a particle of weight 0 is never a parent: no law); null without them.
  const EulerStep* at(const OnlineStep& s, const char* who);
  bool used() const { return step_.has_value(); }

private:
  const OnlineContext& ctx_;
  std::optional<EulerStep> step_;
  std::vector<double> from_; // the SDE state at t-1, component-major
};

// An SDE's estimated density in the JSON details (nothing for a density in closed form): which
// estimator, `how` its estimates are used, and the forward filter's Euler substeps when it
// simulates by Euler-Maruyama.
void add_estimated_density_details(const OnlineContext& ctx, std::string_view how, SmoothResult& r);

// tau_next^j = sum_k wk[k] (tau^{idx[k]} + psi(idx[k], j)), one particle j at a time; with
// `sde`, psi's component c of draw k adds sde[c * sde_stride + k] (the SDE's term of the score).
void add_backward_sample(const OnlineContext& ctx, const OnlineStep& s, int64_t j,
                         const int64_t* idx, const double* wk, int64_t K, SampleScratch& scratch,
                         const double* sde = nullptr, int64_t sde_stride = 0);

// For paris's draws with BackwardDensity::adds_score_terms(): fresh exact-bridge estimates of the
// SDE's term of the score of the drawn pairs (particles from jb on, Nt each, in `pairs`), row c
// at out[c * pairs.size() + p], keyed by (seed, t, jb Nt + p) whatever the path that drew them.
void drawn_score_terms(const OnlineContext& ctx, const OnlineStep& s, int64_t jb,
                       const PairBatch& pairs, std::vector<double>& out);

} // namespace ssm
