// Stan's constraint transforms for one parameter (the "Constraint Transforms" chapter of the Stan
// reference manual): the maps, their inverses, log-Jacobians and gradient chain rules. Each kind
// has its own group of functions below; ParamTransform dispatches on the kind.
#include "learning/param_transform.h"

#include "core/error.h"

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ssm {
namespace {

using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixMap = Eigen::Map<RowMatrix>;
using ConstMatrixMap = Eigen::Map<const RowMatrix>;

double inv_logit(double u) {
  if (u >= 0)
    return 1 / (1 + std::exp(-u));
  const double e = std::exp(u);
  return e / (1 + e);
}

// log(inv_logit(u)) without cancellation for large |u|.
double log_inv_logit(double u) {
  return u >= 0 ? -std::log1p(std::exp(-u)) : u - std::log1p(std::exp(u));
}

// ---- elementwise bounds: Identity, Lower, Upper, Interval ----

bool bounded_below(TransformKind kind) {
  return kind == TransformKind::Lower || kind == TransformKind::Interval;
}
bool bounded_above(TransformKind kind) {
  return kind == TransformKind::Upper || kind == TransformKind::Interval;
}

// One component: x from u, and dx/du at u.
double scalar_constrain(TransformKind kind, double a, double b, double u) {
  switch (kind) {
  case TransformKind::Lower:
    return a + std::exp(u);
  case TransformKind::Upper:
    return b - std::exp(u);
  case TransformKind::Interval: // from the nearer bound, so that x keeps its digits near b too
    return u > 0 ? b - (b - a) * inv_logit(-u) : a + (b - a) * inv_logit(u);
  default:
    return u;
  }
}

double scalar_derivative(TransformKind kind, double a, double b, double u) {
  switch (kind) {
  case TransformKind::Lower:
    return std::exp(u);
  case TransformKind::Upper:
    return -std::exp(u);
  case TransformKind::Interval: {
    const double s = inv_logit(u);
    return (b - a) * s * (1 - s);
  }
  default:
    return 1;
  }
}

double scalar_log_jacobian(TransformKind kind, double a, double b, double u) {
  switch (kind) {
  case TransformKind::Lower:
  case TransformKind::Upper:
    return u;
  case TransformKind::Interval:
    return std::log(b - a) + log_inv_logit(u) + log_inv_logit(-u);
  default:
    return 0;
  }
}

// d(scalar_log_jacobian)/du.
double scalar_log_jacobian_derivative(TransformKind kind, double u) {
  switch (kind) {
  case TransformKind::Lower:
  case TransformKind::Upper:
    return 1;
  case TransformKind::Interval:
    return 1 - 2 * inv_logit(u);
  default:
    return 0;
  }
}

// The inverse, for x strictly inside the support (checked by the caller).
double scalar_unconstrain(TransformKind kind, double a, double b, double x) {
  switch (kind) {
  case TransformKind::Lower:
    return std::log(x - a);
  case TransformKind::Upper:
    return std::log(b - x);
  case TransformKind::Interval:
    return std::log(x - a) - std::log(b - x);
  default:
    return x;
  }
}

// ---- cov_matrix[d]: u is the lower triangle of L, row by row, with log L_ii on the diagonal ----

RowMatrix cholesky_factor(std::span<const double> u, int64_t d) {
  RowMatrix L = RowMatrix::Zero(d, d);
  int64_t k = 0;
  for (int64_t i = 0; i < d; ++i) {
    for (int64_t j = 0; j < i; ++j)
      L(i, j) = u[k++];
    L(i, i) = std::exp(u[k++]);
  }
  return L;
}

void cov_constrain(std::span<const double> u, int64_t d, std::span<double> x) {
  const RowMatrix L = cholesky_factor(u, d);
  MatrixMap sigma(x.data(), d, d);
  sigma.triangularView<Eigen::Lower>() = L * L.transpose();
  // Mirrored rather than computed twice: the kernels' checks want it exactly symmetric.
  sigma.triangularView<Eigen::StrictlyUpper>() = sigma.transpose();
}

// Sigma = L L^T is the map from the lower triangle of L (d(d+1)/2 values) to that of Sigma, with
// log |det| = d log 2 + sum_i (d - i) log L_ii (i from 0); L_ii = exp(u_ii) adds u_ii.
double cov_log_jacobian(std::span<const double> u, int64_t d) {
  double lj = static_cast<double>(d) * std::log(2.0);
  int64_t k = 0;
  for (int64_t i = 0; i < d; ++i) {
    k += i; // past the row's off-diagonal entries
    lj += static_cast<double>(d - i + 1) * u[k++];
  }
  return lj;
}

// With G = d(log p)/d(Sigma) over all d^2 entries, d(log p)/dL = (G + G^T) L (lower triangle).
void cov_gradient(std::span<const double> u, int64_t d, std::span<const double> grad_x,
                  std::span<double> grad_u, bool with_log_jacobian) {
  const RowMatrix L = cholesky_factor(u, d);
  const ConstMatrixMap G(grad_x.data(), d, d);
  const RowMatrix grad_L = (G + G.transpose()) * L;
  int64_t k = 0;
  for (int64_t i = 0; i < d; ++i) {
    for (int64_t j = 0; j < i; ++j)
      grad_u[k++] = grad_L(i, j);
    grad_u[k++] =
        grad_L(i, i) * L(i, i) + (with_log_jacobian ? static_cast<double>(d - i + 1) : 0.0);
  }
}

void cov_unconstrain(std::span<const double> x, int64_t d, std::span<double> u,
                     const std::string& declared, const std::vector<std::string>& names) {
  const ConstMatrixMap sigma(x.data(), d, d);
  const double scale = std::max(1.0, sigma.cwiseAbs().maxCoeff());
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = 0; j < i; ++j)
      if (std::abs(sigma(i, j) - sigma(j, i)) > 1e-8 * scale)
        throw Error(fmt::format("{} must be symmetric positive definite, but '{}' = {} and '{}' = "
                                "{}",
                                declared, names[i * d + j], sigma(i, j), names[j * d + i],
                                sigma(j, i)));
  const Eigen::LLT<RowMatrix> llt(sigma); // reads the lower triangle
  if (llt.info() != Eigen::Success)
    throw Error(declared + " must be symmetric positive definite, but its Cholesky "
                           "factorisation fails (an eigenvalue is <= 0)");
  const RowMatrix L = llt.matrixL();
  int64_t k = 0;
  for (int64_t i = 0; i < d; ++i) {
    for (int64_t j = 0; j < i; ++j)
      u[k++] = L(i, j);
    u[k++] = std::log(L(i, i));
  }
}

// ---- simplex[K]: z_k = inv_logit(u_k - log(K - 1 - k)) of the stick left, k < K - 1 ----

double stick_offset(int64_t K, int64_t k) {
  return std::log(static_cast<double>(K - 1 - k));
}

// The fractions z_k and the stick left before each break (stick[0] = 1).
void simplex_sticks(std::span<const double> u, int64_t K, std::vector<double>& z,
                    std::vector<double>& stick) {
  z.resize(K - 1);
  stick.resize(K);
  stick[0] = 1;
  for (int64_t k = 0; k + 1 < K; ++k) {
    const double v = u[k] - stick_offset(K, k);
    z[k] = inv_logit(v);
    stick[k + 1] = stick[k] * inv_logit(-v); // 1 - z_k without its cancellation
  }
}

void simplex_constrain(std::span<const double> u, int64_t K, std::span<double> x) {
  std::vector<double> z, stick;
  simplex_sticks(u, K, z, stick);
  for (int64_t k = 0; k + 1 < K; ++k)
    x[k] = stick[k] * z[k];
  x[K - 1] = stick[K - 1];
}

// x_k = stick_k z_k: log |det| = sum_k log z_k + log(1 - z_k) + log stick_k, in logs throughout
// (the stick itself underflows for extreme u).
double simplex_log_jacobian(std::span<const double> u, int64_t K) {
  double lj = 0, log_stick = 0;
  for (int64_t k = 0; k + 1 < K; ++k) {
    const double v = u[k] - stick_offset(K, k);
    lj += log_inv_logit(v) + log_inv_logit(-v) + log_stick;
    log_stick += log_inv_logit(-v);
  }
  return lj;
}

// Reverse mode through the breaks, last first. d(log_jacobian)/du_k = 1 - (K - k) z_k: 1 - 2 z_k
// from z_k (1 - z_k), and -z_k from each later log stick.
void simplex_gradient(std::span<const double> u, int64_t K, std::span<const double> grad_x,
                      std::span<double> grad_u, bool with_log_jacobian) {
  std::vector<double> z, stick;
  simplex_sticks(u, K, z, stick);
  double adj_stick = grad_x[K - 1]; // d(log p)/d(stick left after break k)
  for (int64_t k = K - 2; k >= 0; --k) {
    const double adj_z = stick[k] * (grad_x[k] - adj_stick);
    adj_stick = grad_x[k] * z[k] + adj_stick * (1 - z[k]);
    grad_u[k] = adj_z * z[k] * (1 - z[k]);
    if (with_log_jacobian)
      grad_u[k] += 1 - static_cast<double>(K - k) * z[k];
  }
}

// z_k = x_k / (x_k + the components after k): those sums are taken from the right, so that small
// components keep their digits (1 minus the sum before k would cancel).
void simplex_unconstrain(std::span<const double> x, int64_t K, std::span<double> u,
                         const std::string& declared, const std::vector<std::string>& names) {
  double total = 0;
  for (int64_t k = 0; k < K; ++k) {
    if (x[k] <= 0)
      throw Error(fmt::format("{} must have positive components to be mapped to the unconstrained "
                              "space, but '{}' = {}",
                              declared, names[k], x[k]));
    total += x[k];
  }
  if (std::abs(total - 1) > 1e-8)
    throw Error(fmt::format("{} must sum to 1 (within 1e-8), but its components sum to {}",
                            declared, total));
  double after = 0;
  for (int64_t k = K - 1; k-- > 0;) {
    after += x[k + 1];
    u[k] = std::log(x[k]) - std::log(after) + stick_offset(K, k);
  }
}

std::string support_text(const ParamInfo& p, double a, double b, TransformKind kind) {
  return fmt::format("({}, {})", bounded_below(kind) ? fmt::format("{}", a) : "-inf",
                     bounded_above(kind) ? fmt::format("{}", b) : "inf") +
         (p.prior.empty() ? std::string(", its declared bounds")
                          : ", the support of its prior " + p.prior);
}

} // namespace

