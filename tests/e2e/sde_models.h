// What the SDE tests share: the linear-Gaussian models that Euler-Maruyama makes of an
// Ornstein-Uhlenbeck SDE, exact references for the filters and smoothers of SDE transitions, and
// the check of an estimated score against an exact one.
#pragma once

#include "kalman.h"

#include <Eigen/Core>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace e2e {

// The AR(1) that M Euler-Maruyama substeps of dX = -K X dt + S dW over dt make.
inline void euler_ar1(const Eigen::MatrixXd& K, const Eigen::MatrixXd& S, double dt, int steps,
                      Eigen::MatrixXd& A, Eigen::MatrixXd& Q) {
  const double h = dt / steps;
  const int d = static_cast<int>(K.rows());
  const Eigen::MatrixXd step = Eigen::MatrixXd::Identity(d, d) - h * K;
  A = Eigen::MatrixXd::Identity(d, d);
  Q = Eigen::MatrixXd::Zero(d, d);
  for (int j = 0; j < steps; ++j) { // X_M = step^M X_0 + sum_j step^j sqrt(h) S Z_{M-1-j}
    Q += h * A * S * S.transpose() * A.transpose();
    A = step * A;
  }
}

// The 2-D Ornstein-Uhlenbeck SDE dX = -K X dt + S dW of the ou2 test models, K = [[1.0, 0.3],
// [-0.4, 0.6]], S = [[0.5, 0.0], [0.2, 0.4]], from N(0, I), observed with noise 0.3 per
// component, as the AR(1) of `steps` Euler substeps over dt.
inline LinearGaussianModel ou2_euler_model(double dt, int steps) {
  LinearGaussianModel m;
  m.m0 = Eigen::VectorXd::Zero(2);
  m.P0 = Eigen::MatrixXd::Identity(2, 2);
  Eigen::MatrixXd K(2, 2), S(2, 2);
  K << 1.0, 0.3, -0.4, 0.6;
  S << 0.5, 0.0, 0.2, 0.4;
  euler_ar1(K, S, dt, steps, m.A, m.Q);
  m.B = Eigen::MatrixXd::Identity(2, 2);
  m.R = 0.09 * Eigen::MatrixXd::Identity(2, 2);
  return m;
}

// The OU SDE observed every dt with noise sd r, in the state (x, 1) so that the mean mu enters
// the transition matrix: x_t = a x_{t-1} + (1 - a) mu + N(0, s^2 (1 - a^2) / (2 kappa)).
inline LinearGaussianModel ou_observed(double kappa, double mu, double s, double dt, double r) {
  const double a = std::exp(-kappa * dt);
  LinearGaussianModel m;
  m.m0 = Eigen::Vector2d(0, 1);
  m.P0 = Eigen::Vector2d(1, 0).asDiagonal();
  m.A = Eigen::Matrix2d{{a, (1 - a) * mu}, {0, 1}};
  m.Q = Eigen::Vector2d(s * s * (1 - a * a) / (2 * kappa), 0).asDiagonal();
  m.B = Eigen::RowVector2d(1, 0);
  m.R = Eigen::MatrixXd::Constant(1, 1, r * r);
  return m;
}

// The source of model `name`: dX = kappa (mu - X) dt + 0.6 dW observed every 0.5 with noise 0.5,
// from a diffuse prior (the filter cloud at t = 0 is wide beside the noise over dt); kappa and
// mu are parameters (0.8, 0.5), ou_observed's model for a Kalman filter.
inline std::string ou_sde_source(const std::string& name) {
  return "model " + name + R"( {
  param kappa : real(0, inf) = 0.8;
  param mu : real = 0.5;
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ diffusion(kappa * (mu - x[t]), 0.6, 0.5, 400);
  y[t] ~ normal(x[t], 0.5);
}
)";
}

// `score --json`'s estimate of each parameter's score within 4 of its standard errors of the
// exact one (from `reference`, e.g. "Kalman"), that error below a tenth of max(1, |exact|) so
// that the check has power.
inline void check_score(const nlohmann::json& j,
                        const std::vector<std::pair<std::string, double>>& exact,
                        const std::string& reference) {
  for (const auto& [name, value] : exact) {
    const double score = j["score"][name].get<double>(), se = j["score_se"][name].get<double>();
    INFO(name << ": score " << score << " (se " << se << "), " << reference << " " << value);
    CHECK(std::fabs(score - value) < 4 * se);
    CHECK(se < 0.1 * std::max(1.0, std::fabs(value)));
  }
}

} // namespace e2e
