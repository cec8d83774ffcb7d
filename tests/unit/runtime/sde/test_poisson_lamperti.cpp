// The General Poisson estimator of an SDE whose diffusion coefficient reads the path (Lamperti's
// coordinate by quadrature, bridge points taken back by RK4; runtime/sde/poisson_estimator.h),
// through hand-written diffusion_terms kernels of X = g(Y), Y the Ornstein-Uhlenbeck process
// dY = k (mu - Y) dt + dW: by Ito's formula dX = (g'(Y) k (mu - Y) + g''(Y) / 2) dt + g'(Y) dW,
// whose density is q_Y(g^-1(x), g^-1(y)) / g'(g^-1(y)). Two transforms: exp (the coefficient
// x, which is 0 at 0: the path stays positive) and sinh (the coefficient sqrt(1 + x^2)). With k
// = 0 and psi's bounds [0, 0] from the model, X = exp(Y) is geometric Brownian motion and the
// estimate is deterministic: its log matches the lognormal density to quadrature's accuracy,
// for pairs far apart in Lamperti's coordinate (graded panels); its derivative, with Poisson
// points added for it, is unbiased. With k > 0, psi is unbounded
// above: single estimates are unbiased for the density, and their derivatives in (k, mu) for
// the density's, within 4 standard errors. A pair across the coefficient's zero has density 0.
// The Euler step in Lamperti's coordinate (bis's proposal law) has the density of a Gaussian
// step in log x pushed back, and RK4 takes points back to x as exp does.
#include "core/error.h"
#include "core/metadata.h"
#include "sde/euler_step.h"
#include "sde/lamperti.h"
#include "sde/poisson_estimator.h"
#include "sde_fixtures.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>
#include <vector>

namespace {

using sde_fixtures::check_density_unbiased;
using sde_fixtures::check_gradient_unbiased;
using sde_fixtures::exact_and_derivatives;
using sde_fixtures::model_with;
using sde_fixtures::Point;

enum class Transform { Exp, Sinh };

// g', g'' and g''' / g' at y = g^-1(x).
struct Derivatives {
  double y, d1, d2, d3_over_d1;
};

Derivatives at(Transform g, double x) {
  if (g == Transform::Exp)
    return {std::log(x), x, x, 1};
  const double y = std::asinh(x);
  return {y, std::cosh(y), x, 1};
}

// Rows: drift, drift', coefficient, dt, psi's bounds, the drift's bounds, d drift / d(k, mu),
// d drift' / d(k, mu), then the parametrix rows (g^2)' and (g^2)''. Frame [k, mu, dt, lower,
// upper] (psi's bounds as the model gives them).
template <Transform G>
void transformed_ou_terms(const double* theta, int64_t, int64_t begin, int64_t end, int64_t stride,
                          const double*, const int64_t*, const double* x, const double*,
                          double* out) {
  const double k = theta[0], mu = theta[1];
  for (int64_t n = begin; n < end; ++n) {
    const Derivatives d = at(G, x[n]);
    const double beta = k * (mu - d.y);
    const double drift = d.d1 * beta + d.d2 / 2;
    // d drift / dx = (g'' beta - g' k + g''' / 2) / g'
    const double jacobian = d.d2 * beta / d.d1 - k + d.d3_over_d1 / 2;
    const double row[] = {drift,
                          jacobian,
                          d.d1,
                          theta[2],
                          theta[3],
                          theta[4],
                          -INFINITY,
                          INFINITY,
                          d.d1 * (mu - d.y),
                          d.d1 * k,
                          d.d2 * (mu - d.y) / d.d1 - 1,
                          d.d2 * k / d.d1,
                          2 * d.d2,
                          2 * d.d3_over_d1};
    for (int r = 0; r < 14; ++r)
      out[r * stride + n] = row[r];
  }
}

// A coefficient (x - 1.1)(x - 1.2), positive at the pilot points of [0, 2] but not between them;
// no drift. Rows as transformed_ou_terms'.
void two_zeros_terms(const double* theta, int64_t, int64_t begin, int64_t end, int64_t stride,
                     const double*, const int64_t*, const double* x, const double*, double* out) {
  for (int64_t n = begin; n < end; ++n) {
    const double s = (x[n] - 1.1) * (x[n] - 1.2), ds = 2 * x[n] - 2.3;
    const double row[] = {0,        0, s, theta[2], theta[3], theta[4],   -INFINITY,
                          INFINITY, 0, 0, 0,        0,        2 * s * ds, 2 * ds * ds + 4 * s};
    for (int r = 0; r < 14; ++r)
      out[r * stride + n] = row[r];
  }
}

ssm::ModelInfo lamperti_info() {
  ssm::ModelInfo info = sde_fixtures::sde_info(4);
  info.sde->coefficient_constant = false;
  info.sde->parametrix_reason.clear();
  info.sde->parametrix_rows = 2;
  info.sde->psi_lower_given = info.sde->psi_upper_given = true;
  info.sde->exact_bridges = false;
  return info;
}

// q_X(x, y): the OU density of Y with unit noise, over g'(g^-1(y)).
template <Transform G>
double transformed_ou_q(const std::vector<double>& f, const Point& x, const Point& y) {
  const double k = f[0], mu = f[1], dt = f[2];
  const double u = at(G, x[0]).y, v = at(G, y[0]).y;
  const double a = std::exp(-k * dt), var = k != 0 ? (1 - a * a) / (2 * k) : dt;
  const double m = mu + (u - mu) * a;
  return std::exp(-(v - m) * (v - m) / (2 * var)) / std::sqrt(2 * std::numbers::pi * var) /
         at(G, y[0]).d1;
}

} // namespace

