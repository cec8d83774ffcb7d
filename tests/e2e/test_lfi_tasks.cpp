// End-to-end tests that the benchmark's simulators, as shipped in examples/, are the sbibm tasks
// they stand for: their draws, given the parameters drawn with them, have the moments each
// task's law implies (means, variances, correlations, and the mixture's shared scale). SLCP's four
// observations, whitened by the mean and covariance theta implies, are independent standard
// normals; gaussian_mixture's residual has the two components' variances with one scale shared by
// both coordinates; SIR's counts are binomial around the infected fraction of the ODE, solved here
// by the test's own Runge-Kutta; Lotka-Volterra's log-abundances are normal around the ODE's;
// two_moons' point, shifted back, lies on its half circle with a normal radius and a uniform
// angle; and each prior is the task's.
#include "support.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

using namespace e2e;

namespace {

double correlation(const std::vector<double>& a, const std::vector<double>& b) {
  const double ma = sample_mean(a), mb = sample_mean(b);
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
  }
  return sab / std::sqrt(saa * sbb);
}

// log(column) standardised by the lognormal prior's location and scale.
std::vector<double> log_standardised(const std::vector<double>& v, double location, double scale) {
  std::vector<double> z;
  for (double x : v)
    z.push_back((std::log(x) - location) / scale);
  return z;
}

// The classical Runge-Kutta solution of y' = f(y) from y0 at times 0 < t_1 < ..., with step h.
template <size_t D, class F>
std::vector<std::array<double, D>> rk4(const F& f, std::array<double, D> y,
                                       const std::vector<double>& times, double h) {
  std::vector<std::array<double, D>> out;
  double t = 0;
  auto plus = [](std::array<double, D> a, const std::array<double, D>& b, double c) {
    for (size_t i = 0; i < D; ++i)
      a[i] += c * b[i];
    return a;
  };
  for (double target : times) {
    for (long s = std::lround((target - t) / h); s > 0; --s) {
      const auto k1 = f(y), k2 = f(plus(y, k1, h / 2)), k3 = f(plus(y, k2, h / 2)),
                 k4 = f(plus(y, k3, h));
      for (size_t i = 0; i < D; ++i)
        y[i] += h / 6 * (k1[i] + 2 * k2[i] + 2 * k3[i] + k4[i]);
    }
    t = target;
    out.push_back(y);
  }
  return out;
}

} // namespace

TEST_CASE("slcp: four independent draws of the 2-D Gaussian theta defines", "[lfi]") {
  const Table t = parse_table(run_ok({example_exe("slcp"), "simulate", "--n", "4000"}).out);
  std::vector<std::vector<double>> theta;
  for (int k = 0; k < 5; ++k) {
    theta.push_back(t.column(fmt::format("theta[{}]", k)));
    // The prior: uniform on (-3, 3), sd sqrt(3).
    CHECK(*std::min_element(theta[k].begin(), theta[k].end()) > -3);
    CHECK(*std::max_element(theta[k].begin(), theta[k].end()) < 3);
    CHECK(std::fabs(sample_mean(theta[k])) < 4 * std::sqrt(3.0 / 4000));
  }
  // Whitened: u = (x_0 - m_0) / s1, and (v - rho u) / sqrt(1 - rho^2) with v = (x_1 - m_1) / s2.
  std::vector<std::vector<double>> first(4), second(4);
  for (int j = 0; j < 4; ++j) {
    const std::vector<double> x0 = t.column(fmt::format("x{}[0]", j + 1));
    const std::vector<double> x1 = t.column(fmt::format("x{}[1]", j + 1));
    for (size_t i = 0; i < x0.size(); ++i) {
      const double s1 = std::pow(theta[2][i], 2), s2 = std::pow(theta[3][i], 2);
      const double rho = std::tanh(theta[4][i]);
      const double u = (x0[i] - theta[0][i]) / s1, v = (x1[i] - theta[1][i]) / s2;
      first[j].push_back(u);
      second[j].push_back((v - rho * u) / std::sqrt(1 - rho * rho));
    }
    check_standard_normal(first[j], fmt::format("x{}[0] whitened", j + 1));
    check_standard_normal(second[j], fmt::format("x{}[1] whitened", j + 1));
    CHECK(std::fabs(correlation(first[j], second[j])) < 4 / std::sqrt(4000.0));
  }
  for (int j = 1; j < 4; ++j) // the four draws independent of each other
    CHECK(std::fabs(correlation(first[0], first[j])) < 4 / std::sqrt(4000.0));
}

