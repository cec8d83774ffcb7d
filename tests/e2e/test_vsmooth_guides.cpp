// End-to-end tests of a state-space model's guide statement (`guide x[t] ~ backward(...)`), which
// smooth --method variational reads for its family: a declared network encoder (its layers and
// activation, reading y alone) reaches the exact smoothing law of a linear-Gaussian model with the
// closed-form gradient, and its saved guide reproduces the marginals; a linear encoder that reads
// one of two observations is exact when the other is missing throughout, and short of it (a KL
// above 1) when it carries information the guide does not read, where the flags' guide over both
// is exact; and the refusals of a guide or flags that contradict the declaration.
#include "support.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

using namespace e2e;

namespace {

// The 2-D model of test_vsmooth.cpp, with a third observation w of the sum of the states, and
// `guide` standing for the guide statement.
std::string model_source(const std::string& name, const std::string& guide) {
  return fmt::format(R"(model {} {{
  param A : matrix[2, 2] = [[0.8, 0.2], [-0.3, 0.7]];
  net enc : mlp(inputs = 2, outputs = 4, hidden = [16], activation = tanh);
  state x : vector[2];
  obs y : vector[2];
  obs w : real;
  x[0] ~ normal(0, 1);
  x[t] ~ normal(A * x[t-1], 0.5);
  y[t] ~ normal(x[t], 0.7);
  w[t] ~ normal(x[t][0] + x[t][1], 0.2);
  {}
}}
)",
                     name, guide);
}

// A simulated series of `exe`'s model, with w blanked throughout when `without_w`, and its exact
// RTS smoothing at `rts_out`.
std::string simulated_series(const std::string& exe, const std::string& name, bool without_w,
                             const std::string& rts_out) {
  const std::string data = scratch_path(name + ".csv");
  run_ok({exe, "simulate", "--T", "40", "--seed", "7", "--out", data});
  if (without_w) {
    Table t = read_table(data);
    const int w = t.column_index("w");
    REQUIRE(w >= 0);
    for (auto& row : t.rows)
      row[w] = "";
    write_table(data, t);
  }
  run_ok({exe, "smooth", "--data", data, "--method", "rts", "--out", rts_out});
  return data;
}

} // namespace

TEST_CASE("a declared network encoder reaches the exact smoothing law", "[vsmooth]") {
  const std::string& exe =
      model_exe("vs_guide_net", model_source("vs_guide_net", "guide x[t] ~ backward(enc(y[t]));"));
  const std::string rts = scratch_path("vs_guide_net_rts.csv");
  const std::string data = simulated_series(exe, "vs_guide_net", true, rts);
  const std::string out = scratch_path("vs_guide_net_q.csv"), guide = scratch_path("vs_net.pt");
  const nlohmann::json j =
      run_json({exe, "smooth", "--data", data, "--method", "variational", "--init", "random",
                "--seed", "2", "--json", "--out", out, "--save-guide", guide});
  INFO(j.dump());
  CHECK(j["details"]["encoder"] == "mlp");
  CHECK(j["details"]["gradient"] == "analytic");
  CHECK(j["details"]["guide"].get<std::string>().find("vs_guide_net.ssm:11:3") !=
        std::string::npos);
  // w is missing throughout, so y alone informs x: the family holds the exact law.
  CHECK(j["kl"].get<double>() < 0.01);
  const auto [mean_gap, var_gap] = marginal_gaps(out, rts);
  CHECK(mean_gap < 0.03);
  CHECK(var_gap < 0.05);
  // The saved guide keeps the declared encoder (its inputs, layers and activation).
  const std::string again = scratch_path("vs_guide_net_again.csv");
  run_ok({exe, "smooth", "--data", data, "--method", "variational", "--load-guide", guide,
          "--iterations", "0", "--out", again});
  CHECK(read_file(again) == read_file(out));
}

