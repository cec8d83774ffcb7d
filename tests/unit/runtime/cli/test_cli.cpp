// Tests of a generated executable's command line, run in-process through ssm::run_cli on a
// hand-written model: simulate -> filter round trip, JSON summaries, --resampling, exit codes and
// error format, global options after the subcommand, and atomic outputs on failure.
#include "runtime_test_models.h"
#include "text_file.h"

#include "cli/cli.h"
#include "core/csv.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <unistd.h>

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

using unit_test_files::read_file;

namespace {

struct Run {
  int code;
  std::string out, err;
};

std::string slurp(std::FILE* f) {
  std::string s;
  std::rewind(f);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
    s.append(buf, n);
  std::fclose(f);
  return s;
}

Run run(const ssm_model& model, std::vector<std::string> args) {
  args.insert(args.begin(), "/some/dir/ar1");
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  int code = ssm::run_cli(&model, static_cast<int>(args.size()), argv.data(), out, err);
  return {code, slurp(out), slurp(err)};
}

bool exists(const std::string& p) {
  return std::ifstream(p).good();
}

struct TempDir {
  std::string path;
  TempDir() {
    char d[] = "/tmp/ssm_cli_XXXXXX";
    path = mkdtemp(d);
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

} // namespace

TEST_CASE("simulate then filter through the command line", "[runtime][cli]") {
  ssm_model m = rt_test::ar1_model();
  TempDir dir;
  const std::string sim = dir.path + "/sim.csv", flt = dir.path + "/filter.csv";

  Run s = run(m, {"simulate", "--T", "40", "--out", sim, "--seed", "5"});
  INFO(s.err);
  REQUIRE(s.code == 0);
  CHECK(s.out.empty());
  ssm::CsvTable t = ssm::read_csv(sim);
  CHECK(t.header == std::vector<std::string>{"t", "x", "y"});
  CHECK(t.rows.size() == 40);
  CHECK(!exists(sim + ".tmp." + std::to_string(getpid())));

  // Same run to stdout gives the same bytes.
  Run s2 = run(m, {"--seed", "5", "simulate", "--T", "40"});
  CHECK(s2.out == read_file(sim));

  Run f = run(m, {"filter", "--data", sim, "--particles", "300", "--out", flt, "--json",
                  "--threads", "2", "--param", "sigma=0.4"});
  INFO(f.err);
  REQUIRE(f.code == 0);
  nlohmann::json j = nlohmann::json::parse(f.out);
  CHECK(j["particles"] == 300);
  CHECK(j["T"] == 40);
  CHECK(j["threads"] == 2);
  CHECK(j["seed"] == 1);
  CHECK(j["model"] == "ar1");
  CHECK(j["resampling"] == "systematic");
  for (const char* k : {"log_likelihood", "resample_count", "elapsed_s", "ess_min"})
    CHECK(j.contains(k));
  ssm::CsvTable ft = ssm::read_csv(flt);
  CHECK(ft.header == std::vector<std::string>{"t", "mean_x", "var_x", "ess", "loglik_increment"});
  CHECK(ft.rows.size() == 40);
  double sum = 0;
  for (const auto& row : ft.rows)
    sum += std::stod(row[4]);
  CHECK(sum == Approx(j["log_likelihood"].get<double>()).epsilon(1e-12));

  // Thread count does not change the output.
  Run f1 = run(
      m, {"--threads", "1", "--param", "sigma=0.4", "filter", "--data", sim, "--particles", "300"});
  REQUIRE(f1.code == 0);
  CHECK(f1.out == read_file(flt));
}

TEST_CASE("filter --resampling chooses the scheme", "[runtime][cli]") {
  ssm_model m = rt_test::ar1_model();
  TempDir dir;
  const std::string sim = dir.path + "/sim.csv";
  REQUIRE(run(m, {"simulate", "--T", "30", "--out", sim}).code == 0);
  const std::vector<std::string> base = {"filter", "--data",          sim, "--particles",
                                         "200",    "--ess-threshold", "1"};
  std::vector<std::string> args = base;
  Run def = run(m, args);
  REQUIRE(def.code == 0);
  std::set<double> lls;
  for (const char* scheme : {"multinomial", "stratified", "systematic", "residual", "ssp"}) {
    INFO(scheme);
    args = base;
    args.insert(args.end(), {"--resampling", scheme});
    Run csv = run(m, args);
    REQUIRE(csv.code == 0);
    CHECK((csv.out == def.out) == (std::string(scheme) == "systematic"));
    args.push_back("--json");
    Run r = run(m, args);
    INFO(r.err);
    REQUIRE(r.code == 0);
    nlohmann::json j = nlohmann::json::parse(r.out);
    CHECK(j["resampling"] == scheme);
    lls.insert(j["log_likelihood"].get<double>());
  }
  CHECK(lls.size() == 5);

  args = base;
  args.insert(args.end(), {"--resampling", "bootstrap"});
  Run bad = run(m, args);
  CHECK(bad.code == 2);
  CHECK_THAT(bad.err, StartsWith("ar1: error: "));
  CHECK_THAT(bad.err, Contains("--resampling"));
  CHECK_THAT(bad.err, Contains("bootstrap"));
  for (const char* scheme : {"multinomial", "stratified", "systematic", "residual", "ssp"})
    CHECK_THAT(bad.err, Contains(scheme));
  Run help = run(m, {"filter", "--help"});
  CHECK_THAT(help.out, Contains("--resampling"));
}

TEST_CASE("command-line errors: exit codes and messages", "[runtime][cli]") {
  ssm_model m = rt_test::ar1_model();
  TempDir dir;

  SECTION("usage errors exit with 2") {
    for (std::vector<std::string> args : {std::vector<std::string>{},
                                          {"frobnicate"},
                                          {"simulate"},
                                          {"--threads", "0", "info"},
                                          {"filter", "--data", "x.csv", "--particles", "0"},
                                          {"filter", "--data", "x.csv", "--ess-threshold", "1.5"},
                                          {"--seed", "abc", "info"}}) {
      Run r = run(m, args);
      INFO(r.err);
      CHECK(r.code == 2);
      CHECK_THAT(r.err, StartsWith("ar1: error: "));
    }
  }
  SECTION("help exits with 0 and documents the options") {
    Run r = run(m, {"--help"});
    CHECK(r.code == 0);
    CHECK_THAT(r.out, Contains("--param"));
    CHECK_THAT(r.out, Contains("phi : real ~ uniform(-1, 1) = 0.9"));
    Run rf = run(m, {"filter", "--help"});
    CHECK(rf.code == 0);
    CHECK_THAT(rf.out, Contains("--ess-threshold"));
  }
  SECTION("runtime errors exit with 1") {
    Run r = run(m, {"filter", "--data", dir.path + "/none.csv"});
    CHECK(r.code == 1);
    CHECK(r.err ==
          "ar1: error: cannot read '" + dir.path + "/none.csv': No such file or directory\n");
    Run p = run(m, {"info", "--param", "phi=2"});
    CHECK(p.code == 1);
    CHECK(p.err == "ar1: error: parameter 'phi' = 2 is outside [-1, 1], the support of its prior "
                   "uniform(-1, 1)\n");
  }
  SECTION("a failed filter leaves no output file") {
    const std::string data = dir.path + "/bad.csv", out = dir.path + "/out.csv";
    std::ofstream(data) << "t,y\n0,1\n1,abc\n";
    Run r = run(m, {"filter", "--data", data, "--out", out});
    CHECK(r.code == 1);
    CHECK(r.err == "ar1: error: " + data + ":3: column 'y': cannot parse 'abc' as a number\n");
    CHECK(!exists(out));
    CHECK(!exists(out + ".tmp." + std::to_string(getpid())));
  }
  SECTION("ABI version mismatch") {
    ssm_model bad = m;
    bad.abi_version = 999;
    Run r = run(bad, {"info"});
    CHECK(r.code == 1);
    CHECK_THAT(r.err, Contains("ABI version 999"));
  }
}

TEST_CASE("info prints dimensions, parameters and the structure report", "[runtime][cli]") {
  ssm_model m = rt_test::ar1_model();
  Run r = run(m, {"info", "--param", "tau=2"});
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, StartsWith("model ar1 (tests/ar1.ssm)\n"));
  CHECK_THAT(r.out, Contains("  tau : real = 2  ~ half_normal(1)\n"));
  CHECK_THAT(r.out, Contains("structure:\n  linear-Gaussian\n  first-order Markov\n"));
  Run j = run(m, {"info", "--json"});
  REQUIRE(j.code == 0);
  nlohmann::json info = nlohmann::json::parse(j.out);
  CHECK(info["model"] == "ar1");
  CHECK(info["n_theta"] == 3);
  CHECK(info["params"][0]["value"] == 0.9);
  CHECK(info["params"][1]["lower"] == 0);
  CHECK(info["params"][1]["upper"].is_null());
}
