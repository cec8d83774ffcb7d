// The General Poisson estimators of d/dtheta log q through hand-written diffusion_terms kernels
// with gradient rows. Exact bridges (runtime/sde/poisson_gradient.cpp; Martin 2022, appendix C.1,
// Proposition 2): exact for Brownian motion with drift theta, whatever the bridges accepted;
// unbiased for the Sine diffusion dX = sin(X - theta) dt + dW against a numerical derivative of
// its density computed on a grid (the Euler kernel of step dt / 2^k raised to the power 2^k by
// squaring, Richardson-extrapolated in k); reproducible from the seed; its errors. The
// estimate's own derivative (DensityEstimator::estimate with a gradient): unbiased for q' on the
// Ornstein-Uhlenbeck SDE, whose psi is unbounded above, alone and through Wald's sums.
#include "core/error.h"
#include "core/metadata.h"
#include "sde/poisson_estimator.h"
#include "sde_fixtures.h"

#include <Eigen/Core>
#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>
#include <vector>

namespace {

using sde_fixtures::check_gradient_unbiased;
using sde_fixtures::exact_and_derivatives;
using sde_fixtures::model_with;
using sde_fixtures::ou_gpe_q;
using sde_fixtures::ou_gpe_terms;
using sde_fixtures::Point;
using sde_fixtures::sde_info;

// Rows: drift, drift', coefficient, dt, psi's bounds, the drift's bounds, d drift / d theta,
// d drift' / d theta.
// Brownian motion with drift m: frame [m, dt]; psi = m^2 / 2, given bounds m^2 / 2 -+ 1, so that
// bridges are proposed and thinned (each accepted with probability exp(-dt)).
void drift_gradient_terms(const double* theta, int64_t, int64_t begin, int64_t end, int64_t stride,
                          const double*, const int64_t*, const double*, const double*,
                          double* out) {
  const double m = theta[0];
  for (int64_t n = begin; n < end; ++n) {
    const double row[] = {m, 0, 1, theta[1], m * m / 2 - 1, m * m / 2 + 1, m, m, 1, 0};
    for (int r = 0; r < 10; ++r)
      out[r * stride + n] = row[r];
  }
}

// The Sine diffusion dX = A sin(X - theta) dt + dW: frame [theta, dt, A]; psi = (A^2 sin^2 +
// A cos) / 2 in [-A / 2, (A^2 + A) / 2] by intervals (A > 0).
void sine_terms(const double* theta, int64_t, int64_t begin, int64_t end, int64_t stride,
                const double*, const int64_t*, const double* x, const double*, double* out) {
  const double A = theta[2];
  for (int64_t n = begin; n < end; ++n) {
    const double s = std::sin(x[n] - theta[0]), c = std::cos(x[n] - theta[0]);
    const double row[] = {A * s, A * c, 1, theta[1], -A / 2, (A * A + A) / 2, -A, A, -A * c, A * s};
    for (int r = 0; r < 10; ++r)
      out[r * stride + n] = row[r];
  }
}

// As sine_terms with psi's upper bound too low (psi reaches 5 / 8 at A = 1).
void tight_sine_terms(const double* theta, int64_t t, int64_t begin, int64_t end, int64_t stride,
                      const double* xp, const int64_t* a, const double* x, const double* y,
                      double* out) {
  sine_terms(theta, t, begin, end, stride, xp, a, x, y, out);
  for (int64_t n = begin; n < end; ++n)
    out[5 * stride + n] = 0;
}

// The Sine diffusion with a coefficient s as its only parameter: dX = A sin(X - theta0) dt + s dW,
// frame [theta0, dt, A, s]; psi = (A^2 sin^2 / s^2 + A cos) / 2 in [-A / 2, A^2 / (2 s^2) + A / 2].
// Rows as sine_terms', d drift / ds = d drift' / ds = 0, then d s / ds = 1 and drift''.
void sine_scale_terms(const double* theta, int64_t, int64_t begin, int64_t end, int64_t stride,
                      const double*, const int64_t*, const double* x, const double*, double* out) {
  const double A = theta[2], sc = theta[3];
  for (int64_t n = begin; n < end; ++n) {
    const double s = std::sin(x[n] - theta[0]), c = std::cos(x[n] - theta[0]);
    const double row[] = {A * s, A * c, sc, theta[1], -A / 2, A * A / (2 * sc * sc) + A / 2,
                          -A,    A,     0,  0,        1,      -A * s};
    for (int r = 0; r < 12; ++r)
      out[r * stride + n] = row[r];
  }
}

// log q_theta(x, y) of the Sine diffusion (noise `scale`) over dt on a grid of [-4, 6] (x and y
// grid points).
double sine_log_q_grid(double theta, double A, double dt, double x, double y, int squarings,
                       double scale = 1) {
  const double lo = -4, hi = 6;
  const int G = 401;
  const Eigen::VectorXd g = Eigen::VectorXd::LinSpaced(G, lo, hi);
  const double h = dt / std::pow(2.0, squarings), spacing = (hi - lo) / (G - 1);
  Eigen::MatrixXd P(G, G);
  for (int i = 0; i < G; ++i) {
    const double m = g[i] + A * std::sin(g[i] - theta) * h;
    for (int j = 0; j < G; ++j)
      P(i, j) = std::exp(-(g[j] - m) * (g[j] - m) / (2 * h * scale * scale));
    P.row(i) /= P.row(i).sum();
  }
  for (int k = 0; k < squarings; ++k)
    P = (P * P).eval();
  const auto at = [&](double v) { return static_cast<int>(std::lround((v - lo) / spacing)); };
  return std::log(P(at(x), at(y)) / spacing);
}

} // namespace

