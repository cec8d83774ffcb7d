// Tests of the runtime's input handling: model metadata, CSV parsing and observation extraction
// (missing values, parse errors with line and column, missing columns, joint observations),
// parameter resolution and checks, and atomic output files.
#include "error_of.h"
#include "runtime_test_models.h"

#include "core/csv.h"
#include "core/error.h"
#include "core/metadata.h"
#include "core/output.h"
#include "core/params.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <unistd.h>

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

using ssm::test::error_of;

namespace {

const char* kParamMeta = R"json({"name":"p","source":"p.ssm","n_state":1,"n_obs":1,"n_theta":14,
 "state":[{"name":"x","shape":[],"offset":0,"size":1}],
 "obs":[{"name":"y","shape":[],"offset":0,"size":1,"joint":false}],
 "params":[
  {"name":"mu","type":"real","shape":[],"offset":0,"size":1,"default":[-1.02],"lower":null,
   "upper":null,"prior":"normal(0, 2)"},
  {"name":"rho","type":"real","shape":[],"offset":1,"size":1,"default":[0.97],"lower":-1,
   "upper":1,"prior":"uniform(-1, 1)"},
  {"name":"sigma","type":"real","shape":[],"offset":2,"size":1,"lower":0,"upper":null,
   "prior":"half_normal(0.5)"},
  {"name":"b","type":"vector","shape":[2],"offset":3,"size":2,"default":null,"lower":0,
   "upper":null,"prior":"exponential(1)"},
  {"name":"A","type":"matrix","shape":[2,2],"offset":5,"size":4,"default":[1,0,0,1],
   "lower":null,"upper":null,"prior":""},
  {"name":"Q","type":"cov_matrix","shape":[2,2],"offset":9,"size":4,"default":[2,0.5,0.5,1],
   "lower":null,"upper":null,"prior":"wishart(3, I)"},
  {"name":"c","type":"vector","shape":[1],"offset":13,"size":1,"default":[3],"lower":null,
   "upper":null}],
 "structure":"report"})json";

} // namespace

TEST_CASE("metadata parsing and column names", "[runtime][metadata]") {
  ssm::ModelInfo info = ssm::parse_metadata(kParamMeta);
  CHECK(info.name == "p");
  CHECK(info.n_theta == 14);
  REQUIRE(info.params.size() == 7);
  CHECK(info.params[0].default_value == std::vector<double>{-1.02});
  CHECK(!info.params[2].default_value);
  CHECK(!info.params[3].default_value);
  CHECK(*info.params[1].lower == -1);
  CHECK(!info.params[0].upper);
  CHECK(ssm::type_string(info.params[4]) == "matrix[2,2]");
  CHECK(ssm::type_string(info.params[5]) == "cov_matrix[2]");
  CHECK(ssm::column_names("x", {}) == std::vector<std::string>{"x"});
  CHECK(ssm::column_names("x", {3}) == std::vector<std::string>{"x[0]", "x[1]", "x[2]"});
  CHECK(ssm::column_names("A", {2, 2}) ==
        std::vector<std::string>{"A[0,0]", "A[0,1]", "A[1,0]", "A[1,1]"});
  CHECK_THAT(error_of([] { ssm::parse_metadata("{"); }), Contains("invalid model metadata"));
  CHECK_THAT(error_of([] {
               ssm::parse_metadata(R"json({"name":"m","n_state":2,"n_obs":0,"n_theta":0,
                 "state":[{"name":"x","shape":[],"offset":0,"size":1}],"obs":[],"params":[]})json");
             }),
             Contains("component 1 of 'state' belongs to no variable"));
}

