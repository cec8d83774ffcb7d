// Bad input to ssmc and to generated executables: each must end with a message naming what and
// where, and a non-zero exit code (1 for runtime errors, 2 for usage errors); a failed or
// interrupted run must leave no output file behind.
#include "support.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <thread>

using namespace e2e;
using Catch::Contains;
using Catch::StartsWith;

namespace {

// Runs a command expected to fail with `code`, printing `<prog>: error: ...` with every one of
// `words` on standard error and nothing on standard output.
ProcessResult expect_error(const std::vector<std::string>& argv, int code,
                           const std::vector<std::string>& words) {
  ProcessResult r = run_process(argv);
  INFO(r.describe());
  CHECK(r.signal == 0);
  CHECK(r.exit_code == code);
  CHECK(r.out.empty());
  for (const auto& w : words)
    CHECK_THAT(r.err, Contains(w));
  return r;
}

void expect_exe_error(const std::vector<std::string>& argv, int code,
                      const std::vector<std::string>& words) {
  const std::string prog = std::filesystem::path(argv.at(0)).filename();
  ProcessResult r = expect_error(argv, code, words);
  INFO(r.describe());
  CHECK_THAT(r.err, StartsWith(prog + ": error: "));
}

// Files in `dir` whose name starts with `stem` (the output and any temporary file beside it).
std::vector<std::string> files_like(const std::string& dir, const std::string& stem) {
  std::vector<std::string> found;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().starts_with(stem))
      found.push_back(e.path().filename());
  return found;
}

// Observations with bounded support: an observation 1000 away from every particle has
// likelihood zero under all of them.
const char* kCollapseModel = R"(// Test model for the e2e tests: a uniform observation density.
model collapse {
  param s = 1;
  state x : real;
  obs   y : real;
  x[0] ~ normal(0, s);
  x[t] ~ normal(x[t-1], s);
  y[t] ~ uniform(x[t] - 1, x[t] + 1);
}
)";

} // namespace

TEST_CASE("ssmc: a missing model file, an unknown pass", "[e2e][bad]") {
  const std::string missing = scratch_path("no-such-model.ssm");
  for (const std::string cmd : {"build", "check"}) {
    expect_error({ssmc_path(), cmd, missing}, 1,
                 {"ssmc: error: ", "cannot read '" + missing + "'", "No such file"});
  }
  expect_error({ssmc_path(), "build", example_path("sv.ssm"), "-o", "/nonexistent/dir/sv"}, 1,
               {"ssmc: error: ", "cannot write '/nonexistent/dir/sv'", "does not exist"});
  expect_error({ssmc_path(), "frob"}, 2, {"ssmc: error: ", "unknown command 'frob'"});
  expect_error({ssmc_path(), "build", example_path("sv.ssm"), "--passes=cse,fold", "-o",
                scratch_path("never-built")},
               1, {"ssmc: error: ", "unknown pass 'fold'", "constant-fold", "markov-structure"});
  CHECK(!file_exists(scratch_path("never-built")));
}