TEST_CASE("gaussian_mixture: x is N(theta, I) or N(theta, 0.01 I), one scale for both "
          "coordinates",
          "[lfi]") {
  const int n = 20000;
  const Table t = parse_table(
      run_ok({example_exe("gaussian_mixture"), "simulate", "--n", std::to_string(n)}).out);
  std::vector<double> r0, r1, squares, products, inside;
  for (int k = 0; k < 2; ++k) {
    const std::vector<double> theta = t.column(fmt::format("theta[{}]", k));
    CHECK(*std::min_element(theta.begin(), theta.end()) > -10);
    CHECK(*std::max_element(theta.begin(), theta.end()) < 10);
    CHECK(std::fabs(sample_mean(theta)) < 4 * std::sqrt(100.0 / 3 / n));
    const std::vector<double> x = t.column(fmt::format("x[{}]", k));
    for (int i = 0; i < n; ++i)
      (k == 0 ? r0 : r1).push_back(x[i] - theta[i]);
  }
  for (int i = 0; i < n; ++i) {
    squares.push_back(r0[i] * r0[i]);
    products.push_back(r0[i] * r0[i] * r1[i] * r1[i]);
    inside.push_back(std::fabs(r0[i]) < 0.2 ? 1 : 0);
  }
  // E r^2 = (1 + 0.01) / 2, its variance (3 + 3e-4) / 2 - 0.505^2. With one scale for both
  // coordinates, E r0^2 r1^2 = (1 + 1e-4) / 2 (it would be 0.255 with two), its variance about
  // 9 / 2 - 0.25. P(|r0| < 0.2) = (P(|Z| < 0.2) + P(|Z| < 2)) / 2 = 0.55651.
  const double sn = std::sqrt(static_cast<double>(n));
  CHECK(std::fabs(sample_mean(squares) - 0.505) < 4 * std::sqrt(1.5 - 0.255) / sn);
  CHECK(std::fabs(sample_mean(products) - 0.50005) < 4 * std::sqrt(4.5 - 0.25) / sn);
  CHECK(std::fabs(sample_mean(inside) - 0.55651) < 4 * std::sqrt(0.55651 * 0.44349) / sn);
}

TEST_CASE("sir: the counts are binomial around the ODE's infected fraction", "[lfi]") {
  const Table t =
      parse_table(run_ok({example_exe("sir"), "simulate", "--n", "500", "--seed", "5"}).out);
  const std::vector<double> beta = t.column("beta"), gamma = t.column("gamma");
  check_standard_normal(log_standardised(beta, std::log(0.4), 0.5), "log beta");
  check_standard_normal(log_standardised(gamma, std::log(0.125), 0.2), "log gamma");
  const double N = 1e6;
  const std::vector<double> days = {16, 32, 48, 64, 80, 96, 112, 128, 144, 160};
  std::vector<double> z;
  for (size_t i = 0; i < beta.size(); ++i) {
    auto rate = [&](const std::array<double, 3>& y) {
      const double infections = beta[i] * y[0] * y[1] / N;
      return std::array<double, 3>{-infections, infections - gamma[i] * y[1], gamma[i] * y[1]};
    };
    const auto path = rk4<3>(rate, {N - 1, 1, 0}, days, 0.5);
    for (size_t d = 0; d < days.size(); ++d) {
      const double x = t.column(fmt::format("x[{}]", d))[i];
      CHECK(x == std::round(x));
      CHECK((x >= 0 && x <= 1000));
      const double p = path[d][1] / N, var = 1000 * p * (1 - p);
      if (var > 5) // not the near-empty days, where a rare count would dominate the variance
        z.push_back((x - 1000 * p) / std::sqrt(var));
    }
  }
  check_standard_normal(z, "standardised counts");
}