TEST_CASE("General Poisson estimator, Lamperti's coordinate: exact for geometric Brownian motion",
          "[sde]") {
  // k = 0: dX = X / 2 dt + X dW, psi = 0 within the model's bounds [0, 0] (no Poisson points).
  const std::vector<double> frame = {0, 0, 0.5, 0, 0};
  const ssm_model model = model_with(transformed_ou_terms<Transform::Exp>);
  ssm::PoissonEstimator estimator(model, lamperti_info());
  const std::vector<double> x = {1.0, 0.5, 0.05, 3.0, 2.0}, y = {1.3, 0.4, 3.0, 0.02, 2.0};
  const auto P = static_cast<int64_t>(x.size());
  std::vector<double> log_q(P);
  ssm::EstimatorCounts counts;
  estimator.estimate(frame.data(), 4, x.data(), y.data(), P, 1, 3, 0, log_q.data(), &counts);
  CHECK(estimator.positive());
  CHECK(counts.bridge_points == 0);
  for (int64_t p = 0; p < P; ++p) {
    const double exact = std::log(transformed_ou_q<Transform::Exp>(frame, {x[p]}, {y[p]}));
    INFO("pair " << x[p] << " -> " << y[p]);
    CHECK(log_q[p] == Approx(exact).margin(1e-9));
  }
  // The estimate's derivative in (k, mu): psi's equal bounds leave no Poisson points, whose
  // derivative would miss psi's; with a gradient, c rises above them (lambda dt = 1).
  {
    const std::vector<Point> px = {{1.0}, {0.5}, {2.0}}, py = {{1.3}, {0.4}, {1.5}};
    std::vector<double> q;
    std::vector<std::vector<double>> dq;
    exact_and_derivatives(transformed_ou_q<Transform::Exp>, frame, 2, px, py, q, dq);
    check_gradient_unbiased(estimator, frame, px, py, q, dq, 40000, 0.05);
  }
  // Across the coefficient's zero (a negative end) or at it: density 0, not an error.
  const std::vector<double> from = {1.0, 1.0, 0.5}, to = {-0.5, 0.0, 0.7};
  std::vector<double> across(3);
  estimator.estimate(frame.data(), 4, from.data(), to.data(), 3, 1, 3, 0, across.data());
  CHECK(across[0] == -INFINITY);
  CHECK(across[1] == -INFINITY);
  CHECK(std::isfinite(across[2]));
  // Two zeros between pilot points: the nodes see them, and the pair has density 0.
  const ssm_model two_zeros = model_with(two_zeros_terms);
  ssm::PoissonEstimator across_nodes(two_zeros, lamperti_info());
  const std::vector<double> zero_from = {0.0, 0.0}, zero_to = {2.0, 0.5},
                            zero_frame = {0, 0, 0.5, -10, 10};
  std::vector<double> zero_q(2);
  across_nodes.estimate(zero_frame.data(), 4, zero_from.data(), zero_to.data(), 2, 1, 3, 0,
                        zero_q.data());
  CHECK(zero_q[0] == -INFINITY);
  CHECK(std::isfinite(zero_q[1]));
  // The gradient's exact bridges are for a constant coefficient.
  CHECK_FALSE(estimator.exact_bridges(frame.data(), 4));
  CHECK(estimator.log_bound(frame.data(), 4) == INFINITY);
}

