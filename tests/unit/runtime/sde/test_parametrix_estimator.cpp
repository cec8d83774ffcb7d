// The parametrix estimator of an SDE's transition density (runtime/sde) against SDEs whose
// transition densities are known, through hand-written diffusion_terms kernels: the scalar
// Ornstein-Uhlenbeck process; a 2-d one that rotates, dX = (-k X + w J X) dt + s dW, whose law
// from x is N(e^{-k dt} R(w dt) x, s^2 (1 - e^{-2 k dt}) / (2k) I); and a 2-d geometric Brownian
// motion with correlated noise, dX_i = m_i X_i dt + X_i (G dW)_i (the Lotka-Volterra model's
// coefficient, diag(X) G), whose log is Gaussian: a coefficient that moves with the path, so the
// divergences of gamma and the change of gamma along the skeleton enter the weights. Single
// estimates are unbiased (the mean of many within 4 standard errors of the density, with a
// standard error small enough that the test has power); Wald's sums are positive and within a
// set proportional to the densities; the same seed gives the same estimates; a singular
// coefficient is an error naming the step.
#include "core/error.h"
#include "parametrix_fixtures.h"
#include "sde/density_estimator.h"
#include "sde/parametrix_estimator.h"
#include "sde_fixtures.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>
#include <vector>

namespace {

using sde_fixtures::Density;
using sde_fixtures::model_with;
using sde_fixtures::Pairs;
using sde_fixtures::Point;
using namespace parametrix_fixtures;

// sde_fixtures' check, and the estimates drew skeleton points.
void check_unbiased(ssm::DensityEstimator& estimator, const std::vector<double>& frame,
                    const std::vector<Point>& x, const std::vector<Point>& y,
                    const std::vector<double>& exact, int R, double power) {
  const ssm::EstimatorCounts counts =
      sde_fixtures::check_density_unbiased(estimator, frame, x, y, exact, R, power);
  CHECK(counts.skeleton_points > 0);
}

// The exact densities of the pairs at the frame.
std::vector<double> densities(const Density& q, const std::vector<double>& frame,
                              const std::vector<Point>& x, const std::vector<Point>& y) {
  std::vector<double> out;
  for (size_t i = 0; i < x.size(); ++i)
    out.push_back(q(frame, x[i], y[i]));
  return out;
}

} // namespace

TEST_CASE("Parametrix estimator: unbiased for the Ornstein-Uhlenbeck density", "[sde]") {
  const std::vector<double> frame = {0.8, 0.6, 0.5};
  const ssm_model model = model_with(ou_terms);
  ssm::ParametrixEstimator estimator(model, with_gradient(1, 1, true, 1));
  const std::vector<Point> x = {{0.3}, {1.5}, {-1.0}, {2.5}}, y = {{-0.2}, {0.4}, {-1.6}, {1.2}};
  check_unbiased(estimator, frame, x, y, densities(ou_q, frame, x, y), 40000, 0.02);
}

TEST_CASE("Parametrix estimator: unbiased for a rotating 2-d Ornstein-Uhlenbeck density", "[sde]") {
  const std::vector<double> frame = {0.7, 1.3, 0.8, 0.6};
  const ssm_model model = model_with(rotation_terms);
  ssm::ParametrixEstimator estimator(model, with_gradient(2, 2, true, 2));
  const std::vector<Point> x = {{0.5, -0.3}, {1.5, 1.0}, {-1.0, 2.0}},
                           y = {{0.2, -0.6}, {1.6, -0.1}, {0.4, 1.2}};
  check_unbiased(estimator, frame, x, y, densities(rotation_q, frame, x, y), 40000, 0.03);
}

TEST_CASE("Parametrix estimator: unbiased for a 2-d geometric Brownian motion (diag(X) G dW)",
          "[sde]") {
  // The Lotka-Volterra example's noise, G = [[0.5, 0.1], [0.1, 0.2]] (Martin 2022, 7.5.4).
  const std::vector<double> frame = {0.3, -0.2, 0.5, 0.1, 0.1, 0.2, 0.5};
  const ssm_model model = model_with(geometric_terms);
  ssm::ParametrixEstimator estimator(model, with_gradient(2, 4, false, 2));
  const std::vector<Point> x = {{1.0, 2.0}, {1.0, 2.0}, {0.5, 1.5}},
                           y = {{1.1, 1.9}, {1.5, 2.2}, {0.4, 1.6}};
  // A coefficient that moves with the path makes the estimates heavy-tailed (single ones 600
  // times the mean): the standard error is checked against a looser bound.
  check_unbiased(estimator, frame, x, y, densities(geometric_q, frame, x, y), 40000, 0.05);
}

TEST_CASE("Parametrix estimator: Wald's sums are positive and proportional to the density",
          "[sde]") {
  // A model without gradient rows (the estimates alone).
  const std::vector<double> frame = {0.8, 0.6, 0.5};
  const ssm_model model = model_with(ou_plain_terms);
  ssm::ParametrixEstimator estimator(model, sde_fixtures::parametrix_info(1, 1, true));
  REQUIRE(estimator.gradient_size() == 0);
  // Sets of two pairs, one far from the other's scale: negative single estimates are frequent.
  const double xa = 3.0, ya = 1.0, xb = -2.5, yb = -2.4;
  sde_fixtures::check_wald_ratio(estimator, frame, xa, ya, xb, yb,
                                 ou_q(frame, {xa}, {ya}) / ou_q(frame, {xb}, {yb}), 20000);
}

TEST_CASE("Parametrix estimator: a singular coefficient or a bad dt names the step", "[sde]") {
  const ssm_model model = model_with(geometric_terms);
  ssm::ParametrixEstimator estimator(model, with_gradient(2, 4, false, 2));
  const std::vector<double> frame = {0.3, -0.2, 0.5, 0.1, 0.1, 0.2, 0.5};
  // From x0 = 0 the coefficient diag(x) G is singular.
  std::vector<double> prev = {0.0, 2.0}, cur = {1.0, 2.0}, log_q(1);
  CHECK_THROWS_WITH(
      estimator.estimate(frame.data(), 9, prev.data(), cur.data(), 1, 1, 1, 0, log_q.data()),
      Catch::Contains("parametrix estimator for x[t] at t=9") && Catch::Contains("(0, 2)") &&
          Catch::Contains("positive definite"));
  std::vector<double> bad_dt = frame;
  bad_dt[6] = 0;
  prev = {1.0, 2.0};
  CHECK_THROWS_WITH(
      estimator.estimate(bad_dt.data(), 4, prev.data(), cur.data(), 1, 1, 1, 0, log_q.data()),
      Catch::Contains("dt of x[t] at t=4"));
  // Not the run's estimator: the factory says why.
  ssm::ModelInfo gpe_only = sde_fixtures::sde_info();
  gpe_only.sde->estimator = "parametrix";
  gpe_only.sde->parametrix_reason = "no parametrix rows";
  CHECK_THROWS_WITH(ssm::make_density_estimator(model_with(ou_terms), gpe_only),
                    Catch::Contains("no parametrix rows"));
}
