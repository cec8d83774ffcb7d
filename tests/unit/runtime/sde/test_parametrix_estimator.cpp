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
#include "sde/density_estimator.h"
#include "sde/parametrix_estimator.h"
#include "sde_fixtures.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>
#include <vector>

namespace {

using sde_fixtures::model_with;
using sde_fixtures::parametrix_info;
using Point = std::vector<double>;

// Rows: drift (d), Jacobian (d x d), coefficient, dt, psi's and the drift's bounds (unused: 4),
// sum_i d gamma_il / dx_i (d), sum_il d^2 gamma_il / dx_i dx_l.
void bounds_rows(double* out, int first, int64_t stride, int64_t n) {
  for (int r = 0; r < 4; ++r)
    out[(first + r) * stride + n] = r % 2 ? INFINITY : -INFINITY;
}

// Frame [k, s, dt].
void ou_terms(const double* theta, int64_t, int64_t begin, int64_t end, int64_t stride,
              const double*, const int64_t*, const double* x, const double*, double* out) {
  for (int64_t n = begin; n < end; ++n) {
    out[0 * stride + n] = -theta[0] * x[n];
    out[1 * stride + n] = -theta[0];
    out[2 * stride + n] = theta[1];
    out[3 * stride + n] = theta[2];
    bounds_rows(out, 4, stride, n);
    out[8 * stride + n] = out[9 * stride + n] = 0;
  }
}

// Frame [k, w, s, dt]: drift A x, A = [[-k, w], [-w, -k]]; coefficient the vector (s, s).
void rotation_terms(const double* theta, int64_t, int64_t begin, int64_t end, int64_t stride,
                    const double*, const int64_t*, const double* x, const double*, double* out) {
  const double k = theta[0], w = theta[1];
  for (int64_t n = begin; n < end; ++n) {
    const double x0 = x[n], x1 = x[stride + n];
    const double rows[] = {-k * x0 + w * x1, -w * x0 - k * x1, -k,      w, -w, -k,
                           theta[2],         theta[2],         theta[3]};
    for (int r = 0; r < 9; ++r)
      out[r * stride + n] = rows[r];
    bounds_rows(out, 9, stride, n);
    for (int r = 13; r < 16; ++r)
      out[r * stride + n] = 0;
  }
}

// Frame [m0, m1, G00, G01, G10, G11, dt]: drift m_i x_i, coefficient diag(x) G (row-major).
// gamma_il = x_i x_l Q_il, Q = G G^T: sum_i d gamma_il / dx_i = x_l (sum_i Q_il + Q_ll), and
// sum_il d^2 gamma_il / dx_i dx_l = sum_il Q_il + tr Q.
void geometric_terms(const double* theta, int64_t, int64_t begin, int64_t end, int64_t stride,
                     const double*, const int64_t*, const double* x, const double*, double* out) {
  const double* G = theta + 2;
  const double Q00 = G[0] * G[0] + G[1] * G[1], Q01 = G[0] * G[2] + G[1] * G[3],
               Q11 = G[2] * G[2] + G[3] * G[3];
  for (int64_t n = begin; n < end; ++n) {
    const double x0 = x[n], x1 = x[stride + n];
    const double rows[] = {theta[0] * x0, theta[1] * x1, theta[0],  0,         0,       theta[1],
                           x0 * G[0],     x0 * G[1],     x1 * G[2], x1 * G[3], theta[6]};
    for (int r = 0; r < 11; ++r)
      out[r * stride + n] = rows[r];
    bounds_rows(out, 11, stride, n);
    out[15 * stride + n] = x0 * (Q00 + Q01 + Q00);
    out[16 * stride + n] = x1 * (Q01 + Q11 + Q11);
    out[17 * stride + n] = Q00 + 2 * Q01 + Q11 + Q00 + Q11;
  }
}

double normal_pdf(double x, double mean, double var) {
  return std::exp(-(x - mean) * (x - mean) / (2 * var)) / std::sqrt(2 * std::numbers::pi * var);
}

// The bivariate normal density with covariance [[a, c], [c, b]] at the difference d.
double normal2_pdf(double d0, double d1, double a, double b, double c) {
  const double det = a * b - c * c;
  const double q = (b * d0 * d0 - 2 * c * d0 * d1 + a * d1 * d1) / det;
  return std::exp(-q / 2) / (2 * std::numbers::pi * std::sqrt(det));
}

// Pairs repeated R times, component-major as the estimator takes them.
struct Pairs {
  std::vector<double> prev, cur;
  int64_t P = 0;
  Pairs(const std::vector<Point>& x, const std::vector<Point>& y, int64_t R) {
    const int64_t K = static_cast<int64_t>(x.size()), d = static_cast<int64_t>(x[0].size());
    P = K * R;
    prev.resize(d * P);
    cur.resize(d * P);
    for (int64_t p = 0; p < P; ++p)
      for (int64_t c = 0; c < d; ++c) {
        prev[c * P + p] = x[p % K][c];
        cur[c * P + p] = y[p % K][c];
      }
  }
};

// R independent single estimates of each pair: their mean within 4 standard errors of `exact`,
// the standard error below `power` of it.
void check_unbiased(ssm::DensityEstimator& estimator, const std::vector<double>& frame,
                    const std::vector<Point>& x, const std::vector<Point>& y,
                    const std::vector<double>& exact, int R, double power) {
  const auto K = static_cast<int64_t>(x.size());
  Pairs pairs(x, y, R);
  std::vector<double> log_base(pairs.P), factor(pairs.P);
  ssm::EstimatorCounts counts;
  estimator.single(frame.data(), 3, pairs.prev.data(), pairs.cur.data(), pairs.P, 7, 0, 0,
                   log_base.data(), factor.data(), &counts);
  CHECK(counts.skeleton_points > 0);
  for (int64_t k = 0; k < K; ++k) {
    double sum = 0, sum2 = 0;
    int negative = 0;
    for (int r = 0; r < R; ++r) {
      const double e = std::exp(log_base[r * K + k]) * factor[r * K + k];
      sum += e;
      sum2 += e * e;
      negative += e < 0;
    }
    const double mean = sum / R, se = std::sqrt((sum2 / R - mean * mean) / (R - 1));
    INFO("pair " << k << ": mean " << mean << " (se " << se << "), exact " << exact[k] << ", "
                 << negative << " negative of " << R);
    CHECK(std::fabs(mean - exact[k]) <= 4 * se);
    CHECK(se < power * exact[k]);
  }
}

} // namespace

