// The derivative in theta of the parametrix estimates (runtime/sde/parametrix_estimator.cpp, with
// the skeleton and the hazard held), through hand-written diffusion_terms kernels with gradient
// rows, against SDEs whose densities are known in closed form, differentiated numerically: the
// scalar Ornstein-Uhlenbeck process in its rate k; a 2-d one that rotates, dX = (-k X + w J X) dt
// + s dW, in (k, w); and a 2-d geometric Brownian motion dX_i = m_i X_i dt + X_i (G dW)_i in
// (m_0, m_1), whose coefficient moves with the path. Q' = Q d log|Q| of single estimates is
// unbiased for q'; through Wald's sums, the weighted gradient estimates d log q.
#include "parametrix_fixtures.h"
#include "sde/parametrix_estimator.h"
#include "sde_fixtures.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>
#include <vector>

namespace {

using sde_fixtures::check_gradient_unbiased;
using sde_fixtures::exact_and_derivatives;
using sde_fixtures::model_with;
using sde_fixtures::Point;
using namespace parametrix_fixtures;

} // namespace

TEST_CASE("Parametrix estimate's derivative: unbiased for the OU density's derivative", "[sde]") {
  const std::vector<double> frame = {0.8, 0.6, 0.5};
  const ssm_model model = model_with(ou_terms);
  ssm::ParametrixEstimator estimator(model, with_gradient(1, 1, true, 1));
  REQUIRE(estimator.gradient_size() == 1);
  const std::vector<Point> x = {{0.3}, {1.5}, {-1.0}, {2.5}}, y = {{-0.2}, {0.4}, {-1.6}, {1.2}};
  std::vector<double> q;
  std::vector<std::vector<double>> dq;
  exact_and_derivatives(ou_q, frame, 1, x, y, q, dq);
  check_gradient_unbiased(estimator, frame, x, y, q, dq, 40000, 0.03);
}

TEST_CASE("Parametrix estimate's derivative: unbiased for a rotating 2-d OU in (k, w)", "[sde]") {
  const std::vector<double> frame = {0.7, 1.3, 0.8, 0.6};
  const ssm_model model = model_with(rotation_terms);
  ssm::ParametrixEstimator estimator(model, with_gradient(2, 2, true, 2));
  const std::vector<Point> x = {{0.5, -0.3}, {1.5, 1.0}, {-1.0, 2.0}},
                           y = {{0.2, -0.6}, {1.6, -0.1}, {0.4, 1.2}};
  std::vector<double> q;
  std::vector<std::vector<double>> dq;
  exact_and_derivatives(rotation_q, frame, 2, x, y, q, dq);
  check_gradient_unbiased(estimator, frame, x, y, q, dq, 40000, 0.05);
}

TEST_CASE("Parametrix estimate's derivative: unbiased for a 2-d OU with a full diffusion matrix",
          "[sde]") {
  // gamma = S S' is not diagonal: the solves with L and L' that the derivative makes differ.
  const std::vector<double> frame = {1.0, 0.3, 0.7};
  const ssm_model model = model_with(ou_full_terms);
  ssm::ParametrixEstimator estimator(model, with_gradient(2, 4, true, 2));
  const std::vector<Point> x = {{0.5, -0.3}, {1.2, 0.8}, {-0.9, 1.1}},
                           y = {{0.2, -0.4}, {0.5, 0.9}, {-0.2, 0.3}};
  std::vector<double> q;
  std::vector<std::vector<double>> dq;
  exact_and_derivatives(ou_full_q, frame, 2, x, y, q, dq);
  check_gradient_unbiased(estimator, frame, x, y, q, dq, 40000, 0.05);
}

TEST_CASE("Parametrix estimate's derivative: unbiased for a 2-d geometric Brownian motion in its "
          "drift (a coefficient that moves with the path)",
          "[sde]") {
  const std::vector<double> frame = {0.3, -0.2, 0.5, 0.1, 0.1, 0.2, 0.5};
  const ssm_model model = model_with(geometric_terms);
  ssm::ParametrixEstimator estimator(model, with_gradient(2, 4, false, 2));
  const std::vector<Point> x = {{1.0, 2.0}, {1.0, 2.0}, {0.5, 1.5}},
                           y = {{1.1, 1.9}, {1.5, 2.2}, {0.4, 1.6}};
  std::vector<double> q;
  std::vector<std::vector<double>> dq;
  exact_and_derivatives(geometric_q, frame, 2, x, y, q, dq);
  // Heavy-tailed estimates (test_parametrix_estimator.cpp): a looser bound for the power.
  check_gradient_unbiased(estimator, frame, x, y, q, dq, 40000, 0.1);
}

TEST_CASE("Parametrix estimate's derivative: through Wald's sums, the weighted gradient "
          "estimates d log q",
          "[sde]") {
  const std::vector<double> frame = {0.8, 0.6, 0.5};
  const ssm_model model = model_with(ou_terms);
  ssm::ParametrixEstimator estimator(model, with_gradient(1, 1, true, 1));
  const Point x = {3.0}, y = {1.0};
  const double h = 1e-5;
  std::vector<double> up = frame, down = frame;
  up[0] += h;
  down[0] -= h;
  const double dlogq = (std::log(ou_q(up, x, y)) - std::log(ou_q(down, x, y))) / (2 * h);
  sde_fixtures::check_wald_gradient(estimator, frame, x, y, 8, 40000, {dlogq}, 0.05);
}