TEST_CASE("generated executable: bad data files", "[e2e][bad]") {
  const std::string& exe = example_exe("lgssm1");
  const std::string dir = fresh_dir("bad-data");

  SECTION("missing data column") {
    const std::string data = dir + "/nocol.csv";
    write_file(data, "t,z\n0,1\n1,2\n");
    expect_exe_error({exe, "filter", "--data", data}, 1,
                     {data, "column 'y' not found", "'t', 'z'"});
  }
  SECTION("non-numeric cell: file, line and column named") {
    const std::string data = dir + "/abc.csv";
    write_file(data, "t,y\n0,1.5\n1,NA\n2,abc\n3,2\n");
    expect_exe_error({exe, "filter", "--data", data}, 1,
                     {data + ":4:", "column 'y'", "'abc'", "number"});
  }
  SECTION("missing data file") {
    expect_exe_error({exe, "filter", "--data", dir + "/none.csv"}, 1,
                     {dir + "/none.csv", "No such file"});
  }
  SECTION("a row with the wrong number of fields") {
    const std::string data = dir + "/ragged.csv";
    write_file(data, "t,y\n0,1\n1,2,3\n");
    expect_exe_error({exe, "filter", "--data", data}, 1, {data + ":3:", "expected 2 fields"});
  }
  SECTION("partially missing row of a jointly distributed (mvnormal) observation") {
    const std::string& exe10 = example_exe("lgssm");
    const std::string params = example_path("data/lgssm_params.json");
    const std::string sim = dir + "/sim10.csv", data = dir + "/partial.csv";
    run_ok({exe10, "simulate", "--T", "4", "--params", params, "--out", sim});
    Table t = read_table(sim);
    t.rows[2][t.column_index("y[3]")] = "";
    t.rows[2][t.column_index("y[7]")] = "NA";
    write_table(data, t);
    expect_exe_error({exe10, "filter", "--data", data, "--params", params}, 1,
                     {data + ":4:", "'y'", "y[3], y[7]", "all present or all missing"});
  }
}

namespace {

// Data of every constrained type, all read by the model.
const char* kTypedDataModel =
    R"(// Test model for the e2e tests: data declared with constrained types.
model typed_data {
  data Sigma : cov_matrix[2];
  data w : simplex[3];
  data k : int[0..5];
  data r : real(0, inf);
  state x : vector[2];
  obs   y : vector[2];
  x[0] ~ mvnormal(zeros(2), Sigma);
  x[t] ~ mvnormal(x[t-1] * (w[0] + 2 * w[1] + 3 * w[2]) / 3, Sigma);
  y[t] ~ normal(x[t] + k, r + 0.1);
}
)";

} // namespace

TEST_CASE("generated executable: data values must fit their declared types", "[e2e][bad]") {
  const std::string& exe = model_exe("typed_data", kTypedDataModel);
  const std::string dir = fresh_dir("typed-data");
  const nlohmann::json good = nlohmann::json::parse(
      R"({"Sigma": [[1, 0.5], [0.5, 2]], "w": [0.2, 0.3, 0.5], "k": 2, "r": 0.5})");
  const std::string good_file = dir + "/good.json";
  write_file(good_file, good.dump());
  const std::string sim = dir + "/sim.csv";
  run_ok({exe, "simulate", "--T", "20", "--seed", "3", "--data-file", good_file, "--out", sim});
  run_ok({exe, "filter", "--data", sim, "--data-file", good_file, "--particles", "200"});

  // Each bad value stops simulate and filter before any output, naming the item, the file and
  // what is wrong.
  auto expect_bad = [&](const std::string& name, const nlohmann::json& value,
                        const std::vector<std::string>& words) {
    nlohmann::json bad = good;
    bad[name] = value;
    const std::string file = dir + "/bad-" + name + ".json";
    write_file(file, bad.dump());
    std::vector<std::string> all = words;
    all.push_back(file);
    const std::string out = dir + "/out-" + name + ".csv";
    expect_exe_error({exe, "simulate", "--T", "5", "--data-file", file, "--out", out}, 1, all);
    CHECK_FALSE(file_exists(out));
    expect_exe_error({exe, "filter", "--data", sim, "--data-file", file}, 1, all);
  };
  SECTION("a cov_matrix that is not symmetric") {
    expect_bad("Sigma", nlohmann::json::parse("[[1, 0.5], [0.3, 2]]"),
               {"data 'Sigma' (cov_matrix[2]) in", "must be symmetric positive definite",
                "Sigma[0,1] = 0.5 but Sigma[1,0] = 0.3"});
  }
  SECTION("a cov_matrix that is not positive definite") {
    expect_bad("Sigma", nlohmann::json::parse("[[1, 2], [2, 1]]"),
               {"data 'Sigma' (cov_matrix[2]) in", "Cholesky factorisation fails"});
  }
  SECTION("a simplex with a negative component") {
    expect_bad("w", nlohmann::json::parse("[0.7, -0.2, 0.5]"),
               {"data 'w' (simplex[3]) in", "must be on the simplex", "'w[1]' = -0.2 is negative"});
  }
  SECTION("a simplex that does not sum to 1") {
    expect_bad("w", nlohmann::json::parse("[0.2, 0.3, 0.4]"),
               {"data 'w' (simplex[3]) in", "its components sum to 0.9"});
  }
  SECTION("an int[lo..hi] that is not an integer") {
    expect_bad("k", 2.5, {"data 'k' = 2.5 in", "is not an integer", "int[0..5]"});
  }
  SECTION("an int[lo..hi] outside its range") {
    expect_bad("k", 6, {"data 'k' = 6 in", "is outside its declared range int[0..5]"});
    expect_bad("k", -1, {"data 'k' = -1 in", "is outside its declared range int[0..5]"});
  }
  SECTION("a real(lo, hi) outside its bounds") {
    expect_bad("r", -0.5, {"data 'r' = -0.5 in", "is outside [0, inf)", "its declared bounds"});
  }
}

