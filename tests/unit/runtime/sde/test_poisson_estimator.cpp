// The General Poisson estimator of an SDE's transition density (runtime/sde) against SDEs whose
// transition densities are known, through hand-written diffusion_terms kernels: the
// Ornstein-Uhlenbeck process dX = -k X dt + s dW (psi unbounded above: c and lambda from psi
// near each pair, estimates of either sign) and dX = tanh(X) dt + dW (psi = 1/2, bounded by the
// compiler's intervals [0, 1]: positive estimates), whose density is
// phi_dt(y - x) cosh(y) / cosh(x) exp(-dt / 2). Single estimates are unbiased (the mean of many
// independent ones within 4 standard errors of the density); Wald's sums are positive and, within
// a set, proportional to the densities (a ratio of means within 4 delta-method standard errors);
// the same seed gives the same estimates; estimates far in the tails are computed in logarithms;
// a pair with a non-finite end has estimate 0; a zero coefficient is an error naming the step.
#include "core/error.h"
#include "core/metadata.h"
#include "sde/poisson_estimator.h"
#include "sde_fixtures.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>
#include <vector>

namespace {

using sde_fixtures::model_with;
using sde_fixtures::sde_info;

// The frame: [k, s, dt] for OU, [dt] for tanh. Rows: drift, drift', coefficient, dt, psi's bounds,
// the drift's bounds.
void ou_poisson_terms(const double* theta, int64_t, int64_t begin, int64_t end, int64_t stride,
                      const double*, const int64_t*, const double* x, const double*, double* out) {
  const double k = theta[0], s = theta[1], dt = theta[2];
  for (int64_t n = begin; n < end; ++n) {
    out[0 * stride + n] = -k * x[n];
    out[1 * stride + n] = -k;
    out[2 * stride + n] = s;
    out[3 * stride + n] = dt;
    out[4 * stride + n] = -k / 2;
    out[5 * stride + n] = INFINITY;
    out[6 * stride + n] = -INFINITY; // the drift's bounds
    out[7 * stride + n] = INFINITY;
  }
}

void tanh_terms(const double* theta, int64_t, int64_t begin, int64_t end, int64_t stride,
                const double*, const int64_t*, const double* x, const double*, double* out) {
  for (int64_t n = begin; n < end; ++n) {
    const double th = std::tanh(x[n]);
    out[0 * stride + n] = th;
    out[1 * stride + n] = 1 - th * th;
    out[2 * stride + n] = 1;
    out[3 * stride + n] = theta[0];
    out[4 * stride + n] = 0; // (tanh^2 in [0, 1] + sech^2 in [0, 1]) / 2, as intervals give it
    out[5 * stride + n] = 1;
    out[6 * stride + n] = -1; // the drift's bounds
    out[7 * stride + n] = 1;
  }
}

// Brownian motion with drift m: frame [m, dt]; psi = m^2 / 2, given bounds m^2 / 2 -+ 1.
void drift_terms(const double* theta, int64_t, int64_t begin, int64_t end, int64_t stride,
                 const double*, const int64_t*, const double*, const double*, double* out) {
  const double m = theta[0];
  for (int64_t n = begin; n < end; ++n) {
    out[0 * stride + n] = m;
    out[1 * stride + n] = 0;
    out[2 * stride + n] = 1;
    out[3 * stride + n] = theta[1];
    out[4 * stride + n] = m * m / 2 - 1;
    out[5 * stride + n] = m * m / 2 + 1;
    out[6 * stride + n] = out[7 * stride + n] = m; // the drift's bounds
  }
}

// As tanh_terms, with psi's bounds NaN (parameters outside what the bounds' expressions allow).
void nan_bounds_terms(const double* theta, int64_t t, int64_t begin, int64_t end, int64_t stride,
                      const double* xp, const int64_t* a, const double* x, const double* y,
                      double* out) {
  tanh_terms(theta, t, begin, end, stride, xp, a, x, y, out);
  for (int64_t n = begin; n < end; ++n)
    out[4 * stride + n] = out[5 * stride + n] = NAN;
}

// As tanh_terms, with psi's bounds from the frame [dt, lower, upper] (as a model gives them).
void tanh_given_terms(const double* theta, int64_t t, int64_t begin, int64_t end, int64_t stride,
                      const double* xp, const int64_t* a, const double* x, const double* y,
                      double* out) {
  tanh_terms(theta, t, begin, end, stride, xp, a, x, y, out);
  for (int64_t n = begin; n < end; ++n) {
    out[4 * stride + n] = theta[1];
    out[5 * stride + n] = theta[2];
  }
}

double normal_pdf(double x, double mean, double var) {
  return std::exp(-(x - mean) * (x - mean) / (2 * var)) / std::sqrt(2 * std::numbers::pi * var);
}

// sde_fixtures' check, for scalar pairs (x[i], y[i]), the error below 5% of the density.
void check_unbiased(ssm::PoissonEstimator& estimator, const std::vector<double>& frame,
                    const std::vector<double>& x, const std::vector<double>& y,
                    const std::vector<double>& exact, int R) {
  std::vector<sde_fixtures::Point> px, py;
  for (size_t i = 0; i < x.size(); ++i) {
    px.push_back({x[i]});
    py.push_back({y[i]});
  }
  sde_fixtures::check_density_unbiased(estimator, frame, px, py, exact, R, 0.05);
}

} // namespace

