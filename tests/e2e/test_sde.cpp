// SDE transitions (`x[t] ~ diffusion(drift, diffusion, dt, steps)`) against exact answers. Euler-
// Maruyama with M substeps of h = dt / M is itself a linear-Gaussian transition when the drift is
// linear and the diffusion constant: X_t = (I - hK)^M X_{t-1} + noise of covariance
// h sum_j (I - hK)^j S S' (I - hK)^j', so the bootstrap filter's likelihood and filtering moments
// are checked against Kalman's on that AR(1) (compare.cpp: tolerances from the Monte Carlo
// error). A state-dependent coefficient (geometric Brownian motion) is checked through the exact
// moments of its Euler scheme. The reproducibility of the paths, and the model's errors.
#include "compare.h"
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
#include <numbers>

using namespace e2e;

TEST_CASE("diffusion: Euler-Maruyama Ornstein-Uhlenbeck against Kalman on its AR(1)",
          "[e2e][stat][sde]") {
  const std::string& exe = model_exe("ou_sde", R"(
model ou_sde {
  param kappa : real(0, inf) = 0.8;
  param sigma : real(0, inf) = 0.6;
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ diffusion(-kappa * x[t], sigma, 0.5, 4);
  y[t] ~ normal(x[t], 0.5);
}
)");
  const std::string data = scratch_path("ou-sde-sim.csv");
  run_ok({exe, "simulate", "--T", "60", "--seed", "8", "--out", data});
  LinearGaussianModel m;
  m.m0 = Eigen::VectorXd::Zero(1);
  m.P0 = Eigen::MatrixXd::Identity(1, 1);
  euler_ar1(Eigen::MatrixXd::Constant(1, 1, 0.8), Eigen::MatrixXd::Constant(1, 1, 0.6), 0.5, 4, m.A,
            m.Q);
  m.B = Eigen::MatrixXd::Ones(1, 1);
  m.R = Eigen::MatrixXd::Constant(1, 1, 0.25);
  const KalmanResult exact = kalman_filter(m, observations(read_table(data), {"y"}));

  PfVsKalman c;
  c.label = "ou-sde";
  c.exe = exe;
  c.args = {"--data", data};
  c.state_cols = {"x"};
  c.particles = 5000;
  c.runs = 32;
  c.seed0 = 7000;
  c.missing.assign(60, false);
  compare_with_kalman(c, exact);
}

TEST_CASE("diffusion: a 2-D OU with a full diffusion matrix against Kalman", "[e2e][stat][sde]") {
  // dX = -K X dt + S dW: the drift a matrix product, the diffusion a matrix (a vector state's
  // noise is S dW with W two independent Wiener processes).
  const std::string& exe = model_exe("ou2_sde", R"(
model ou2_sde {
  const K = [[1.0, 0.3], [-0.4, 0.6]];
  const S = [[0.5, 0.0], [0.2, 0.4]];
  state x : vector[2];
  obs y : vector[2];
  x[0] ~ mvnormal([0, 0], [[1, 0], [0, 1]]);
  x[t] ~ diffusion(-(K * x[t]), S, 0.7, 5);
  y[t] ~ normal(x[t], 0.3);
}
)");
  const std::string data = scratch_path("ou2-sde-sim.csv");
  run_ok({exe, "simulate", "--T", "40", "--seed", "9", "--out", data});
  const LinearGaussianModel m = ou2_euler_model(0.7, 5);
  const KalmanResult exact = kalman_filter(m, observations(read_table(data), {"y[0]", "y[1]"}));

  PfVsKalman c;
  c.label = "ou2-sde";
  c.exe = exe;
  c.args = {"--data", data};
  c.state_cols = {"x[0]", "x[1]"};
  c.particles = 10000;
  c.runs = 32;
  c.seed0 = 7100;
  c.missing.assign(40, false);
  compare_with_kalman(c, exact);
}