ParamTransform::ParamTransform(const ParamInfo& p)
    : param_(p), size_(p.size), components_(column_names(p.name, p.shape)) {
  const std::string declared = fmt::format("parameter '{}' ({})", p.name, type_string(p));
  if (p.type == "cov_matrix") {
    if (p.shape.size() != 2 || p.shape[0] != p.shape[1] || p.shape[0] < 1)
      throw Error(declared + ": a cov_matrix must be square");
    kind_ = TransformKind::CovMatrix;
    size_ = p.shape[0] * (p.shape[0] + 1) / 2;
    return;
  }
  if (p.type == "simplex") {
    if (p.shape.size() != 1 || p.shape[0] < 1)
      throw Error(declared + ": a simplex must be a vector");
    kind_ = TransformKind::Simplex;
    size_ = p.shape[0] - 1;
    return;
  }
  if (p.type != "real" && p.type != "vector" && p.type != "matrix")
    throw Error(declared + ": only real, vector, matrix, cov_matrix and simplex parameters map "
                           "to an unconstrained space");
  const bool has_a = p.lower && std::isfinite(*p.lower);
  const bool has_b = p.upper && std::isfinite(*p.upper);
  lower_ = has_a ? *p.lower : 0;
  upper_ = has_b ? *p.upper : 0;
  kind_ = has_a && has_b ? TransformKind::Interval
          : has_a        ? TransformKind::Lower
          : has_b        ? TransformKind::Upper
                         : TransformKind::Identity;
  if (has_a && has_b && !(lower_ < upper_))
    throw Error(fmt::format("{}: its support ({}, {}) is empty", declared, lower_, upper_));
}

