// An SDE whose diffusion coefficient reads the path, against exact answers: X = exp(Y) with Y the
// Sine-type diffusion dY = sin(Y) dt + dW is, by Ito's formula, dX = X (sin(log X) + 1/2) dt +
// X dW, observed through log X with unit noise. In Lamperti's coordinate (log X) psi =
// (sin^2 + cos) / 2 lies in [-1/2, 5/8]; with those bounds from the model the General Poisson
// estimator applies, the random-weight filter proposes an Euler step in that coordinate, and
// bis, drawing its indices by the filter weights times that step's density, weighs by the
// estimates. Their likelihood and means of X agree with forward-backward for
// Y on a grid (sde_models.h) within their Monte Carlo error. Without a lower bound of psi the
// estimator does not apply, and says why. The score of geometric Brownian motion by bis agrees
// with Kalman's on log x, and PMMH learns its coefficient's parameter as the exact-likelihood
// chain does. A coefficient whose coordinate does not span the real line (sqrt(x)) stops the run
// with the step and the point.
#include "sde_models.h"
#include "support.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <vector>

using namespace e2e;

namespace {

std::string exp_sine_source(const std::string& name, const std::string& bounds) {
  return fmt::format(R"(
model {} {{
  state x : real;
  obs y : real;
  x[0] ~ lognormal(0, 1);
  x[t] ~ diffusion(drift = x[t] * (sin(log(x[t])) + 0.5), diffusion = x[t], dt = 0.5{});
  y[t] ~ normal(log(x[t]), 1);
}}
)",
                     name, bounds);
}

} // namespace

TEST_CASE("diffusion: a coefficient that reads the path, in Lamperti's coordinate; the filter "
          "and bis agree with quadrature",
          "[e2e][stat][sde]") {
  const std::string& exe =
      model_exe("exp_sine", exp_sine_source("exp_sine", ", psi_lower = -0.5, psi_upper = 0.625"));
  const ProcessResult check =
      run_ok({ssmc_path(), "check", scratch_path("exp_sine.ssm"), "--structure", "--format=json"});
  const nlohmann::json structure = nlohmann::json::parse(check.out);
  CHECK(structure["sde"]["coefficient_constant"] == false);
  CHECK(structure["sde"]["gpe"]["available"] == true);
  CHECK(structure["sde"]["gpe"]["positive"] == true);
  // Without psi's lower bound, no General Poisson estimator: the parametrix one, and why.
  model_exe("exp_sine_free", exp_sine_source("exp_sine_free", ""));
  const nlohmann::json free =
      nlohmann::json::parse(run_ok({ssmc_path(), "check", scratch_path("exp_sine_free.ssm"),
                                    "--structure", "--format=json"})
                                .out);
  CHECK(free["sde"]["gpe"]["available"] == false);
  CHECK_THAT(free["sde"]["gpe"]["reason"].get<std::string>(),
             Catch::Contains("Lamperti") && Catch::Contains("psi_lower"));

  const std::string data = scratch_path("exp-sine-sim.csv");
  run_ok({exe, "simulate", "--T", "15", "--seed", "5", "--out", data});
  GridSde grid{[](double v) { return std::sin(v); }, 0.5, 1.0, read_table(data).column("y")};
  grid.of = [](double v) { return std::exp(v); };
  const GridSde::Pass exact = grid.exact();
  check_filter_and_bis(exe, data, exact, "exp-sine", [](const FilterRun& f, const FilterRun& s) {
    CHECK(f.summary.at("method") == "random-weight");
    CHECK_THAT(f.summary.at("proposal").get<std::string>(), Catch::Contains("Lamperti"));
    CHECK(s.summary.at("filter") == "random-weight");
    CHECK(s.summary.at("details").at("backward_proposal") == "euler"); // in Lamperti's u
  });
}

TEST_CASE("diffusion: the score of geometric Brownian motion, by bis in Lamperti's coordinate, "
          "agrees with Kalman's for its logarithm",
          "[e2e][stat][sde]") {
  // dX = mu X dt + 0.4 X dW: log X steps by N(mu - 0.08, 0.4^2) over dt = 1, observed with noise
  // 0.3, a linear-Gaussian model whose score is exact. psi = (mu / 0.4 - 0.2)^2 / 2 is constant:
  // the model's equal bounds leave the estimate without Poisson points, which the estimate's
  // derivative adds (its term in psi's derivative).
  const std::string& gbm = model_exe("gbm_score", R"(
model gbm_score {
  param mu : real = 0.1;
  state x : real;
  obs y : real;
  x[0] ~ lognormal(0, 1);
  x[t] ~ diffusion(drift = mu * x[t], diffusion = 0.4 * x[t], dt = 1,
                   psi_lower = (mu / 0.4 - 0.2)^2 / 2, psi_upper = (mu / 0.4 - 0.2)^2 / 2);
  y[t] ~ normal(log(x[t]), 0.3);
}
)");
  const std::string& log_gbm = model_exe("log_gbm_score", R"(
model log_gbm_score {
  param mu : real = 0.1;
  state z : real;
  obs y : real;
  z[0] ~ normal(0, 1);
  z[t] ~ normal(z[t-1] + mu - 0.08, 0.4);
  y[t] ~ normal(z[t], 0.3);
}
)");
  const std::string data = scratch_path("gbm-score-sim.csv");
  run_ok({log_gbm, "simulate", "--T", "30", "--seed", "2", "--out", data});
  const nlohmann::json exact =
      nlohmann::json::parse(run_ok({log_gbm, "score", "--data", data, "--json"}).out);
  REQUIRE(exact["exact"] == true);
  const nlohmann::json j = nlohmann::json::parse(
      run_ok({gbm, "score", "--data", data, "--method", "bis", "--seed", "4", "--json"}).out);
  CHECK(j["method"] == "bis");
  check_score(j, {{"mu", exact["score"]["mu"].get<double>()}}, "Kalman");
}