namespace {

// A state declared int[0..1] whose transition, poisson(2), puts probability 0.594 outside the
// range (the compiler warns), and a count observation declared int[0..5].
const char* kLeakyRangeModel = R"(// Test model for the e2e tests: a poisson state in int[0..1].
model leaky_range {
  state z : int[0..1];
  obs   k : int[0..5];
  z[0] ~ bernoulli(0.5);
  z[t] ~ poisson(2);
  k[t] ~ poisson(1 + z[t]);
}
)";

// A categorical over 3 weights takes 0..2, but the state is declared int[1..3].
const char* kShiftedCategoricalModel =
    R"(// Test model for the e2e tests: a categorical state declared int[1..3].
model shifted_categorical {
  state c : int[1..3];
  obs   y : real;
  c[0] ~ categorical([0.2, 0.3, 0.5]);
  c[t] ~ categorical([0.2, 0.3, 0.5]);
  y[t] ~ normal(c[t], 1);
}
)";

// A count observation of a state that stays in its range: only the observation can leave it.
const char* kCountObsModel = R"(// Test model for the e2e tests: a poisson observation in int[0..5].
model count_obs {
  param P : matrix[2, 2] = [[0.9, 0.1], [0.2, 0.8]];
  state z : int[0..1];
  obs   k : int[0..5];
  z[0] ~ bernoulli(0.5);
  z[t] ~ categorical(P[z[t-1]]);
  k[t] ~ poisson(1 + 4 * z[t]);
}
)";

// int[0..40] for a poisson(2) state: the probability beyond 40 is below 1e-9, so the exact
// methods accept the truncation.
const char* kTruncatedPoissonModel =
    R"(// Test model for the e2e tests: a poisson state truncated far in its tail.
model truncated_poisson {
  state z : int[0..40];
  obs   y : real;
  z[0] ~ poisson(2);
  z[t] ~ poisson(2);
  y[t] ~ normal(z[t], 1);
}
)";

} // namespace

