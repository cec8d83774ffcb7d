// EulerStep: see euler_step.h.
#include "sde/euler_step.h"

#include "core/error.h"
#include "sde/lamperti.h"

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <numbers>

namespace ssm {

namespace {
using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
} // namespace

EulerStep::EulerStep(const ssm_model& model, const ModelInfo& info)
    : terms_(model, info), relation_(info.sde->relation), dim_(info.sde->dim),
      lamperti_(in_lamperti_coordinate(info)) {}

void EulerStep::eta(const double* frame, int64_t t, const double* x, int64_t stride, int64_t n,
                    double* out, double* log_s) {
  from_.assign(n, reference_);
  to_.resize(n);
  std::vector<bool> skip(n);
  for (int64_t i = 0; i < n; ++i) {
    to_[i] = x[i * stride];
    skip[i] = !std::isfinite(to_[i]);
  }
  quadrature_.build(terms_, frame, t, from_.data(), to_.data(), n, 1, 0.0, &skip);
  std::vector<double>& points = quadrature_.points();
  for (int64_t i = 0; i < n; ++i)
    points[quadrature_.first(i)] = skip[i] ? 0.0 : to_[i]; // the leading slot: the point itself
  terms_.evaluate(frame, t, points.data(), quadrature_.size());
  for (int64_t i = 0; i < n; ++i) {
    out[i] = log_s[i] = NAN;
    if (skip[i] || quadrature_.outside(i) || quadrature_.crosses_zero(terms_, i))
      continue;
    double sum = 0;
    for (int64_t q = 0; q < quadrature_.node_count(i); ++q)
      sum += quadrature_.weight(i, q) / std::fabs(terms_.coefficient(quadrature_.node(i, q)));
    out[i] = sum;
    log_s[i] = std::log(std::fabs(terms_.coefficient(quadrature_.first(i))));
  }
}

void EulerStep::evaluate_lamperti(const double* frame, int64_t t, const double* x, int64_t P,
                                  const char* who) {
  terms_.evaluate(frame, t, x, P);
  reference_ = NAN;
  for (int64_t p = 0; p < P; ++p) {
    finite_[p] = std::isfinite(x[p]);
    if (!finite_[p])
      continue;
    const double s = terms_.coefficient(p), dt = terms_.dt(p);
    if (s == 0 || !std::isfinite(s)) { // at a zero of the coefficient: no law (density 0 there)
      finite_[p] = 0;
      continue;
    }
    const double b = lamperti_drift(terms_, p).b;
    if (!(std::isfinite(dt) && dt > 0 && std::isfinite(b)))
      throw Error(fmt::format("{}: at t={} the Euler step of {} in Lamperti's coordinate from {} "
                              "has dt {} and drift {} there (the coefficient is {})",
                              who, t, relation_, x[p], dt, b, s));
    if (std::isnan(reference_))
      reference_ = x[p];
    mean_[p] = b * dt; // eta(x) added below
    chol_[p] = std::sqrt(dt);
    log_norm_[p] = -std::log(chol_[p]) - 0.5 * std::log(2 * std::numbers::pi);
  }
  log_s_.resize(P);
  std::vector<double> eta_x(P);
  eta(frame, t, x, 1, P, eta_x.data(), log_s_.data());
  for (int64_t p = 0; p < P; ++p) {
    if (finite_[p] && std::isnan(eta_x[p])) // across a zero of the coefficient: no law
      finite_[p] = 0;
    if (finite_[p])
      mean_[p] += eta_x[p];
  }
}

void EulerStep::targets(const double* frame, int64_t t, const double* y, int64_t stride,
                        int64_t n) {
  target_eta_.resize(n);
  target_log_s_.resize(n);
  eta(frame, t, y, stride, n, target_eta_.data(), target_log_s_.data());
}

void EulerStep::evaluate(const double* frame, int64_t t, const double* x, int64_t P,
                         const char* who) {
  const int d = dim_;
  P_ = P;
  terms_.evaluate(frame, t, x, P);
  mean_.resize(P * d);
  chol_.resize(P * d * d);
  log_norm_.resize(P);
  finite_.assign(P, 1);
  if (lamperti_) {
    evaluate_lamperti(frame, t, x, P, who);
    return;
  }
  auto point = [&](int64_t p) {
    std::string out = d > 1 ? "(" : "";
    for (int c = 0; c < d; ++c)
      out += fmt::format("{}{}", c ? ", " : "", x[c * P + p]);
    return d > 1 ? out + ")" : out;
  };
  for (int64_t p = 0; p < P; ++p) {
    for (int c = 0; c < d; ++c)
      if (!std::isfinite(x[c * P + p]))
        finite_[p] = 0;
    if (!finite_[p])
      continue;
    const double dt = terms_.dt(p);
    Eigen::Map<RowMatrix> L(&chol_[p * d * d], d, d);
    terms_.gamma(p, L.data());
    L *= dt;
    // In place: the factor overwrites the lower triangle, the only part read afterwards.
    Eigen::LLT<Eigen::Ref<RowMatrix>> llt(L);
    bool ok = std::isfinite(dt) && dt > 0 && llt.info() == Eigen::Success;
    double log_det = 0;
    for (int c = 0; c < d && ok; ++c) {
      ok = std::isfinite(L(c, c)) && L(c, c) > 0;
      log_det += std::log(L(c, c));
    }
    if (!ok)
      throw Error(fmt::format("{}: at t={} the Euler step of {} from {} has dt {} and a "
                              "covariance that is not finite and positive definite",
                              who, t, relation_, point(p), dt));
    log_norm_[p] = -log_det - 0.5 * d * std::log(2 * std::numbers::pi);
    for (int c = 0; c < d; ++c) {
      mean_[p * d + c] = x[c * P + p] + terms_.drift(p, c) * dt;
      if (!std::isfinite(mean_[p * d + c]))
        throw Error(fmt::format("{}: at t={} the drift of {} at {} (component {}) is not finite",
                                who, t, relation_, point(p), c));
    }
  }
}

void EulerStep::log_densities(const double* y, int64_t stride, double* out, int64_t target) const {
  const int d = dim_;
  if (lamperti_) {
    if (target < 0 || target >= static_cast<int64_t>(target_eta_.size()))
      throw Error("internal error: an Euler density in Lamperti's coordinate without its target");
    const double u = target_eta_[target], log_s = target_log_s_[target];
    for (int64_t p = 0; p < P_; ++p) {
      const double z = (u - mean_[p]) / chol_[p];
      out[p] = finite_[p] && !std::isnan(u) ? -0.5 * z * z + log_norm_[p] - log_s
                                            : -std::numeric_limits<double>::infinity();
    }
    return;
  }
  if (d == 1) { // the common case, without the triangular solve's loops
    const double y0 = y[0];
    for (int64_t p = 0; p < P_; ++p) {
      const double z = (y0 - mean_[p]) / chol_[p];
      out[p] = finite_[p] ? -0.5 * z * z + log_norm_[p] : -std::numeric_limits<double>::infinity();
    }
    return;
  }
  std::vector<double> z(d);
  for (int64_t p = 0; p < P_; ++p) {
    if (!finite_[p]) {
      out[p] = -std::numeric_limits<double>::infinity();
      continue;
    }
    const double *m = mean(p), *L = chol(p);
    double q = 0;
    for (int c = 0; c < d; ++c) { // L z = y - mean, forward substitution
      double r = y[c * stride] - m[c];
      for (int k = 0; k < c; ++k)
        r -= L[c * d + k] * z[k];
      z[c] = r / L[c * d + c];
      q += z[c] * z[c];
    }
    out[p] = -0.5 * q + log_norm_[p];
  }
}

double EulerStep::draw(int64_t p, const double* z, double* out, int64_t stride) const {
  if (lamperti_)
    throw Error("internal error: an Euler draw in Lamperti's coordinate (sde/lamperti.h draws)");
  const int d = dim_;
  const double *m = mean(p), *L = chol(p);
  double q = 0;
  for (int c = 0; c < d; ++c) {
    double v = m[c];
    for (int k = 0; k <= c; ++k)
      v += L[c * d + k] * z[k];
    out[c * stride] = v;
    q += z[c] * z[c];
  }
  return -0.5 * q + log_norm_[p];
}

} // namespace ssm