TEST_CASE("diffusion: a state-dependent coefficient (geometric Brownian motion) has its Euler "
          "scheme's exact moments",
          "[e2e][stat][sde]") {
  // X_{k+1} = X_k (1 + mu h + s sqrt(h) Z_k): the moments of X after M substeps from x0 are
  // products, E[X^p] = x0^p E[(1 + mu h + s sqrt(h) Z)^p]^M. With y missing at t = 0 and 1 the
  // filter's particles at t = 1 are N independent paths: their mean and second moment are checked
  // within 4 standard errors of the exact values.
  const std::string& exe = model_exe("gbm_sde", R"(
model gbm_sde {
  param mu : real = 0.3;
  param s : real(0, inf) = 0.5;
  state x : real;
  obs y : real;
  x[0] ~ normal(2, 1e-12);
  x[t] ~ diffusion(mu * x[t], s * x[t], 1.0, 8);
  y[t] ~ normal(x[t], 1);
}
)");
  const std::string data = scratch_path("gbm-sde-data.csv");
  write_file(data, "y\nNA\nNA\n");
  const int64_t n = 200000;
  const FilterRun run =
      run_filter(exe, {"--data", data, "--particles", std::to_string(n), "--seed", "11"},
                 scratch_path("gbm-sde-filter.csv"));
  const double x0 = 2, mu = 0.3, s = 0.5, h = 1.0 / 8;
  const double a = 1 + mu * h, v = s * s * h;
  const double m1 = x0 * std::pow(a, 8);
  const double m2 = x0 * x0 * std::pow(a * a + v, 8);
  const double m4 = std::pow(x0, 4) * std::pow(std::pow(a, 4) + 6 * a * a * v + 3 * v * v, 8);
  const double mean = run.table.column("mean_x").at(1);
  const double var = run.table.column("var_x").at(1);
  const double se1 = std::sqrt((m2 - m1 * m1) / n), se2 = std::sqrt((m4 - m2 * m2) / n);
  INFO(fmt::format("mean {} (exact {}, se {}), second moment {} (exact {}, se {})", mean, m1, se1,
                   var + mean * mean, m2, se2));
  CHECK(std::fabs(mean - m1) < 4 * se1);
  CHECK(std::fabs(var + mean * mean - m2) < 4 * se2);
}