TEST_CASE("int[lo..hi]: values drawn or read outside the declared range stop the run",
          "[e2e][bad]") {
  const std::string dir = fresh_dir("int-range");
  const std::string data = dir + "/k.csv";
  write_file(data, "t,k\n0,1\n1,0\n2,3\n3,2\n4,1\n");

  SECTION("simulate names the variable, the value, the range and the time step") {
    const std::string& exe = model_exe("leaky_range", kLeakyRangeModel);
    const std::string out = dir + "/sim.csv";
    expect_exe_error(
        {exe, "simulate", "--T", "20", "--seed", "1", "--out", out}, 1,
        {"simulate: at t=", "the model drew z = ", "outside its declared range int[0..1]"});
    CHECK_FALSE(file_exists(out));
    const std::string& shifted = model_exe("shifted_categorical", kShiftedCategoricalModel);
    expect_exe_error({shifted, "simulate", "--T", "20", "--seed", "1"}, 1,
                     {"simulate: at t=", "drew c = 0, outside its declared range int[1..3]"});
  }
  SECTION("a particle filter names the particle") {
    const std::string& exe = model_exe("leaky_range", kLeakyRangeModel);
    for (const std::string method : {"bootstrap", "apf"})
      expect_exe_error(
          {exe, "filter", "--data", data, "--method", method}, 1,
          {"filter: at t=1 ", "of particle ", "drew z = ", "outside its declared range int[0..1]"});
    expect_exe_error({exe, "smooth", "--data", data, "--method", "ffbsm", "--particles", "50"}, 1,
                     {"filter: at t=1 the transition of particle ", "int[0..1]"});
  }
  SECTION("exact methods refuse to drop the probability outside the range") {
    const std::string& exe = model_exe("leaky_range", kLeakyRangeModel);
    const std::vector<std::string> words = {
        "exact finite-state methods", "(z: int[0..1])",
        "at t=1 the transition from z = 0 gives probability 0.594 to values outside them"};
    expect_exe_error({exe, "filter", "--data", data}, 1, words); // auto: forward
    expect_exe_error({exe, "filter", "--data", data, "--method", "forward"}, 1, words);
    expect_exe_error({exe, "smooth", "--data", data, "--method", "forward-backward"}, 1, words);
    expect_exe_error({exe, "decode", "--data", data}, 1, words);
    const std::string& shifted = model_exe("shifted_categorical", kShiftedCategoricalModel);
    const std::string y = dir + "/y.csv";
    write_file(y, "t,y\n0,1.5\n1,2\n");
    expect_exe_error({shifted, "filter", "--data", y}, 1,
                     {"(c: int[1..3])", "the initial distribution gives probability 0.2 to "
                                        "values outside them"});
  }
  SECTION("a truncation that loses less than 1e-9 is exact") {
    const std::string& exe = model_exe("truncated_poisson", kTruncatedPoissonModel);
    const std::string y = dir + "/y40.csv";
    write_file(y, "t,y\n0,1.5\n1,2\n2,0.3\n");
    const auto summary = nlohmann::json::parse(run_ok({exe, "filter", "--data", y, "--json"}).out);
    CHECK(summary.at("method") == "forward");
  }
  SECTION("an observation drawn outside its range stops simulate") {
    const std::string& exe = model_exe("count_obs", kCountObsModel);
    expect_exe_error({exe, "simulate", "--T", "50", "--seed", "2"}, 1,
                     {"simulate: at t=", "the model drew k = ", "int[0..5]"});
  }
  SECTION("an observation in the data outside its range, or not an integer") {
    const std::string& exe = model_exe("count_obs", kCountObsModel);
    run_ok({exe, "filter", "--data", data});
    const std::string high = dir + "/high.csv", frac = dir + "/frac.csv";
    write_file(high, "t,k\n0,1\n1,7\n2,3\n");
    write_file(frac, "t,k\n0,1\n1,2\n2,2.5\n");
    for (const std::string method : {"bootstrap", "forward"}) {
      expect_exe_error({exe, "filter", "--data", high, "--method", method}, 1,
                       {high + ":3: column 'k': 7 is outside the declared range of observation "
                               "'k', int[0..5]"});
      expect_exe_error({exe, "filter", "--data", frac, "--method", method}, 1,
                       {frac + ":4: column 'k': 2.5 is not an integer, but observation 'k' is "
                               "declared int[0..5]"});
    }
  }
}