TEST_CASE("a declared linear encoder reads the observations it names", "[vsmooth]") {
  const std::string& declared =
      model_exe("vs_guide_y", model_source("vs_guide_y", "guide x[t] ~ backward(y[t]);"));
  const std::string& flags = model_exe("vs_guide_none", model_source("vs_guide_none", ""));
  SECTION("exact where the observation it does not read is missing") {
    const std::string rts = scratch_path("vs_guide_y_rts.csv");
    const std::string data = simulated_series(declared, "vs_guide_y", true, rts);
    const std::string out = scratch_path("vs_guide_y_q.csv");
    const nlohmann::json j =
        run_json({declared, "smooth", "--data", data, "--method", "variational", "--init", "random",
                  "--seed", "3", "--json", "--out", out});
    INFO(j.dump());
    CHECK(j["details"]["encoder"] == "linear");
    CHECK(j["kl"].get<double>() < 1e-4);
    const auto [mean_gap, var_gap] = marginal_gaps(out, rts);
    CHECK(mean_gap < 1e-3);
    CHECK(var_gap < 1e-3);
  }
  SECTION("short of it where that observation informs the state") {
    const std::string rts = scratch_path("vs_guide_yw_rts.csv");
    const std::string data = simulated_series(declared, "vs_guide_yw", false, rts);
    const nlohmann::json partial =
        run_json({declared, "smooth", "--data", data, "--method", "variational", "--json"});
    const nlohmann::json full =
        run_json({flags, "smooth", "--data", data, "--method", "variational", "--json"});
    INFO(partial.dump() << "\n" << full.dump());
    // w (noise 0.2 against y's 0.7) pins x[0] + x[1]: a guide blind to it is far from the law.
    CHECK(partial["kl"].get<double>() > 1);
    CHECK(full["kl"].get<double>() < 1e-6);
    CHECK(partial["log_likelihood"].get<double>() ==
          Approx(full["log_likelihood"].get<double>()).epsilon(1e-12));
  }
}

TEST_CASE("a declared guide refuses the flags and the guides that contradict it", "[vsmooth]") {
  const std::string& declared =
      model_exe("vs_guide_net", model_source("vs_guide_net", "guide x[t] ~ backward(enc(y[t]));"));
  const std::string& flags = model_exe("vs_guide_none", model_source("vs_guide_none", ""));
  const std::string data = scratch_path("vs_guide_refuse.csv");
  run_ok({declared, "simulate", "--T", "10", "--seed", "1", "--out", data});
  auto refused = [&](std::vector<std::string> args, const std::string& expected) {
    std::vector<std::string> argv = {declared, "smooth", "--data", data, "--method", "variational"};
    argv.insert(argv.end(), args.begin(), args.end());
    const ProcessResult p = run_process(argv);
    INFO(p.describe());
    CHECK(p.exit_code == 1);
    CHECK(p.err.find(expected) != std::string::npos);
    CHECK(p.out.empty());
  };
  refused({"--encoder", "linear"}, "the model declares its guide (");
  refused({"--hidden", "8"}, "whose encoder is network 'enc'; --encoder and --hidden choose");
  // A guide trained by the flags' network (which reads the missing-value mask too).
  const std::string other = scratch_path("vs_guide_flags.pt");
  run_ok({flags, "smooth", "--data", data, "--method", "variational", "--encoder", "mlp",
          "--hidden", "16", "--iterations", "3", "--save-guide", other});
  refused({"--load-guide", other}, "the guide is over 2 state and 3 observation components, and "
                                   "the model 'vs_guide_net' has 2 and 2 that its guide reads");
  // A guide over the same observation whose encoder is linear (the declaration of vs_guide_y).
  const std::string& linear =
      model_exe("vs_guide_y", model_source("vs_guide_y", "guide x[t] ~ backward(y[t]);"));
  const std::string linear_guide = scratch_path("vs_guide_linear.pt");
  run_ok({linear, "smooth", "--data", data, "--method", "variational", "--iterations", "3",
          "--save-guide", linear_guide});
  refused({"--load-guide", linear_guide},
          "the guide's encoder is linear, and the model declares mlp(hidden = [16], activation = "
          "tanh) (");
}