TEST_CASE("diffusion: bis with the General Poisson estimator agrees with the exact smoothing law "
          "of an Ornstein-Uhlenbeck SDE",
          "[e2e][stat][sde]") {
  // dX = -kappa X dt + sigma dW observed every 0.5 with noise 0.5: exactly an AR(1), a =
  // exp(-kappa dt), q^2 = sigma^2 (1 - a^2) / (2 kappa). Its psi, (kappa^2 x^2 / sigma^2 - kappa)
  // / 2, is unbounded above: the estimates are made positive by Wald's identity. The forward
  // filter simulates the SDE by Euler-Maruyama (400 substeps: a bias far below the Monte Carlo
  // error); the backward weights are the estimator's. Means over 16 seeds within 4 standard errors
  // (5 per t) of the exact smoothing means and functionals.
  const double kappa = 0.8, sigma = 0.6, dt = 0.5, r = 0.5;
  const std::string& exe = model_exe("ou_sde_bis", R"(
model ou_sde_bis {
  param kappa : real(0, inf) = 0.8;
  param sigma : real(0, inf) = 0.6;
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ diffusion(-kappa * x[t], sigma, 0.5, 400);
  y[t] ~ normal(x[t], 0.5);
  functional level = sum_t x[t];
  functional cross = sum_t (t == 0 ? 0 : x[t-1] * x[t]);
}
)");
  const std::string data = scratch_path("ou-sde-bis-sim.csv");
  const int T = 20;
  run_ok({exe, "simulate", "--T", std::to_string(T), "--seed", "12", "--out", data});
  LinearGaussianModel m;
  m.m0 = Eigen::VectorXd::Zero(1);
  m.P0 = Eigen::MatrixXd::Identity(1, 1);
  const double a = std::exp(-kappa * dt);
  m.A = Eigen::MatrixXd::Constant(1, 1, a);
  m.Q = Eigen::MatrixXd::Constant(1, 1, sigma * sigma * (1 - a * a) / (2 * kappa));
  m.B = Eigen::MatrixXd::Ones(1, 1);
  m.R = Eigen::MatrixXd::Constant(1, 1, r * r);
  // psi is unbounded above: the random-weight filter makes the estimates positive by Wald's
  // identity over each step, so its likelihood is biased: it says so, and auto does not pick it;
  // its filtering means are Kalman's within 5 standard errors over 8 seeds.
  const nlohmann::json automatic =
      nlohmann::json::parse(run_ok({exe, "filter", "--data", data, "--json"}).out);
  CHECK(automatic["method"] == "bootstrap");
  const KalmanResult filtered = kalman_filter(m, observations(read_table(data), {"y"}));
  std::vector<std::vector<double>> rw_means(T);
  for (int k = 0; k < 8; ++k) {
    const FilterRun rw = run_filter(exe,
                                    {"--data", data, "--method", "random-weight", "--particles",
                                     "2000", "--seed", std::to_string(700 + k)},
                                    scratch_path(fmt::format("ou-sde-rw-{}.csv", k)));
    CHECK_THAT(rw.summary["log_likelihood_caveat"].get<std::string>(),
               Catch::Contains("Wald's identity"));
    const std::vector<double> mean = rw.table.column("mean_x");
    REQUIRE(mean.size() == static_cast<size_t>(T));
    for (int t = 0; t < T; ++t)
      rw_means[t].push_back(mean[t]);
  }
  for (int t = 0; t < T; ++t)
    check_mean_close(rw_means[t], filtered.mean[t][0], 5,
                     fmt::format("random-weight E[x_{} | y_0:{}]", t, t));
  // ... and the score in sigma comes from the General Poisson estimate's derivative alone
  // (test_sde_score.cpp checks it against Kalman's): the parametrix one's is refused.
  const ProcessResult score =
      run_process({exe, "score", "--data", data, "--estimator", "parametrix"});
  CHECK(score.exit_code != 0);
  CHECK_THAT(score.err, Catch::Contains("the diffusion coefficient reads the parameters") &&
                            Catch::Contains("--estimator gpe"));
  // ... and paris's rejection sampling, which needs the estimates bounded, or exact draws.
  const ProcessResult rejection =
      run_process({exe, "smooth", "--data", data, "--method", "paris", "--backward", "rejection"});
  CHECK(rejection.exit_code != 0);
  CHECK_THAT(rejection.err, Catch::Contains("have no bound") && Catch::Contains("--backward mcmc"));
  const ProcessResult exact_draws =
      run_process({exe, "smooth", "--data", data, "--method", "paris", "--backward", "exact"});
  CHECK(exact_draws.exit_code != 0);
  CHECK_THAT(exact_draws.err, Catch::Contains("only estimates"));
  // auto smooths by bis, whose bias is O(1/K), rather than by paris's moves, unless a flag asks
  // for the moves.
  CHECK(nlohmann::json::parse(
            run_ok({exe, "smooth", "--data", data, "--no-marginals", "--json"}).out)["method"] ==
        "bis");
  CHECK(nlohmann::json::parse(run_ok({exe, "smooth", "--data", data, "--backward", "mcmc",
                                      "--no-marginals", "--json"})
                                  .out)["method"] == "paris");
  const SmoothingReference exact = brute_force_smoother(m, observations(read_table(data), {"y"}));
  double level = 0, cross = 0;
  for (int t = 0; t < T; ++t) {
    level += exact.mean[t];
    if (t > 0)
      cross += exact.cov(t - 1, t) + exact.mean[t - 1] * exact.mean[t];
  }

  // 16 runs of `smooth` with `args` (seeds from seed0), each run's JSON checked by `check`: the
  // means of their functionals within 4 standard errors, of their marginal means within 5 (per
  // t), of the exact ones.
  auto agrees_with_exact = [&](const std::string& name, const std::vector<std::string>& args,
                               int seed0, const std::function<void(const nlohmann::json&)>& check) {
    std::vector<double> levels, crosses;
    std::vector<std::vector<double>> means(T);
    for (int k = 0; k < 16; ++k) {
      std::vector<std::string> command = {"--data", data, "--seed", std::to_string(seed0 + k)};
      command.insert(command.end(), args.begin(), args.end());
      const FilterRun r =
          run_smooth(exe, command, scratch_path(fmt::format("ou-sde-{}-{}.csv", name, k)));
      check(r.summary);
      levels.push_back(r.summary["functionals"]["level"].get<double>());
      crosses.push_back(r.summary["functionals"]["cross"].get<double>());
      const std::vector<double> mean = r.table.column("mean_x");
      REQUIRE(mean.size() == static_cast<size_t>(T));
      for (int t = 0; t < T; ++t)
        means[t].push_back(mean[t]);
    }
    check_mean_close(levels, level, 4, name + ": sum_t x[t]");
    check_mean_close(crosses, cross, 4, name + ": sum_t x[t-1] x[t]");
    for (int t = 0; t < T; ++t)
      check_mean_close(means[t], exact.mean[t], 5, fmt::format("{}: E[x_{} | y]", name, t));
  };
  // bis with indices from the filter weights, as the thesis's bis (the default, Euler draws, is
  // checked against exact answers in test_sde_parametrix.cpp and test_sde_score.cpp).
  agrees_with_exact("bis",
                    {"--method", "bis", "--particles", "300", "--backward-samples", "100",
                     "--backward-proposal", "filter", "--marginals"},
                    300, [](const nlohmann::json& j) {
                      CHECK(j["details"]["backward_proposal"] == "filter");
                      CHECK_THAT(j["details"]["transition_density"].get<std::string>(),
                                 Catch::Contains("General Poisson"));
                      CHECK(j["details"]["euler_substeps"] == 400);
                    });
  // paris, whose estimates have no bound here: pseudo-marginal Metropolis-Hastings moves (auto's
  // backward sampling for it) proposed from W_i times the Euler density, estimates positive by
  // Wald's identity within each particle's start estimates and proposals.
  agrees_with_exact(
      "paris",
      {"--method", "paris", "--particles", "300", "--backward-samples", "10", "--marginals"}, 400,
      [](const nlohmann::json& j) {
        CHECK(j["details"]["backward"] == "mcmc");
        CHECK(j["details"]["backward_proposal"] == "euler"); // as bis's
        CHECK(j["details"]["start_estimates"] == 10);
        CHECK(j["details"]["chain_start"] == "ancestor"); // the bootstrap filter
        CHECK_THAT(j["details"]["transition_density"].get<std::string>(),
                   Catch::Contains("Wald's identity"));
      });
}

