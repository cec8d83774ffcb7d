// ffbsm (marginal forward-filtering backward-smoothing): the smoothing weight of every particle
// at every step, w_{t|T}^i = W_t^i sum_j w_{t+1|T}^j f(x_{t+1}^j | x_t^i) / D_j with
// D_j = sum_k W_t^k f(x_{t+1}^j | x_t^k), and the functionals under the pairwise smoothing weights
// w_{t+1|T}^j W_t^i f(x_{t+1}^j | x_t^i) / D_j: O(N^2) per step, no sampling noise beyond the
// filter's.
#include "smoothing/offline_pass.h"

namespace ssm {

void ffbsm_pass(OfflinePass& p) {
  const ssm_model& model = p.model;
  const ModelInfo& info = p.info;
  const StatLayout& lay = p.lay;
  const StoredSystem& sys = p.sys;
  const int64_t T = sys.T, N = sys.N, stride = sys.stride, ns = p.ns, nf = p.nf, nper = p.nper;
  auto frame_at = [&](int64_t t) { return p.frame_at(t); };
  std::vector<double>& sums = p.sums;
  std::vector<double>& q = p.q;
  SmoothResult& r = p.r;
  std::vector<double> ws(sys.w_at(T - 1), sys.w_at(T - 1) + N), ws_prev(N);
  const int64_t nb = (N + kBackwardBlock - 1) / kBackwardBlock;
  const int64_t part_width = N + lay.nsum + nper;
  std::vector<double> part(nb * part_width);
  for (int64_t t = T - 1; t >= 0; --t) {
    // Pairs (t-1, t): the weights at t-1 and the functionals' terms at t.
    std::fill(q.begin(), q.end(), 0.0);
    p.store_state_moments(ws.data(), sys.x_at(t, ns));
    if (t == 0) {
      p.add_initial_terms(ws.data());
      lay.store_estimates(0, q.data(), r, info);
      p.report(T - 1, T);
      break;
    }
    const double* x_prev = sys.x_at(t - 1, ns);
    const double* x_cur = sys.x_at(t, ns);
    const double* W = sys.w_at(t - 1);
    std::fill(part.begin(), part.end(), 0.0);
    p.pool.parallel_for(nb, [&](int64_t b) {
      const int64_t jb = b * kBackwardBlock, je = std::min(N, jb + kBackwardBlock);
      std::vector<double> bc(ns * stride), l(stride), terms(std::max<int64_t>(nf, 1) * stride),
          term_sums(lay.nsum + nper);
      double* pb = &part[b * part_width];
      for (int64_t j = jb; j < je; ++j) {
        if (ws[j] <= 0)
          continue;
        backward_logpdf(model, frame_at(t), t, N, stride, ns, x_prev, x_cur, j, bc.data(),
                        l.data());
        const double D = backward_weights(W, l.data(), N);
        if (!(D > 0))
          throw_no_parent(t, j, true);
        const double coef = ws[j] / D;
        for (int64_t i = 0; i < N; ++i)
          pb[i] += coef * l[i];
        if (nf == 0)
          continue;
        backward_term_sums(model, info, lay, frame_at(t), t, N, stride, x_prev, bc.data(),
                           p.data.at(t), l.data(), terms.data(), term_sums.data());
        for (int64_t k = 0; k < lay.nsum + nper; ++k)
          pb[N + k] += coef * term_sums[k];
      }
    });
    std::fill(ws_prev.begin(), ws_prev.end(), 0.0);
    for (int64_t b = 0; b < nb; ++b) {
      const double* pb = &part[b * part_width];
      for (int64_t i = 0; i < N; ++i)
        ws_prev[i] += pb[i];
      for (int64_t k = 0; k < lay.nsum; ++k)
        sums[k] += pb[N + k];
      for (int64_t k = 0; k < nper; ++k)
        q[2 * ns + k] += pb[N + lay.nsum + k];
    }
    lay.store_estimates(t, q.data(), r, info);
    std::swap(ws, ws_prev);
    p.report(T - 1 - t, T);
  }
}

} // namespace ssm
