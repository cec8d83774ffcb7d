// The one-step Euler law of an SDE transition (runtime/sde/euler_step.h) against its closed form,
// N(x + drift(x) dt, dt sigma sigma^T(x)), through the hand-written diffusion_terms kernels of
// parametrix_fixtures.h: a 2-d geometric Brownian motion with correlated noise, whose coefficient
// diag(x) G moves with the point (a full covariance), and the scalar Ornstein-Uhlenbeck process;
// draws are mean + L z with L the covariance's Cholesky factor; a diverged point has no law; a
// singular covariance or a drift that is not finite is an error naming the step and the point.
#include "core/error.h"
#include "parametrix_fixtures.h"
#include "sde/euler_step.h"
#include "sde_fixtures.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

namespace {

using namespace parametrix_fixtures;
using sde_fixtures::model_with;

// geometric_terms' frame [m0, m1, G00, G01, G10, G11, dt].
const std::vector<double> kGeometric = {0.3, -0.2, 0.5, 0.1, 0.2, 0.4, 0.7};

// The Euler law's covariance from (x0, x1): dt diag(x) G G^T diag(x), as [[a, c], [c, b]].
struct Covariance {
  double a, b, c;
};
Covariance geometric_covariance(double x0, double x1) {
  const double* G = kGeometric.data() + 2;
  const double dt = kGeometric[6];
  const double Q00 = G[0] * G[0] + G[1] * G[1], Q01 = G[0] * G[2] + G[1] * G[3],
               Q11 = G[2] * G[2] + G[3] * G[3];
  return {dt * x0 * x0 * Q00, dt * x1 * x1 * Q11, dt * x0 * x1 * Q01};
}

} // namespace

TEST_CASE("EulerStep: the densities of a state-dependent full-covariance law", "[sde]") {
  const ssm_model model = model_with(geometric_terms);
  const ssm::ModelInfo info = with_gradient(2, 4, false, 2); // the rows geometric_terms writes
  ssm::EulerStep euler(model, info);
  // Three points, component-major; the second diverged.
  const std::vector<double> x = {1.2, NAN, 0.6, 0.8, 2.0, 1.5};
  euler.evaluate(kGeometric.data(), 4, x.data(), 3, "test");
  REQUIRE(euler.size() == 3);
  CHECK(euler.finite(0));
  CHECK_FALSE(euler.finite(1));
  CHECK(euler.finite(2));

  const std::vector<double> y = {1.05, 0.9}; // y[c * stride], stride 1
  std::vector<double> out(3);
  euler.log_densities(y.data(), 1, out.data());
  const double dt = kGeometric[6];
  for (int64_t p : {0, 2}) {
    const double x0 = x[p], x1 = x[3 + p];
    const Covariance v = geometric_covariance(x0, x1);
    const double m0 = x0 + kGeometric[0] * x0 * dt, m1 = x1 + kGeometric[1] * x1 * dt;
    const double exact = std::log(normal2_pdf(y[0] - m0, y[1] - m1, v.a, v.b, v.c));
    INFO("point " << p);
    CHECK(out[p] == Approx(exact).epsilon(1e-12));
  }
  CHECK(out[1] == -std::numeric_limits<double>::infinity());

  // A draw is mean + L z, L lower triangular with L L^T the covariance, and its log density is
  // the law's at the draw.
  const double z[2] = {0.3, -1.2};
  double drawn[2];
  const double log_p = euler.draw(2, z, drawn);
  const double x0 = x[2], x1 = x[5];
  const Covariance v = geometric_covariance(x0, x1);
  const double L00 = std::sqrt(v.a), L10 = v.c / L00, L11 = std::sqrt(v.b - L10 * L10);
  CHECK(drawn[0] == Approx(x0 + kGeometric[0] * x0 * dt + L00 * z[0]).epsilon(1e-12));
  CHECK(drawn[1] == Approx(x1 + kGeometric[1] * x1 * dt + L10 * z[0] + L11 * z[1]).epsilon(1e-12));
  euler.log_densities(drawn, 1, out.data());
  CHECK(log_p == Approx(out[2]).epsilon(1e-12));
}

TEST_CASE("EulerStep: a scalar law, and its errors", "[sde]") {
  const ssm_model model = model_with(ou_terms); // frame [k, s, dt]: drift -k x, coefficient s
  const ssm::ModelInfo info = with_gradient(1, 1, true, 1); // the rows ou_terms writes
  ssm::EulerStep euler(model, info);
  const std::vector<double> frame = {0.8, 0.6, 0.5}, x = {-0.4, 1.5};
  euler.evaluate(frame.data(), 2, x.data(), 2, "test");
  std::vector<double> out(2);
  const double y = 0.3;
  euler.log_densities(&y, 1, out.data());
  for (int p = 0; p < 2; ++p) {
    const double mean = x[p] - 0.8 * x[p] * 0.5, var = 0.36 * 0.5;
    CHECK(out[p] ==
          Approx(-0.5 * (y - mean) * (y - mean) / var - 0.5 * std::log(2 * std::numbers::pi * var))
              .epsilon(1e-12));
  }
  // A coefficient of 0: no Gaussian law.
  const std::vector<double> flat = {0.8, 0.0, 0.5};
  CHECK_THROWS_WITH(euler.evaluate(flat.data(), 3, x.data(), 2, "filter"),
                    Catch::Contains("filter: at t=3 the Euler step of x[t] from -0.4") &&
                        Catch::Contains("not finite and positive definite"));
  // A drift that is not finite at a finite point.
  const std::vector<double> wild = {INFINITY, 0.6, 0.5};
  CHECK_THROWS_WITH(euler.evaluate(wild.data(), 5, x.data(), 2, "bis"),
                    Catch::Contains("bis: at t=5 the drift of x[t] at -0.4") &&
                        Catch::Contains("not finite"));
}