namespace {

// The mean of a over replicates minus that of b, in standard errors of the difference.
double difference_in_se(const std::vector<double>& a, const std::vector<double>& b) {
  const double se = std::sqrt(sample_variance(a) / static_cast<double>(a.size()) +
                              sample_variance(b) / static_cast<double>(b.size()));
  return (sample_mean(a) - sample_mean(b)) / se;
}

} // namespace

TEST_CASE("diffusion: the random-weight filter has no discretisation error", "[e2e][stat][sde]") {
  // dX = 2 sin(X - theta) dt + dW over dt = 1: one Euler step is far from the transition. The
  // random-weight filter proposes one Euler step and weighs it by the General Poisson estimate of
  // the exact density (psi = 2 sin^2 + cos is bounded: positive estimates), so its likelihood and
  // filtering means agree with those of the bootstrap filter through 100 Euler substeps (bias
  // O(1/100), far below the Monte Carlo error) within 4 standard errors (5 per t); the bootstrap
  // filter through one substep must be told apart by the same check, or the test could not fail.
  const auto source = [](int steps) {
    return fmt::format(R"(
model sine_rw{0} {{
  param theta : real = 0.7853981633974483;
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ diffusion(2 * sin(x[t] - theta), 1, 1, {0});
  y[t] ~ normal(x[t], 0.5);
}}
)",
                       steps);
  };
  const std::string& coarse = model_exe("sine_rw1", source(1));
  const std::string& fine = model_exe("sine_rw100", source(100));
  const std::string data = scratch_path("sine-rw-sim.csv");
  const int T = 15;
  run_ok({fine, "simulate", "--T", std::to_string(T), "--seed", "4", "--out", data});
  struct Runs {
    std::vector<double> loglik;
    std::vector<std::vector<double>> mean = std::vector<std::vector<double>>(T);
  };
  const auto replicate = [&](const std::string& exe, const std::string& method) {
    Runs r;
    for (int k = 0; k < 8; ++k) {
      const FilterRun f = run_filter(exe,
                                     {"--data", data, "--method", method, "--particles", "10000",
                                      "--seed", std::to_string(40 + k)},
                                     scratch_path(fmt::format("sine-rw-{}.csv", method)));
      CHECK(f.summary.at("method") == method);
      r.loglik.push_back(f.summary.at("log_likelihood").get<double>());
      const std::vector<double> mean = f.table.column("mean_x");
      REQUIRE(mean.size() == static_cast<size_t>(T));
      for (int t = 0; t < T; ++t)
        r.mean[t].push_back(mean[t]);
    }
    return r;
  };
  const Runs reference = replicate(fine, "bootstrap");
  const Runs exact = replicate(coarse, "random-weight");
  const Runs euler = replicate(coarse, "bootstrap");
  INFO("log-likelihood: reference " << sample_mean(reference.loglik) << ", random-weight "
                                    << sample_mean(exact.loglik) << ", one Euler step "
                                    << sample_mean(euler.loglik));
  CHECK(std::fabs(difference_in_se(exact.loglik, reference.loglik)) < 4);
  CHECK(std::fabs(difference_in_se(euler.loglik, reference.loglik)) > 4);
  for (int t = 0; t < T; ++t) {
    INFO("E[x_" << t << " | y_0:" << t << "]: reference " << sample_mean(reference.mean[t])
                << ", random-weight " << sample_mean(exact.mean[t]));
    CHECK(std::fabs(difference_in_se(exact.mean[t], reference.mean[t])) < 5);
  }
  const FilterRun auto_choice =
      run_filter(coarse, {"--data", data, "--method", "auto"}, scratch_path("sine-rw-auto.csv"));
  CHECK(auto_choice.summary.at("method") == "random-weight");
  CHECK_THAT(auto_choice.summary.at("transition_density").get<std::string>(),
             Catch::Contains("General Poisson"));
}

