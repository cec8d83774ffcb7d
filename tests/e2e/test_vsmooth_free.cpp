// End-to-end tests of the variational smoother's free (non-amortised) encoder, each step's
// natural parameters its own (Chagneux 2023, 4.4.2's comparison with Campbell et al. 2021): it
// holds the exact smoothing law of a linear-Gaussian model whose observation noise changes with
// t, which no amortised encoder (one map of y[t] for every step) can reach; started at the
// model's emission, its guide is the exact law and its per-step moments (--online-out, offline)
// the Kalman filter's; its saved guide serves the series it was trained on, and is refused on
// another length; the runs it cannot serve are refused.
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

// A 2-D linear-Gaussian model whose observation noise alternates between 0.2 and 2 with t.
const char* kFreeModel = R"(model vs_free {
  param A : matrix[2, 2] = [[0.8, 0.2], [-0.3, 0.7]];
  state x : vector[2];
  obs y : vector[2];
  x[0] ~ normal(0, 1);
  x[t] ~ normal(A * x[t-1], 0.5);
  y[t] ~ normal(x[t], t % 2 == 0 ? 0.2 : 2);
}
)";

struct FreeSetup {
  std::string exe, data, rts;
};

const FreeSetup& free_setup() {
  static const FreeSetup s = [] {
    FreeSetup s;
    s.exe = model_exe("vs_free", kFreeModel);
    s.data = scratch_path("vs_free.csv");
    s.rts = scratch_path("vs_free_rts.csv");
    run_ok({s.exe, "simulate", "--T", "30", "--seed", "4", "--out", s.data});
    run_ok({s.exe, "smooth", "--data", s.data, "--method", "rts", "--out", s.rts});
    return s;
  }();
  return s;
}

// The largest |difference| between two CSVs' columns `prefix`x[0] and `prefix`x[1], over the
// rows from `from`.
double column_gap(const Table& a, const Table& b, const std::string& prefix_a,
                  const std::string& prefix_b, size_t from = 0) {
  double gap = 0;
  for (const char* c : {"x[0]", "x[1]"}) {
    const std::vector<double> va = a.column(prefix_a + c), vb = b.column(prefix_b + c);
    REQUIRE(va.size() == vb.size());
    for (size_t t = from; t < va.size(); ++t)
      gap = std::max(gap, std::abs(va[t] - vb[t]));
  }
  return gap;
}

} // namespace

TEST_CASE("the free encoder holds a smoothing law no amortised encoder reaches", "[vsmooth]") {
  const FreeSetup& s = free_setup();
  auto fit = [&](const std::string& encoder, const std::string& iterations,
                 const std::string& out) {
    return run_json({s.exe, "smooth", "--data", s.data, "--method", "variational", "--encoder",
                     encoder, "--init", "random", "--seed", "5", "--iterations", iterations,
                     "--json", "--out", out});
  };
  const std::string free_out = scratch_path("vs_free_q.csv");
  const nlohmann::json free = fit("free", "500", free_out);
  const nlohmann::json linear = fit("linear", "200", scratch_path("vs_free_linear.csv"));
  INFO(free.dump() << "\n" << linear.dump());
  CHECK(free["details"]["encoder"] == "free");
  CHECK(free["details"]["gradient"] == "analytic");
  // Per step p + p(p+1)/2 = 5 natural parameters, beside the prior's 2 + 3 and the transition's
  // 4 + 2 + 3.
  CHECK(free["details"]["guide_parameters"] == 30 * 5 + 5 + 9);
  // From a generic start L-BFGS on the closed form closes in on the exact law, slowly (a step
  // whose noise is 2 barely moves the ELBO): KL 0.014 after 200 evaluations, 8e-4 after 500
  // (gaps 0.002 and 0.003), 2e-4 after 1000.
  CHECK(free["kl"].get<double>() < 2e-3);
  const Table q = read_table(free_out), rts = read_table(s.rts);
  CHECK(column_gap(q, rts, "mean_", "mean_") < 0.01);
  CHECK(column_gap(q, rts, "var_", "var_") < 0.01);
  // One emission noise for every step: the best amortised linear guide is far from it (70).
  CHECK(linear["kl"].get<double>() > 10);
  // The exact law is the optimum: from it (the model's emission at each step) training stays.
  const nlohmann::json stays =
      run_json({s.exe, "smooth", "--data", s.data, "--method", "variational", "--encoder", "free",
                "--iterations", "50", "--json"});
  CHECK(stays["kl"].get<double>() < 1e-8);
}