TEST_CASE("generated executable: parameters", "[e2e][bad]") {
  const std::string& exe = example_exe("lgssm1");
  const std::string& exe10 = example_exe("lgssm");
  const std::string params = example_path("data/lgssm_params.json");

  SECTION("parameters with no value") {
    expect_exe_error({exe10, "simulate", "--T", "3"}, 1,
                     {"'A'", "'Q'", "'B'", "'R'", "no value", "--param", "--params"});
  }
  SECTION("wrong shapes") {
    expect_exe_error({exe, "simulate", "--T", "3", "--param", "a=[1,2]"}, 1,
                     {"'a'", "real", "a number", "array of 2 numbers"});
    expect_exe_error(
        {exe10, "simulate", "--T", "3", "--params", params, "--param", "Q=[[1,2],[3,4]]"}, 1,
        {"'Q'", "cov_matrix[10]", "10x10", "2x2"});
  }
  SECTION("a cov_matrix that is not positive definite") {
    nlohmann::json p = nlohmann::json::parse(read_file(params));
    p["R"][4][4] = -0.8; // symmetric, one negative eigenvalue
    const std::string bad = scratch_path("lgssm-bad-R.json");
    write_file(bad, p.dump());
    expect_exe_error({exe10, "simulate", "--T", "3", "--params", bad}, 1,
                     {"'R'", "positive definite"});
  }
  SECTION("unknown parameter, value outside the prior's support, bad file") {
    expect_exe_error({exe, "simulate", "--T", "3", "--param", "nope=1"}, 1,
                     {"'nope'", "a, q, r, m0, s0"});
    expect_exe_error({exe, "simulate", "--T", "3", "--param", "a=1.5"}, 1,
                     {"'a'", "1.5", "uniform(-1, 1)"});
    const std::string broken = scratch_path("broken.json");
    write_file(broken, "{\"a\": ");
    expect_exe_error({exe, "simulate", "--T", "3", "--params", broken}, 1, {broken, "JSON"});
  }
}

TEST_CASE("generated executable: usage errors exit with 2", "[e2e][bad]") {
  const std::string& exe = example_exe("lgssm1");
  expect_exe_error({exe, "filter", "--data", "x.csv", "--bogus"}, 2, {"--bogus", "--help"});
  expect_exe_error({exe, "--bogus", "info"}, 2, {"--bogus"});
  expect_exe_error({exe, "frobnicate"}, 2,
                   {"unknown subcommand 'frobnicate' (expected one of simulate, filter, smooth"});
  // Misspellings get the closest real name; an option given twice says so.
  expect_exe_error({exe, "fitler", "--data", "x.csv"}, 2,
                   {"unknown subcommand 'fitler'; did you mean 'filter'?"});
  expect_exe_error({exe, "filter", "--data", "x.csv", "--particels", "10"}, 2,
                   {"unknown option '--particels'; did you mean '--particles'?"});
  expect_exe_error({exe, "smooth", "--data", "x.csv", "--sed=4"}, 2,
                   {"unknown option '--sed'; did you mean '--seed'?"});
  expect_exe_error({exe, "filter", "--data", "x.csv", "--seed", "1", "--seed", "2"}, 2,
                   {"--seed given 2 times; it takes one value"});
  expect_error({ssmc_path(), "chek", example_path("sv.ssm")}, 2,
               {"ssmc: error: unknown command 'chek'; did you mean 'check'?"});
  expect_error({ssmc_path(), "build", example_path("sv.ssm"), "--optput", "x"}, 2,
               {"ssmc: error: unknown option '--optput'; did you mean '--output'?"});
  // Sizes beyond memory: a clear error naming what was asked for, at once; no output left.
  const std::string sim = scratch_path("oom-sim.csv");
  expect_exe_error({exe, "simulate", "--T", "100000000000", "--out", sim}, 1,
                   {"out of memory in simulate (it was asked for --T 100000000000"});
  CHECK(!file_exists(sim));
  run_ok({exe, "simulate", "--T", "20", "--out", sim});
  expect_exe_error(
      {exe, "filter", "--data", sim, "--method", "bootstrap", "--particles", "100000000000"}, 1,
      {"out of memory in filter (it was asked for --particles 100000000000"});
  expect_exe_error({exe}, 2, {"subcommand"});
  expect_exe_error({exe, "simulate"}, 2, {"--T", "required"});
  expect_exe_error({exe, "simulate", "--T", "0"}, 2, {"--T", "positive integer", "'0'"});
  expect_exe_error({exe, "filter", "--data", "x.csv", "--particles", "-5"}, 2,
                   {"--particles", "positive integer", "'-5'"});
  expect_exe_error({exe, "--seed", "-1", "info"}, 2, {"--seed", "'-1'"});

  // A flag that the chosen method does not read, while another method of the subcommand does:
  // a usage error when the method is named, a warning when auto chose it.
  const std::string data = scratch_path("usage-lgssm1.csv");
  run_ok({exe, "simulate", "--T", "5", "--out", data});
  expect_exe_error({exe, "filter", "--data", data, "--method", "kalman", "--particles", "10"}, 2,
                   {"filter: --particles does not apply to --method kalman (it applies to "
                    "bootstrap"});
  expect_exe_error({exe, "optimize", "--data", data, "--method", "lbfgs", "--e-step", "ffbsi"}, 2,
                   {"--e-step does not apply to --method lbfgs (it applies to em)"});
  const ProcessResult warned =
      run_process({exe, "filter", "--data", data, "--particles", "10", "--json"});
  INFO(warned.describe());
  CHECK(warned.exit_code == 0);
  CHECK(warned.err.find("warning: filter --particles does not apply to --method kalman") !=
        std::string::npos);
  CHECK(warned.err.find("which auto chose for this model") != std::string::npos);
}

