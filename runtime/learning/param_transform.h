// The map between one parameter's constrained value and an unconstrained vector, as Stan's
// constraint transforms: identity, log for a lower or an upper bound, logit for both, the Cholesky
// factor with a log diagonal for cov_matrix, stick-breaking for simplex. Learning methods move on
// the unconstrained side, so that no step leaves the parameter's support.
#pragma once

#include "core/metadata.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ssm {

enum class TransformKind {
  Identity,  // no bound: x = u
  Lower,     // x > a: x = a + exp(u)
  Upper,     // x < b: x = b - exp(u)
  Interval,  // a < x < b: x = a + (b - a) inv_logit(u)
  CovMatrix, // cov_matrix[d]: x = L L^T, L lower triangular with L_ii = exp(u_ii)
  Simplex,   // simplex[K]: K - 1 values by stick-breaking, offset so that u = 0 is uniform
};

// The map for one parameter (a ParamInfo of the model's metadata). Bounds apply elementwise to
// real, vector and matrix parameters; a cov_matrix or simplex is mapped by its structure alone.
// Spans: `x` is the constrained value in the parameter's flat layout (param().size components,
// row-major), `u` the unconstrained vector (size() components).
class ParamTransform {
public:
  // Throws ssm::Error for a type it cannot map or an empty support (lower >= upper).
  explicit ParamTransform(const ParamInfo& p);

  const ParamInfo& param() const { return param_; }
  TransformKind kind() const { return kind_; }
  int64_t size() const { return size_; } // unconstrained components

  // x from u. Throws ssm::Error naming the coordinate when u is not finite, or the component when
  // x overflows (exp of a large u).
  void constrain(std::span<const double> u, std::span<double> x) const;
  // u from x. Throws ssm::Error naming the component when x is not strictly inside the support,
  // when a cov_matrix is not symmetric positive definite, when a simplex has a component <= 0 or
  // does not sum to 1 within 1e-8.
  void unconstrain(std::span<const double> x, std::span<double> u) const;
  // log |det d constrain / du| at u: for cov_matrix and simplex, of the map to the free
  // components of x (the lower triangle, the first K - 1).
  double log_jacobian(std::span<const double> u) const;
  // The chain rule: grad_x = d(log p)/dx at x = constrain(u) (every component of x, as the
  // kernels read them: both triangles of a cov_matrix, all K of a simplex) gives grad_u =
  // d(log p)/du, plus d(log_jacobian)/du when with_log_jacobian.
  void gradient(std::span<const double> u, std::span<const double> grad_x, std::span<double> grad_u,
                bool with_log_jacobian) const;

  // Names of the unconstrained coordinates for reports: `sigma`, `A[0,1]`; the lower triangle of
  // a cov_matrix, row by row (`Q[1,0]`); the first K - 1 components of a simplex (`w[2]`).
  std::vector<std::string> coordinate_names() const;

private:
  ParamInfo param_;
  TransformKind kind_ = TransformKind::Identity;
  double lower_ = 0, upper_ = 0; // the bounds of Lower, Upper, Interval
  int64_t size_ = 0;
  std::vector<std::string> components_; // names of x's components: `Q[0,1]`
};

// The unconstrained value of one component x strictly inside [lower, upper] (an infinite bound:
// that side open), by the elementwise transforms above: log(x - lower), log(upper - x), their
// difference, or x itself.
double unconstrain_within(double lower, double upper, double x);

} // namespace ssm
