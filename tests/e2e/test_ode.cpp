// End-to-end tests of ode_rk4, the Runge-Kutta integration of a user function: on a linear system
// the kernels reproduce the method's own recurrence, y_{j+1} = R(hA) y_j with R the degree-4
// Taylor polynomial of exp, to rounding, and come within its error bound of the exact solution;
// a rate of time alone is integrated exactly (Runge-Kutta is then Simpson's rule, exact for
// cubics), over intervals of different step counts; and an ODE inside a transition, which makes
// the model linear-Gaussian without the analysis seeing it, gives a bootstrap filter whose
// filtering means agree with the Kalman filter's within their Monte Carlo error, an EKF whose
// Jacobian (the ODE's forward sensitivity in its start) makes it that Kalman filter exactly, and
// a score (sensitivities in the rate's parameter) within its standard errors of the Kalman
// log-likelihood's derivative.
#include "kalman.h"
#include "support.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <Eigen/Core>
#include <unsupported/Eigen/MatrixFunctions>

#include <cmath>
#include <string>
#include <vector>

using namespace e2e;

namespace {

// R(M) = I + M + M^2/2 + M^3/6 + M^4/24: one classical Runge-Kutta step of y' = A y is R(hA) y.
Eigen::Matrix2d runge_kutta_step(const Eigen::Matrix2d& m) {
  const Eigen::Matrix2d m2 = m * m;
  return Eigen::Matrix2d::Identity() + m + m2 / 2 + m2 * m / 6 + m2 * m2 / 24;
}

} // namespace

TEST_CASE("ode_rk4 on a linear system is the Runge-Kutta recurrence, within its error bound of "
          "the exact solution",
          "[e2e][ode]") {
  // y' = A y, A = [[-k, w], [-w, -k]]: a decaying rotation, y(t) = exp((t - t0) A) y0. From t0 =
  // 0.2 to 0.7, 1.5 and 4 with steps of at most 0.3: 2, 3 and 9 steps of 0.25, 0.2667, 0.2778.
  const std::string& exe = model_exe("ode_linear", R"(
simulator ode_linear {
  param k ~ uniform(0.1, 1);
  param w ~ uniform(0.5, 3);
  fn spin(time : real, y : vector[2], decay : real, speed : real) -> vector[2] =
    [-decay * y[0] + speed * y[1], -speed * y[0] - decay * y[1]];
  let Y = ode_rk4(spin, [1, -0.5], 0.2, [0.7, 1.5, 4], 0.3, k, w);
  obs first = Y[0:3, 0];
  obs second = Y[0:3, 1];
}
)");
  const Table table = parse_table(run_ok({exe, "simulate", "--n", "50", "--seed", "3"}).out);
  const std::vector<double> ks = table.column("k"), ws = table.column("w");
  const double times[] = {0.2, 0.7, 1.5, 4};
  const int steps[] = {2, 3, 9};
  double worst_recurrence = 0, worst_exact = 0;
  for (size_t r = 0; r < ks.size(); ++r) {
    Eigen::Matrix2d a;
    a << -ks[r], ws[r], -ws[r], -ks[r];
    Eigen::Vector2d y(1, -0.5);
    for (int i = 0; i < 3; ++i) {
      const double h = (times[i + 1] - times[i]) / steps[i];
      for (int j = 0; j < steps[i]; ++j)
        y = runge_kutta_step(h * a) * y;
      const Eigen::Vector2d exact =
          (Eigen::Matrix2d((times[i + 1] - times[0]) * a).exp()) * Eigen::Vector2d(1, -0.5);
      const double got[] = {table.column(fmt::format("first[{}]", i))[r],
                            table.column(fmt::format("second[{}]", i))[r]};
      for (int c = 0; c < 2; ++c) {
        INFO(fmt::format("k {} w {} t {} component {}: {} against {} (recurrence), {} (exact)",
                         ks[r], ws[r], times[i + 1], c, got[c], y[c], exact[c]));
        // The recurrence, to rounding: each value is the same sum of a few hundred products.
        CHECK(std::fabs(got[c] - y[c]) <= 1e-12);
        // Runge-Kutta's global error: each step's local error is at most |hA|^5 / 120 |y|
        // (the Taylor remainder of exp, |A| <= k + w), and errors do not grow (|R(hA)| <= 1 here).
        double bound = 0;
        for (int l = 0; l <= i; ++l) {
          const double hl = (times[l + 1] - times[l]) / steps[l];
          bound += steps[l] * std::pow(hl * (ks[r] + ws[r]), 5) / 120 * 1.2;
        }
        CHECK(std::fabs(got[c] - exact[c]) <= bound);
        worst_recurrence = std::max(worst_recurrence, std::fabs(got[c] - y[c]));
        worst_exact = std::max(worst_exact, std::fabs(got[c] - exact[c]));
      }
    }
  }
  INFO(fmt::format("largest differences: {} from the recurrence, {} from exp(tA)", worst_recurrence,
                   worst_exact));
  CHECK(worst_exact > 1e-9); // the check above would see a solver that ignored the step
}