void ParamTransform::constrain(std::span<const double> u, std::span<double> x) const {
  for (int64_t k = 0; k < size_; ++k)
    if (!std::isfinite(u[k]))
      throw Error(fmt::format("parameter '{}': its unconstrained coordinate '{}' is {}",
                              param_.name, coordinate_names()[k], u[k]));
  const int64_t n = param_.size;
  if (kind_ == TransformKind::CovMatrix)
    cov_constrain(u, param_.shape[0], x);
  else if (kind_ == TransformKind::Simplex)
    simplex_constrain(u, n, x);
  else
    for (int64_t k = 0; k < n; ++k)
      x[k] = scalar_constrain(kind_, lower_, upper_, u[k]);
  for (int64_t k = 0; k < n; ++k)
    if (!std::isfinite(x[k]))
      throw Error(fmt::format("parameter '{}' overflows: '{}' = {} from the unconstrained point",
                              param_.name, components_[k], x[k]));
}

void ParamTransform::unconstrain(std::span<const double> x, std::span<double> u) const {
  const std::string declared = fmt::format("parameter '{}' ({})", param_.name, type_string(param_));
  const int64_t n = param_.size;
  for (int64_t k = 0; k < n; ++k)
    if (!std::isfinite(x[k]))
      throw Error(fmt::format("parameter '{}' = {}: values must be finite", components_[k], x[k]));
  if (kind_ == TransformKind::CovMatrix)
    return cov_unconstrain(x, param_.shape[0], u, declared, components_);
  if (kind_ == TransformKind::Simplex)
    return simplex_unconstrain(x, n, u, declared, components_);
  for (int64_t k = 0; k < n; ++k) {
    const double v = x[k];
    const bool inside =
        (!bounded_below(kind_) || v > lower_) && (!bounded_above(kind_) || v < upper_);
    if (!inside)
      throw Error(fmt::format("parameter '{}' = {} is not inside {}: it has no unconstrained "
                              "value",
                              components_[k], v, support_text(param_, lower_, upper_, kind_)));
    u[k] = scalar_unconstrain(kind_, lower_, upper_, v);
  }
}

