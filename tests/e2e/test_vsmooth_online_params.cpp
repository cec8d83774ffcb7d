// End-to-end tests of `smooth --method variational --online --learn-params` on examples/lgssm1.ssm:
// the model's parameters learned as the observations stream past, beside the guide. The
// recursion's estimate of the ELBO's gradient in the parameters, at the exact guide, against the
// Kalman filter's exact score (`score`); one pass from a start far from the maximum likelihood
// against `rml`, which follows the same gradient with a particle smoother's score.
#include "support.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <map>
#include <string>
#include <vector>

using namespace e2e;

// At the model's exact guide (lgssm1's default start, without updates), E_q[grad_theta log p(x,
// y)] is the score (Fisher's identity). The recursion estimates it with N draws per step and
// self-normalised backward weights, whose bias is O(T / N) (measured on 100 steps: +4.8 in the q
// component at N = 64, +0.4 at N = 256, against a standard deviation of 0.4): Richardson's (4
// g_256 - g_64) / 3 leaves O(1/N^2), and its mean over five seeds agrees with the exact score
// within 4 standard errors (the seeds' spread) in every component. 50 steps: half the time of 100,
// with the estimates within 1.5 standard errors (measured).
TEST_CASE("online variational smoothing estimates the score at the exact guide",
          "[vsmooth][params]") {
  const std::string& exe = example_exe("lgssm1");
  const std::string data = scratch_path("vs_online_params_score.csv");
  run_ok({exe, "simulate", "--T", "50", "--seed", "5", "--out", data});
  const nlohmann::json exact = run_json({exe, "score", "--data", data, "--json"})["score"];
  const std::vector<std::string> names = {"a", "q", "r", "m0", "s0"};
  std::map<std::string, std::vector<double>> extrapolated;
  for (int seed = 1; seed <= 5; ++seed) {
    auto gradient = [&](int samples) {
      const nlohmann::json j =
          run_json({exe, "smooth", "--data", data, "--method", "variational", "--online",
                    "--epochs", "0", "--learn-params", "--samples", std::to_string(samples),
                    "--seed", std::to_string(seed), "--json"});
      REQUIRE(j["details"]["training"] == "none");
      return j["details"]["parameter_gradient"];
    };
    const nlohmann::json g64 = gradient(64), g256 = gradient(256);
    for (const std::string& name : names)
      extrapolated[name].push_back((4 * g256[name].get<double>() - g64[name].get<double>()) / 3);
  }
  for (const std::string& name : names) {
    const std::vector<double>& v = extrapolated[name];
    const double mean = sample_mean(v), se = std::sqrt(sample_variance(v) / v.size());
    INFO(name << ": exact " << exact[name].get<double>() << ", estimate " << mean << " (SE " << se
              << ")");
    CHECK(std::abs(mean - exact[name].get<double>()) < 4 * se);
  }
}

// From (a, q, r) = (0.6, 0.8, 0.7), 2000 observations simulated at (0.9, 0.5, 1): one streaming
// pass with RML's step sizes (0.05, held 100 steps, then decaying as k^-0.6) raises the
// log-likelihood by 78 nats (measured; the maximum is 78 nats further), and ends near where `rml`
// ends from the same start, as both follow the log-likelihood's gradient: rml's from a particle
// smoother, this one's from the guide, which the same pass trains. Over seeds 1 to 4 the two
// differed by 0.09 at most in any parameter; q ends 0.055 higher on average (the O(T / N) bias of
// the gradient at N = 16, above), and a seed's difference has a spread of 0.045: the bound 0.25
// is that bias plus 4 spreads. The saved parameters are the JSON's, and a --params file that the
// Kalman filter reads.
TEST_CASE("online variational smoothing learns the model's parameters as rml does",
          "[vsmooth][params]") {
  const std::string& exe = example_exe("lgssm1");
  const std::string data = scratch_path("vs_online_params_learn.csv");
  run_ok({exe, "simulate", "--T", "2000", "--seed", "11", "--out", data});
  const std::vector<std::string> start = {exe,     "--param", "a=0.6", "--param",
                                          "q=0.8", "--param", "r=0.7"};
  auto log_likelihood = [&](std::vector<std::string> argv) {
    argv.insert(argv.end(), {"filter", "--data", data, "--method", "kalman", "--json"});
    return run_json(argv)["log_likelihood"].get<double>();
  };
  const std::string saved = scratch_path("vs_online_params.json");
  std::vector<std::string> argv = start;
  argv.insert(argv.end(),
              {"smooth", "--data", data, "--method", "variational", "--online", "--learn-params",
               "--fix", "m0", "--fix", "s0", "--seed", "3", "--save", saved, "--json"});
  const nlohmann::json j = run_json(argv);
  INFO(j.dump());
  CHECK(j["details"]["learned"] == nlohmann::json::array({"a", "q", "r"}));
  CHECK(j["details"]["training"] == "streaming");
  CHECK(nlohmann::json::parse(read_file(saved)) == j["params"]);
  CHECK(j["params"]["m0"].get<double>() == 0.0); // fixed
  const double before = log_likelihood(start), after = log_likelihood({exe, "--params", saved});
  std::vector<std::string> rml_argv = start;
  rml_argv.insert(rml_argv.end(),
                  {"rml", "--data", data, "--fix", "m0", "--fix", "s0", "--seed", "3", "--json"});
  const nlohmann::json rml = run_json(rml_argv);
  INFO("log-likelihood: start " << before << ", learned " << after << "\nrml: " << rml.dump());
  CHECK(after > before + 50);
  for (const char* name : {"a", "q", "r"})
    CHECK(std::abs(j["params"][name].get<double>() - rml["params"][name].get<double>()) < 0.25);
}