TEST_CASE("lotka_volterra: the log-abundances are normal around the ODE's", "[lfi]") {
  const Table t = parse_table(
      run_ok({example_exe("lotka_volterra"), "simulate", "--n", "300", "--seed", "5"}).out);
  const std::vector<double> alpha = t.column("alpha"), beta = t.column("beta"),
                            gamma = t.column("gamma"), delta = t.column("delta");
  check_standard_normal(log_standardised(alpha, -0.125, 0.5), "log alpha");
  check_standard_normal(log_standardised(beta, -3, 0.5), "log beta");
  check_standard_normal(log_standardised(gamma, -0.125, 0.5), "log gamma");
  check_standard_normal(log_standardised(delta, -3, 0.5), "log delta");
  const std::vector<double> times = {2, 4, 6, 8, 10, 12, 14, 16, 18, 20};
  std::vector<double> z;
  for (size_t i = 0; i < alpha.size(); ++i) {
    auto rate = [&](const std::array<double, 2>& y) {
      return std::array<double, 2>{alpha[i] * y[0] - beta[i] * y[0] * y[1],
                                   -gamma[i] * y[1] + delta[i] * y[0] * y[1]};
    };
    // Steps of 0.002, five times finer than the model's: its solution is the ODE's to 0.001.
    const auto path = rk4<2>(rate, {30, 1}, times, 0.002);
    for (size_t d = 0; d < times.size(); ++d)
      for (const auto& [column, k] : {std::pair{"log_prey", 0}, std::pair{"log_predators", 1}}) {
        const double x = t.column(fmt::format("{}[{}]", column, d))[i];
        z.push_back((x - std::log(path[d][k])) / 0.1);
      }
  }
  check_standard_normal(z, "log-abundances' residuals");
}

TEST_CASE("two_moons: x is a point of the half circle of radius N(0.1, 0.01^2), shifted by theta",
          "[lfi]") {
  const int n = 20000;
  const Table t =
      parse_table(run_ok({example_exe("two_moons"), "simulate", "--n", std::to_string(n)}).out);
  const std::vector<double> t0 = t.column("theta[0]"), t1 = t.column("theta[1]");
  const std::vector<double> x0 = t.column("x[0]"), x1 = t.column("x[1]");
  std::vector<double> radius, angle; // standardised: N(0, 1), and U(0, 1) from the angle
  for (int i = 0; i < n; ++i) {
    CHECK((std::fabs(t0[i]) < 1 && std::fabs(t1[i]) < 1));
    const double u = x0[i] + std::fabs(t0[i] + t1[i]) / std::sqrt(2.0) - 0.25,
                 v = x1[i] - (t1[i] - t0[i]) / std::sqrt(2.0);
    radius.push_back((std::hypot(u, v) - 0.1) / 0.01);
    angle.push_back(std::atan2(v, u) / M_PI + 0.5);
  }
  check_standard_normal(radius, "radius");
  // The angle uniform on (-pi/2, pi/2): its CDF within the KS critical value at 0.1%.
  std::sort(angle.begin(), angle.end());
  double d = 0;
  for (int i = 0; i < n; ++i)
    d = std::max({d, (i + 1.0) / n - angle[i], angle[i] - static_cast<double>(i) / n});
  CHECK(angle.front() > 0);
  CHECK(angle.back() < 1);
  CHECK(d < 1.949 / std::sqrt(static_cast<double>(n)));
}