TEST_CASE("General Poisson gradient: exact for Brownian motion with drift", "[sde]") {
  // d/dm log N(y; x + m dt, dt) = y - x - m dt; the estimator's integral is y - x and its bridge
  // term dt d(m^2 / 2)/dm = m dt, whichever bridge is accepted.
  const double m = 0.7, dt = 0.5;
  const ssm_model model = model_with(drift_gradient_terms);
  const ssm::ModelInfo info = sde_info(2);
  ssm::PoissonEstimator estimator(model, info);
  const std::vector<double> frame = {m, dt};
  const std::vector<double> x = {0.2, -1.0, 3.0, 0.0}, y = {0.9, -2.5, 3.1, 4.0};
  std::vector<double> g(x.size());
  ssm::EstimatorCounts counts;
  estimator.gradient(frame.data(), 2, x.data(), y.data(), 4, 11, 0, g.data(), &counts);
  for (size_t p = 0; p < x.size(); ++p)
    CHECK(g[p] == Approx(y[p] - x[p] - m * dt).margin(1e-12));

  // EA1's acceptance: psi - lower = 1 under marks uniform on [0, 2], so a bridge is accepted with
  // probability exp(-dt); proposals per pair are geometric, of mean exp(dt) and variance
  // (1 - p) / p^2, p = exp(-dt).
  const int64_t R = 4000;
  std::vector<double> prev(R, 0.2), cur(R, 0.9), many(R);
  ssm::EstimatorCounts tries;
  estimator.gradient(frame.data(), 2, prev.data(), cur.data(), R, 12, 0, many.data(), &tries);
  const double p = std::exp(-dt), per_pair = double(tries.bridge_proposals) / R;
  CHECK(std::fabs(per_pair - 1 / p) < 4 * std::sqrt((1 - p) / (p * p) / R));
}

TEST_CASE("General Poisson gradient: unbiased for the Sine diffusion against its grid density",
          "[sde]") {
  // Two cases: the thesis's (A = 1, dt = 0.5) and a strong drift over a long step between distant
  // ends (A = 2, dt = 1, psi in [-1, 3]), where the diffusion bridge is far from the Brownian one.
  struct Case {
    double A, dt, x, y;
  };
  const ssm_model model = model_with(sine_terms);
  const ssm::ModelInfo info = sde_info(2);
  ssm::PoissonEstimator estimator(model, info);
  const double theta = 0.785, step = 0.02;
  for (const Case& c : {Case{1, 0.5, 0.5, 1.3}, Case{2, 1, -0.5, 2.0}}) {
    // The central difference in theta of log q on the grid, Richardson-extrapolated from 2^6 and
    // 2^7 Euler steps (an error near 1e-5, far below the standard error below).
    const auto derivative = [&](int squarings) {
      return (sine_log_q_grid(theta + step, c.A, c.dt, c.x, c.y, squarings) -
              sine_log_q_grid(theta - step, c.A, c.dt, c.x, c.y, squarings)) /
             (2 * step);
    };
    const double exact = 2 * derivative(7) - derivative(6);
    const std::vector<double> frame = {theta, c.dt, c.A};
    CHECK(estimator.exact_bridges(frame.data(), 1)); // the compiler's flag, and psi bounded above
    const int64_t R = 20000;
    std::vector<double> prev(R, c.x), cur(R, c.y), g(R);
    ssm::EstimatorCounts counts;
    estimator.gradient(frame.data(), 1, prev.data(), cur.data(), R, 3, 0, g.data(), &counts);
    double sum = 0, sum2 = 0;
    for (double v : g) {
      sum += v;
      sum2 += v * v;
    }
    const double mean = sum / R, se = std::sqrt((sum2 / R - mean * mean) / (R - 1));
    INFO("A = " << c.A << ": estimate " << mean << " (se " << se << "), grid " << exact
                << "; bridges proposed per pair " << double(counts.bridge_proposals) / R);
    CHECK(std::fabs(mean - exact) <= 4 * se);
    CHECK(se < 0.01);
    if (c.A == 2) // the thinning rejects: a bridge test with power
      CHECK(counts.bridge_proposals > R * 3 / 2);

    // The same seed gives the same estimates; another seed other ones.
    std::vector<double> again(R), other(R);
    estimator.gradient(frame.data(), 1, prev.data(), cur.data(), R, 3, 0, again.data());
    estimator.gradient(frame.data(), 1, prev.data(), cur.data(), R, 4, 0, other.data());
    CHECK(again == g);
    CHECK(other != g);
  }
}