TEST_CASE("ode_rk4 integrates a rate of time alone exactly: Simpson's rule on a cubic",
          "[e2e][ode]") {
  // y' = 3 s^2 - 2 s + 1 + c from y(0.5) = y0: y(t) = y0 + [s^3 - s^2 + s]_{0.5}^{t} + c (t - 0.5).
  // Each Runge-Kutta step of a rate that does not read y is Simpson's rule on [s, s + h], exact
  // for cubics, so the solution is exact at 1, 2.25 and 3 (2, 4 and 2 steps of at most 0.4).
  const std::string& exe = model_exe("ode_cubic", R"(
simulator ode_cubic {
  param c ~ normal(0, 1);
  param y0 ~ normal(0, 1);
  fn slope(s : real, y : vector[1], shift : real) -> vector[1] = [3 * s^2 - 2 * s + 1 + shift];
  obs x = ode_rk4(slope, [y0], 0.5, [1, 2.25, 3], 0.4, c)[0:3, 0];
}
)");
  const Table table = parse_table(run_ok({exe, "simulate", "--n", "20", "--seed", "5"}).out);
  const std::vector<double> cs = table.column("c"), y0s = table.column("y0");
  auto antiderivative = [](double s) { return s * s * s - s * s + s; };
  const double times[] = {1, 2.25, 3};
  for (size_t r = 0; r < cs.size(); ++r)
    for (int i = 0; i < 3; ++i) {
      const double exact =
          y0s[r] + antiderivative(times[i]) - antiderivative(0.5) + cs[r] * (times[i] - 0.5);
      const double got = table.column(fmt::format("x[{}]", i))[r];
      INFO(fmt::format("c {} y0 {} t {}: {} against {}", cs[r], y0s[r], times[i], got, exact));
      CHECK(std::fabs(got - exact) <= 1e-12 * (1 + std::fabs(exact)));
    }
}