TEST_CASE("CSV parsing", "[runtime][csv]") {
  SECTION("quotes, CRLF, blanks, trailing empty lines") {
    ssm::CsvTable t = ssm::parse_csv("t, \"a,b\" ,c\r\n0,\"x \"\"q\"\"\",  3 \r\n1,,NA\n\n\n", "f");
    REQUIRE(t.header == std::vector<std::string>{"t", "a,b", "c"});
    REQUIRE(t.rows.size() == 2);
    CHECK(t.rows[0] == std::vector<std::string>{"0", "x \"q\"", "3"});
    CHECK(t.rows[1] == std::vector<std::string>{"1", "", "NA"});
    CHECK(t.lines == std::vector<int64_t>{2, 3});
  }
  SECTION("a quoted field spanning lines keeps later line numbers right") {
    ssm::CsvTable t = ssm::parse_csv("a,b\n\"x\ny\",1\n2,oops\n", "f");
    REQUIRE(t.rows.size() == 2);
    CHECK(t.lines == std::vector<int64_t>{2, 4});
  }
  SECTION("single column: an empty line inside the data is a missing value") {
    ssm::CsvTable t = ssm::parse_csv("y\n1\n\n3\n\n", "f");
    REQUIRE(t.rows.size() == 3);
    CHECK(t.rows[1][0] == "");
  }
  CHECK(error_of([] { ssm::parse_csv("a,b\n1,2\n3\n", "f.csv"); }) ==
        "f.csv:3: expected 2 fields as in the header, found 1");
  CHECK(error_of([] { ssm::parse_csv("a,b\n1,2\n\n3,4\n", "f.csv"); }) ==
        "f.csv:3: empty line inside the data (write a row of empty cells or NA for a missing "
        "observation)");
  CHECK(error_of([] { ssm::parse_csv("", "f.csv"); }) ==
        "f.csv: the file is empty (expected a header line naming the columns)");
  CHECK(error_of([] { ssm::parse_csv("a,a\n1,2\n", "f.csv"); }) ==
        "f.csv:1: column 'a' appears twice in the header");
  CHECK(error_of([] { ssm::parse_csv("a\n\"1\n", "f.csv"); }) ==
        "f.csv:2: unterminated quoted field");
  CHECK_THAT(error_of([] { ssm::read_csv("/nonexistent/dir/x.csv"); }),
             StartsWith("cannot read '/nonexistent/dir/x.csv': No such file"));
}

TEST_CASE("observations from CSV", "[runtime][csv]") {
  ssm::ModelInfo ar1 = ssm::parse_metadata(rt_test::kAr1Meta);
  SECTION("columns by name, missing cells, other columns ignored") {
    ssm::ObsData d = ssm::read_observations(
        ar1, ssm::parse_csv("t,year,y\n0,1871,1120\n1,1872,\n2,1873,NA\n3,x, +2.5e1 \n4,,nan\n",
                            "nile.csv"));
    REQUIRE(d.T == 5);
    CHECK(d.y[0] == 1120);
    CHECK(std::isnan(d.y[1]));
    CHECK(std::isnan(d.y[2]));
    CHECK(d.y[3] == 25);
    CHECK(std::isnan(d.y[4]));
    for (int64_t t = 0; t < 5; ++t)
      CHECK(d.line(t) == t + 2);
  }
  CHECK(error_of([&] {
          ssm::read_observations(ar1, ssm::parse_csv("t,y\n0,1\n1,abc\n", "data.csv"));
        }) == "data.csv:3: column 'y': cannot parse 'abc' as a number");
  CHECK(error_of([&] {
          ssm::read_observations(ar1, ssm::parse_csv("t,y\n0,1\n1,1.5.2\n", "data.csv"));
        }) == "data.csv:3: column 'y': cannot parse '1.5.2' as a number");
  CHECK_THAT(
      error_of([&] { ssm::read_observations(ar1, ssm::parse_csv("t,y\n0,inf\n", "data.csv")); }),
      StartsWith("data.csv:2: column 'y': 'inf' is not a finite number"));
  CHECK(error_of([&] {
          ssm::read_observations(ar1, ssm::parse_csv("t,z,Y\n0,1,2\n", "data.csv"));
        }) == "data.csv: column 'y' not found (observation columns of model 'ar1': y); columns "
              "found: 't', 'z', 'Y'");
  CHECK(error_of([&] { ssm::read_observations(ar1, ssm::parse_csv("t,y\n", "data.csv")); }) ==
        "data.csv: no data rows after the header");

  ssm::ModelInfo ar2 = ssm::parse_metadata(rt_test::kAr2Meta);
  SECTION("joint observation: all or none missing") {
    ssm::ObsData d = ssm::read_observations(
        ar2, ssm::parse_csv("y[1],y[0]\n1,2\nNA,\n", "v.csv")); // column order is free
    CHECK(d.y[0] == 2);
    CHECK(d.y[1] == 1);
    CHECK(std::isnan(d.y[2]));
    CHECK(std::isnan(d.y[3]));
    CHECK(error_of([&] {
            ssm::read_observations(ar2, ssm::parse_csv("y[0],y[1]\n1,2\n3,NA\n", "v.csv"));
          }) ==
          "v.csv:3: observation 'y' is jointly distributed, so its 2 columns must be all present "
          "or all missing; missing here: y[1]");
  }
  CHECK_THAT(error_of([&] { ssm::read_observations(ar2, ssm::parse_csv("y[0]\n1\n", "v.csv")); }),
             StartsWith("v.csv: column 'y[1]' not found"));
}

