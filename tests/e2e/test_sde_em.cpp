// EM on an SDE transition (Martin 2022, 7.5.4: EM with bis's E-step): the Ornstein-Uhlenbeck SDE
// observed with Gaussian noise is a linear-Gaussian model, so the Kalman filter gives its exact
// log-likelihood and maximum likelihood estimate, which EM with estimated densities (trajectories
// from bis's backward draws; Q's SDE term the log of the mean of 32 estimates per pair, the same
// draws for every parameter the M-step tries) must reach. Its refusals name the E-steps that
// apply.
#include "kalman.h"
#include "lgssm_support.h"
#include "sde_models.h"
#include "support.h"

#include <Eigen/LU>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <vector>

using namespace e2e;

namespace {

// The exact MLE of (kappa, mu) by Newton's method on the Kalman log-likelihood (central
// differences), from (1, 0.5), and its standard errors from the observed information there.
void exact_mle(const std::vector<Eigen::VectorXd>& y, Eigen::Vector2d& theta, Eigen::Vector2d& se) {
  const auto ll = [&](const Eigen::Vector2d& p) {
    return kalman_filter(ou_observed(p[0], p[1], 0.6, 0.5, 0.5), y).log_likelihood;
  };
  const double h = 1e-4;
  theta = {1.0, 0.5};
  Eigen::Matrix2d H;
  for (int it = 0; it < 30; ++it) {
    Eigen::Vector2d g;
    for (int i = 0; i < 2; ++i) {
      const Eigen::Vector2d e = h * Eigen::Vector2d::Unit(i);
      g[i] = (ll(theta + e) - ll(theta - e)) / (2 * h);
      for (int j = 0; j < 2; ++j) {
        const Eigen::Vector2d f = h * Eigen::Vector2d::Unit(j);
        H(i, j) = (ll(theta + e + f) - ll(theta + e - f) - ll(theta - e + f) + ll(theta - e - f)) /
                  (4 * h * h);
      }
    }
    theta -= H.lu().solve(g);
  }
  se = (-H).inverse().diagonal().cwiseSqrt();
}

} // namespace

TEST_CASE("optimize --method em on an OU SDE: estimated densities reach the Kalman MLE",
          "[e2e][stat][sde][em]") {
  const std::string& exe = model_exe("ou_sde_em", ou_sde_source("ou_sde_em"));
  const std::string data = scratch_path("ou-sde-em.csv");
  run_ok({exe, "simulate", "--T", "40", "--seed", "5", "--out", data});
  Eigen::Vector2d mle, se;
  exact_mle(observations(read_table(data), {"y"}), mle, se);
  INFO("Kalman MLE kappa " << mle[0] << " (se " << se[0] << "), mu " << mle[1] << " (se " << se[1]
                           << ")");
  REQUIRE(mle[0] > 0.3);

  const std::string path = scratch_path("ou-sde-em-path.csv");
  const nlohmann::json j = nlohmann::json::parse(
      run_ok({exe,  "optimize",    "--json",  "--method",       "em",   "--data",
              data, "--particles", "100",     "--trajectories", "40",   "--max-iterations",
              "20", "--param",     "kappa=2", "--param",        "mu=0", "--seed",
              "1",  "--out",       path})
          .out);
  INFO(j.dump());
  CHECK(j["method"] == "em");
  CHECK(j["e_step"] == "bis"); // smooth's auto for these unbounded estimates
  CHECK(j["sde_estimates"] == 32);
  CHECK(j["m_step"]["kappa"].get<std::string>().starts_with("numerical"));
  CHECK(j["converged"] == true); // the mean estimated score over the last 10 is within noise
  // Over seeds 1 to 3 the estimates' spread was 0.075 standard errors of the MLE (kappa) and
  // 0.055 (mu), and their mean within 0.03 of the MLE: 4 times that spread is allowed.
  CHECK(std::fabs(j["params"]["kappa"].get<double>() - mle[0]) < 0.3 * se[0]);
  CHECK(std::fabs(j["params"]["mu"].get<double>() - mle[1]) < 0.22 * se[1]);
  // The path climbs from the start's log-likelihood to near the maximum.
  const Table rows = read_table(path);
  REQUIRE(rows.rows.size() == 20);
  const std::vector<double> ll = rows.column("log_likelihood");
  CHECK(ll.back() > ll.front() + 5);

  // What does not apply says which E-steps do.
  const ProcessResult ffbsi =
      run_process({exe, "optimize", "--method", "em", "--e-step", "ffbsi", "--data", data});
  CHECK(ffbsi.exit_code != 0);
  CHECK_THAT(ffbsi.err, Catch::Contains("sample-only") && Catch::Contains("(--e-step bis)"));
  const ProcessResult exact =
      run_process({exe, "optimize", "--method", "em", "--e-step", "exact", "--data", data});
  CHECK(exact.exit_code != 0);
  CHECK_THAT(exact.err, Catch::Contains("--e-step paris or bis"));
  // More estimates per pair than Wald's bound of rounds leaves room for.
  const ProcessResult many =
      run_process({exe, "optimize", "--method", "em", "--sde-estimates", "501", "--data", data});
  CHECK(many.exit_code != 0);
  CHECK_THAT(many.err, Catch::Contains("--sde-estimates must be in [1, 500] (got 501)"));
  // A coefficient that reads a parameter (G): no gradient of the estimates for the M-step.
  const std::string& lv = example_exe("lotka_volterra_sde");
  const ProcessResult no_gradient = run_process({lv, "optimize", "--method", "em", "--data", data});
  CHECK(no_gradient.exit_code != 0);
  CHECK_THAT(no_gradient.err, Catch::Contains("the M-step climbs Q with the gradient") &&
                                  Catch::Contains("reads the parameter G"));
}