TEST_CASE("an ODE in a transition: the bootstrap filter agrees with the Kalman filter, the EKF is "
          "it, and the score is its derivative",
          "[e2e][ode][stat]") {
  // x[t] ~ N(z(1), q) with z' = -k z, z(0) = x[t-1], in 4 Runge-Kutta steps: z(1) = a x[t-1], a =
  // R(-k/4)^4, so the model is linear-Gaussian with that a.
  const std::string& exe = model_exe("ode_transition", R"(
model ode_transition {
  param k : real(0, inf) = 0.7;
  param q : real(0, inf) = 0.5;
  state x : real;
  obs y : real;
  fn decay(time : real, z : vector[1], rate : real) -> vector[1] = -rate * z;
  x[0] ~ normal(1, 1);
  x[t] ~ normal(ode_rk4(decay, [x[t-1]], 0, 1, 0.25, k)[0, 0], q);
  y[t] ~ normal(x[t], 1);
}
)");
  // The Runge-Kutta map of z' = -k z over one unit in 4 steps.
  auto rk4_map = [](double k) {
    const double m = -k * 0.25;
    return std::pow(1 + m + m * m / 2 + m * m * m / 6 + m * m * m * m / 24, 4);
  };
  const double a = rk4_map(0.7);
  std::vector<Eigen::VectorXd> ys;
  std::string csv = "y\n";
  for (int t = 0; t < 25; ++t) {
    const double y = 1.5 * std::sin(0.7 * t) + 0.3 * std::cos(2.1 * t);
    ys.push_back(Eigen::VectorXd::Constant(1, y));
    csv += fmt::format("{}\n", y);
  }
  const std::string data = scratch_path("ode-transition.csv");
  write_file(data, csv);
  LinearGaussianModel lg;
  lg.m0 = Eigen::VectorXd::Constant(1, 1);
  lg.P0 = Eigen::MatrixXd::Constant(1, 1, 1);
  lg.A = Eigen::MatrixXd::Constant(1, 1, a);
  lg.Q = Eigen::MatrixXd::Constant(1, 1, 0.25);
  lg.B = Eigen::MatrixXd::Constant(1, 1, 1);
  lg.R = Eigen::MatrixXd::Constant(1, 1, 1);
  const KalmanResult exact = kalman_filter(lg, ys);
  const FilterRun run = run_filter(exe, {"--data", data, "--particles", "20000", "--seed", "7"},
                                   scratch_path("ode-transition-filter.csv"));
  const std::vector<double> mean = run.table.column("mean_x"), ess = run.table.column("ess");
  for (size_t t = 0; t < ys.size(); ++t) {
    const double se = std::sqrt(exact.cov[t](0, 0) / ess[t]);
    INFO(fmt::format("t {}: filter mean {} against Kalman {} (se {})", t, mean[t], exact.mean[t][0],
                     se));
    CHECK(std::fabs(mean[t] - exact.mean[t][0]) < 4 * se);
  }
  // On a linear-Gaussian model the EKF is the Kalman filter: its Jacobian d z(1) / d x[t-1] is
  // the ODE's sensitivity in its start, which must be a exactly.
  const nlohmann::json ekf = nlohmann::json::parse(
      run_ok({exe, "filter", "--data", data, "--method", "ekf", "--json"}).out);
  CHECK(ekf["log_likelihood"].get<double>() == Approx(exact.log_likelihood).epsilon(1e-10));
  // The score in k flows through the sensitivity in the rate's parameter; in q it does not.
  // Against central differences of the Kalman log-likelihood, within 4 standard errors.
  auto log_likelihood = [&](double k, double q) {
    LinearGaussianModel m = lg;
    m.A(0, 0) = rk4_map(k);
    m.Q(0, 0) = q * q;
    return kalman_filter(m, ys).log_likelihood;
  };
  const double eps = 1e-6;
  const double exact_k =
      (log_likelihood(0.7 + eps, 0.5) - log_likelihood(0.7 - eps, 0.5)) / (2 * eps);
  const double exact_q =
      (log_likelihood(0.7, 0.5 + eps) - log_likelihood(0.7, 0.5 - eps)) / (2 * eps);
  const nlohmann::json score =
      nlohmann::json::parse(run_ok({exe, "score", "--data", data, "--particles", "2000",
                                    "--replicates", "20", "--seed", "3", "--json"})
                                .out);
  for (const auto& [name, truth] : {std::pair{"k", exact_k}, std::pair{"q", exact_q}}) {
    const double got = score["score"][name].get<double>();
    const double se = score["score_se"][name].get<double>();
    INFO(fmt::format("score in {}: {} (se {}) against Kalman's {}", name, got, se, truth));
    CHECK(std::fabs(got - truth) < 4 * se);
  }

  // An ODE's solution as an extra argument of another's rate: z' = -k c z with c = w(1) of
  // w' = 0.3 w, w(0) = 1, so a = R(-k c / 4)^4, c = R(0.3 / 4)^4. The inner ODE does not read the
  // outer one's state: the EKF's Jacobian is a, and the EKF is again the Kalman filter.
  const std::string& nested = model_exe("ode_argument", R"(
model ode_argument {
  param k : real(0, inf) = 0.7;
  param q : real(0, inf) = 0.5;
  state x : real;
  obs y : real;
  fn decay(time : real, z : vector[1], rate : real, scale : real) -> vector[1] = -rate * scale * z;
  fn grow(time : real, w : vector[1]) -> vector[1] = 0.3 * w;
  x[0] ~ normal(1, 1);
  x[t] ~ normal(ode_rk4(decay, [x[t-1]], 0, 1, 0.25, k, ode_rk4(grow, [1.0], 0, 1, 0.25)[0, 0])[0, 0], q);
  y[t] ~ normal(x[t], 1);
}
)");
  LinearGaussianModel scaled = lg;
  scaled.A(0, 0) = rk4_map(0.7 * rk4_map(-0.3));
  const nlohmann::json nested_ekf = nlohmann::json::parse(
      run_ok({nested, "filter", "--data", data, "--method", "ekf", "--json"}).out);
  CHECK(nested_ekf["log_likelihood"].get<double>() ==
        Approx(kalman_filter(scaled, ys).log_likelihood).epsilon(1e-10));
}

