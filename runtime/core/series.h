// Several independent series in one data file (the `series` column, csv.h): a method runs on each
// series from its own initial distribution, with its own seed, and the results combine as the
// series are independent: log-likelihoods and `sum_t` functionals add (their standard errors in
// quadrature), per-step outputs follow one another and carry the layout, so that the CSVs name
// each row's series. With one series these call the method once, exactly as before.
#pragma once

#include "core/method_registry.h"
#include "core/results.h"

#include <cstdint>

namespace ssm {

// The seed of series k: run.seed for the first, so a file of one series keeps its results.
uint64_t series_seed(uint64_t seed, int64_t k);

FilterResult filter_each_series(const Method& method, const MethodRun& run);
SmoothResult smooth_each_series(const Method& method, const MethodRun& run);
// Folds the next series' smoothing result into `total` (what smooth_each_series does between
// series; the caller sets total.series): for a method that fits all series at once.
void add_series_result(SmoothResult& total, const SmoothResult& next);
Decoding decode_each_series(const Method& method, const MethodRun& run);

} // namespace ssm
