// SDE transitions whose density only the parametrix estimator estimates (a vector SDE with a full
// diffusion matrix) against exact answers: the Ornstein-Uhlenbeck SDE's transition is Gaussian,
// so the exact filtering and smoothing laws are Kalman's and RTS's on its AR(1) (sde_models.h).
// bis with parametrix estimates made positive by Wald's identity within each particle's backward
// draws; the random-weight filter with them made positive over each step's particles.
#include "kalman.h"
#include "lgssm_support.h"
#include "sde_models.h"
#include "support.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <functional>

using namespace e2e;

TEST_CASE("diffusion: bis with the parametrix estimator agrees with the exact smoothing law of "
          "a 2-D Ornstein-Uhlenbeck SDE with a full diffusion matrix",
          "[e2e][stat][sde]") {
  // dX = -K X dt + S dW: a vector SDE, outside the General Poisson estimator's scope, whose
  // transition is exactly Gaussian, X_t = e^{-K dt} X_{t-1} + N(0, int_0^dt e^{-Ks} S S'
  // e^{-K's} ds) (Euler's AR(1) with 10^5 substeps: within 10^-5 of it). The forward filter
  // simulates by Euler-Maruyama (400 substeps: a bias far below the Monte Carlo error); bis's
  // backward weights are parametrix estimates made positive by Wald's identity. Means over 12
  // seeds within 4 standard errors (5 per t and component) of the exact smoothing moments.
  const std::string& exe = model_exe("ou2_sde_bis", R"(
model ou2_sde_bis {
  const K = [[1.0, 0.3], [-0.4, 0.6]];
  const S = [[0.5, 0.0], [0.2, 0.4]];
  state x : vector[2];
  obs y : vector[2];
  x[0] ~ mvnormal([0, 0], [[1, 0], [0, 1]]);
  x[t] ~ diffusion(-(K * x[t]), S, 0.7, 400);
  y[t] ~ normal(x[t], 0.3);
  functional level = sum_t x[t][0];
  functional cross = sum_t (t == 0 ? 0 : x[t-1][1] * x[t][0]);
}
)");
  const std::string data = scratch_path("ou2-sde-bis-sim.csv");
  const int T = 12;
  run_ok({exe, "simulate", "--T", std::to_string(T), "--seed", "21", "--out", data});
  const SmoothingReference exact = brute_force_smoother(
      ou2_euler_model(0.7, 100000), observations(read_table(data), {"y[0]", "y[1]"}));
  double level = 0, cross = 0;
  for (int t = 0; t < T; ++t) {
    level += exact.mean[2 * t];
    if (t > 0)
      cross += exact.cov(2 * (t - 1) + 1, 2 * t) + exact.mean[2 * (t - 1) + 1] * exact.mean[2 * t];
  }
  // The General Poisson estimator does not apply (a vector SDE): asked for, it says why and
  // which one does; paris's rejection sampling needs positive bounded estimates.
  const ProcessResult gpe =
      run_process({exe, "smooth", "--data", data, "--method", "bis", "--estimator", "gpe"});
  CHECK(gpe.exit_code != 0);
  CHECK_THAT(gpe.err,
             Catch::Contains("scalar SDEs") && Catch::Contains("--estimator parametrix applies"));
  const ProcessResult paris =
      run_process({exe, "smooth", "--data", data, "--method", "paris", "--backward", "rejection"});
  CHECK(paris.exit_code != 0);
  CHECK_THAT(paris.err, Catch::Contains("parametrix estimator") && Catch::Contains("signed"));

  // 12 runs of `smooth` with `args` (seeds from seed0), each run's JSON checked by `check`: the
  // means of their functionals and marginal means against the exact smoothing law.
  auto agrees_with_exact = [&](const std::string& name, const std::vector<std::string>& args,
                               int seed0, const std::function<void(const nlohmann::json&)>& check) {
    const int R = 12;
    std::vector<double> levels, crosses;
    std::vector<std::vector<double>> means(2 * T);
    for (int k = 0; k < R; ++k) {
      std::vector<std::string> command = {"--data", data, "--seed", std::to_string(seed0 + k)};
      command.insert(command.end(), args.begin(), args.end());
      const FilterRun r =
          run_smooth(exe, command, scratch_path(fmt::format("ou2-sde-{}-{}.csv", name, k)));
      check(r.summary);
      levels.push_back(r.summary["functionals"]["level"].get<double>());
      crosses.push_back(r.summary["functionals"]["cross"].get<double>());
      const Table& table = r.table;
      for (int c = 0; c < 2; ++c) {
        const std::vector<double> mean = table.column(fmt::format("mean_x[{}]", c));
        REQUIRE(mean.size() == static_cast<size_t>(T));
        for (int t = 0; t < T; ++t)
          means[2 * t + c].push_back(mean[t]);
      }
    }
    check_mean_close(levels, level, 4, name + ": sum_t x[t][0]");
    check_mean_close(crosses, cross, 4, name + ": sum_t x[t-1][1] x[t][0]");
    for (int t = 0; t < T; ++t)
      for (int c = 0; c < 2; ++c)
        check_mean_close(means[2 * t + c], exact.mean[2 * t + c], 5,
                         fmt::format("{}: E[x_{}[{}] | y]", name, t, c));
  };
  agrees_with_exact(
      "bis", {"--method", "bis", "--particles", "200", "--backward-samples", "40", "--marginals"},
      500, [](const nlohmann::json& j) {
        CHECK_THAT(j["details"]["transition_density"].get<std::string>(),
                   Catch::Contains("parametrix"));
        CHECK(j["details"]["backward_proposal"] == "euler"); // auto's for an SDE
      });
  // paris by pseudo-marginal Metropolis-Hastings moves (its backward sampling here), proposed
  // from the filter weights (the thesis's; the default, Euler proposals, is checked in
  // test_sde.cpp), estimates made positive by Wald's identity within each particle's start
  // estimates and proposals.
  agrees_with_exact("paris",
                    {"--method", "paris", "--particles", "200", "--backward-samples", "10",
                     "--backward-proposal", "filter", "--marginals"},
                    600, [](const nlohmann::json& j) {
                      CHECK(j["details"]["backward"] == "mcmc");
                      CHECK(j["details"]["backward_proposal"] == "filter");
                    });
}