namespace {

GridSde sine_grid(double theta, const std::vector<double>& y) {
  return {[theta](double v) { return std::sin(v - theta); }, 0.5, 1.0, y};
}

} // namespace

TEST_CASE("diffusion: bis and paris after the random-weight filter on the Sine SDE agree with "
          "quadrature",
          "[e2e][stat][sde]") {
  // The thesis's Sine model (section 7.5.2), theta = pi / 4, 11 observations every 0.5: auto's
  // filter is the random-weight one, so bis's smoothing means have no discretisation error. Means
  // over 12 seeds within 5 standard errors of forward-backward on a grid at every t.
  const std::string& exe = example_exe("sine_sde");
  const std::string data = scratch_path("sine-sde-bis-sim.csv");
  run_ok({exe, "simulate", "--T", "11", "--seed", "7", "--out", data});
  const std::vector<double> exact =
      sine_grid(std::numbers::pi / 4, read_table(data).column("y")).exact().smoothing;
  const auto T = static_cast<int>(exact.size());
  std::vector<std::vector<double>> means(T);
  for (int k = 0; k < 12; ++k) {
    const std::string out = scratch_path(fmt::format("sine-sde-bis-{}.csv", k));
    const ProcessResult p = run_ok({exe, "smooth", "--data", data, "--method", "bis", "--particles",
                                    "1000", "--backward-samples", "100", "--marginals", "--seed",
                                    std::to_string(70 + k), "--json", "--out", out});
    const nlohmann::json j = nlohmann::json::parse(p.out);
    CHECK(j["filter"] == "random-weight");
    CHECK_FALSE(j["details"].contains("euler_substeps"));
    const std::vector<double> mean = read_table(out).column("mean_x");
    REQUIRE(mean.size() == static_cast<size_t>(T));
    for (int t = 0; t < T; ++t)
      means[t].push_back(mean[t]);
  }
  for (int t = 0; t < T; ++t)
    check_mean_close(means[t], exact[t], 5, fmt::format("E[x_{} | y]", t));

  // paris over 12 seeds from seed0 with `args`, each run's JSON checked by `check`: its means
  // within 5 standard errors of the grid's.
  auto paris_agrees = [&](const std::string& name, std::vector<std::string> args, int seed0,
                          const std::function<void(const nlohmann::json&)>& check) {
    std::vector<std::vector<double>> paris(T);
    for (int k = 0; k < 12; ++k) {
      std::vector<std::string> command = {
          "--data",      data,   "--seed",     std::to_string(seed0 + k),
          "--particles", "1000", "--marginals"};
      command.insert(command.end(), args.begin(), args.end());
      const FilterRun r =
          run_smooth(exe, command, scratch_path(fmt::format("sine-sde-{}-{}.csv", name, k)));
      CHECK(r.summary["method"] == "paris");
      check(r.summary);
      const std::vector<double> mean = r.table.column("mean_x");
      REQUIRE(mean.size() == static_cast<size_t>(T));
      for (int t = 0; t < T; ++t)
        paris[t].push_back(mean[t]);
    }
    for (int t = 0; t < T; ++t)
      check_mean_close(paris[t], exact[t], 5, fmt::format("{}: E[x_{} | y]", name, t));
  };
  // paris (auto's choice here) draws its backward indices by rejection, a fresh estimate of the
  // density per proposal over the estimates' bound: exact draws from the pseudo-marginal backward
  // kernel (Gloaguen et al.; the thesis's accept-reject), so even K = 2 is unbiased.
  paris_agrees("paris", {}, 90,
               [](const nlohmann::json& j) { CHECK(j["details"]["backward"] == "rejection"); });
  // Its pseudo-marginal moves after the random-weight filter, whose ancestors are not draws from
  // the backward kernel: each chain starts at one of 10 Euler proposals drawn in proportion to
  // estimate / Euler density (an approximate draw from the kernel), then moves.
  paris_agrees("paris-moves", {"--backward", "mcmc", "--backward-samples", "10"}, 110,
               [](const nlohmann::json& j) {
                 CHECK(j["details"]["backward"] == "mcmc");
                 CHECK(j["details"]["chain_start"] == "proposals");
               });
  const ProcessResult exact_draws =
      run_process({exe, "smooth", "--data", data, "--method", "paris", "--backward", "exact"});
  CHECK(exact_draws.exit_code != 0);
  CHECK_THAT(exact_draws.err, Catch::Contains("only estimates"));
  // One proposal per draw: most draws take the self-normalised fallback, counted as such.
  const ProcessResult fallback =
      run_ok({exe, "smooth", "--data", data, "--method", "paris", "--max-trials", "1", "--json"});
  CHECK(nlohmann::json::parse(fallback.out)["details"]["fallback_draws"].get<int64_t>() > 0);
}