TEST_CASE("an ODE of constants folds to its exact solution; an SDE whose drift solves an ODE "
          "builds, filters, and its estimators say why they do not apply",
          "[e2e][ode]") {
  // A rate that reads neither t nor y is a constant c: y(t) = y0 + c (t - t0), which the
  // compiler folds (every Runge-Kutta step adds h c).
  const std::string& folded = model_exe("ode_constant", R"(
simulator ode_constant {
  param theta ~ normal(0, 1);
  fn constant_rate(time : real, y : vector[1], c : real) -> vector[1] = [c];
  obs k = ode_rk4(constant_rate, [1], 0, [1, 2.5], 0.4, 2.0)[0:2, 0] + theta;
}
)");
  const Table table = parse_table(run_ok({folded, "simulate", "--n", "5", "--seed", "2"}).out);
  const std::vector<double> theta = table.column("theta");
  for (size_t r = 0; r < theta.size(); ++r) {
    CHECK(table.column("k[0]")[r] == Approx(3 + theta[r]).margin(1e-12));
    CHECK(table.column("k[1]")[r] == Approx(6 + theta[r]).margin(1e-12));
  }
  const std::string& sde = model_exe("ode_in_drift", R"(
model ode_in_drift {
  param theta : real = 0.5;
  state x : real;
  obs y : real;
  fn push(time : real, z : vector[1], c : real) -> vector[1] = [c * z[0]];
  x[0] ~ normal(0, 1);
  x[t] ~ diffusion(-theta * x[t] + ode_rk4(push, [1.0], 0, 1, 0.1, theta)[0, 0], 1, 0.5);
  y[t] ~ normal(x[t], 1);
}
)");
  const std::string data = scratch_path("ode-in-drift.csv");
  write_file(data, "y\n0.1\n0.5\n-0.2\n");
  const nlohmann::json filtered =
      nlohmann::json::parse(run_ok({sde, "filter", "--data", data, "--json"}).out);
  CHECK(std::isfinite(filtered["log_likelihood"].get<double>()));
  const ProcessResult score = run_process({sde, "score", "--data", data});
  CHECK(score.exit_code != 0);
  CHECK_THAT(score.err, Catch::Matchers::Contains("the drift solves an ODE (ode_rk4)"));
}
