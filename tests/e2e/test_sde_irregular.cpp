// An SDE observed at irregular times, the gap between observations read from an input column
// (`diffusion(..., gap[t], ...)`), against the exact smoothing law: the Ornstein-Uhlenbeck
// SDE's transition over a gap that is a multiple of h is its AR(1) over h raised to that many
// steps, so the exact law is the brute-force smoother of the AR(1) on the grid of step h with
// the observations at their grid points and missing in between.
#include "kalman.h"
#include "lgssm_support.h"
#include "support.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <vector>

using namespace e2e;

TEST_CASE("diffusion: irregular observation times from an input column agree with the exact "
          "smoothing law",
          "[e2e][stat][sde]") {
  const double kappa = 0.8, sigma = 0.6, r = 0.5, h = 0.25;
  const std::string& exe = model_exe("ou_gaps", R"(
model ou_gaps {
  param kappa : real(0, inf) = 0.8;
  input gap : real; // the time since the previous observation
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ diffusion(-kappa * x[t], 0.6, gap[t], 400);
  y[t] ~ normal(x[t], 0.5);
}
)");
  // Gaps from a quarter to two units of time (gap[0] is not read).
  const std::vector<int> quarters = {0, 1, 4, 2, 7, 1, 3, 8, 2, 5, 1, 4, 2, 3, 6};
  const int T = static_cast<int>(quarters.size());
  std::string inputs = "t,gap\n";
  for (int t = 0; t < T; ++t)
    inputs += fmt::format("{},{}\n", t, quarters[t] * h);
  const std::string gaps = scratch_path("ou-gaps-inputs.csv");
  write_file(gaps, inputs);
  const std::string sim = scratch_path("ou-gaps-sim.csv");
  run_ok(
      {exe, "simulate", "--T", std::to_string(T), "--seed", "4", "--inputs", gaps, "--out", sim});
  // simulate writes the inputs it read beside y: its output is the data file of the methods.
  const std::vector<double> y = read_table(sim).column("y");
  REQUIRE(y.size() == static_cast<size_t>(T));
  const std::string& data = sim;

  // The AR(1) over h on the grid; observation t at grid step sum of its quarters.
  LinearGaussianModel m;
  const double a = std::exp(-kappa * h);
  m.m0 = Eigen::VectorXd::Zero(1);
  m.P0 = Eigen::MatrixXd::Identity(1, 1);
  m.A = Eigen::MatrixXd::Constant(1, 1, a);
  m.Q = Eigen::MatrixXd::Constant(1, 1, sigma * sigma * (1 - a * a) / (2 * kappa));
  m.B = Eigen::MatrixXd::Ones(1, 1);
  m.R = Eigen::MatrixXd::Constant(1, 1, r * r);
  std::vector<int> step(T, 0);
  for (int t = 1; t < T; ++t)
    step[t] = step[t - 1] + quarters[t];
  std::vector<Eigen::VectorXd> grid(
      step.back() + 1, Eigen::VectorXd::Constant(1, std::numeric_limits<double>::quiet_NaN()));
  for (int t = 0; t < T; ++t)
    grid[step[t]][0] = y[t];
  const SmoothingReference exact = brute_force_smoother(m, grid);

  // bis with General Poisson estimates of each step's density over its own gap (psi unbounded
  // above: Wald's identity), 12 seeds: the means within 5 standard errors at every t.
  std::vector<std::vector<double>> means(T);
  for (int k = 0; k < 12; ++k) {
    const std::string out = scratch_path(fmt::format("ou-gaps-bis-{}.csv", k));
    const nlohmann::json j = nlohmann::json::parse(
        run_ok({exe, "smooth", "--data", data, "--method", "bis", "--particles", "500",
                "--marginals", "--seed", std::to_string(40 + k), "--json", "--out", out})
            .out);
    CHECK_THAT(j["details"]["transition_density"].get<std::string>(),
               Catch::Contains("General Poisson"));
    const std::vector<double> mean = read_table(out).column("mean_x");
    REQUIRE(mean.size() == static_cast<size_t>(T));
    for (int t = 0; t < T; ++t)
      means[t].push_back(mean[t]);
  }
  for (int t = 0; t < T; ++t)
    check_mean_close(means[t], exact.mean[step[t]], 5,
                     fmt::format("E[x_{} | y] after a gap of {}", t, quarters[t] * h));
  // The test has power: had the gaps been ignored (every step one unit of time), the exact means
  // would differ from these by more than 10 times the largest standard error.
  LinearGaussianModel unit = m;
  const double a1 = std::exp(-kappa);
  unit.A(0, 0) = a1;
  unit.Q(0, 0) = sigma * sigma * (1 - a1 * a1) / (2 * kappa);
  std::vector<Eigen::VectorXd> ys;
  for (int t = 0; t < T; ++t)
    ys.push_back(Eigen::VectorXd::Constant(1, y[t]));
  const SmoothingReference ignored = brute_force_smoother(unit, ys);
  double gap = 0, se = 0;
  for (int t = 0; t < T; ++t) {
    gap = std::max(gap, std::fabs(ignored.mean[t] - exact.mean[step[t]]));
    se = std::max(se, std::sqrt(sample_variance(means[t]) / static_cast<double>(means[t].size())));
  }
  INFO("largest difference " << gap << ", largest standard error " << se);
  CHECK(gap > 10 * se);
}