TEST_CASE("diffusion: the score of a Sine SDE by bis with estimated gradients agrees with "
          "quadrature",
          "[e2e][stat][sde]") {
  // d/d(a, theta) log p(y) for dX = a sin(X - theta) dt + dW by Fisher's identity: bis weighs by
  // General Poisson estimates of the density and adds, per backward pair, an unbiased estimate of
  // d/dtheta log q (exact diffusion bridges); two parameters, so that the gradient rows must
  // line up with theta's layout. Against central differences of the grid log-likelihood, within
  // 4 of the score's standard errors (16 replicates); K = 50 backward samples, where bis's O(1/K)
  // bias is far below them (bench/README.md). The random-weight filter's log-likelihood is
  // checked against the grid's too.
  const std::string& exe = model_exe("sine_sde_score", R"(
model sine_sde_score {
  param a : real = 1.2;
  param theta : real = 0.7853981633974483;
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ diffusion(a * sin(x[t] - theta), 1, 0.5);
  y[t] ~ normal(x[t], 1);
}
)");
  const std::string data = scratch_path("sine-sde-score-sim.csv");
  run_ok({exe, "simulate", "--T", "11", "--seed", "7", "--out", data});
  const std::vector<double> y = read_table(data).column("y");
  const double a = 1.2, theta = std::numbers::pi / 4, step = 0.01;
  const auto loglik = [&](double av, double th) {
    return GridSde{[=](double v) { return av * std::sin(v - th); }, 0.5, 1.0, y}
        .exact()
        .log_likelihood;
  };
  const double exact_a = (loglik(a + step, theta) - loglik(a - step, theta)) / (2 * step);
  const double exact_theta = (loglik(a, theta + step) - loglik(a, theta - step)) / (2 * step);
  const ProcessResult p =
      run_ok({exe, "score", "--data", data, "--particles", "1000", "--backward-samples", "50",
              "--replicates", "16", "--seed", "3", "--json"});
  const nlohmann::json j = nlohmann::json::parse(p.out);
  CHECK(j["method"] == "bis"); // auto: bis weighs K estimates and their terms
  check_score(j, {{"a", exact_a}, {"theta", exact_theta}}, "grid");
  // paris adds, to each pair it draws from the backward kernel (here by rejection: exact
  // pseudo-marginal draws), a fresh exact-bridge estimate of the SDE's term: unbiased per pair.
  const nlohmann::json by_paris = nlohmann::json::parse(
      run_ok({exe, "score", "--data", data, "--method", "paris", "--particles", "1000",
              "--backward-samples", "4", "--replicates", "16", "--seed", "4", "--json"})
          .out);
  CHECK(by_paris["method"] == "paris");
  check_score(by_paris, {{"a", exact_a}, {"theta", exact_theta}}, "grid, paris");
  // The observations' part of the score is 0 here: the SDE's term is all of it, and omitted or
  // doubled it would be off by far more than 4 standard errors.
  for (const auto& [name, value] : {std::pair{"a", exact_a}, std::pair{"theta", exact_theta}})
    CHECK(std::fabs(value) > 8 * by_paris["score_se"][name].get<double>());
  // ... and to the states of its Metropolis-Hastings moves after the bootstrap filter (through
  // 20 Euler substeps: a discretisation bias far below the standard errors here).
  const nlohmann::json by_moves = nlohmann::json::parse(
      run_ok({exe, "score", "--data", data, "--method", "paris", "--filter", "bootstrap",
              "--backward", "mcmc", "--particles", "1000", "--backward-samples", "4",
              "--replicates", "16", "--seed", "5", "--json"})
          .out);
  CHECK(by_moves["method"] == "paris");
  check_score(by_moves, {{"a", exact_a}, {"theta", exact_theta}}, "grid, paris's moves");

  std::vector<double> filtered;
  for (int k = 0; k < 16; ++k) {
    const FilterRun f = run_filter(exe,
                                   {"--data", data, "--method", "random-weight", "--particles",
                                    "2000", "--seed", std::to_string(500 + k)},
                                   scratch_path("sine-sde-score-filter.csv"));
    filtered.push_back(f.summary.at("log_likelihood").get<double>());
  }
  check_mean_close(filtered, loglik(a, theta), 4, "log p(y)");

  // rml's auto is bis too: from a = 2, theta = 2 on 2000 observations it ends near (1.2, pi/4)
  // (the maximum likelihood estimate's standard errors at T = 2000 are below 0.05; 50 starts of
  // the Sine RML in bench/README.md end within 0.03 of each other), and without the SDE's term
  // it would not move at all (the observations' score is 0).
  const std::string stream = scratch_path("sine-sde-rml.csv");
  run_ok({exe, "simulate", "--T", "2000", "--seed", "21", "--out", stream});
  const nlohmann::json rml =
      nlohmann::json::parse(run_ok({exe, "rml", "--data", stream, "--particles", "100",
                                    "--backward-samples", "10", "--step-size", "0.5", "--step-hold",
                                    "300", "--param", "a=2", "--param", "theta=2", "--json"})
                                .out);
  CHECK(rml["method"] == "bis");
  CHECK(std::fabs(rml["params"]["a"].get<double>() - a) < 0.2);
  CHECK(std::fabs(rml["params"]["theta"].get<double>() - theta) < 0.2);
  // ... and so does rml by paris, its draws' SDE terms from exact bridges.
  const nlohmann::json rml_paris = nlohmann::json::parse(
      run_ok({exe, "rml", "--data", stream, "--method", "paris", "--particles", "100",
              "--backward-samples", "10", "--step-size", "0.5", "--step-hold", "300", "--param",
              "a=2", "--param", "theta=2", "--json"})
          .out);
  CHECK(rml_paris["method"] == "paris");
  CHECK(std::fabs(rml_paris["params"]["a"].get<double>() - a) < 0.2);
  CHECK(std::fabs(rml_paris["params"]["theta"].get<double>() - theta) < 0.2);

  // Other smoothers leave the SDE's term out of the score: refused, bis named (paris's
  // refusal, where psi has no upper bound, is in test_sde_score.cpp).
  const ProcessResult genealogy =
      run_process({exe, "score", "--data", data, "--method", "genealogy"});
  CHECK(genealogy.exit_code != 0);
  CHECK_THAT(genealogy.err, Catch::Contains("bis adds unbiased estimates"));
}