TEST_CASE("all particle weights zero: the time step is named and no output is left", "[e2e][bad]") {
  const std::string& exe = model_exe("collapse", kCollapseModel);
  const std::string dir = fresh_dir("collapse");
  const std::string data = dir + "/y.csv", out = dir + "/out.csv";
  write_file(data, "t,y\n0,0.5\n1,0.2\n2,1000\n3,0\n");

  expect_exe_error({exe, "filter", "--data", data, "--particles", "100", "--out", out}, 1,
                   {"t=2", data + " line 4", "y=1000", "zero", "--particles"});
  CHECK(files_like(dir, "out.csv").empty());

  // An existing result survives a failed run unchanged.
  write_file(out, "previous result\n");
  expect_exe_error({exe, "filter", "--data", data, "--particles", "100", "--out", out, "--json"}, 1,
                   {"t=2"});
  CHECK(read_file(out) == "previous result\n");
  CHECK(files_like(dir, "out.csv") == std::vector<std::string>{"out.csv"});

  // The same data without the impossible observation filters fine.
  write_file(data, "t,y\n0,0.5\n1,0.2\n2,NA\n3,0\n");
  run_ok({exe, "filter", "--data", data, "--particles", "100", "--out", out});
  CHECK(read_table(out).rows.size() == 4);
}

TEST_CASE("an interrupted filter leaves no output file", "[e2e][bad]") {
  const std::string& exe = example_exe("lgssm1");
  const std::string dir = fresh_dir("interrupt");
  const std::string data = dir + "/y.csv", out = dir + "/out.csv";
  run_ok({exe, "simulate", "--T", "2000", "--seed", "1", "--out", data});
  // 2e9 particle-steps take far longer than the 700 ms after which the run is terminated.
  ProcessResult r = run_process({exe, "filter", "--data", data, "--method", "bootstrap",
                                 "--particles", "1000000", "--out", out, "--threads", "1"},
                                700);
  INFO(r.describe());
  REQUIRE(r.signal == SIGTERM);
  CHECK(files_like(dir, "out.csv").empty());
}

TEST_CASE("an unwritable --out fails before filtering, naming the path", "[e2e][bad]") {
  const std::string& exe = example_exe("lgssm1");
  const std::string dir = fresh_dir("unwritable");
  const std::string data = dir + "/y.csv";
  write_file(data, "y\n1\n2\n");
  const std::string out = dir + "/no/such/dir/out.csv";
  expect_exe_error({exe, "filter", "--data", data, "--out", out}, 1, {out});
  expect_exe_error({exe, "simulate", "--T", "3", "--out", out}, 1, {out});
  expect_exe_error({exe, "filter", "--data", data, "--out", dir}, 1, {dir, "directory"});
}

