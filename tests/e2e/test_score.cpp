// End-to-end tests of `score`: the gradient of the log-likelihood by Fisher's identity over the
// smoothers, against central finite differences of the exact log-likelihood (Kalman on a
// linear-Gaussian model with a vector observation and a missing row; the forward algorithm on the
// HMM example; the 10-D linear-Gaussian example, 400 parameter components), the particle estimate
// (paris) within its Monte Carlo error of the exact one, the JSON and CSV layouts, and the refusal
// of a model whose score is not compiled.
#include "support.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <vector>

using namespace e2e;

namespace {

const char* kLinearGaussian = R"(
model lgscore {
  param a : real = 0.8;
  param q : real = 0.5;
  param c : vector[2] = [1.0, 0.5];
  param r : real = 0.7;
  param m0 : real = 0.2;
  state x : real;
  obs y : vector[2];
  x[0] ~ normal(m0, 1);
  x[t] ~ normal(a * x[t-1], q);
  y[t] ~ normal(c * x[t], r);
}
)";

// The log-likelihood of `exe` by its exact filter with `param` set to `value` (JSON text).
double filter_loglik(const std::string& exe, const std::string& data, const std::string& param,
                     const std::string& value) {
  const nlohmann::json j = nlohmann::json::parse(
      run_ok({exe, "filter", "--data", data, "--json", "--param", param + "=" + value}).out);
  return j.at("log_likelihood").get<double>();
}

// Central differences of the exact log-likelihood in each component of a parameter whose
// current value is `value` (flat, row-major; `rows` > 0 for a matrix).
std::vector<double> finite_differences(const std::string& exe, const std::string& data,
                                       const std::string& param, std::vector<double> value,
                                       int rows = 0) {
  const double h = 1e-5;
  auto text = [&](const std::vector<double>& v) {
    if (v.size() == 1 && rows == 0)
      return fmt::format("{:.17g}", v[0]);
    if (rows == 0)
      return fmt::format("[{:.17g}]", fmt::join(v, ","));
    const size_t cols = v.size() / static_cast<size_t>(rows);
    std::vector<std::string> r;
    for (int i = 0; i < rows; ++i)
      r.push_back(fmt::format("[{:.17g}]",
                              fmt::join(v.begin() + i * cols, v.begin() + (i + 1) * cols, ",")));
    return fmt::format("[{}]", fmt::join(r, ","));
  };
  std::vector<double> out;
  for (size_t k = 0; k < value.size(); ++k) {
    std::vector<double> up = value, down = value;
    up[k] += h;
    down[k] -= h;
    out.push_back(
        (filter_loglik(exe, data, param, text(up)) - filter_loglik(exe, data, param, text(down))) /
        (2 * h));
  }
  return out;
}

std::vector<double> flat(const nlohmann::json& j) {
  std::vector<double> out;
  if (j.is_number())
    out.push_back(j.get<double>());
  else
    for (const nlohmann::json& e : j)
      for (double v : flat(e))
        out.push_back(v);
  return out;
}

bool close(double got, double want, double rel) {
  return std::abs(got - want) <= rel * std::max(1.0, std::abs(want));
}

} // namespace

TEST_CASE("score by rts equals finite differences of the Kalman log-likelihood", "[score]") {
  const std::string& exe = model_exe("lgscore", kLinearGaussian);
  const std::string sim = scratch_path("lgscore-sim.csv"), data = scratch_path("lgscore.csv");
  run_ok({exe, "simulate", "--T", "40", "--seed", "8", "--out", sim});
  Table table = read_table(sim);
  for (const char* col : {"y[0]", "y[1]"}) // a whole missing row adds nothing
    table.rows.at(6).at(table.column_index(col)) = "NA";
  write_table(data, table);
  const std::string csv = scratch_path("lgscore-score.csv");
  const nlohmann::json j =
      nlohmann::json::parse(run_ok({exe, "score", "--data", data, "--json", "--out", csv}).out);
  CHECK(j["method"] == "rts");
  CHECK(j["chosen_by"] == "auto");
  CHECK(j["exact"] == true);
  CHECK(j["score"]["c"].is_array());
  CHECK(j["score"]["a"].is_number());
  const std::vector<std::pair<std::string, std::vector<double>>> params = {
      {"a", {0.8}}, {"q", {0.5}}, {"c", {1.0, 0.5}}, {"r", {0.7}}, {"m0", {0.2}}};
  const Table t = read_table(csv);
  REQUIRE(t.header == std::vector<std::string>{"parameter", "score", "se"});
  size_t row = 0;
  for (const auto& [name, value] : params) {
    const std::vector<double> fd = finite_differences(exe, data, name, value);
    const std::vector<double> got = flat(j["score"][name]);
    REQUIRE(got.size() == fd.size());
    for (size_t k = 0; k < fd.size(); ++k, ++row) {
      INFO(name << "[" << k << "]: score " << got[k] << ", finite differences " << fd[k]);
      CHECK(close(got[k], fd[k], 1e-6));
      CHECK(t.column("score")[row] == got[k]);
      CHECK(t.column("se")[row] == 0);
    }
  }
  CHECK(t.rows.at(2).at(0) == "c[0]");
}