double ParamTransform::log_jacobian(std::span<const double> u) const {
  if (kind_ == TransformKind::CovMatrix)
    return cov_log_jacobian(u, param_.shape[0]);
  if (kind_ == TransformKind::Simplex)
    return simplex_log_jacobian(u, param_.size);
  double lj = 0;
  for (int64_t k = 0; k < size_; ++k)
    lj += scalar_log_jacobian(kind_, lower_, upper_, u[k]);
  return lj;
}

void ParamTransform::gradient(std::span<const double> u, std::span<const double> grad_x,
                              std::span<double> grad_u, bool with_log_jacobian) const {
  if (kind_ == TransformKind::CovMatrix)
    return cov_gradient(u, param_.shape[0], grad_x, grad_u, with_log_jacobian);
  if (kind_ == TransformKind::Simplex)
    return simplex_gradient(u, param_.size, grad_x, grad_u, with_log_jacobian);
  for (int64_t k = 0; k < size_; ++k) {
    grad_u[k] = grad_x[k] * scalar_derivative(kind_, lower_, upper_, u[k]);
    if (with_log_jacobian)
      grad_u[k] += scalar_log_jacobian_derivative(kind_, u[k]);
  }
}

std::vector<std::string> ParamTransform::coordinate_names() const {
  if (kind_ == TransformKind::CovMatrix) {
    const int64_t d = param_.shape[0];
    std::vector<std::string> names;
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = 0; j <= i; ++j)
        names.push_back(components_[i * d + j]);
    return names;
  }
  return {components_.begin(), components_.begin() + size_};
}

double unconstrain_within(double lower, double upper, double x) {
  const bool below = lower > -INFINITY, above = upper < INFINITY;
  const TransformKind kind = below && above ? TransformKind::Interval
                             : below        ? TransformKind::Lower
                             : above        ? TransformKind::Upper
                                            : TransformKind::Identity;
  return scalar_unconstrain(kind, lower, upper, x);
}

} // namespace ssm
