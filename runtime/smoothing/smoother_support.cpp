// What the particle smoothers share: the backward kernel's densities and weights, the transition
// density's bound for rejection sampling, and the alias table and index draws. (The statistics
// layout and the frames of past steps, which the exact smoothers use too, are core/results.h.)
#include "core/error.h"
#include "smoothing/smoothers.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace ssm {

void backward_logpdf(const ssm_model& model, const double* frame, int64_t t_next, int64_t N,
                     int64_t stride, int64_t ns, const double* x_prev, const double* x_next,
                     int64_t j, double* bc, double* out) {
  for (int64_t c = 0; c < ns; ++c)
    std::fill(bc + c * stride, bc + c * stride + N, x_next[c * stride + j]);
  model.transition_logpdf(frame, t_next, 0, N, stride, x_prev, nullptr, bc, out);
}

double backward_weights(const double* W, double* l, int64_t N) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < N; ++i)
    if (W[i] > 0 && l[i] > m)
      m = l[i];
  if (!std::isfinite(m))
    return 0;
  double s = 0;
  for (int64_t i = 0; i < N; ++i) {
    const double b = W[i] > 0 && !std::isnan(l[i]) ? W[i] * std::exp(l[i] - m) : 0.0;
    l[i] = b;
    s += b;
  }
  return s;
}

double transition_log_bound(const ssm_model& model, const double* frame, int64_t t, int64_t N,
                            int64_t stride, const double* x_prev, std::vector<double>& scratch) {
  if (!model.transition_log_bound)
    return NAN;
  scratch.resize(N);
  model.transition_log_bound(frame, t, 0, N, stride, x_prev, scratch.data());
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < N; ++i) {
    if (std::isnan(scratch[i]))
      return NAN;
    m = std::max(m, scratch[i]);
  }
  return m;
}

void BoundRange::add(double log_bound) {
  if (!std::isfinite(log_bound)) {
    ++unbounded_steps;
    return;
  }
  lo = std::min(lo, log_bound);
  hi = std::max(hi, log_bound);
}

nlohmann::json BoundRange::json() const {
  nlohmann::json j = {{"steps_without_bound", unbounded_steps}};
  if (lo <= hi) {
    j["min"] = lo;
    j["max"] = hi;
  }
  return j;
}

void AliasTable::build(const double* w, int64_t n) {
  n_ = n;
  columns_.resize(n);
  small_.resize(n + 1); // one slot of slack: the compaction loops write before they test
  large_.resize(n + 1);
  double total = 0;
  for (int64_t i = 0; i < n; ++i)
    total += w[i];
  const double scale = static_cast<double>(n) / total;
  for (int64_t i = 0; i < n; ++i)
    columns_[i] = {w[i] * scale, i};
  // The columns below 1 (small) and the others (large), in index order.
  int64_t small_end = 0, large_end = 0;
  for (int64_t i = 0; i < n; ++i) {
    small_[small_end] = i;
    small_end += columns_[i].prob < 1;
  }
  for (int64_t i = 0; i < n; ++i) {
    large_[large_end] = i;
    large_end += !(columns_[i].prob < 1);
  }
  // Each small column takes its deficit from the current large one; a large column that drops
  // below 1 replaces the small one just filled, to be filled in turn.
  int64_t small = 0, large = 0;
  while (small < small_end && large < large_end) {
    const int64_t s = small_[small], l = large_[large];
    columns_[s].alias = l;
    columns_[l].prob -= 1 - columns_[s].prob;
    const bool drops = columns_[l].prob < 1;
    small_[small] = drops ? l : s;
    small += !drops;
    large += drops;
  }
  // Rounding leaves columns that are full up to an ulp: they keep themselves. A zero-weight
  // column always has an alias, since its deficit of 1 exceeds any rounding.
  for (int64_t k = large; k < large_end; ++k)
    columns_[large_[k]].prob = 1;
  for (int64_t k = small; k < small_end; ++k)
    columns_[small_[k]].prob = 1;
}

void throw_bound_exceeded(double log_density, double log_bound, int64_t t) {
  throw Error(fmt::format("smooth: at t={} the transition log-density ({}) exceeds the log of the "
                          "upper bound the compiler derived for it ({}), so rejection sampling "
                          "would be biased. This is a bug in ssmc's density analysis: please "
                          "report it with the model. --backward exact does not use the bound",
                          t, log_density, log_bound));
}

int64_t draw_index(const std::vector<double>& cumulative, double u) {
  // upper_bound skips zero-weight entries; u < 1 keeps the target below the total.
  const double target = u * cumulative.back();
  const auto it = std::upper_bound(cumulative.begin(), cumulative.end(), target);
  return std::min<int64_t>(it - cumulative.begin(), static_cast<int64_t>(cumulative.size()) - 1);
}

std::vector<StepPoints> trajectory_steps(const std::vector<int64_t>& J, int64_t T, int64_t M,
                                         int64_t ns, int64_t stride,
                                         const std::function<const double*(int64_t)>& x_at) {
  std::vector<StepPoints> steps(T);
  for (int64_t t = 0; t < T; ++t) {
    StepPoints& s = steps[t];
    s.count = M;
    s.weight.assign(M, 1.0 / static_cast<double>(M));
    s.cur.resize(ns * M);
    s.prev.assign(ns * M, NAN);
    const double* cur = x_at(t);
    const double* prev = t > 0 ? x_at(t - 1) : nullptr;
    for (int64_t c = 0; c < ns; ++c)
      for (int64_t m = 0; m < M; ++m) {
        s.cur[c * M + m] = cur[c * stride + J[t * M + m]];
        if (prev)
          s.prev[c * M + m] = prev[c * stride + J[(t - 1) * M + m]];
      }
  }
  return steps;
}

} // namespace ssm
