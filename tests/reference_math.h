// Hand computations the unit and end-to-end tests check built-in functions against.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace ssm::test {

// log(sum exp(v)), the largest element subtracted first so that nothing overflows.
inline double reference_log_sum_exp(const std::vector<double>& v) {
  const double m = *std::max_element(v.begin(), v.end());
  double s = 0;
  for (double x : v)
    s += std::exp(x - m);
  return m + std::log(s);
}

// exp(v_i) / sum exp(v), likewise (exp(v_i - log_sum_exp) would carry the rounding of the
// log-sum, 1e-13 at 1000).
inline std::vector<double> reference_softmax(const std::vector<double>& v) {
  const double m = *std::max_element(v.begin(), v.end());
  double s = 0;
  for (double x : v)
    s += std::exp(x - m);
  std::vector<double> out;
  for (double x : v)
    out.push_back(std::exp(x - m) / s);
  return out;
}

} // namespace ssm::test