TEST_CASE("General Poisson gradient: its errors", "[sde]") {
  const ssm_model model = model_with(sine_terms);
  std::vector<double> prev = {0.1}, cur = {0.2}, g(1);
  const std::vector<double> frame = {0.785, 0.5, 1.0};
  ssm::ModelInfo none = sde_info(2);
  none.sde->gradient_reason = "the diffusion coefficient reads the parameter s";
  none.sde->gradient_rows = 0;
  ssm::PoissonEstimator without(model, none);
  CHECK_THROWS_WITH(without.gradient(frame.data(), 3, prev.data(), cur.data(), 1, 1, 0, g.data()),
                    Catch::Contains("reads the parameter s"));
  ssm::PoissonEstimator estimator(model, sde_info(2));
  std::vector<double> p2 = {0.1, NAN}, c2 = {0.2, 0.3}, g2(2, 5.0);
  CHECK_THROWS_WITH(
      estimator.gradient(frame.data(), 3, p2.data(), c2.data(), 2, 1, 0xFFFFFFFFull, g2.data()),
      Catch::Contains("2^32 random streams"));
  // psi beyond the bounds the terms give: the thinning would be wrong, so an error.
  const ssm_model tight = model_with(tight_sine_terms);
  ssm::PoissonEstimator wrong_bounds(tight, sde_info(2));
  std::vector<double> from(200, 0.1), to(200, 0.2), g200(200); // Poisson points on some bridges
  CHECK_THROWS_WITH(
      wrong_bounds.gradient(frame.data(), 8, from.data(), to.data(), 200, 1, 0, g200.data()),
      Catch::Contains("at t=8") && Catch::Contains("the upper bound the compiler derived"));
  // A pair with a non-finite end has gradient 0 (its weight is 0 wherever it is used).
  estimator.gradient(frame.data(), 3, p2.data(), c2.data(), 2, 1, 0, g2.data());
  CHECK(std::isfinite(g2[0]));
  CHECK(g2[1] == 0);
}

TEST_CASE("General Poisson estimate's derivative: unbiased for the OU density's derivative "
          "(psi unbounded above)",
          "[sde]") {
  // Q' = Q d log|Q| from single rounds, in (k, mu), for pairs near and far in psi's tail (where
  // estimates of either sign occur: the derivative of a signed estimate).
  const std::vector<double> frame = {0.8, 0.3, 0.6, 0.5};
  const ssm_model model = model_with(ou_gpe_terms);
  ssm::PoissonEstimator estimator(model, sde_info(4));
  REQUIRE(estimator.gradient_size() == 2);
  CHECK_FALSE(estimator.exact_bridges(frame.data(), 3)); // gradient() cannot: no upper bound
  const std::vector<Point> x = {{0.3}, {1.5}, {-1.0}, {-2.5}}, y = {{-0.2}, {0.4}, {-1.6}, {-2.4}};
  std::vector<double> q;
  std::vector<std::vector<double>> dq;
  exact_and_derivatives(ou_gpe_q, frame, 2, x, y, q, dq);
  CHECK(check_gradient_unbiased(estimator, frame, x, y, q, dq, 40000, 0.05));
}