TEST_CASE("diffusion: the random-weight filter with the model's proposal and missing "
          "observations agrees with quadrature",
          "[e2e][stat][sde]") {
  // The thesis's proposal (7.16): one Euler step times the observation density, a Gaussian with
  // variance v = 1 / (1 / 0.5 + 1). Where y[t] is missing the filter proposes one Euler step
  // instead. Filtering means within 5 standard errors (16 seeds) of the grid's at every t, and
  // the log-likelihood within 4.
  const std::string& exe = model_exe("sine_sde_proposal", R"(
model sine_sde_proposal {
  param theta : real = 0.7853981633974483;
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ diffusion(sin(x[t] - theta), 1, 0.5);
  y[t] ~ normal(x[t], 1);
  proposal x[t] ~ normal((2 * (x[t-1] + 0.5 * sin(x[t-1] - theta)) + y[t]) / 3, sqrt(1.0 / 3));
}
)");
  const std::string full = scratch_path("sine-proposal-full.csv");
  run_ok({exe, "simulate", "--T", "12", "--seed", "9", "--out", full});
  Table table = read_table(full);
  const int y_col = table.column_index("y");
  for (int t : {3, 4, 8}) // missing observations
    table.rows[t][y_col] = "";
  const std::string data = scratch_path("sine-proposal.csv");
  write_table(data, table);
  const GridSde::Pass exact = sine_grid(std::numbers::pi / 4, table.column("y")).exact();
  const int T = 12;
  std::vector<double> loglik;
  std::vector<std::vector<double>> means(T);
  for (int k = 0; k < 16; ++k) {
    const FilterRun f = run_filter(exe,
                                   {"--data", data, "--particles", "2000", "--seed",
                                    std::to_string(600 + k), "--method", "auto"},
                                   scratch_path("sine-proposal-filter.csv"));
    CHECK(f.summary.at("method") == "random-weight");
    CHECK_THAT(f.summary.at("proposal").get<std::string>(), Catch::Contains("model's proposal"));
    loglik.push_back(f.summary.at("log_likelihood").get<double>());
    const std::vector<double> mean = f.table.column("mean_x");
    REQUIRE(mean.size() == static_cast<size_t>(T));
    for (int t = 0; t < T; ++t)
      means[t].push_back(mean[t]);
  }
  check_mean_close(loglik, exact.log_likelihood, 4, "log p(y)");
  for (int t = 0; t < T; ++t)
    check_mean_close(means[t], exact.filtering[t], 5, fmt::format("E[x_{} | y_0:{}]", t, t));
}