TEST_CASE("the free encoder at the model's emission is the Kalman filter", "[vsmooth]") {
  const FreeSetup& s = free_setup();
  const std::string kalman = scratch_path("vs_free_kalman.csv");
  run_ok({s.exe, "filter", "--data", s.data, "--method", "kalman", "--out", kalman});
  const std::string steps = scratch_path("vs_free_steps.csv"), out = scratch_path("vs_free0.csv");
  const std::string guide = scratch_path("vs_free.pt");
  const nlohmann::json j = run_json({s.exe, "smooth", "--data", s.data, "--method", "variational",
                                     "--encoder", "free", "--iterations", "0", "--online-out",
                                     steps, "--out", out, "--save-guide", guide, "--json"});
  INFO(j.dump());
  CHECK(j["details"]["init"] == "model");
  CHECK(j["kl"].get<double>() < 1e-8);
  const Table on = read_table(steps), kf = read_table(kalman), rts = read_table(s.rts);
  REQUIRE(on.rows.size() == 30);
  CHECK(on.header.back() == "one_step_var_x[1]"); // offline: no running ELBO
  CHECK(column_gap(on, kf, "filter_mean_", "mean_") < 1e-6);
  CHECK(column_gap(on, kf, "filter_var_", "var_") < 1e-6);
  // The one-step smoothing law of the last step is the smoothing law of the one before.
  for (const char* c : {"x[0]", "x[1]"}) {
    CHECK(on.column(fmt::format("one_step_mean_{}", c))[29] ==
          Approx(rts.column(fmt::format("mean_{}", c))[28]).margin(1e-6));
    CHECK(on.column(fmt::format("one_step_var_{}", c))[29] ==
          Approx(rts.column(fmt::format("var_{}", c))[28]).margin(1e-6));
  }
  CHECK(on.rows[0][on.column_index("one_step_mean_x[0]")].empty());
  // The saved guide reproduces the smoothing CSV on its own series.
  const std::string again = scratch_path("vs_free_again.csv");
  run_ok({s.exe, "smooth", "--data", s.data, "--method", "variational", "--load-guide", guide,
          "--iterations", "0", "--out", again});
  CHECK(read_file(again) == read_file(out));
  // And is refused on a series of another length.
  const std::string other = scratch_path("vs_free_other.csv");
  run_ok({s.exe, "simulate", "--T", "20", "--seed", "9", "--out", other});
  const ProcessResult p = run_process(
      {s.exe, "smooth", "--data", other, "--method", "variational", "--load-guide", guide});
  INFO(p.describe());
  CHECK(p.exit_code == 1);
  CHECK(p.err.find("the guide's free encoder holds parameters for 30 steps, and the data has "
                   "20: a non-amortised guide serves the series it was trained on") !=
        std::string::npos);
}

TEST_CASE("the free encoder refuses the runs it cannot serve", "[vsmooth]") {
  const FreeSetup& s = free_setup();
  auto refused = [&](const std::string& data, std::vector<std::string> args,
                     const std::string& expected) {
    std::vector<std::string> argv = {s.exe, "smooth", "--data", data, "--method", "variational"};
    argv.insert(argv.end(), args.begin(), args.end());
    const ProcessResult p = run_process(argv);
    INFO(p.describe());
    CHECK(p.exit_code == 1);
    CHECK(p.err.find(expected) != std::string::npos);
    CHECK(p.out.empty());
  };
  refused(s.data, {"--encoder", "free", "--online"},
          "the free encoder's parameters grow with the series");
  // Two series in one file.
  Table two = read_table(s.data);
  const size_t n = two.rows.size();
  two.header.insert(two.header.begin(), "series");
  for (size_t r = 0; r < n; ++r)
    two.rows[r].insert(two.rows[r].begin(), r < n / 2 ? "a" : "b");
  const std::string two_path = scratch_path("vs_free_two.csv");
  write_table(two_path, two);
  refused(two_path, {"--encoder", "free"}, "the data has 2 series, and a non-amortised guide");
  refused(two_path, {"--online-out", scratch_path("vs_free_two_steps.csv")},
          "the per-step moments are written for one");
}
