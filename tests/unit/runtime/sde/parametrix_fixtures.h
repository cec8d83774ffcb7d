// The parametrix estimator's unit tests' SDEs, as hand-written diffusion_terms kernels with
// gradient rows, and their transition densities in closed form: the scalar Ornstein-Uhlenbeck
// process; a 2-d one that rotates, dX = (-k X + w J X) dt + s dW, whose law from x is
// N(e^{-k dt} R(w dt) x, s^2 (1 - e^{-2 k dt}) / (2k) I); and a 2-d geometric Brownian motion
// with correlated noise, dX_i = m_i X_i dt + X_i (G dW)_i (the Lotka-Volterra model's
// coefficient, diag(X) G), whose log is Gaussian. The first entries of each frame are the theta
// components of the gradient rows.
#pragma once

#include "sde_fixtures.h"

#include <Eigen/Core>

#include <cmath>
#include <initializer_list>
#include <numbers>
#include <vector>

namespace parametrix_fixtures {

using sde_fixtures::Point;

// The parametrix estimator's model description with K theta components' gradient rows.
inline ssm::ModelInfo with_gradient(int dim, int coefficient_size, bool constant, int K) {
  ssm::ModelInfo info = sde_fixtures::parametrix_info(dim, coefficient_size, constant);
  info.sde->gradient_reason.clear();
  info.sde->gradient_rows = (dim + 1) * K;
  return info;
}

// Writes `rows` at n, then psi's and the drift's bounds (unused), the gradient rows and the
// parametrix rows as given.
inline void write(double* out, int64_t stride, int64_t n, std::initializer_list<double> head,
                  std::initializer_list<double> tail) {
  int r = 0;
  for (double v : head)
    out[r++ * stride + n] = v;
  for (int b = 0; b < 4; ++b)
    out[r++ * stride + n] = b % 2 ? INFINITY : -INFINITY;
  for (double v : tail)
    out[r++ * stride + n] = v;
}

// Frame [k, s, dt]: drift -k x; d drift / dk = -x, d drift' / dk = -1.
inline void ou_terms(const double* theta, int64_t, int64_t begin, int64_t end, int64_t stride,
                     const double*, const int64_t*, const double* x, const double*, double* out) {
  for (int64_t n = begin; n < end; ++n)
    write(out, stride, n, {-theta[0] * x[n], -theta[0], theta[1], theta[2]}, {-x[n], -1, 0, 0});
}

// As ou_terms without gradient rows (a model whose score is not derived).
inline void ou_plain_terms(const double* theta, int64_t, int64_t begin, int64_t end, int64_t stride,
                           const double*, const int64_t*, const double* x, const double*,
                           double* out) {
  for (int64_t n = begin; n < end; ++n)
    write(out, stride, n, {-theta[0] * x[n], -theta[0], theta[1], theta[2]}, {0, 0});
}

// Frame [k00, k01, dt]: drift -K x, K = [[k00, k01], [-0.4, 0.6]]; the constant coefficient
// S = [[0.5, 0], [0.2, 0.4]] (a full gamma: L^-1 and L^-T differ); d drift / d(k00, k01) =
// (-x0, -x1) for the first component, 0 for the second; d div / d(k00, k01) = (-1, 0).
inline void ou_full_terms(const double* theta, int64_t, int64_t begin, int64_t end, int64_t stride,
                          const double*, const int64_t*, const double* x, const double*,
                          double* out) {
  const double k00 = theta[0], k01 = theta[1];
  for (int64_t n = begin; n < end; ++n) {
    const double x0 = x[n], x1 = x[stride + n];
    write(out, stride, n,
          {-k00 * x0 - k01 * x1, 0.4 * x0 - 0.6 * x1, -k00, -k01, 0.4, -0.6, 0.5, 0, 0.2, 0.4,
           theta[2]},
          {-x0, -x1, 0, 0, -1, 0, 0, 0, 0});
  }
}

// Frame [k, w, s, dt]: drift A x, A = [[-k, w], [-w, -k]], div = -2k; coefficient (s, s).
inline void rotation_terms(const double* theta, int64_t, int64_t begin, int64_t end, int64_t stride,
                           const double*, const int64_t*, const double* x, const double*,
                           double* out) {
  const double k = theta[0], w = theta[1];
  for (int64_t n = begin; n < end; ++n) {
    const double x0 = x[n], x1 = x[stride + n];
    write(out, stride, n,
          {-k * x0 + w * x1, -w * x0 - k * x1, -k, w, -w, -k, theta[2], theta[2], theta[3]},
          {-x0, x1, -x1, -x0, -2, 0, 0, 0, 0});
  }
}

// Frame [m0, m1, G00, G01, G10, G11, dt]: drift m_i x_i, coefficient diag(x) G (row-major).
// gamma_il = x_i x_l Q_il, Q = G G^T: sum_i d gamma_il / dx_i = x_l (sum_i Q_il + Q_ll), and
// sum_il d^2 gamma_il / dx_i dx_l = sum_il Q_il + tr Q.
inline void geometric_terms(const double* theta, int64_t, int64_t begin, int64_t end,
                            int64_t stride, const double*, const int64_t*, const double* x,
                            const double*, double* out) {
  const double* G = theta + 2;
  const double Q00 = G[0] * G[0] + G[1] * G[1], Q01 = G[0] * G[2] + G[1] * G[3],
               Q11 = G[2] * G[2] + G[3] * G[3];
  for (int64_t n = begin; n < end; ++n) {
    const double x0 = x[n], x1 = x[stride + n];
    write(out, stride, n,
          {theta[0] * x0, theta[1] * x1, theta[0], 0, 0, theta[1], x0 * G[0], x0 * G[1], x1 * G[2],
           x1 * G[3], theta[6]},
          {x0, 0, 0, x1, 1, 1, x0 * (2 * Q00 + Q01), x1 * (Q01 + 2 * Q11),
           2 * Q00 + 2 * Q01 + 2 * Q11});
  }
}

// The bivariate normal density with covariance [[a, c], [c, b]] at the difference (d0, d1).
inline double normal2_pdf(double d0, double d1, double a, double b, double c) {
  const double det = a * b - c * c;
  const double q = (b * d0 * d0 - 2 * c * d0 * d1 + a * d1 * d1) / det;
  return std::exp(-q / 2) / (2 * std::numbers::pi * std::sqrt(det));
}

inline double ou_q(const std::vector<double>& f, const Point& x, const Point& y) {
  const double a = std::exp(-f[0] * f[2]), var = f[1] * f[1] * (1 - a * a) / (2 * f[0]);
  return std::exp(-(y[0] - a * x[0]) * (y[0] - a * x[0]) / (2 * var)) /
         std::sqrt(2 * std::numbers::pi * var);
}

inline double rotation_q(const std::vector<double>& f, const Point& x, const Point& y) {
  const double k = f[0], w = f[1], s = f[2], dt = f[3];
  const double decay = std::exp(-k * dt), c = std::cos(w * dt), sn = std::sin(w * dt);
  const double var = s * s * (1 - decay * decay) / (2 * k);
  const double m0 = decay * (c * x[0] + sn * x[1]), m1 = decay * (-sn * x[0] + c * x[1]);
  return normal2_pdf(y[0] - m0, y[1] - m1, var, var, 0);
}

inline double geometric_q(const std::vector<double>& f, const Point& x, const Point& y) {
  const double* G = f.data() + 2;
  const double Q00 = G[0] * G[0] + G[1] * G[1], Q01 = G[0] * G[2] + G[1] * G[3],
               Q11 = G[2] * G[2] + G[3] * G[3], dt = f[6];
  const double m0 = std::log(x[0]) + (f[0] - Q00 / 2) * dt;
  const double m1 = std::log(x[1]) + (f[1] - Q11 / 2) * dt;
  return normal2_pdf(std::log(y[0]) - m0, std::log(y[1]) - m1, Q00 * dt, Q11 * dt, Q01 * dt) /
         (y[0] * y[1]);
}

// ou_full_terms' density N(y; e^{A dt} x, int_0^dt e^{As} S S' e^{A's} ds), A = -K: the
// exponential by its Taylor series, the covariance by the midpoint rule over 4000 steps (an
// error near 1e-9, far below the Monte Carlo error).
inline double ou_full_q(const std::vector<double>& f, const Point& x, const Point& y) {
  Eigen::Matrix2d A, S;
  A << -f[0], -f[1], 0.4, -0.6;
  S << 0.5, 0, 0.2, 0.4;
  const auto expm = [&](double s) {
    Eigen::Matrix2d out = Eigen::Matrix2d::Identity(), term = Eigen::Matrix2d::Identity();
    for (int n = 1; n < 30; ++n) {
      term = (term * A * s / n).eval();
      out += term;
    }
    return out;
  };
  const double dt = f[2];
  const int steps = 4000;
  Eigen::Matrix2d cov = Eigen::Matrix2d::Zero();
  for (int j = 0; j < steps; ++j) {
    const Eigen::Matrix2d e = expm((j + 0.5) * dt / steps);
    cov += dt / steps * e * S * S.transpose() * e.transpose();
  }
  const Eigen::Vector2d d = Eigen::Vector2d(y[0], y[1]) - expm(dt) * Eigen::Vector2d(x[0], x[1]);
  return normal2_pdf(d[0], d[1], cov(0, 0), cov(1, 1), cov(0, 1));
}

} // namespace parametrix_fixtures
