// The shared results: the filter CSV and the smoothing statistics' layout (core/results.h).
#include "core/results.h"
#include "core/error.h"
#include "core/frame.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ssm {

std::string filter_csv(const ModelInfo& info, const FilterResult& r) {
  std::vector<std::string> cols = state_columns(info);
  fmt::memory_buffer out;
  fmt::format_to(std::back_inserter(out), "{}{}", series_header(r.series), info.step);
  for (const auto& c : cols)
    fmt::format_to(std::back_inserter(out), ",mean_{},var_{}", c, c);
  const bool ess = !r.ess.empty(); // exact filters have none
  fmt::format_to(std::back_inserter(out), "{},loglik_increment\n", ess ? ",ess" : "");
  const int64_t ns = r.n_state, shown = static_cast<int64_t>(cols.size());
  for (int64_t t = 0; t < r.T; ++t) {
    fmt::format_to(std::back_inserter(out), "{}", step_cells(r.series, t));
    for (int64_t c = 0; c < shown; ++c)
      fmt::format_to(std::back_inserter(out), ",{},{}", format_double(r.mean[t * ns + c]),
                     format_double(r.var[t * ns + c]));
    if (ess)
      fmt::format_to(std::back_inserter(out), ",{}", format_double(r.ess[t]));
    fmt::format_to(std::back_inserter(out), ",{}\n", format_double(r.loglik_increment[t]));
  }
  return fmt::to_string(out);
}

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
} // namespace ssm