TEST_CASE("an absurd --threads is capped at 4 per core, with a note", "[e2e][bad]") {
  const std::string& exe = example_exe("nile");
  const ProcessResult p =
      run_process({exe, "--threads", "1000000", "filter", "--data", example_path("data/nile.csv"),
                   "--method", "bootstrap", "--particles", "100", "--json"});
  INFO(p.describe());
  REQUIRE(p.exit_code == 0);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  CHECK(nlohmann::json::parse(p.out)["threads"] == 4 * cores);
  CHECK(p.err.find("note: --threads 1000000 capped at " + std::to_string(4 * cores)) !=
        std::string::npos);
}

TEST_CASE("encodings and numbers out of range: models, CSV and JSON say what is wrong and are "
          "left as they were",
          "[e2e][bad]") {
  const std::string dir = fresh_dir("encodings");
  const std::string model_text = read_file(example_path("lgssm1.ssm"));
  // A file and the expected words; each file must be byte-identical afterwards.
  auto check_unchanged = [](const std::string& path, const std::string& bytes) {
    CHECK(read_file(path) == bytes);
  };
  auto utf16 = [](const std::string& text) { // little-endian, with its byte-order mark
    std::string out = "\xFF\xFE";
    for (char c : text)
      out += std::string{c, '\0'};
    return out;
  };

  SECTION("models") {
    const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
        {utf16(model_text), {"m.ssm:1:1: error: not a UTF-8 text file", "UTF-16 (little-endian)"}},
        {std::string("model m {\0", 10) + model_text,
         {"m.ssm:1:1: error: not a UTF-8 text file", "a NUL byte at line 1, column 10"}},
        {"// caf\xE9\n" + model_text,
         {"m.ssm:1:1: error: not a UTF-8 text file", "the byte 0xE9 at line 1, column 7"}},
        {"model m {\n  param a = 1e999;\n}\n", {"m.ssm:2:13: error: this number overflows"}},
        {"model m {\n  param a = 1e-999;\n}\n", {"m.ssm:2:13: error: this number underflows"}},
        {"model m {\n  param a\xE2\x80\x8B = 1;\n}\n",
         {"m.ssm:2:10: error: unexpected character U+200B (an invisible character)"}}};
    for (const auto& [bytes, words] : cases) {
      const std::string path = dir + "/m.ssm";
      write_file(path, bytes);
      expect_error({ssmc_path(), "check", path}, 1, words);
      check_unchanged(path, bytes);
    }
    // A UTF-8 byte-order mark is skipped, and columns count from after it.
    write_file(dir + "/bom.ssm", "\xEF\xBB\xBF" + model_text);
    run_ok({ssmc_path(), "check", dir + "/bom.ssm"});
  }

  SECTION("data and parameter files") {
    const std::string& exe = example_exe("lgssm1");
    const std::vector<std::pair<std::string, std::vector<std::string>>> csv = {
        {utf16("t,y\n0,1\n"), {"d.csv:1:1: not a UTF-8 text file", "0xFF"}},
        {std::string("t,y\n0,1\n1,\0\n", 12), {"d.csv:3: not a UTF-8 text file (a NUL byte"}},
        {"t,\xE9y\n0,1\n", {"d.csv:1: not a UTF-8 text file (column 2 of the header"}},
        {"t,y\n0,1e999\n", {"d.csv:2: column 'y': '1e999' overflows a double"}},
        {"t,y\n0,-1e-999\n", {"d.csv:2: column 'y': '-1e-999' underflows a double"}}};
    for (const auto& [bytes, words] : csv) {
      const std::string path = dir + "/d.csv";
      write_file(path, bytes);
      expect_exe_error({exe, "filter", "--data", path}, 1, words);
      check_unchanged(path, bytes);
    }
    // A UTF-8 byte-order mark is skipped: the first column, which the model needs, is found.
    write_file(dir + "/ok.csv", "\xEF\xBB\xBFy,t\n1,0\n2,1\n");
    run_ok({exe, "filter", "--data", dir + "/ok.csv"});
    const std::string params = dir + "/p.json";
    const std::string json16 = utf16("{\"q\": 1}");
    write_file(params, json16);
    expect_exe_error({exe, "filter", "--data", dir + "/ok.csv", "--params", params}, 1,
                     {"p.json:1:1: not a UTF-8 text file", "UTF-16 (little-endian)"});
    check_unchanged(params, json16);
    expect_exe_error({exe, "filter", "--data", dir + "/ok.csv", "--param", "q=1e999"}, 1,
                     {"'1e999' overflows a double"});
  }
}

