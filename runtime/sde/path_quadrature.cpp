// PathQuadrature: see path_quadrature.h.
#include "sde/path_quadrature.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace ssm {

namespace {

// 8-point Gauss-Legendre on [-1, 1]: exact for polynomials of degree 15 on each panel.
constexpr double kNodes[] = {-0.9602898564975363, -0.7966664774136267, -0.5255324099163290,
                             -0.1834346424956498, 0.1834346424956498,  0.5255324099163290,
                             0.7966664774136267,  0.9602898564975363};
constexpr double kWeights[] = {0.1012285362903763, 0.2223810344533745, 0.3137066458778873,
                               0.3626837833783620, 0.3626837833783620, 0.3137066458778873,
                               0.2223810344533745, 0.1012285362903763};
constexpr int kNodesPerPanel = 8;
constexpr int kMaxPanels = 1000;
constexpr int kPilot = 5;
constexpr int kCells = kPilot - 1;

int panels(double lamperti_units) {
  return static_cast<int>(std::clamp(std::ceil(lamperti_units), 1.0, double(kMaxPanels)));
}

} // namespace

void PathQuadrature::build(DiffusionTerms& terms, const double* frame, int64_t t, const double* a,
                           const double* b, int64_t n, int leading, double scale,
                           const std::vector<bool>* skip) {
  leading_ = leading;
  outside_.assign(n, 0);
  sign_.assign(n, 0.0);
  // Panels per cell of [a, b] split in kCells: even panels live in cell 0 alone.
  std::vector<std::array<int, kCells>> cells(n, std::array<int, kCells>{});
  const auto skipped = [&](int64_t i) { return skip && (*skip)[i]; };
  if (scale > 0) {
    for (int64_t i = 0; i < n; ++i)
      if (!skipped(i)) {
        cells[i][0] = panels(std::fabs(b[i] - a[i]) / scale);
        sign_[i] = 1;
      }
  } else {
    points_.resize(static_cast<size_t>(n * kPilot));
    for (int64_t i = 0; i < n; ++i)
      for (int k = 0; k < kPilot; ++k)
        points_[i * kPilot + k] = skipped(i) ? 0.0 : a[i] + (b[i] - a[i]) * k / double(kCells);
    terms.evaluate(frame, t, points_.data(), n * kPilot);
    for (int64_t i = 0; i < n; ++i) {
      if (skipped(i))
        continue;
      std::array<double, kPilot> s{};
      const double s0 = terms.coefficient(i * kPilot);
      for (int k = 0; k < kPilot; ++k) {
        const double v = terms.coefficient(i * kPilot + k);
        if (!keeps_sign(v, s0))
          outside_[i] = 1;
        s[k] = std::fabs(v);
      }
      if (outside_[i])
        continue;
      sign_[i] = s0 > 0 ? 1.0 : -1.0;
      // A cell's Lamperti width, by the larger 1 / |s| at its ends.
      const double cell = std::fabs(b[i] - a[i]) / kCells;
      double total = 0;
      for (int k = 0; k < kCells; ++k) {
        const double width = cell / std::min(s[k], s[k + 1]);
        total += width;
        cells[i][k] = std::clamp(static_cast<int>(std::ceil(width)), 1, kMaxPanels / kCells);
      }
      const auto [lo, hi] = std::minmax_element(s.begin(), s.end());
      if (*hi <= 2 * *lo) // even panels: grading would only add nodes
        cells[i] = {panels(total), 0, 0, 0};
    }
  }
  first_.assign(n + 1, 0);
  for (int64_t i = 0; i < n; ++i) {
    int count = 0;
    for (int c : cells[i])
      count += c;
    first_[i + 1] =
        first_[i] + (skipped(i) || outside_[i] ? leading : leading + count * kNodesPerPanel);
  }
  points_.assign(first_[n], 0.0);
  weights_.assign(first_[n], 0.0);
  for (int64_t i = 0; i < n; ++i) {
    if (skipped(i) || outside_[i])
      continue;
    const bool even = cells[i][1] == 0;
    int64_t q = 0;
    for (int k = 0; k < kCells; ++k) {
      const double span = (b[i] - a[i]) / (even ? 1.0 : kCells);
      const double start = a[i] + (even ? 0.0 : span * k);
      const int m = cells[i][k];
      const double width = m > 0 ? span / m : 0.0;
      for (int j = 0; j < m; ++j)
        for (int g = 0; g < kNodesPerPanel; ++g, ++q) {
          const int64_t e = node(i, q);
          points_[e] = start + width * (j + 0.5 * (kNodes[g] + 1.0));
          weights_[e] = kWeights[g] * 0.5 * width;
        }
    }
  }
}

bool PathQuadrature::crosses_zero(const DiffusionTerms& terms, int64_t i) const {
  for (int64_t e = first_[i]; e < first_[i + 1]; ++e)
    if (!keeps_sign(terms.coefficient(e), sign_[i]))
      return true;
  return false;
}

} // namespace ssm
