// `ssmc run`: the model compiled in memory (ORC JIT) and run inside ssmc must behave exactly like
// the executable `ssmc build` writes: byte-identical output for the same seed, the same errors.
#include "support.h"

#include <catch2/catch.hpp>

using namespace e2e;
using Catch::Contains;
using Catch::StartsWith;

namespace {

std::vector<std::string> ssmc_run(const std::string& model, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {ssmc_path(), "run", model, "--"};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

} // namespace

TEST_CASE("ssmc run: simulate output is byte-identical to the compiled executable", "[e2e][jit]") {
  const std::vector<std::string> args = {"simulate", "--T", "50", "--seed", "3"};
  std::vector<std::string> exe = {example_exe("lgssm1")};
  exe.insert(exe.end(), args.begin(), args.end());
  ProcessResult compiled = run_ok(exe);
  ProcessResult jit = run_ok(ssmc_run(example_path("lgssm1.ssm"), args));
  CHECK(!compiled.out.empty());
  CHECK(jit.out == compiled.out);
  CHECK(jit.err == compiled.err);
}

TEST_CASE("ssmc run: a particle filter gives the compiled executable's log-likelihood",
          "[e2e][jit]") {
  const std::string sim = scratch_path("jit-sv-sim.csv");
  run_ok({example_exe("sv"), "simulate", "--T", "100", "--seed", "1", "--out", sim});
  const std::vector<std::string> args = {"filter", "--data", sim, "--particles",
                                         "5000",   "--seed", "2", "--json"};
  std::vector<std::string> exe = {example_exe("sv")};
  exe.insert(exe.end(), args.begin(), args.end());
  ProcessResult compiled = run_ok(exe);
  ProcessResult jit = run_ok(ssmc_run(example_path("sv.ssm"), args));
  nlohmann::json a, b;
  REQUIRE_NOTHROW(a = nlohmann::json::parse(compiled.out));
  REQUIRE_NOTHROW(b = nlohmann::json::parse(jit.out));
  // Bit-identical kernels and the same Philox streams: equal, not merely close.
  CHECK(b.at("log_likelihood").get<double>() == a.at("log_likelihood").get<double>());
  CHECK(b.at("model") == a.at("model"));
}

TEST_CASE("ssmc run: errors of the model's run and of the model itself", "[e2e][jit]") {
  const std::string missing = scratch_path("jit-no-such-data.csv");
  ProcessResult r = run_process(ssmc_run(example_path("sv.ssm"), {"filter", "--data", missing}));
  {
    INFO(r.describe());
    CHECK(r.signal == 0);
    CHECK(r.exit_code == 1);
    CHECK(r.out.empty());
    CHECK_THAT(r.err, StartsWith("sv: error: "));
    CHECK_THAT(r.err, Contains(missing));
  }

  // A usage error of the executable's command line is the executable's (exit code 2).
  ProcessResult usage = run_process(ssmc_run(example_path("sv.ssm"), {"frobnicate"}));
  {
    INFO(usage.describe());
    CHECK(usage.exit_code == 2);
    CHECK_THAT(usage.err, StartsWith("sv: error: "));
  }

  const std::string bad = scratch_path("jit-syntax-error.ssm");
  write_file(bad, "model bad {\n  param s = 1;\n  state x : real\n  x[0] ~ normal(0, s);\n}\n");
  ProcessResult diag = run_process(ssmc_run(bad, {"info"}));
  ProcessResult check = run_process({ssmc_path(), "check", bad});
  INFO(diag.describe());
  CHECK(diag.exit_code == 1);
  CHECK(diag.out.empty());
  CHECK_THAT(diag.err, Contains(bad + ":3:"));
  CHECK_THAT(diag.err, Contains("error:"));
  // The same frontend: the same diagnostic as `ssmc check`.
  CHECK(diag.err == check.err);
}