TEST_CASE("diffusion: the random-weight filter with parametrix estimates made positive by Wald's "
          "identity has no discretisation error",
          "[e2e][stat][sde]") {
  // The 2-D OU of the test above with 2 Euler substeps for simulation and the bootstrap filter:
  // coarse (dt = 0.7), so the bootstrap filter's means are off. The random-weight filter proposes
  // one Euler step and weighs it by parametrix estimates, made positive over all N particles of
  // each step at once: its filtering means match the exact Kalman filter's (on the exact AR(1):
  // Euler's with 10^5 substeps) within 5 standard errors over 12 seeds, where the bootstrap
  // filter's do not; its log-likelihood carries a caveat (Wald's rounds bias it), so auto keeps
  // the bootstrap filter and PMMH refuses it; the same seed gives the same output whatever the
  // threads.
  const std::string& exe = model_exe("ou2_sde_rw", R"(
model ou2_sde_rw {
  const K = [[1.0, 0.3], [-0.4, 0.6]];
  const S = [[0.5, 0.0], [0.2, 0.4]];
  param r : real(0, inf) ~ lognormal(-1.2, 0.1) = 0.3; // for PMMH's refusal
  state x : vector[2];
  obs y : vector[2];
  x[0] ~ mvnormal([0, 0], [[1, 0], [0, 1]]);
  x[t] ~ diffusion(-(K * x[t]), S, 0.7, 2);
  y[t] ~ normal(x[t], r);
}
)");
  // Any data will do: the exact filtering law given them is the Kalman filter's on the exact
  // AR(1), whatever simulated them.
  const std::string data = scratch_path("ou2-sde-rw-data.csv");
  const int T = 15;
  run_ok({exe, "simulate", "--T", std::to_string(T), "--seed", "22", "--out", data});
  const KalmanResult exact =
      kalman_filter(ou2_euler_model(0.7, 100000), observations(read_table(data), {"y[0]", "y[1]"}));

  const ProcessResult pmmh = run_process(
      {exe, "sample", "--method", "pmmh", "--data", data, "--filter", "random-weight", "--json"});
  CHECK(pmmh.exit_code != 0);
  CHECK_THAT(pmmh.err, Catch::Contains("unbiased likelihood") && Catch::Contains("Wald"));

  const int R = 12;
  std::vector<std::vector<double>> rw(2 * T), boot(2 * T);
  for (int k = 0; k < R; ++k)
    for (const char* method : {"random-weight", "auto"}) {
      const FilterRun run = run_filter(exe,
                                       {"--data", data, "--method", method, "--particles", "2000",
                                        "--seed", std::to_string(600 + k)},
                                       scratch_path(fmt::format("ou2-rw-{}-{}.csv", method, k)));
      const bool wald = std::string(method) == "random-weight";
      CHECK(run.summary["method"] == (wald ? "random-weight" : "bootstrap"));
      CHECK(run.summary.contains("log_likelihood_caveat") == wald);
      for (int c = 0; c < 2; ++c) {
        const std::vector<double> mean = run.table.column(fmt::format("mean_x[{}]", c));
        REQUIRE(mean.size() == static_cast<size_t>(T));
        for (int t = 0; t < T; ++t)
          (wald ? rw : boot)[2 * t + c].push_back(mean[t]);
      }
    }
  double worst_boot = 0;
  for (int t = 0; t < T; ++t)
    for (int c = 0; c < 2; ++c) {
      check_mean_close(rw[2 * t + c], exact.mean[t][c], 5,
                       fmt::format("E[x_{}[{}] | y_0:{}]", t, c, t));
      const double se = std::sqrt(sample_variance(boot[2 * t + c]) / R);
      worst_boot =
          std::max(worst_boot, std::fabs(sample_mean(boot[2 * t + c]) - exact.mean[t][c]) / se);
    }
  INFO("the bootstrap filter's largest deviation from Kalman: " << worst_boot << " se");
  CHECK(worst_boot > 5); // two Euler substeps over 0.7 are visibly biased: the test has power

  // Thread-count independence of the Wald step, over two particle blocks.
  const std::string one = scratch_path("ou2-rw-threads-1.csv"),
                    two = scratch_path("ou2-rw-threads-2.csv");
  run_ok({exe, "filter", "--data", data, "--method", "random-weight", "--particles", "5000",
          "--threads", "1", "--out", one});
  run_ok({exe, "filter", "--data", data, "--method", "random-weight", "--particles", "5000",
          "--threads", "2", "--out", two});
  CHECK(read_file(one) == read_file(two));
}