TEST_CASE("General Poisson estimate's derivative: through Wald's sums, the weighted gradient "
          "estimates d log q",
          "[sde]") {
  // Sets of 8 copies of a pair far in psi's tail, so that Wald's loop runs.
  const std::vector<double> frame = {0.8, 0.3, 0.6, 0.5};
  const Point x = {-2.5}, y = {-2.4};
  const ssm_model model = model_with(ou_gpe_terms);
  ssm::PoissonEstimator estimator(model, sde_info(4));
  std::vector<double> q;
  std::vector<std::vector<double>> dq;
  exact_and_derivatives(ou_gpe_q, frame, 2, {x}, {y}, q, dq);
  sde_fixtures::check_wald_gradient(estimator, frame, x, y, 8, 40000,
                                    {dq[0][0] / q[0], dq[0][1] / q[0]}, 0.05);
}

TEST_CASE("General Poisson estimate's derivative: Brownian motion with drift, and its errors",
          "[sde]") {
  // psi = m^2 / 2 is constant: each Poisson factor (c - psi) / lambda = 1 / 2 and its derivative
  // in m is -m / lambda, so d log Q = y - x - m K for K Poisson points of rate lambda dt = 2 dt:
  // the weighted gradient, E[Q d log Q] / E[Q] = y - x - m dt, is exact on average.
  const double m = 0.7, dt = 0.5, x = 0.2, y = 0.9;
  const ssm_model model = model_with(drift_gradient_terms);
  ssm::PoissonEstimator estimator(model, sde_info(2));
  const std::vector<double> frame = {m, dt};
  const int64_t P = 20000;
  std::vector<double> prev(P, x), cur(P, y), log_q(P), grad(P);
  estimator.estimate(frame.data(), 2, prev.data(), cur.data(), P, 1, 5, 0, log_q.data(), nullptr,
                     grad.data());
  double sq = 0, sdq = 0;
  for (int64_t p = 0; p < P; ++p) {
    const double K = (y - x - grad[p]) / m; // the Poisson count, an integer
    REQUIRE(std::fabs(K - std::round(K)) < 1e-9);
    sq += std::exp(log_q[p]);
    sdq += std::exp(log_q[p]) * grad[p];
  }
  CHECK(sdq / sq == Approx(y - x - m * dt).margin(0.016)); // 4 sd of the ratio (0.004)

  // Without gradient rows there is no gradient to give.
  ssm::PoissonEstimator without(model, sde_info());
  CHECK_THROWS_WITH(without.estimate(frame.data(), 2, prev.data(), cur.data(), 1, 1, 5, 0,
                                     log_q.data(), nullptr, grad.data()),
                    Catch::Contains("at t=2") && Catch::Contains("gradient"));
}

TEST_CASE("General Poisson estimate's derivative in a constant coefficient's parameter: "
          "unbiased for the Sine diffusion's, against its grid density",
          "[sde]") {
  // u = x / s, v = y / s and the bridge's points x = s w move with s; drift'' enters psi's
  // derivative along them. The exact d q / ds: central differences on the grid, Richardson-
  // extrapolated from 2^6 and 2^7 Euler steps.
  const double theta0 = 0.785, A = 1, dt = 0.5, sc = 0.8, step = 0.02;
  const std::vector<double> frame = {theta0, dt, A, sc};
  const ssm_model model = model_with(sine_scale_terms);
  ssm::ModelInfo info = sde_info(2);
  info.sde->coefficient_gradient_rows = 2;
  info.sde->exact_bridges = false; // as the compiler says with a coefficient that reads theta
  ssm::PoissonEstimator estimator(model, info);
  REQUIRE(estimator.gradient_size() == 1);
  std::vector<double> buffer(1);
  const std::vector<double> from = {0.5}, to = {1.3};
  CHECK_THROWS_WITH(
      estimator.gradient(frame.data(), 1, from.data(), to.data(), 1, 3, 0, buffer.data()),
      Catch::Contains("reads the parameters"));
  const std::vector<Point> x = {{0.5}, {-0.4}, {1.0}}, y = {{1.3}, {0.2}, {-0.3}};
  std::vector<double> q;
  std::vector<std::vector<double>> dq;
  for (size_t i = 0; i < x.size(); ++i) {
    const auto log_q = [&](double s, int squarings) {
      return sine_log_q_grid(theta0, A, dt, x[i][0], y[i][0], squarings, s);
    };
    const auto derivative = [&](int squarings) {
      return (log_q(sc + step, squarings) - log_q(sc - step, squarings)) / (2 * step);
    };
    q.push_back(std::exp(2 * log_q(sc, 7) - log_q(sc, 6)));
    dq.push_back({q.back() * (2 * derivative(7) - derivative(6))});
  }
  check_gradient_unbiased(estimator, frame, x, y, q, dq, 40000, 0.05);
}
