// Gauss-Legendre nodes between pairs of points (a, b) of a scalar SDE's path, for integrals in x
// of its terms (the General Poisson estimator's int a / s^2 and Lamperti's coordinate int 1 / |s|,
// sde/lamperti.h): panels of about one Lamperti unit each, 8 nodes per panel. With a constant
// coefficient s the panels are even, |b - a| / s of them; with one that reads the path they are
// graded by |s| at 5 pilot points of [a, b] (one extra evaluation), where it varies by more than
// a factor 2. An interval over which the coefficient is 0, not finite or changes sign at a pilot
// point is `outside`: the path does not cross a zero of its coefficient.
#pragma once

#include "sde/diffusion_terms.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace ssm {

// Whether a value s of the coefficient is finite, not 0 and of the sign `sign` has (that at an
// interval's start): where Lamperti's coordinate is defined along the path.
inline bool keeps_sign(double s, double sign) {
  return std::isfinite(s) && s != 0 && (s > 0) == (sign > 0);
}

class PathQuadrature {
public:
  // Nodes for the n intervals [a[i], b[i]] (none for those in `skip`, if given): interval i's
  // points are `leading` slots for the caller's own points (weight 0), then its nodes, from
  // first(i) to first(i + 1). scale > 0: a constant coefficient |s| = scale (no pilot).
  void build(DiffusionTerms& terms, const double* frame, int64_t t, const double* a,
             const double* b, int64_t n, int leading, double scale,
             const std::vector<bool>* skip = nullptr);

  int64_t first(int64_t i) const { return first_[i]; }
  int64_t size() const { return first_.empty() ? 0 : first_.back(); }
  int64_t node_count(int64_t i) const { return first_[i + 1] - first_[i] - leading_; }
  int64_t node(int64_t i, int64_t q) const { return first_[i] + leading_ + q; } // its point
  double weight(int64_t i, int64_t q) const { return weights_[node(i, q)]; }
  bool outside(int64_t i) const { return outside_[i] != 0; }
  double sign(int64_t i) const { return sign_[i]; } // of s at a[i] (0: outside, skipped)
  // After the caller's evaluation of points() by `terms`: whether the coefficient fails
  // keeps_sign at one of interval i's points, its leading slots included (a zero between the
  // pilot points).
  bool crosses_zero(const DiffusionTerms& terms, int64_t i) const;
  std::vector<double>& points() { return points_; } // the leading slots are the caller's

private:
  std::vector<int64_t> first_;
  std::vector<double> points_, weights_, sign_;
  std::vector<char> outside_;
  int leading_ = 0;
};

} // namespace ssm