TEST_CASE("General Poisson estimator: unbiased for the Ornstein-Uhlenbeck density", "[sde]") {
  const double k = 0.8, s = 0.6, dt = 0.5;
  const ssm_model model = model_with(ou_poisson_terms);
  const ssm::ModelInfo info = sde_info();
  ssm::PoissonEstimator estimator(model, info);
  const std::vector<double> frame = {k, s, dt};
  const std::vector<double> x = {0.3, 1.5, -1.0, 2.5}, y = {-0.2, 0.4, -1.6, 1.2};
  const double a = std::exp(-k * dt), var = s * s * (1 - a * a) / (2 * k);
  std::vector<double> exact;
  for (size_t i = 0; i < x.size(); ++i)
    exact.push_back(normal_pdf(y[i], a * x[i], var));
  check_unbiased(estimator, frame, x, y, exact, 40000);
}

TEST_CASE("General Poisson estimator: positive and unbiased when psi is bounded (tanh drift)",
          "[sde]") {
  const double dt = 0.7;
  const ssm_model model = model_with(tanh_terms);
  const ssm::ModelInfo info = sde_info();
  ssm::PoissonEstimator estimator(model, info);
  const std::vector<double> frame = {dt};
  const std::vector<double> x = {0.0, 1.2, -2.0}, y = {0.5, 0.3, -1.1};
  std::vector<double> exact;
  for (size_t i = 0; i < x.size(); ++i)
    exact.push_back(normal_pdf(y[i], x[i], dt) * std::cosh(y[i]) / std::cosh(x[i]) *
                    std::exp(-dt / 2));
  check_unbiased(estimator, frame, x, y, exact, 20000);

  // With c = sup psi every estimate is positive: one round, no Wald.
  const int64_t P = 3000;
  std::vector<double> prev(P, 1.2), cur(P, 0.3), log_q(P);
  ssm::EstimatorCounts counts;
  estimator.estimate(frame.data(), 1, prev.data(), cur.data(), P, 1, 9, 0, log_q.data(), &counts);
  CHECK(counts.extra_rounds == 0);
  CHECK(counts.estimates == P);
  for (double v : log_q)
    CHECK(std::isfinite(v));
}