TEST_CASE("diffusion: paths are reproducible from the seed whatever the threads",
          "[e2e][repro][sde]") {
  const std::string& exe = example_exe("sine_sde");
  const std::string a = scratch_path("sine-sde-a.csv"), b = scratch_path("sine-sde-b.csv");
  run_ok({exe, "simulate", "--T", "30", "--seed", "5", "--out", a});
  run_ok({exe, "simulate", "--T", "30", "--seed", "5", "--out", b});
  CHECK(read_file(a) == read_file(b));
  const FilterRun one = run_filter(exe, {"--data", a, "--particles", "10007", "--threads", "1"},
                                   scratch_path("sine-sde-f1.csv"));
  const FilterRun two = run_filter(exe, {"--data", a, "--particles", "10007", "--threads", "2"},
                                   scratch_path("sine-sde-f2.csv"));
  CHECK(one.csv_text == two.csv_text);
  CHECK(one.summary.at("log_likelihood") == two.summary.at("log_likelihood"));
  // The random-weight filter's Euler draws and estimates are keyed by the particle, too.
  const FilterRun rw1 = run_filter(
      exe, {"--data", a, "--method", "random-weight", "--particles", "10007", "--threads", "1"},
      scratch_path("sine-sde-rw1.csv"));
  const FilterRun rw2 = run_filter(
      exe, {"--data", a, "--method", "random-weight", "--particles", "10007", "--threads", "2"},
      scratch_path("sine-sde-rw2.csv"));
  CHECK(rw1.csv_text == rw2.csv_text);
}

TEST_CASE("diffusion: the density-based methods refuse an SDE transition and say why",
          "[e2e][sde]") {
  const std::string& exe = example_exe("sine_sde");
  const std::string data = scratch_path("sine-sde-refuse.csv");
  run_ok({exe, "simulate", "--T", "10", "--seed", "2", "--out", data});
  for (const std::string method : {"ffbsi", "online"}) {
    ProcessResult r = run_process({exe, "smooth", "--data", data, "--method", method});
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains("transition density has no closed form"));
  }
  // The Euler proposal is for SDE transitions only, and for bis and paris's moves: not for
  // paris's rejection sampling (auto's here, the estimates being bounded) or another method.
  const ProcessResult paris = run_process(
      {exe, "smooth", "--data", data, "--method", "paris", "--backward-proposal", "euler"});
  CHECK(paris.exit_code == 1);
  CHECK_THAT(paris.err, Catch::Contains("applies to paris's Metropolis-Hastings moves"));
  const ProcessResult genealogy = run_process(
      {exe, "smooth", "--data", data, "--method", "genealogy", "--backward-proposal", "euler"});
  CHECK(genealogy.exit_code == 2);
  CHECK_THAT(genealogy.err,
             Catch::Contains("--backward-proposal does not apply to --method genealogy"));
  const std::string& lgssm = example_exe("lgssm1");
  const std::string lg_data = scratch_path("lgssm1-euler.csv");
  run_ok({lgssm, "simulate", "--T", "10", "--seed", "2", "--out", lg_data});
  const ProcessResult bis = run_process(
      {lgssm, "smooth", "--data", lg_data, "--method", "bis", "--backward-proposal", "euler"});
  CHECK(bis.exit_code == 1);
  CHECK_THAT(bis.err, Catch::Contains("--backward-proposal euler draws from the Euler density of "
                                      "an SDE transition"));
  // optimize's exact methods need an exact likelihood.
  ProcessResult lbfgs = run_process({exe, "optimize", "--data", data, "--method", "lbfgs"});
  CHECK(lbfgs.exit_code != 0);
  CHECK_THAT(lbfgs.err, Catch::Contains("the likelihood is not exact"));
}