TEST_CASE("Parametrix estimator: unbiased for the Ornstein-Uhlenbeck density", "[sde]") {
  const double k = 0.8, s = 0.6, dt = 0.5;
  const ssm_model model = model_with(ou_terms);
  ssm::ParametrixEstimator estimator(model, parametrix_info(1, 1, true));
  const std::vector<Point> x = {{0.3}, {1.5}, {-1.0}, {2.5}}, y = {{-0.2}, {0.4}, {-1.6}, {1.2}};
  const double a = std::exp(-k * dt), var = s * s * (1 - a * a) / (2 * k);
  std::vector<double> exact;
  for (size_t i = 0; i < x.size(); ++i)
    exact.push_back(normal_pdf(y[i][0], a * x[i][0], var));
  check_unbiased(estimator, {k, s, dt}, x, y, exact, 40000, 0.02);
}

TEST_CASE("Parametrix estimator: unbiased for a rotating 2-d Ornstein-Uhlenbeck density", "[sde]") {
  const double k = 0.7, w = 1.3, s = 0.8, dt = 0.6;
  const ssm_model model = model_with(rotation_terms);
  ssm::ParametrixEstimator estimator(model, parametrix_info(2, 2, true));
  const std::vector<Point> x = {{0.5, -0.3}, {1.5, 1.0}, {-1.0, 2.0}},
                           y = {{0.2, -0.6}, {1.6, -0.1}, {0.4, 1.2}};
  const double decay = std::exp(-k * dt), c = std::cos(w * dt), sn = std::sin(w * dt);
  const double var = s * s * (1 - decay * decay) / (2 * k);
  std::vector<double> exact;
  for (size_t i = 0; i < x.size(); ++i) { // e^{A dt} = e^{-k dt} [[c, sn], [-sn, c]]
    const double m0 = decay * (c * x[i][0] + sn * x[i][1]);
    const double m1 = decay * (-sn * x[i][0] + c * x[i][1]);
    exact.push_back(normal2_pdf(y[i][0] - m0, y[i][1] - m1, var, var, 0));
  }
  check_unbiased(estimator, {k, w, s, dt}, x, y, exact, 40000, 0.03);
}

TEST_CASE("Parametrix estimator: unbiased for a 2-d geometric Brownian motion (diag(X) G dW)",
          "[sde]") {
  // The Lotka-Volterra example's noise, G = [[0.5, 0.1], [0.1, 0.2]] (Martin 2022, 7.5.4).
  const std::vector<double> frame = {0.3, -0.2, 0.5, 0.1, 0.1, 0.2, 0.5};
  const double dt = frame[6], Q00 = 0.26, Q01 = 0.07, Q11 = 0.05;
  const ssm_model model = model_with(geometric_terms);
  ssm::ParametrixEstimator estimator(model, parametrix_info(2, 4, false));
  const std::vector<Point> x = {{1.0, 2.0}, {1.0, 2.0}, {0.5, 1.5}},
                           y = {{1.1, 1.9}, {1.5, 2.2}, {0.4, 1.6}};
  std::vector<double> exact;
  for (size_t i = 0; i < x.size(); ++i) {
    const double m0 = std::log(x[i][0]) + (frame[0] - Q00 / 2) * dt;
    const double m1 = std::log(x[i][1]) + (frame[1] - Q11 / 2) * dt;
    exact.push_back(
        normal2_pdf(std::log(y[i][0]) - m0, std::log(y[i][1]) - m1, Q00 * dt, Q11 * dt, Q01 * dt) /
        (y[i][0] * y[i][1]));
  }
  // A coefficient that moves with the path makes the estimates heavy-tailed (single ones 600
  // times the mean): the standard error is checked against a looser bound.
  check_unbiased(estimator, frame, x, y, exact, 40000, 0.05);
}

TEST_CASE("Parametrix estimator: Wald's sums are positive and proportional to the density",
          "[sde]") {
  const double k = 0.8, s = 0.6, dt = 0.5;
  const ssm_model model = model_with(ou_terms);
  ssm::ParametrixEstimator estimator(model, parametrix_info(1, 1, true));
  const std::vector<double> frame = {k, s, dt};
  // Sets of two pairs, one far from the other's scale: negative single estimates are frequent.
  const double xa = 3.0, ya = 1.0, xb = -2.5, yb = -2.4;
  const double a = std::exp(-k * dt), var = s * s * (1 - a * a) / (2 * k);
  sde_fixtures::check_wald_ratio(estimator, frame, xa, ya, xb, yb,
                                 normal_pdf(ya, a * xa, var) / normal_pdf(yb, a * xb, var), 20000);
}

TEST_CASE("Parametrix estimator: a singular coefficient or a bad dt names the step", "[sde]") {
  const ssm_model model = model_with(geometric_terms);
  ssm::ParametrixEstimator estimator(model, parametrix_info(2, 4, false));
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
