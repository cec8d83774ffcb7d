// online (Del Moral, Doucet & Singh 2010): tau_t^j averages tau_{t-1}^i + psi_t(i, j) over the
// exact backward kernel B(j, .), all N particles: O(N^2) per step, no sampling noise.
#include "smoothing/online_stats.h"

namespace ssm {

namespace {

class OnlineExact final : public OnlineMethod {
public:
  explicit OnlineExact(const OnlineContext& ctx) : ctx_(ctx) {}
  bool draws_from_weights() const override { return false; }
  void step(const OnlineStep& s) override {
    ctx_.pool.parallel_for(ctx_.blocks(), [&](int64_t b) {
      const int64_t jb = b * kOnlineBlock, je = std::min(ctx_.N, jb + kOnlineBlock);
      const int64_t stride = ctx_.stride;
      std::vector<double> bc(ctx_.ns * stride), l(stride),
          terms(std::max<int64_t>(ctx_.nf, 1) * stride);
      std::vector<double> step_q(std::max<int64_t>(ctx_.lay.per_step, 1)),
          term_sums(ctx_.lay.nsum + ctx_.nper);
      for (int64_t j = jb; j < je; ++j)
        particle(s, j, bc.data(), l.data(), terms.data(), term_sums.data(), step_q.data());
    });
  }
  void details(SmoothResult&) const override {}

private:
  // tau_next^j = sum_i B(j, i) (tau^i + psi(i, j)), all pairs at once.
  void particle(const OnlineStep& s, int64_t j, double* bc, double* l, double* terms,
                double* term_sums, double* step_q) const {
    const StatLayout& lay = ctx_.lay;
    const int64_t N = ctx_.N, ns = ctx_.ns, stride = ctx_.stride, nf = ctx_.nf, t = s.back.t;
    const double* tau = s.tau;
    double* tau_next = s.tau_next;
    if (!(s.w_cur[j] > 0)) // never read again (tau_next stays 0): its terms may not be finite
      return;
    ctx_.density.all(s.back.frame, t, N, s.back.x_prev, s.back.x_cur, j, bc, l);
    const double sum = backward_weights(s.back.W, l, N);
    if (!(sum > 0))
      throw_no_parent(t, j, false);
    for (int64_t k = 0; k < s.D; ++k) {
      const double* row = tau + k * N;
      double a = 0;
      for (int64_t i = 0; i < N; ++i)
        if (l[i] > 0)
          a += l[i] * row[i];
      tau_next[k * N + j] = a / sum;
    }
    if (nf > 0) {
      backward_term_sums(ctx_.model, ctx_.info, lay, s.back.frame, t, N, stride, s.back.x_prev, bc,
                         s.y, l, terms, term_sums);
      for (int64_t k = 0; k < lay.nsum + ctx_.nper; ++k)
        if (k < lay.nsum)
          tau_next[k * N + j] += term_sums[k] / sum;
        else
          step_q[2 * ns + (k - lay.nsum)] = term_sums[k] / sum;
    }
    lay.state_quantities(s.back.x_cur, j, stride, step_q);
    if (lay.marginals)
      for (int64_t k = 0; k < lay.per_step; ++k)
        tau_next[(s.slot + k) * N + j] = step_q[k];
  }

  const OnlineContext& ctx_;
};

} // namespace

std::unique_ptr<OnlineMethod> make_online_exact(const OnlineContext& ctx) {
  return std::make_unique<OnlineExact>(ctx);
}

} // namespace ssm