TEST_CASE("General Poisson estimator: Wald's sums are positive and proportional to the density",
          "[sde]") {
  const double k = 0.8, s = 0.6, dt = 0.5;
  const ssm_model model = model_with(ou_poisson_terms);
  const ssm::ModelInfo info = sde_info();
  ssm::PoissonEstimator estimator(model, info);
  const std::vector<double> frame = {k, s, dt};
  // Sets of two pairs far in psi's tail (large x): negative single estimates are frequent.
  const double xa = 3.0, ya = 1.0, xb = -2.5, yb = -2.4;
  const double a = std::exp(-k * dt), var = s * s * (1 - a * a) / (2 * k);
  sde_fixtures::check_wald_ratio(estimator, frame, xa, ya, xb, yb,
                                 normal_pdf(ya, a * xa, var) / normal_pdf(yb, a * xb, var), 20000);
}

TEST_CASE("General Poisson estimator: far in the tails, in logarithms; a diverged path has 0",
          "[sde]") {
  // Brownian motion with a large drift m (psi = m^2 / 2 = 1800, given bounds [1799, 1801]): the
  // density is moderate, but its Girsanov factors are exp(-900), exp(1800), exp(-900), which as
  // plain numbers overflow and underflow. Unbiased all the same.
  const double m = 60, dt = 0.5;
  const ssm_model model = model_with(drift_terms);
  const ssm::ModelInfo info = sde_info();
  ssm::PoissonEstimator estimator(model, info);
  const std::vector<double> frame = {m, dt};
  const std::vector<double> x = {0.2, -1.0}, y = {0.2 + m * dt + 0.3, -1.0 + m * dt - 1.1};
  std::vector<double> exact;
  for (size_t i = 0; i < x.size(); ++i)
    exact.push_back(normal_pdf(y[i], x[i] + m * dt, dt));
  check_unbiased(estimator, frame, x, y, exact, 20000);

  // A stiff OU (k = 10, s = 0.1; psi about 5000 at x = 1): thousands of factors below 1 per
  // estimate, whose logarithms stay finite.
  const std::vector<double> stiff = {10, 0.1, 0.5};
  const int64_t P = 200;
  std::vector<double> prev(P, 1.0), cur(P, 0.5), log_q(P);
  estimator.estimate(stiff.data(), 1, prev.data(), cur.data(), P, 1, 5, 0, log_q.data());
  for (double v : log_q)
    CHECK(std::isfinite(v));

  // A pair with a non-finite end (a path that diverged) has estimate 0, and the others of its
  // set are made positive as usual.
  std::vector<double> p2 = {0.3, NAN, 0.2, 0.1}, c2 = {0.1, 0.4, INFINITY, 0.0}, l2(4);
  const std::vector<double> ou = {0.8, 0.6, 0.5};
  estimator.estimate(ou.data(), 1, p2.data(), c2.data(), 4, 2, 5, 0, l2.data());
  CHECK(std::isfinite(l2[0]));
  CHECK(l2[1] == -INFINITY);
  CHECK(l2[2] == -INFINITY);
  CHECK(std::isfinite(l2[3]));
}

TEST_CASE("General Poisson estimator: a zero coefficient, a bad dt or bounds name the step",
          "[sde]") {
  const ssm_model model = model_with(ou_poisson_terms);
  const ssm::ModelInfo info = sde_info();
  ssm::PoissonEstimator estimator(model, info);
  std::vector<double> prev = {0.1}, cur = {0.2}, log_q(1);
  const std::vector<double> zero_scale = {0.8, 0.0, 0.5}, bad_dt = {0.8, 0.6, -1.0};
  CHECK_THROWS_WITH(
      estimator.estimate(zero_scale.data(), 17, prev.data(), cur.data(), 1, 1, 1, 0, log_q.data()),
      Catch::Contains("at t=17") && Catch::Contains("must be finite and not 0"));
  CHECK_THROWS_WITH(
      estimator.estimate(bad_dt.data(), 4, prev.data(), cur.data(), 1, 1, 1, 0, log_q.data()),
      Catch::Contains("dt of x[t] at t=4"));
  const ssm_model nan_model = model_with(nan_bounds_terms); // the estimator keeps a reference
  ssm::PoissonEstimator nan_bounds(nan_model, info);
  const std::vector<double> tanh_frame = {0.5};
  CHECK_THROWS_WITH(
      nan_bounds.estimate(tanh_frame.data(), 6, prev.data(), cur.data(), 1, 1, 1, 0, log_q.data()),
      Catch::Contains("at t=6") && Catch::Contains("psi's bounds"));
  ssm::ModelInfo no_gpe = sde_info();
  no_gpe.sde->gpe_reason = "the General Poisson estimator is implemented for scalar SDEs";
  CHECK_THROWS_WITH(ssm::PoissonEstimator(model, no_gpe), Catch::Contains("scalar SDEs"));
}

