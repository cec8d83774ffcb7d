// What the particle smoothers share: the frames of past steps, the layout of the statistics they
// carry per particle (the additive functionals' running sums, then per time step the state, its
// square and the per-t functionals), and turning weighted sums of those into a SmoothResult.
#include "smoothers.h"
#include "ssm/error.h"
#include "ssm/frame.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace ssm {

std::vector<double> all_frames(const ModelInfo& info, const std::vector<double>& fixed,
                               const ObsData& data) {
  Frame frame(info, fixed);
  std::vector<double> out(static_cast<size_t>(info.n_frame * data.T));
  for (int64_t t = 0; t < data.T; ++t) {
    const double* f = frame.step(data.inputs_at(t), t > 0 ? data.at(t - 1) : nullptr);
    std::copy(f, f + info.n_frame, out.begin() + t * info.n_frame);
  }
  return out;
}

SmoothResult make_result(const ModelInfo& info, SmoothMethod method, int64_t T, int64_t particles,
                         bool marginals) {
  SmoothResult r;
  r.method = method;
  r.T = T;
  r.n_state = info.n_state;
  r.particles = particles;
  r.has_marginals = marginals;
  if (marginals) {
    r.mean.assign(T * info.n_state, 0.0);
    r.var.assign(T * info.n_state, 0.0);
  }
  for (const FunctionalInfo& f : info.functionals) {
    FunctionalEstimate e;
    e.name = f.name;
    e.sum = f.sum;
    e.size = f.size;
    if (f.sum)
      e.total.assign(f.size, 0.0);
    else if (marginals)
      e.per_t.assign(T * f.size, 0.0);
    r.functionals.push_back(std::move(e));
  }
  return r;
}

StatLayout::StatLayout(const ModelInfo& info, bool with_marginals)
    : ns(info.n_state), nf(info.n_functional), marginals(with_marginals) {
  for (const FunctionalInfo& f : info.functionals)
    for (int64_t k = 0; k < f.size; ++k)
      (f.sum ? sum_comp : per_t_comp).push_back(f.offset + k);
  nsum = static_cast<int64_t>(sum_comp.size());
  per_step = marginals ? 2 * ns + static_cast<int64_t>(per_t_comp.size()) : 0;
}

void StatLayout::step_quantities(const double* x, int64_t n, int64_t stride, const double* terms,
                                 int64_t term_index, int64_t term_stride, double* out,
                                 int64_t out_stride) const {
  if (!marginals)
    return;
  for (int64_t c = 0; c < ns; ++c) {
    const double v = x[c * stride + n];
    out[c * out_stride] = v;
    out[(ns + c) * out_stride] = v * v;
  }
  for (size_t k = 0; k < per_t_comp.size(); ++k)
    out[(2 * ns + static_cast<int64_t>(k)) * out_stride] =
        terms[per_t_comp[k] * term_stride + term_index];
}

void StatLayout::store_estimates(int64_t t, const double* q, SmoothResult& r,
                                 const ModelInfo& info) const {
  for (int64_t c = 0; c < ns; ++c) {
    const double m = q[c];
    r.mean[t * ns + c] = m;
    r.var[t * ns + c] = std::max(0.0, q[ns + c] - m * m);
  }
  int64_t k = 2 * ns;
  for (size_t i = 0; i < info.functionals.size(); ++i) {
    const FunctionalInfo& f = info.functionals[i];
    if (f.sum)
      continue;
    for (int64_t j = 0; j < f.size; ++j)
      r.functionals[i].per_t[t * f.size + j] = q[k++];
  }
}

void StatLayout::store_sums(const double* s, SmoothResult& r, const ModelInfo& info) const {
  int64_t k = 0;
  for (size_t i = 0; i < info.functionals.size(); ++i) {
    const FunctionalInfo& f = info.functionals[i];
    if (!f.sum)
      continue;
    for (int64_t j = 0; j < f.size; ++j)
      r.functionals[i].total[j] = s[k++];
  }
}

void check_terms(const double* terms, int64_t nf, int64_t stride, const double* w, int64_t begin,
                 int64_t end, int64_t t, const ModelInfo& info) {
  for (int64_t k = 0; k < nf; ++k)
    for (int64_t n = begin; n < end; ++n)
      if (w[n] > 0 && !std::isfinite(terms[k * stride + n])) {
        std::string name;
        for (const FunctionalInfo& f : info.functionals)
          if (k >= f.offset && k < f.offset + f.size)
            name = f.name;
        throw Error(fmt::format(
            "smooth: functional '{}' has a non-finite term at t={} ({}){}", name, t,
            terms[k * stride + n],
            t == 0 ? "; a term that reads x[t-1] must be guarded at t = 0: `t == 0 ? ... : ...`"
                   : ""));
      }
}

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

} // namespace ssm