TEST_CASE("General Poisson estimator, Lamperti's coordinate: unbiased for transformed "
          "Ornstein-Uhlenbeck densities, and its derivative for theirs",
          "[sde]") {
  // psi = (k^2 (mu - y)^2 - k) / 2 in Lamperti's coordinate y: the model's lower bound -k / 2.
  const double k = 0.8, mu = 0.3;
  const std::vector<double> frame = {k, mu, 0.5, -k / 2, INFINITY};
  {
    INFO("X = exp(Y)");
    const ssm_model model = model_with(transformed_ou_terms<Transform::Exp>);
    ssm::PoissonEstimator estimator(model, lamperti_info());
    const std::vector<Point> x = {{0.5}, {2.0}, {0.25}, {3.0}}, y = {{0.8}, {1.1}, {0.6}, {1.2}};
    std::vector<double> q;
    std::vector<std::vector<double>> dq;
    exact_and_derivatives(transformed_ou_q<Transform::Exp>, frame, 2, x, y, q, dq);
    check_density_unbiased(estimator, frame, x, y, q, 40000, 0.05);
    check_gradient_unbiased(estimator, frame, x, y, q, dq, 40000, 0.05);
  }
  {
    INFO("X = sinh(Y)");
    const ssm_model model = model_with(transformed_ou_terms<Transform::Sinh>);
    ssm::PoissonEstimator estimator(model, lamperti_info());
    const std::vector<Point> x = {{0.3}, {1.5}, {-1.0}, {4.0}}, y = {{-0.2}, {0.4}, {-1.6}, {2.0}};
    std::vector<double> q;
    std::vector<std::vector<double>> dq;
    exact_and_derivatives(transformed_ou_q<Transform::Sinh>, frame, 2, x, y, q, dq);
    check_density_unbiased(estimator, frame, x, y, q, 40000, 0.05);
    check_gradient_unbiased(estimator, frame, x, y, q, dq, 40000, 0.05);
  }
}

TEST_CASE("Lamperti's coordinate: the Euler law in u, and points taken back to x", "[sde]") {
  const double k = 0.8, mu = 0.3, dt = 0.5;
  const std::vector<double> frame = {k, mu, dt, -k / 2, INFINITY};
  const ssm_model model = model_with(transformed_ou_terms<Transform::Exp>);
  const ssm::ModelInfo info = lamperti_info();
  REQUIRE(ssm::in_lamperti_coordinate(info));
  ssm::EulerStep euler(model, info);
  REQUIRE(euler.lamperti());
  const std::vector<double> from = {0.5, 2.0, NAN, 1.0}, to = {0.8, 3.0, -1.0};
  euler.evaluate(frame.data(), 2, from.data(), 4, "test");
  euler.targets(frame.data(), 2, to.data(), 1, 3);
  std::vector<double> out(4);
  for (int64_t j = 0; j < 3; ++j) {
    euler.log_densities(&to[j], 1, out.data(), j);
    for (int64_t p = 0; p < 4; ++p) {
      INFO("from " << from[p] << " to " << to[j]);
      if (!std::isfinite(from[p]) || to[j] <= 0) { // a diverged path; across the zero
        CHECK(out[p] == -INFINITY);
        continue;
      }
      const double u = std::log(from[p]), v = std::log(to[j]), m = u + k * (mu - u) * dt;
      const double exact =
          -(v - m) * (v - m) / (2 * dt) - 0.5 * std::log(2 * std::numbers::pi * dt) - v;
      CHECK(out[p] == Approx(exact).margin(1e-9));
    }
  }
  CHECK_THROWS_WITH(euler.log_densities(&to[0], 1, out.data()), Catch::Contains("target"));

  // eta^-1(eta(x) + w) = x e^w for the coefficient x, targets on either side of w = 0: RK4 in
  // steps of 1/8 errs by about (1/8)^5 / 120 per step, a few 1e-6 over |w| = 2.7.
  ssm::DiffusionTerms terms(model, info);
  const std::vector<double> start = {0.5, 2.0};
  const std::vector<int64_t> group = {0, 0, 1, 0, 1};
  const std::vector<double> w = {1.3, -0.4, 0.05, -2.7, 0.0};
  std::vector<double> x(w.size());
  ssm::lamperti_inverse(terms, frame.data(), 2, start, group, w.data(), 5, x.data(),
                        [](int64_t, double, double s) { return std::fabs(s); });
  for (size_t j = 0; j < w.size(); ++j)
    CHECK(x[j] == Approx(start[group[j]] * std::exp(w[j])).epsilon(1e-5));
}