TEST_CASE("score by forward-backward equals finite differences of the forward algorithm",
          "[score][finite]") {
  const std::string& exe = example_exe("hmm");
  const std::string data = scratch_path("hmm-score.csv");
  run_ok({exe, "simulate", "--T", "60", "--seed", "2", "--out", data});
  const nlohmann::json j =
      nlohmann::json::parse(run_ok({exe, "score", "--data", data, "--json"}).out);
  CHECK(j["method"] == "forward-backward");
  const nlohmann::json info = nlohmann::json::parse(run_ok({exe, "info", "--json"}).out);
  for (const nlohmann::json& p : info["params"]) {
    const std::string name = p["name"];
    if (p["type"] == "simplex")
      continue; // a component moved alone leaves the simplex
    const std::vector<double> value = flat(p["value"]);
    const int rows = p["type"] == "matrix" ? p["shape"][0].get<int>() : 0;
    const std::vector<double> fd = finite_differences(exe, data, name, value, rows);
    const std::vector<double> got = flat(j["score"][name]);
    REQUIRE(got.size() == fd.size());
    for (size_t k = 0; k < fd.size(); ++k) {
      INFO(name << "[" << k << "]: score " << got[k] << ", finite differences " << fd[k]);
      CHECK(close(got[k], fd[k], 1e-6));
    }
  }
}

TEST_CASE("the particle score (paris) is within Monte Carlo error of the exact one",
          "[score][smooth]") {
  const std::string& exe = model_exe("lgscore", kLinearGaussian);
  const std::string data = scratch_path("lgscore-particle.csv");
  run_ok({exe, "simulate", "--T", "40", "--seed", "9", "--out", data});
  const nlohmann::json exact =
      nlohmann::json::parse(run_ok({exe, "score", "--data", data, "--json"}).out);
  const nlohmann::json particle =
      nlohmann::json::parse(run_ok({exe, "score", "--data", data, "--json", "--method", "paris",
                                    "--particles", "1000", "--replicates", "16", "--seed", "3"})
                                .out);
  CHECK(particle["method"] == "paris");
  CHECK(particle["exact"] == false);
  CHECK(particle["replicates"] == 16);
  for (const char* name : {"a", "q", "c", "r", "m0"}) {
    const std::vector<double> want = flat(exact["score"][name]),
                              got = flat(particle["score"][name]),
                              se = flat(particle["score_se"][name]);
    for (size_t k = 0; k < want.size(); ++k) {
      INFO(name << "[" << k << "]: paris " << got[k] << " +- " << se[k] << ", exact " << want[k]);
      CHECK(se[k] > 0);
      CHECK(std::abs(got[k] - want[k]) < 4 * se[k]);
    }
  }
}

// A relation whose shape some particles put outside its domain: those particles get weight 0
// (the kernel's density is NaN), and their score terms, NaN, must not stop the smoother.
TEST_CASE("particles of weight 0 with undefined score terms: paris, online and ffbsm agree",
          "[score][smooth]") {
  const std::string& exe = model_exe("gamma_shape", R"(
model gamma_shape {
  param a : real(0, inf) = 2;
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1.5);
  x[t] ~ normal(0.5 * x[t-1], 1.5);
  y[t] ~ gamma(a + x[t], 1);
}
)");
  std::string csv = "t,y\n";
  for (int t = 0; t < 25; ++t)
    csv += fmt::format("{},{}\n", t, 1 + 0.8 * std::sin(0.7 * t) + 0.05 * t);
  const std::string data = scratch_path("gamma-shape.csv");
  write_file(data, csv);
  std::vector<nlohmann::json> runs;
  for (const char* method : {"paris", "online", "ffbsm"})
    runs.push_back(
        nlohmann::json::parse(run_ok({exe, "score", "--data", data, "--json", "--method", method,
                                      "--particles", "400", "--replicates", "8", "--seed", "5"})
                                  .out));
  const double paris = flat(runs[0]["score"]["a"])[0], paris_se = flat(runs[0]["score_se"]["a"])[0];
  for (size_t k = 1; k < runs.size(); ++k) {
    const double other = flat(runs[k]["score"]["a"])[0], se = flat(runs[k]["score_se"]["a"])[0];
    INFO(runs[k]["method"] << ": " << other << " +- " << se << "; paris " << paris << " +- "
                           << paris_se);
    CHECK(std::isfinite(other));
    CHECK(std::abs(other - paris) < 4 * std::hypot(se, paris_se));
  }
}

