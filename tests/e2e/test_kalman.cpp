// Validates the reference Kalman filter (kalman.h) before it is used to judge the particle filter:
// against a hand-written bivariate normal density for T = 2 in 1-D, and against conditioning the
// joint Gaussian directly for a 2-D model with missing components.
#include "kalman.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <numbers>

using namespace e2e;

namespace {

const double NaN = std::numeric_limits<double>::quiet_NaN();

LinearGaussianModel scalar_model(double m0, double p0, double a, double q, double b, double r) {
  LinearGaussianModel m;
  m.m0 = Eigen::VectorXd::Constant(1, m0);
  m.P0 = Eigen::MatrixXd::Constant(1, 1, p0);
  m.A = Eigen::MatrixXd::Constant(1, 1, a);
  m.Q = Eigen::MatrixXd::Constant(1, 1, q);
  m.B = Eigen::MatrixXd::Constant(1, 1, b);
  m.R = Eigen::MatrixXd::Constant(1, 1, r);
  return m;
}

std::vector<Eigen::VectorXd> scalars(std::initializer_list<double> v) {
  std::vector<Eigen::VectorXd> ys;
  for (double y : v)
    ys.push_back(Eigen::VectorXd::Constant(1, y));
  return ys;
}

} // namespace

TEST_CASE("Kalman filter: T=2 1-D likelihood equals the bivariate normal density of (y0, y1)",
          "[kalman]") {
  const double m0 = 0.3, p0 = 1.7, a = 0.8, q = 0.6, b = 1.3, r = 0.9;
  const double y0 = 1.1, y1 = -0.4;
  // y0 = b x0 + v0, y1 = b (a x0 + w1) + v1.
  const double mu0 = b * m0, mu1 = b * a * m0;
  const double s00 = b * b * p0 + r, s11 = b * b * (a * a * p0 + q) + r, s01 = b * b * a * p0;
  const double det = s00 * s11 - s01 * s01;
  const double d0 = y0 - mu0, d1 = y1 - mu1;
  const double quad = (s11 * d0 * d0 - 2 * s01 * d0 * d1 + s00 * d1 * d1) / det;
  const double exact = -std::log(2 * std::numbers::pi) - 0.5 * std::log(det) - 0.5 * quad;

  KalmanResult k = kalman_filter(scalar_model(m0, p0, a, q, b, r), scalars({y0, y1}));
  CHECK(k.log_likelihood == Approx(exact).epsilon(1e-12));
  // The first increment is the marginal density of y0.
  CHECK(k.loglik_increment[0] ==
        Approx(-0.5 * std::log(2 * std::numbers::pi * s00) - 0.5 * d0 * d0 / s00).epsilon(1e-12));
  // E[x1 | y0, y1] and Var[x1 | y0, y1] by conditioning the joint Gaussian of (x1, y0, y1).
  const double cx0 = a * p0 * b, cx1 = b * (a * a * p0 + q); // Cov(x1, y0), Cov(x1, y1)
  const double g0 = (s11 * cx0 - s01 * cx1) / det, g1 = (s00 * cx1 - s01 * cx0) / det;
  CHECK(k.mean[1][0] == Approx(a * m0 + g0 * d0 + g1 * d1).epsilon(1e-12));
  CHECK(k.cov[1](0, 0) == Approx(a * a * p0 + q - g0 * cx0 - g1 * cx1).epsilon(1e-12));

  // With y1 missing there is no update at t=1: the likelihood is that of y0 alone and x1 is
  // the prediction from t=0.
  KalmanResult km = kalman_filter(scalar_model(m0, p0, a, q, b, r), scalars({y0, NaN}));
  CHECK(km.loglik_increment[1] == 0);
  CHECK(km.log_likelihood == Approx(k.loglik_increment[0]).epsilon(1e-12));
  CHECK(km.mean[1][0] == Approx(a * km.mean[0][0]).epsilon(1e-12));
  CHECK(km.cov[1](0, 0) == Approx(a * a * km.cov[0](0, 0) + q).epsilon(1e-12));
}

TEST_CASE("Kalman filter agrees with direct conditioning of the joint Gaussian (2-D, missing)",
          "[kalman]") {
  LinearGaussianModel m;
  m.m0 = Eigen::Vector2d(0.5, -1);
  m.P0 = Eigen::Matrix2d{{2, 0.3}, {0.3, 1}};
  m.A = Eigen::Matrix2d{{0.9, 0.2}, {-0.1, 0.7}};
  m.Q = Eigen::Matrix2d{{0.5, 0.1}, {0.1, 0.4}};
  m.B = Eigen::MatrixXd{{1, 0.5}, {0, 1}, {0.3, -0.2}}; // 3 observations of a 2-D state
  m.R = Eigen::Matrix3d{{0.7, 0.2, 0}, {0.2, 0.6, 0.1}, {0, 0.1, 0.9}};
  std::vector<Eigen::VectorXd> ys = {
      Eigen::Vector3d(0.4, -1.2, 0.3), Eigen::Vector3d(NaN, NaN, NaN), // a missing row
      Eigen::Vector3d(1.5, NaN, -0.2),                                 // partly missing
      Eigen::Vector3d(0.1, 0.9, -0.7), Eigen::Vector3d(-0.3, NaN, NaN)};
  KalmanResult k = kalman_filter(m, ys), b = brute_force_filter(m, ys);
  REQUIRE(k.mean.size() == ys.size());
  CHECK(k.log_likelihood == Approx(b.log_likelihood).epsilon(1e-10));
  CHECK(k.loglik_increment[1] == 0);
  for (size_t t = 0; t < ys.size(); ++t) {
    INFO("t = " << t);
    CHECK(k.loglik_increment[t] == Approx(b.loglik_increment[t]).margin(1e-10));
    for (int i = 0; i < 2; ++i) {
      CHECK(k.mean[t][i] == Approx(b.mean[t][i]).margin(1e-10));
      for (int j = 0; j < 2; ++j)
        CHECK(k.cov[t](i, j) == Approx(b.cov[t](i, j)).margin(1e-10));
    }
  }
}