TEST_CASE("numbers ssmc cannot stand behind: a non-finite Kalman likelihood is an error, a "
          "collapsed particle system a warning",
          "[e2e][bad]") {
  const std::string dir = fresh_dir("no-nonsense");
  // An observation 1e200 from its prediction: its squared distance overflows.
  const std::string tail = dir + "/tail.csv";
  write_file(tail, "t,y\n0,1\n1,1e200\n2,3\n");
  for (const std::string method : {"kalman", "ukf"})
    expect_exe_error({example_exe("lgssm1"), "filter", "--data", tail, "--method", method}, 1,
                     {"the log-likelihood is not finite at t=1 (", "tail.csv line 3: y=1e+200)"});
  expect_exe_error({example_exe("lgssm1"), "smooth", "--data", tail}, 1,
                   {"kalman: the log-likelihood is not finite at t=1"});

  // A uniform observation density 3.7 away from a standard normal state: with 200 particles one
  // or two land within its support (seed 1: one), and the filter warns, in the JSON too.
  const std::string& exe = model_exe("collapse", kCollapseModel);
  const std::string data = dir + "/collapse.csv";
  write_file(data, "t,y\n0,0\n1,3.7\n2,3.7\n");
  const ProcessResult r =
      run_ok({exe, "filter", "--data", data, "--particles", "200", "--seed", "1", "--json"});
  const nlohmann::json summary = nlohmann::json::parse(r.out);
  REQUIRE(summary.at("ess_min").get<double>() < 1.5);
  CHECK_THAT(r.err, Contains("warning: filter: the effective sample size fell to 1.00 of 200 "
                             "particles at step 1 ("));
  CHECK_THAT(r.err, Contains("collapse.csv line 3: y=3.7)"));
  REQUIRE(summary.contains("warnings"));
  CHECK_THAT(summary.at("warnings").at(0).get<std::string>(), Contains("about one particle"));
  // More particles: no collapse, no warning.
  const ProcessResult fine =
      run_ok({exe, "filter", "--data", data, "--particles", "20000", "--seed", "1", "--json"});
  CHECK(fine.err.empty());
  CHECK(!nlohmann::json::parse(fine.out).contains("warnings"));
}

TEST_CASE("a backward kernel that accepts under 1% of its proposals is a warning, in the JSON too",
          "[e2e][bad]") {
  // A random walk with a tiny step and an uninformative observation: the filter's particles stay
  // spread out, and a backward proposal lands near its own descendant only by chance.
  const std::string& exe = model_exe("tight_walk", R"(
model tight_walk {
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 5);
  x[t] ~ normal(x[t-1], 0.01);
  y[t] ~ normal(x[t], 100);
}
)");
  const std::string sim = scratch_path("tight-walk.csv");
  run_ok({exe, "simulate", "--T", "20", "--seed", "1", "--out", sim});
  for (const std::string backward : {"rejection", "mcmc"}) {
    const std::string method = backward == "rejection" ? "ffbsi" : "paris";
    const ProcessResult r = run_ok({exe, "smooth", "--data", sim, "--method", method, "--backward",
                                    backward, "--particles", "200", "--json"});
    const nlohmann::json j = nlohmann::json::parse(r.out);
    INFO(method << " --backward " << backward);
    REQUIRE(j.at("details").at("acceptance_rate").get<double>() < 0.01);
    CHECK_THAT(r.err, Contains("warning: smooth: the backward kernel (" + backward + ") accepted"));
    REQUIRE(j.contains("warnings"));
    CHECK_THAT(j.at("warnings").at(0).get<std::string>(), Contains("try --backward exact"));
  }
}