TEST_CASE("the 10-D linear-Gaussian example's exact score equals finite differences", "[score]") {
  // 400 parameter components, every matrix learned: mvnormal's closed-form gradient makes its
  // score terms small enough to compile. Entries of A, B and the covariances' lower triangles
  // (an entry below the diagonal stands for both of its symmetric pair, the upper one scores 0),
  // against central differences of the Kalman log-likelihood; a missing row adds nothing.
  const std::string& exe = example_exe("lgssm");
  const std::string params = example_path("data/lgssm_params.json");
  const std::string sim = scratch_path("lgssm10-sim.csv"), data = scratch_path("lgssm10.csv");
  run_ok({exe, "--params", params, "simulate", "--T", "60", "--seed", "4", "--out", sim});
  Table table = read_table(sim);
  for (int c = 0; c < 10; ++c)
    table.rows.at(9).at(table.column_index(fmt::format("y[{}]", c))) = "NA";
  write_table(data, table);
  const nlohmann::json j = nlohmann::json::parse(
      run_ok({exe, "--params", params, "score", "--data", data, "--json"}).out);
  CHECK(j["method"] == "rts");
  CHECK(j["exact"] == true);
  nlohmann::json start = nlohmann::json::parse(read_file(params));
  auto loglik = [&](const std::string& name, const nlohmann::json& value) {
    const nlohmann::json f = nlohmann::json::parse(
        run_ok({exe, "--params", params, "--param", name + "=" + value.dump(), "filter", "--data",
                data, "--json", "--out", scratch_path("lgssm10-filter.csv")})
            .out);
    return f.at("log_likelihood").get<double>();
  };
  const double h = 1e-5;
  struct Entry {
    const char* name;
    int i, j;
  };
  for (const Entry& e : {Entry{"A", 0, 2}, Entry{"A", 7, 3}, Entry{"B", 1, 9}, Entry{"B", 3, 3},
                         Entry{"Q", 1, 0}, Entry{"Q", 4, 4}, Entry{"R", 9, 2}, Entry{"R", 9, 9}}) {
    const bool covariance = e.name[0] == 'Q' || e.name[0] == 'R';
    auto moved = [&](double by) {
      nlohmann::json v = start[e.name];
      v[e.i][e.j] = v[e.i][e.j].get<double>() + by;
      if (covariance && e.i != e.j)
        v[e.j][e.i] = v[e.j][e.i].get<double>() + by;
      return v;
    };
    const double fd = (loglik(e.name, moved(h)) - loglik(e.name, moved(-h))) / (2 * h);
    const double got = j["score"][e.name][e.i][e.j].get<double>();
    INFO(e.name << "[" << e.i << ", " << e.j << "]: score " << got << ", finite differences "
                << fd);
    CHECK(close(got, fd, 1e-6));
    if (covariance && e.i != e.j)
      CHECK(j["score"][e.name][e.j][e.i].get<double>() == 0.0);
  }
  // optimize learns the parameters with a default or a prior; the example's have neither, and
  // the refusal says so rather than that they have no value.
  const ProcessResult held = run_process({exe, "--params", params, "optimize", "--data", data});
  INFO(held.describe());
  CHECK(held.exit_code == 1);
  CHECK(held.err.find("optimize: no parameter to learn: A, Q, B and R have neither a default nor "
                      "a prior in the model, so they stay at the values given by --param or "
                      "--params") != std::string::npos);
}

TEST_CASE("score is refused, with the reason, where the compiler derived none", "[score]") {
  // A deterministic state that reads a parameter: the score would need the state's derivative in
  // it, carried through time. (Terms too large to derive: tests/unit/test_derivatives.cpp.)
  const std::string& exe = model_exe("det_param", R"(
model det_param {
  param a : real = 0.5;
  state x : real;
  state s : real;
  obs   y : real;
  x[0] ~ normal(0, 1);
  s[0] = 0;
  x[t] ~ normal(0.9 * x[t-1], 1);
  s[t] = s[t-1] + a * x[t-1];
  y[t] ~ normal(x[t] + s[t], 1);
}
)");
  const ProcessResult p = run_process({exe, "score", "--data", scratch_path("none.csv")});
  INFO(p.describe());
  CHECK(p.exit_code == 1);
  CHECK(p.err.find("the compiler derived no score for model 'det_param'") != std::string::npos);
  CHECK(p.err.find("a deterministic relation that reads a parameter") != std::string::npos);
  CHECK(p.out.empty());
}