// A parameter step too long for the model stops the pass at the step it broke, restores the
// parameters under which the last step succeeded (saved with --save, a --params file the Kalman
// filter reads), says which learning rate to lower, and leaves the data as it was. Without
// --clip, a step of 10^6 times q's score sends q's logarithm past exp's range ("left their
// space"); learning every parameter at 10^3, the model the step leads to has no finite ELBO.
// (With the default --clip, steps are clipped to 1 and both runs end, with q very large.)
TEST_CASE("online parameter learning stops at the step that went too far and keeps the last good "
          "parameters",
          "[vsmooth][params]") {
  const std::string& exe = example_exe("lgssm1");
  const std::string data = scratch_path("vs_online_params_far.csv");
  run_ok({exe, "--param", "q=9", "simulate", "--T", "50", "--seed", "2", "--out", data});
  const std::string original = read_file(data);
  struct Case {
    std::vector<std::string> args;
    std::string why;
  };
  const std::vector<Case> cases = {
      {{"--fix", "a", "--fix", "r", "--fix", "m0", "--fix", "s0", "--param-learning-rate", "1e6",
        "--clip", "0"},
       "the parameters left their space (parameter 'q' overflows"},
      {{"--param-learning-rate", "1e3", "--clip", "0"}, "the ELBO is not finite"}};
  for (const Case& c : cases) {
    const std::string saved = scratch_path("vs_online_params_far.json");
    std::vector<std::string> argv = {exe,        "smooth",      "--data",   data,
                                     "--method", "variational", "--online", "--learn-params",
                                     "--save",   saved};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const ProcessResult r = run_process(argv);
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains(c.why) && Catch::Contains(" at t=") &&
                          Catch::Contains("vs_online_params_far.csv line ") &&
                          Catch::Contains("a smaller --param-learning-rate may keep") &&
                          Catch::Contains("its parameters are in"));
    const nlohmann::json params = nlohmann::json::parse(read_file(saved));
    for (const auto& [name, value] : params.items())
      CHECK(std::isfinite(value.get<double>()));
    const nlohmann::json kalman = run_json(
        {exe, "--params", saved, "filter", "--data", data, "--method", "kalman", "--json"});
    CHECK(std::isfinite(kalman["log_likelihood"].get<double>()));
    CHECK(read_file(data) == original);
  }
  // With the default --clip the same rate does not fail: q moves by the clip, 1 a step on its log
  // scale, at every step. That is said, on standard error and in the JSON, with the count.
  const ProcessResult r = run_process({exe,
                                       "smooth",
                                       "--data",
                                       data,
                                       "--method",
                                       "variational",
                                       "--online",
                                       "--learn-params",
                                       "--json",
                                       "--out",
                                       scratch_path("vs_online_params_clipped.csv"),
                                       "--fix",
                                       "a",
                                       "--fix",
                                       "r",
                                       "--fix",
                                       "m0",
                                       "--fix",
                                       "s0",
                                       "--param-learning-rate",
                                       "1e6"});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const int64_t clipped = j["details"]["clipped_parameter_steps"].get<int64_t>();
  CHECK(clipped > 25);
  CHECK(j["details"]["clip"] == 1.0);
  CHECK(!j["details"].contains("warnings"));
  REQUIRE(j["warnings"].size() == 1);
  const std::string warning = j["warnings"][0].get<std::string>();
  CHECK_THAT(warning, Catch::Contains(fmt::format("was clipped (--clip 1) at {} of ", clipped)) &&
                          Catch::Contains("--param-learning-rate 1e+06 is likely too large"));
  CHECK_THAT(r.err, Catch::Contains(warning));
  CHECK(j["params"]["q"].get<double>() > 1e6);
}
