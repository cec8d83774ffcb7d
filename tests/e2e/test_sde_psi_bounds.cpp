// Bounds of psi given by the model (diffusion(..., psi_lower = ..., psi_upper = ...)) against
// exact answers. dX = X / (1 + X^2) dt + dW has psi = 1 / (2 (1 + X^2)^2), in (0, 1/2], which the
// compiler's intervals cannot bound (a quotient by a non-constant): with the model's bounds the
// General Poisson estimator applies, its estimates positive, so `filter` picks the random-weight
// filter and `smooth` weighs bis's draws by the estimates. Their likelihood and means agree with
// forward-backward on a grid (sde_models.h) within their Monte Carlo error; a bound that psi
// crosses stops the run, naming the step and the bound.
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

std::string repelled_source(const std::string& name, const std::string& bounds) {
  return fmt::format(R"(
model {} {{
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ diffusion(drift = x[t] / (1 + x[t]^2), diffusion = 1, dt = 0.5{});
  y[t] ~ normal(x[t], 1);
}}
)",
                     name, bounds);
}

GridSde repelled_grid(const std::vector<double>& y) {
  return {[](double v) { return v / (1 + v * v); }, 0.5, 1.0, y};
}

} // namespace

TEST_CASE("diffusion: psi's bounds from the model make the General Poisson estimator apply; its "
          "filter and smoother agree with quadrature",
          "[e2e][stat][sde]") {
  const std::string& exe =
      model_exe("repelled", repelled_source("repelled", ", psi_lower = 0, psi_upper = 0.5"));
  const nlohmann::json structure = nlohmann::json::parse(
      run_ok({ssmc_path(), "check", scratch_path("repelled.ssm"), "--structure", "--format=json"})
          .out);
  const nlohmann::json& gpe = structure["sde"]["gpe"];
  CHECK(gpe["available"] == true);
  CHECK(gpe["positive"] == true);
  CHECK(gpe["psi_lower_given"] == true);
  CHECK(gpe["psi_upper"] == "0.5");
  // Without them the compiler finds no lower bound: the parametrix estimator only.
  model_exe("repelled_free", repelled_source("repelled_free", ""));
  const nlohmann::json free =
      nlohmann::json::parse(run_ok({ssmc_path(), "check", scratch_path("repelled_free.ssm"),
                                    "--structure", "--format=json"})
                                .out);
  CHECK(free["sde"]["gpe"]["available"] == false);
  CHECK_THAT(free["sde"]["gpe"]["reason"].get<std::string>(), Catch::Contains("psi_lower"));

  const std::string data = scratch_path("repelled-sim.csv");
  run_ok({exe, "simulate", "--T", "15", "--seed", "5", "--out", data});
  const GridSde::Pass exact = repelled_grid(read_table(data).column("y")).exact();
  check_filter_and_bis(exe, data, exact, "repelled", [](const FilterRun& f, const FilterRun& s) {
    CHECK(f.summary.at("method") == "random-weight");
    CHECK(s.summary.at("filter") == "random-weight");
  });
}

TEST_CASE("diffusion: a bound of psi from the model that does not hold stops the run at its step",
          "[e2e][sde]") {
  // psi reaches 1/2 at x = 0: an upper bound 0.25 is crossed near the origin, a lower bound 0.1
  // far from it; either estimate would be wrong, so the run stops.
  const std::string data = scratch_path("repelled-bad-sim.csv");
  run_ok({model_exe("repelled", repelled_source("repelled", ", psi_lower = 0, psi_upper = 0.5")),
          "simulate", "--T", "30", "--seed", "5", "--out", data});
  const struct {
    const char* name;
    const char* bounds;
    const char* says;
  } cases[] = {{"repelled_low_upper", ", psi_upper = 0.25, psi_lower = 0",
                "above 0.25, the model's psi_upper"},
               {"repelled_high_lower", ", psi_lower = 0.1", "below 0.1, the model's psi_lower"}};
  for (const auto& c : cases) {
    const std::string& exe = model_exe(c.name, repelled_source(c.name, c.bounds));
    const ProcessResult r =
        run_process({exe, "smooth", "--data", data, "--method", "bis", "--particles", "200"});
    INFO(r.describe());
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains(c.says) && Catch::Contains("at t=") &&
                          Catch::Contains("the bound does not hold"));
  }
}

TEST_CASE("diffusion: with a bound of psi from the model the score does not use exact bridges",
          "[e2e][sde]") {
  // Their rejection step needs psi within its bounds along the whole path, which no check at
  // the visited points can promise: paris refuses the score, bis estimates it.
  const std::string& exe = model_exe("sine_given_upper", R"(
model sine_given_upper {
  param theta : real = 0.7853981633974483;
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ diffusion(sin(x[t] - theta), 1, 0.5, psi_upper = 0.625);
  y[t] ~ normal(x[t], 1);
}
)");
  const std::string data = scratch_path("sine-given-upper-sim.csv");
  run_ok({exe, "simulate", "--T", "10", "--seed", "3", "--out", data});
  const ProcessResult paris = run_process({exe, "score", "--data", data, "--method", "paris"});
  CHECK(paris.exit_code == 1);
  CHECK_THAT(paris.err, Catch::Contains("not the model's psi_lower or psi_upper"));
  const nlohmann::json bis = nlohmann::json::parse(
      run_ok({exe, "score", "--data", data, "--method", "bis", "--particles", "200", "--json"})
          .out);
  CHECK(std::isfinite(bis["score"]["theta"].get<double>()));
}