TEST_CASE("observations streamed from a file keep their line numbers", "[runtime][csv]") {
  ssm::ModelInfo ar1 = ssm::parse_metadata(rt_test::kAr1Meta);
  const std::string path = fmt::format("/tmp/ssm-unit-obs-{}.csv", ::getpid());
  auto write = [&](const std::string& text) { std::ofstream(path, std::ios::binary) << text; };
  SECTION("regular rows: line t + 2, nothing stored") {
    write("\xEF\xBB\xBFt,y\r\n0,1.5\r\n1,NA\r\n2,3\r\n");
    const ssm::ObsData d = ssm::read_observations_file(ar1, path);
    REQUIRE(d.T == 3);
    CHECK(d.y[0] == 1.5);
    CHECK(std::isnan(d.y[1]));
    CHECK(d.y[2] == 3);
    CHECK(d.lines.empty());
    CHECK(d.line(2) == 4);
  }
  SECTION("a quoted field over two lines shifts the later rows") {
    write("note,y\n\"a\nb\",1\nc,2\n");
    const ssm::ObsData d = ssm::read_observations_file(ar1, path);
    REQUIRE(d.T == 2);
    CHECK(d.line(0) == 2);
    CHECK(d.line(1) == 4);
    write("note,y\n\"a\nb\",1\nc,x\n");
    CHECK(error_of([&] { ssm::read_observations_file(ar1, path); }) ==
          path + ":4: column 'y': cannot parse 'x' as a number");
  }
  SECTION("single column: blank lines inside are missing, at the end formatting") {
    write("y\n1\n\n\n4\n\n\n");
    const ssm::ObsData d = ssm::read_observations_file(ar1, path);
    REQUIRE(d.T == 4);
    CHECK(d.y[0] == 1);
    CHECK(std::isnan(d.y[1]));
    CHECK(std::isnan(d.y[2]));
    CHECK(d.y[3] == 4);
    CHECK(d.line(3) == 5);
  }
  SECTION("several columns: a blank line inside the data is an error") {
    write("t,y\n0,1\n\n1,2\n");
    CHECK_THAT(error_of([&] { ssm::read_observations_file(ar1, path); }),
               StartsWith(path + ":3: empty line inside the data"));
  }
  std::remove(path.c_str());
  CHECK_THAT(error_of([&] { ssm::read_observations_file(ar1, path); }),
             StartsWith("cannot read '" + path + "'"));
}

