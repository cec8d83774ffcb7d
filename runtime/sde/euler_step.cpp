// EulerStep: see euler_step.h.
#include "sde/euler_step.h"

#include "core/error.h"

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
    : terms_(model, info), relation_(info.sde->relation), dim_(info.sde->dim) {}

void EulerStep::evaluate(const double* frame, int64_t t, const double* x, int64_t P,
                         const char* who) {
  const int d = dim_;
  P_ = P;
  terms_.evaluate(frame, t, x, P);
  mean_.resize(P * d);
  chol_.resize(P * d * d);
  log_norm_.resize(P);
  finite_.assign(P, 1);
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

void EulerStep::log_densities(const double* y, int64_t stride, double* out) const {
  const int d = dim_;
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