TEST_CASE(
    "diffusion: PMMH learns a coefficient's parameter in Lamperti's coordinate; its posterior "
    "agrees with the exact-likelihood chain on log x",
    "[e2e][stat][sde]") {
  // dX = mu X dt + s X dW with s a parameter: the gradient's estimators do not apply (the
  // coefficient reads s), but the random-weight filter's likelihood is unbiased (psi = (mu / s -
  // s / 2)^2 / 2 bounded both ways by the model), so PMMH targets the exact posterior. The
  // reference is PMMH with Kalman's likelihood on log x, whose steps are N(mu - s^2 / 2, s^2).
  const std::string& gbm = model_exe("gbm_pmmh", R"(
model gbm_pmmh {
  param mu ~ normal(0, 1) = 0.1;
  param s ~ gamma(2, 4) = 0.4;
  state x : real;
  obs y : real;
  x[0] ~ lognormal(0, 1);
  x[t] ~ diffusion(drift = mu * x[t], diffusion = s * x[t], dt = 1,
                   psi_lower = (mu / s - s / 2)^2 / 2, psi_upper = (mu / s - s / 2)^2 / 2);
  y[t] ~ normal(log(x[t]), 0.3);
}
)");
  const std::string& log_gbm = model_exe("log_gbm_pmmh", R"(
model log_gbm_pmmh {
  param mu ~ normal(0, 1) = 0.1;
  param s ~ gamma(2, 4) = 0.4;
  state z : real;
  obs y : real;
  z[0] ~ normal(0, 1);
  z[t] ~ normal(z[t-1] + mu - s^2 / 2, s);
  y[t] ~ normal(z[t], 0.3);
}
)");
  const std::string data = scratch_path("gbm-pmmh-sim.csv");
  run_ok({log_gbm, "simulate", "--T", "50", "--seed", "4", "--out", data});
  const nlohmann::json exact = nlohmann::json::parse(
      run_ok({log_gbm, "sample", "--data", data, "--method", "pmmh", "--chains", "4", "--warmup",
              "500", "--iterations", "4000", "--seed", "2", "--json", "--out",
              scratch_path("gbm-pmmh-exact.csv")})
          .out);
  REQUIRE(exact["likelihood"] == "kalman");
  const nlohmann::json j = nlohmann::json::parse(
      run_ok({gbm, "sample", "--data", data, "--method", "pmmh", "--chains", "2", "--warmup", "300",
              "--iterations", "700", "--particles", "100", "--seed", "3", "--json", "--out",
              scratch_path("gbm-pmmh.csv")})
          .out);
  CHECK(j["likelihood"] == "random-weight");
  for (const char* name : {"mu", "s"}) {
    const nlohmann::json &a = j["summary"][name], &b = exact["summary"][name];
    const double mcse = std::hypot(a["mcse_mean"].get<double>(), b["mcse_mean"].get<double>());
    INFO(name << ": " << a["mean"] << " (mcse " << a["mcse_mean"] << ") against Kalman's "
              << b["mean"] << " (mcse " << b["mcse_mean"] << ")");
    CHECK(std::fabs(a["mean"].get<double>() - b["mean"].get<double>()) < 4 * mcse);
    CHECK(a["mcse_mean"].get<double>() < 0.2 * b["sd"].get<double>()); // a test with power
  }
}

TEST_CASE("diffusion: a coefficient whose Lamperti coordinate does not span the real line stops "
          "the run, naming the step and the point",
          "[e2e][sde]") {
  // sqrt(x): eta = 2 sqrt(x) stops at 0, so a step or a bridge in u can leave it; the estimators
  // and the filter's proposal would need the coefficient where it is not defined.
  const std::string& exe = model_exe("cir_lamperti", R"(
model cir_lamperti {
  state x : real;
  obs y : real;
  x[0] ~ lognormal(-1, 0.5);
  x[t] ~ diffusion(drift = 0.5 - x[t], diffusion = sqrt(x[t]), dt = 0.5, psi_lower = -10,
                   psi_upper = 10);
  y[t] ~ normal(x[t], 0.3);
}
)");
  const std::string data = scratch_path("cir-lamperti-sim.csv");
  run_ok({exe, "simulate", "--T", "10", "--seed", "1", "--out", data});
  const ProcessResult filter = run_process({exe, "filter", "--data", data, "--particles", "1000"});
  INFO(filter.describe());
  CHECK(filter.exit_code == 1);
  CHECK_THAT(filter.err, Catch::Contains("at t=1") && Catch::Contains("Lamperti's coordinate") &&
                             Catch::Contains("must not be integrable"));
  const ProcessResult smooth = run_process({exe, "smooth", "--data", data, "--method", "bis",
                                            "--filter", "bootstrap", "--particles", "200"});
  INFO(smooth.describe());
  CHECK(smooth.exit_code == 1);
  CHECK_THAT(smooth.err, Catch::Contains("General Poisson estimator for x[t] at t=") &&
                             Catch::Contains("must not be integrable") &&
                             Catch::Contains("--estimator parametrix"));
}