TEST_CASE("parameter value syntax", "[runtime][params]") {
  CHECK(ssm::parse_param_value("0.5") == nlohmann::json(0.5));
  CHECK(ssm::parse_param_value(" .5") == nlohmann::json(0.5));
  CHECK(ssm::parse_param_value("+1e-3") == nlohmann::json(1e-3));
  CHECK(ssm::parse_param_value("[1, -2]") == nlohmann::json::parse("[1.0,-2.0]"));
  CHECK(ssm::parse_param_value("[[1,2],[3,4]]") == nlohmann::json::parse("[[1,2],[3,4]]"));
  CHECK_THAT(error_of([] { ssm::parse_param_value("[1,2"); }), Contains("missing ']'"));
  CHECK_THAT(error_of([] { ssm::parse_param_value("abc"); }), Contains("'abc' is not a number"));
  CHECK_THAT(error_of([] { ssm::parse_param_value("1 2"); }), Contains("unexpected '2'"));
  // Deep nesting is refused before it exhausts the stack (fuzz/corpus/json), and a long value is
  // shown by its start.
  const std::string deep(100000, '[');
  const std::string message = error_of([&] { ssm::parse_param_value(deep); });
  CHECK_THAT(message, Contains("arrays nested more than 32 deep"));
  CHECK_THAT(message, Contains("cannot parse '" + std::string(60, '[') + "...'"));
  CHECK(message.size() < 300);
  CHECK(ssm::parse_param_value(std::string(32, '[') + std::string(32, ']')).is_array());
}