TEST_CASE("General Poisson estimator: psi's bounds from the model are used, and checked", "[sde]") {
  // dX = tanh(X) dt + dW has psi = 1/2 everywhere: bounds [1/2, 1/2] make the Poisson rate 0 and
  // every estimate the exact density phi_dt(y - x) cosh(y) / cosh(x) exp(-dt / 2).
  const double dt = 0.7;
  const ssm_model model = model_with(tanh_given_terms);
  ssm::ModelInfo info = sde_info();
  info.sde->psi_lower_given = info.sde->psi_upper_given = true;
  info.sde->exact_bridges = false; // the compiler says so with a bound from the model
  ssm::PoissonEstimator estimator(model, info);
  const std::vector<double> tight = {dt, 0.5, 0.5};
  const std::vector<double> x = {0.0, 1.2, -2.0}, y = {0.5, 0.3, -1.1};
  std::vector<double> log_q(x.size());
  ssm::EstimatorCounts counts;
  estimator.estimate(tight.data(), 2, x.data(), y.data(), 3, 1, 5, 0, log_q.data(), &counts);
  CHECK(counts.bridge_points == 0);
  for (size_t i = 0; i < x.size(); ++i)
    CHECK(log_q[i] == Approx(std::log(normal_pdf(y[i], x[i], dt) * std::cosh(y[i]) /
                                      std::cosh(x[i]) * std::exp(-dt / 2)))
                          .epsilon(1e-10));
  // A bound that psi crosses at a point the estimate visits is the model's error, at that step.
  const std::vector<double> low_upper = {dt, 0.0, 0.3}, high_lower = {dt, 0.6, 1.0};
  CHECK_THROWS_WITH(
      estimator.estimate(low_upper.data(), 9, x.data(), y.data(), 3, 1, 5, 0, log_q.data()),
      Catch::Contains("at t=9") && Catch::Contains("psi = 0.5") &&
          Catch::Contains("above 0.3, the model's psi_upper"));
  CHECK_THROWS_WITH(
      estimator.estimate(high_lower.data(), 4, x.data(), y.data(), 3, 1, 5, 0, log_q.data()),
      Catch::Contains("at t=4") && Catch::Contains("below 0.6, the model's psi_lower"));
  // The same crossing of bounds the compiler derived says so.
  ssm::ModelInfo derived = sde_info();
  ssm::PoissonEstimator compiler_bounds(model, derived);
  CHECK_THROWS_WITH(
      compiler_bounds.estimate(low_upper.data(), 9, x.data(), y.data(), 3, 1, 5, 0, log_q.data()),
      Catch::Contains("the upper bound the compiler derived"));
}

