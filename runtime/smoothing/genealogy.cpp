// genealogy and fixed-lag smoothing: estimates read off the particle filter's ancestral lines.
//
// Each step's per-particle quantities (state, its square, the functionals' terms at the pair
// (x_{t-1}^{a_n}, x_t^n)) are kept with the ancestor indices in a window of the last L + 1 steps.
// fixed-lag estimates step s once the filter reaches s + L, by tracing the lines of the particles
// at s + L back to s and weighting with the weights at s + L; steps within L of the end are
// estimated with the final weights. genealogy is the same with the whole series as the window (the
// path-space "poor man's" smoother): every step is estimated with the final weights, and suffers
// from path degeneracy on long series. Memory is O(N L) for fixed-lag, O(N T) for genealogy.
#include "core/error.h"
#include "smoothing/smoothers.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

namespace ssm {

SmoothResult smooth_genealogy(const ssm_model& model, const ModelInfo& info,
                              const std::vector<double>& fixed, const ObsData& data,
                              const SmoothOptions& opt, ThreadPool& pool) {
  const auto start = std::chrono::steady_clock::now();
  const bool whole_path = opt.method == SmoothMethod::Genealogy;
  const int64_t T = data.T, N = opt.filter.particles;
  const StatLayout lay(info, true);
  SmoothResult r = make_result(info, opt.method, T, N, true);
  ParticleFilter pf(model, info, fixed, data, opt.filter, pool);
  const int64_t stride = pf.stride(), ns = info.n_state, nf = lay.nf;
  const int64_t L = whole_path ? T : std::min(opt.lag, T);
  const int64_t capacity = std::max<int64_t>(1, std::min(L + 1, T));
  const int64_t width = lay.per_step + lay.nsum; // per particle and step
  const int64_t nb = (N + kParticleBlock - 1) / kParticleBlock;

  struct Record {
    std::vector<int64_t> anc;  // N: the particle at the previous step each descends from
    std::vector<double> stats; // width x N: step quantities, then the sum_t terms
  };
  std::vector<Record> ring(capacity);
  std::vector<double> terms(std::max<int64_t>(nf, 1) * stride), nan_prev(ns * stride, NAN);
  std::vector<double> sums(lay.nsum, 0.0), q(width);

  // Estimates steps [s_lo, s_hi] with the weights at t_now, tracing the lines back from t_now.
  auto estimate = [&](int64_t t_now, int64_t s_lo, int64_t s_hi) {
    const int64_t steps = s_hi - s_lo + 1;
    std::vector<double> part(nb * steps * width, 0.0);
    const double* w = pf.weights();
    pool.parallel_for(nb, [&](int64_t b) {
      const int64_t begin = b * kParticleBlock, end = std::min(N, begin + kParticleBlock);
      std::vector<int64_t> idx(end - begin);
      std::iota(idx.begin(), idx.end(), begin);
      for (int64_t s = t_now; s >= s_lo; --s) {
        const Record& rec = ring[s % capacity];
        if (s <= s_hi) {
          double* p = &part[(b * steps + (s - s_lo)) * width];
          for (int64_t k = 0; k < width; ++k) {
            const double* row = rec.stats.data() + k * N;
            double acc = 0;
            for (int64_t n = begin; n < end; ++n)
              if (w[n] > 0)
                acc += w[n] * row[idx[n - begin]];
            p[k] = acc;
          }
        }
        if (s > s_lo)
          for (int64_t& i : idx)
            i = rec.anc[i];
      }
    });
    const double W = pf.weight_sum();
    for (int64_t s = s_lo; s <= s_hi; ++s) {
      std::fill(q.begin(), q.end(), 0.0);
      for (int64_t b = 0; b < nb; ++b)
        for (int64_t k = 0; k < width; ++k)
          q[k] += part[(b * steps + (s - s_lo)) * width + k];
      for (double& v : q)
        v /= W;
      lay.store_estimates(s, q.data(), r, info);
      for (int64_t k = 0; k < lay.nsum; ++k)
        sums[k] += q[lay.per_step + k];
    }
  };

  StepTimer timer;
  while (timer.step(pf)) {
    const int64_t t = pf.t();
    Record& rec = ring[t % capacity];
    rec.anc.resize(N);
    rec.stats.resize(width * N);
    if (const int64_t* a = pf.ancestors())
      std::copy(a, a + N, rec.anc.begin());
    else
      std::iota(rec.anc.begin(), rec.anc.end(), 0);
    const double* x_prev = t > 0 ? pf.x_prev() : nan_prev.data();
    pool.parallel_for(nb, [&](int64_t b) {
      const int64_t begin = b * kParticleBlock, end = std::min(N, begin + kParticleBlock);
      if (nf > 0) {
        model.functional_terms(pf.frame(), t, begin, end, stride, x_prev, pf.ancestors(), pf.x(),
                               pf.y(), terms.data());
        check_terms(terms.data(), nf, stride, pf.weights(), begin, end, t, info);
      }
      for (int64_t n = begin; n < end; ++n) {
        lay.step_quantities(pf.x(), n, stride, terms.data(), n, stride, rec.stats.data() + n, N);
        for (int64_t k = 0; k < lay.nsum; ++k)
          rec.stats[(lay.per_step + k) * N + n] = terms[lay.sum_comp[k] * stride + n];
      }
    });
    if (!whole_path && t >= L)
      estimate(t, t - L, t - L);
    if (t == T - 1 && std::max<int64_t>(0, T - L) <= T - 1)
      estimate(t, std::max<int64_t>(0, T - L), T - 1);
  }
  lay.store_sums(sums.data(), r, info);
  const FilterResult& fr = pf.result();
  r.log_likelihood = fr.log_likelihood;
  timer.finish(r, start);
  r.details = {{"resample_count", fr.resample_count}, {"ess_min", fr.ess_min}};
  return r;
}

} // namespace ssm