TEST_CASE("parameter resolution", "[runtime][params]") {
  ssm::ModelInfo info = ssm::parse_metadata(kParamMeta);
  const std::vector<std::string> needed = {"sigma=0.3", "b=[1, 2]"};

  SECTION("defaults < file < --param, flattened into theta at the metadata offsets") {
    nlohmann::json file = nlohmann::json::parse(R"({"mu": 5, "sigma": 0.1, "b": [3, 4],
                                                    "A": [[1, 2], [3, 4]]})");
    ssm::ParamValues v = ssm::resolve_params_json(info, &file, "p.json", {"sigma=0.3"});
    std::vector<double> theta = ssm::assemble_theta(info, v);
    CHECK(theta == std::vector<double>{5, 0.97, 0.3, 3, 4, 1, 2, 3, 4, 2, 0.5, 0.5, 1, 3});
  }
  SECTION("missing values are named with the way to give them") {
    ssm::ParamValues v = ssm::resolve_params_json(info, nullptr, "", {});
    CHECK(error_of([&] { ssm::assemble_theta(info, v); }) ==
          "parameters 'sigma', 'b' have no value (the model gives no default): give them with "
          "--param, e.g. --param sigma=0.5 --param b=[1,2], or in a --params FILE.json object");
    ssm::ParamValues v1 = ssm::resolve_params_json(info, nullptr, "", {"sigma=1"});
    CHECK(error_of([&] { ssm::assemble_theta(info, v1); }) ==
          "parameter 'b' has no value (the model gives no default): give it with --param, e.g. "
          "--param b=[1,2], or in a --params FILE.json object");
  }
  auto resolve = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = needed;
    a.insert(a.end(), extra.begin(), extra.end());
    return error_of([&] { ssm::resolve_params_json(info, nullptr, "", a); });
  };
  CHECK(resolve({}) == "(no error)");
  CHECK(resolve({"nu=1"}) == "--param nu=1: unknown parameter 'nu'; the model's parameters are: "
                             "mu, rho, sigma, b, A, Q, c");
  CHECK(resolve({"mu"}) == "--param 'mu': expected name=value, e.g. --param sigma=0.5");
  CHECK(resolve({"b=[1,2,3]"}) == "parameter 'b' is vector[2] and needs an array of 2 numbers, "
                                  "e.g. [1, 2]; --param gives an array of 3 numbers");
  CHECK(resolve({"mu=[1]"}) ==
        "parameter 'mu' is real and needs a number; --param gives an array of 1 numbers");
  CHECK(resolve({"c=3"}) ==
        "parameter 'c' is vector[1] and needs an array of 1 numbers, e.g. [1, 2]; --param gives "
        "a number");
  CHECK(resolve({"A=[1,2,3,4]"}) ==
        "parameter 'A' is matrix[2,2] and needs a 2x2 nested array (rows), e.g. [[1, 2], [3, "
        "4]]; --param gives an array of 4 numbers");
  CHECK(resolve({"rho=1.5"}) ==
        "parameter 'rho' = 1.5 is outside [-1, 1], the support of its prior uniform(-1, 1)");
  CHECK(resolve({"rho=-1"}) == "(no error)"); // the bounds themselves are allowed
  CHECK(resolve({"sigma=-0.5"}) == "parameter 'sigma' = -0.5 is outside [0, inf), the support "
                                   "of its prior half_normal(0.5)");
  CHECK(resolve({"b=[1,-2]"}) == "parameter 'b[1]' = -2 is outside [0, inf), the support of its "
                                 "prior exponential(1)");
  CHECK(resolve({"Q=[[1,2],[2,1]]"}) ==
        "parameter 'Q' (cov_matrix[2]) must be symmetric positive definite: the Cholesky "
        "factorisation fails (an eigenvalue is <= 0)");
  CHECK(resolve({"Q=[[1,0.5],[0.4,1]]"}) ==
        "parameter 'Q' (cov_matrix[2]) must be symmetric positive definite: Q[0,1] = 0.5 but "
        "Q[1,0] = 0.4");
  CHECK(resolve({"Q=[[2,1],[1,2]]"}) == "(no error)");
  CHECK(resolve({"mu=x"}) ==
        "--param mu=x: cannot parse 'x': 'x' is not a number (expected a number, [a, b, ...] or "
        "[[a, b], [c, d]])");

  SECTION("parameter file errors") {
    nlohmann::json bad = nlohmann::json::parse(R"({"mu": "one"})");
    CHECK(error_of([&] { ssm::resolve_params_json(info, &bad, "p.json", needed); }) ==
          "parameter 'mu' is real and needs a number; p.json gives a string");
    nlohmann::json unknown = nlohmann::json::parse(R"({"nu": 1})");
    CHECK_THAT(error_of([&] { ssm::resolve_params_json(info, &unknown, "p.json", needed); }),
               StartsWith("p.json: unknown parameter 'nu'"));
    nlohmann::json arr = nlohmann::json::parse("[1]");
    CHECK_THAT(error_of([&] { ssm::resolve_params_json(info, &arr, "p.json", needed); }),
               StartsWith("p.json: expected a JSON object"));
    char path[] = "/tmp/ssm_params_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    REQUIRE(write(fd, "{\"mu\": 1,", 9) == 9);
    close(fd);
    CHECK_THAT(error_of([&] { ssm::resolve_params(info, path, needed); }),
               StartsWith(std::string(path) + ": invalid JSON"));
    std::remove(path);
    CHECK_THAT(error_of([&] { ssm::resolve_params(info, "/nonexistent/p.json", needed); }),
               StartsWith("cannot read parameter file '/nonexistent/p.json'"));
  }
  SECTION("formatting") {
    const ssm::ParamInfo& A = *info.find_param("A");
    CHECK(ssm::format_param_value(A, {1, 2, 3, 4.5}) == "[[1, 2], [3, 4.5]]");
    CHECK(ssm::param_value_json(A, {1, 2, 3, 4}) == nlohmann::json::parse("[[1,2],[3,4]]"));
  }
}

TEST_CASE("atomic output files", "[runtime][output]") {
  char dir[] = "/tmp/ssm_out_XXXXXX";
  REQUIRE(mkdtemp(dir));
  const std::string path = std::string(dir) + "/out.csv";
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  auto exists = [](const std::string& p) { return std::ifstream(p).good(); };
  {
    ssm::OutputFile f(path);
    f.write("a,b\n");
    CHECK(exists(tmp));
    CHECK(!exists(path));
    f.commit();
  }
  CHECK(exists(path));
  CHECK(!exists(tmp));
  std::remove(path.c_str());
  {
    ssm::OutputFile f(path);
    f.write("partial");
    // destroyed without commit (an error happened): nothing is left behind
  }
  CHECK(!exists(path));
  CHECK(!exists(tmp));
  CHECK_THAT(error_of([&] { ssm::OutputFile f(std::string(dir) + "/no/such/dir/x.csv"); }),
             StartsWith("cannot write '" + std::string(dir) + "/no/such/dir/x.csv.tmp."));
  rmdir(dir);
}
