// Running a method on each series of the data and combining the results: see series.h.
#include "core/series.h"

#include <algorithm>
#include <cmath>

namespace ssm {

namespace {

template <class T> void append(std::vector<T>& to, const std::vector<T>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

// Runs `entry` on each series with its own data and seed; combine(total, one) folds the results.
template <class Result, class Entry, class Combine>
Result each_series(const MethodRun& run, const Entry& entry, const Combine& combine) {
  const ObsData& data = *run.data;
  if (data.series.start.empty())
    return entry(run);
  Result total;
  for (int64_t k = 0; k < data.series.count(); ++k) {
    const ObsData one = data.one_series(k);
    MethodRun at = run;
    at.data = &one;
    at.seed = series_seed(run.seed, k);
    Result r = entry(at);
    if (k == 0)
      total = std::move(r);
    else
      combine(total, r);
  }
  total.series = data.series;
  return total;
}

} // namespace

uint64_t series_seed(uint64_t seed, int64_t k) {
  return seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(k);
}

FilterResult filter_each_series(const Method& method, const MethodRun& run) {
  return each_series<FilterResult>(run, method.filter, [](FilterResult& t, const FilterResult& r) {
    t.log_likelihood += r.log_likelihood;
    t.T += r.T;
    t.resample_count += r.resample_count;
    t.ess_min = std::min(t.ess_min, r.ess_min);
    t.elapsed_s += r.elapsed_s;
    append(t.mean, r.mean);
    append(t.var, r.var);
    append(t.ess, r.ess);
    append(t.loglik_increment, r.loglik_increment);
    append(t.resampled, r.resampled);
  });
}

SmoothResult smooth_each_series(const Method& method, const MethodRun& run) {
  return each_series<SmoothResult>(run, method.smooth, add_series_result);
}

void add_series_result(SmoothResult& t, const SmoothResult& r) {
  t.T += r.T;
  t.log_likelihood += r.log_likelihood;
  append(t.mean, r.mean);
  append(t.var, r.var);
  append(t.lag_one_cov, r.lag_one_cov); // block 0 of each series is zero: no covariance across
  for (size_t f = 0; f < t.functionals.size(); ++f) {
    FunctionalEstimate& a = t.functionals[f];
    const FunctionalEstimate& b = r.functionals[f];
    for (size_t i = 0; i < a.total.size(); ++i)
      a.total[i] += b.total[i];
    append(a.per_t, b.per_t);
    for (size_t i = 0; i < a.se.size() && i < b.se.size(); ++i)
      a.se[i] = std::hypot(a.se[i], b.se[i]);
  }
  t.filter_s += r.filter_s;
  t.smooth_s += r.smooth_s;
}

Decoding decode_each_series(const Method& method, const MethodRun& run) {
  return each_series<Decoding>(run, method.decode, [](Decoding& t, const Decoding& r) {
    append(t.path, r.path);
    t.log_joint += r.log_joint;
    t.log_likelihood += r.log_likelihood;
    append(t.probability, r.probability);
  });
}

} // namespace ssm