TEST_CASE("General Poisson estimator: its bound holds for every estimate", "[sde]") {
  // tanh drift: psi >= 0 (the intervals' lower bound), |drift| <= 1, s = 1: the bound is
  // exp(dt / 2) / sqrt(2 pi dt) (rejection sampling from the backward kernel divides by it).
  const double dt = 0.5;
  const ssm_model model = model_with(tanh_terms);
  ssm::PoissonEstimator estimator(model, sde_info());
  const std::vector<double> frame = {dt};
  const double lb = estimator.log_bound(frame.data(), 2);
  CHECK(lb == Approx(dt / 2 - 0.5 * std::log(2 * std::numbers::pi * dt)));
  const int64_t P = 4000;
  std::vector<double> prev(P), cur(P), log_q(P);
  for (int64_t p = 0; p < P; ++p) { // pairs over [-3, 3]^2, some far apart
    prev[p] = -3 + 6 * static_cast<double>(p % 61) / 60;
    cur[p] = -3 + 6 * static_cast<double>(p % 67) / 66;
  }
  estimator.estimate(frame.data(), 2, prev.data(), cur.data(), P, 1, 9, 0, log_q.data());
  double top = -INFINITY;
  for (double v : log_q)
    top = std::max(top, v);
  CHECK(top <= lb);
  CHECK(top > lb - 1); // and not a vacuous bound
  // An unbounded psi (OU) or drift has none.
  const ssm_model ou = model_with(ou_poisson_terms);
  ssm::PoissonEstimator unbounded(ou, sde_info());
  const std::vector<double> ou_frame = {0.8, 0.6, 0.5};
  CHECK(unbounded.log_bound(ou_frame.data(), 2) == INFINITY);
}

TEST_CASE("Wald's loop over one set of pairs on a pool is estimate() with one set, whatever the "
          "threads",
          "[sde]") {
  // 3000 pairs (twelve blocks of work) in one set, the random-weight filter's step: OU pairs far
  // in psi's tail, whose single estimates are sometimes negative, so that the loop runs rounds.
  const std::vector<double> frame = {0.8, 0.6, 0.5};
  const ssm_model model = model_with(ou_poisson_terms);
  const ssm::ModelInfo info = sde_info();
  const int64_t P = 3000;
  std::vector<double> prev(P), cur(P), serial(P);
  for (int64_t p = 0; p < P; ++p) {
    prev[p] = 2 + 2 * static_cast<double>(p % 37) / 36;
    cur[p] = -1 + 3 * static_cast<double>(p % 41) / 40;
  }
  prev[5] = NAN; // a diverged pair takes no part
  ssm::EstimatorCounts counts;
  ssm::PoissonEstimator(model, info)
      .estimate(frame.data(), 4, prev.data(), cur.data(), P, P, 13, 0, serial.data(), &counts);
  CHECK(counts.extra_rounds > 0);
  CHECK(serial[5] == -INFINITY);
  for (int threads : {1, 4}) {
    ssm::ThreadPool pool(threads);
    std::vector<double> pooled(P);
    ssm::DensityEstimator::estimate_one_set(model, info, pool, frame.data(), 4, prev.data(),
                                            cur.data(), P, 13, 0, pooled.data());
    CHECK(pooled == serial);
  }
}

TEST_CASE("single_rounds prepares once and gives single()'s values round by round", "[sde]") {
  const ssm_model model = model_with(ou_poisson_terms);
  ssm::PoissonEstimator estimator(model, sde_info());
  const std::vector<double> frame = {0.8, 0.6, 0.5}, prev = {0.1, -1.3, 2.0}, cur = {0.4, 0.2, 1.1};
  const std::vector<int> rounds = {0, 3, 7};
  std::vector<std::vector<double>> base, factor;
  estimator.single_rounds(frame.data(), 5, prev.data(), cur.data(), 3, 17, 40, rounds, false,
                          [&](int, const double* b, const double* f, const double* g) {
                            CHECK(g == nullptr);
                            base.emplace_back(b, b + 3);
                            factor.emplace_back(f, f + 3);
                          });
  REQUIRE(base.size() == rounds.size());
  for (size_t i = 0; i < rounds.size(); ++i) {
    std::vector<double> b(3), f(3);
    estimator.single(frame.data(), 5, prev.data(), cur.data(), 3, 17, 40, rounds[i], b.data(),
                     f.data());
    CHECK(b == base[i]);
    CHECK(f == factor[i]);
  }
  CHECK(factor[0] != factor[1]); // the rounds' draws differ
}
