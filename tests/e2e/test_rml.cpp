// End-to-end tests of `rml` (recursive maximum likelihood): on 10^5 observations of a 1-D
// linear-Gaussian model, the averaged estimate reaches the exact maximum-likelihood estimate,
// found here by Nelder-Mead on a Kalman filter written in the test, within a few of its standard
// errors (from the observed information of the same filter); the trajectory CSV (--thin, the
// series column, the support kept by huge steps), --save read back, and the refusals.
#include "support.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

using namespace e2e;

namespace {

using Point = std::array<double, 3>; // (a, q, r)

// The exact log-likelihood of lgssm1 (x_0 ~ N(0, 1), x_t = a x_{t-1} + N(0, q^2), y_t = x_t +
// N(0, r^2)) by a scalar Kalman filter.
double lgssm1_loglik(const std::vector<double>& y, const Point& p) {
  const auto [a, q, r] = p;
  return scalar_kalman_loglik(y, a, q * q, 1, r * r, 1);
}

// (atanh a, log q, log r) and back: Nelder-Mead moves on an unconstrained scale.
Point constrained(const Point& u) {
  return {std::tanh(u[0]), std::exp(u[1]), std::exp(u[2])};
}

// Nelder-Mead (a minimiser) over R^3 from x0, initial steps of 0.3.
Point nelder_mead(const auto& f, const Point& x0) {
  std::array<Point, 4> s = {x0, x0, x0, x0};
  for (int i = 0; i < 3; ++i)
    s[i + 1][i] += 0.3;
  std::array<double, 4> v{};
  for (int i = 0; i < 4; ++i)
    v[i] = f(s[i]);
  auto along = [](const Point& c, const Point& w, double k) {
    Point p{};
    for (int i = 0; i < 3; ++i)
      p[i] = c[i] + k * (w[i] - c[i]);
    return p;
  };
  for (int it = 0; it < 5000; ++it) {
    std::array<int, 4> o = {0, 1, 2, 3};
    std::sort(o.begin(), o.end(), [&](int a, int b) { return v[a] < v[b]; });
    const int best = o[0], worst = o[3], second = o[2];
    if (std::abs(v[worst] - v[best]) < 1e-10)
      break;
    Point c{};
    for (int k = 0; k < 3; ++k)
      for (int i = 0; i < 3; ++i)
        c[i] += s[o[k]][i] / 3;
    const Point r = along(c, s[worst], -1);
    const double fr = f(r);
    if (fr < v[best]) {
      const Point e = along(c, s[worst], -2);
      const double fe = f(e);
      s[worst] = fe < fr ? e : r;
      v[worst] = std::min(fe, fr);
    } else if (fr < v[second]) {
      s[worst] = r;
      v[worst] = fr;
    } else {
      const Point k = along(c, s[worst], 0.5);
      const double fk = f(k);
      if (fk < v[worst]) {
        s[worst] = k;
        v[worst] = fk;
      } else
        for (int i : {o[1], o[2], o[3]}) {
          s[i] = along(s[best], s[i], 0.5);
          v[i] = f(s[i]);
        }
    }
  }
  return s[std::min_element(v.begin(), v.end()) - v.begin()];
}

// Standard errors of the MLE (a, q, r) from the observed information: the inverse of minus the
// Hessian of the log-likelihood by central differences.
Point standard_errors(const std::vector<double>& y, const Point& mle) {
  const double h = 1e-3;
  double H[3][3];
  for (int i = 0; i < 3; ++i)
    for (int j = i; j < 3; ++j) {
      auto at = [&](double di, double dj) {
        Point p = mle;
        p[i] += di;
        p[j] += dj;
        return lgssm1_loglik(y, p);
      };
      H[i][j] = H[j][i] = (at(h, h) - at(h, -h) - at(-h, h) + at(-h, -h)) / (4 * h * h);
    }
  // The inverse of -H by cofactors (3 x 3).
  double M[3][3];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      M[i][j] = -H[i][j];
  const double det = M[0][0] * (M[1][1] * M[2][2] - M[1][2] * M[2][1]) -
                     M[0][1] * (M[1][0] * M[2][2] - M[1][2] * M[2][0]) +
                     M[0][2] * (M[1][0] * M[2][1] - M[1][1] * M[2][0]);
  const double c00 = M[1][1] * M[2][2] - M[1][2] * M[2][1];
  const double c11 = M[0][0] * M[2][2] - M[0][2] * M[2][0];
  const double c22 = M[0][0] * M[1][1] - M[0][1] * M[1][0];
  return {std::sqrt(c00 / det), std::sqrt(c11 / det), std::sqrt(c22 / det)};
}

std::vector<double> column_of(const std::string& csv, const std::string& name) {
  return read_table(csv).column(name);
}

} // namespace

TEST_CASE("rml: 10^5 observations of a linear-Gaussian model reach the exact MLE", "[rml]") {
  const std::string& exe = example_exe("lgssm1");
  const std::string data = scratch_path("rml-lgssm1.csv"), path = scratch_path("rml-path.csv");
  run_ok({exe, "simulate", "--T", "100000", "--seed", "3", "--param", "a=0.8", "--param", "q=0.5",
          "--param", "r=1", "--out", data});
  const std::vector<double> y = column_of(data, "y");
  const Point mle = constrained(nelder_mead(
      [&](const Point& u) { return -lgssm1_loglik(y, constrained(u)); }, {0.5, -0.5, 0.0}));
  const Point se = standard_errors(y, mle);

  // From a start far from it: a = 0.5, q = 1, r = 0.5.
  const nlohmann::json j =
      nlohmann::json::parse(run_ok({exe,           "rml",   "--data",         data,
                                    "--fix",       "m0",    "--fix",          "s0",
                                    "--param",     "a=0.5", "--param",        "q=1",
                                    "--param",     "r=0.5", "--particles",    "1000",
                                    "--step-size", "1",     "--average-from", "50000",
                                    "--thin",      "1000",  "--out",          path,
                                    "--json"})
                                .out);
  CHECK(j["method"] == "paris");
  CHECK(j["chosen_by"] == "auto");
  CHECK(j["observations"] == 100000);
  CHECK(j["averaged_over"] == 50001);
  CHECK(j["learned"] == nlohmann::json{"a", "q", "r"});
  CHECK(j["params"]["m0"] == 0.0);
  CHECK(j["params"]["s0"] == 1.0);
  const std::array<const char*, 3> names = {"a", "q", "r"};
  for (int i = 0; i < 3; ++i) {
    const double got = j["params"][names[i]].get<double>();
    INFO(names[i] << ": rml " << got << ", exact MLE " << mle[i] << " (se " << se[i] << ")");
    // The averaged iterate is asymptotically efficient; the particle approximation of the
    // tangent filter adds a bias of order 1/N, here one to two standard errors (N = 100 gives
    // three to five).
    CHECK(std::abs(got - mle[i]) < 4 * se[i]);
  }
  // --thin 1000: the rows of observations 1000, 2000, ..., 100000.
  const Table t = read_table(path);
  CHECK(t.header == std::vector<std::string>{"observation", "t", "step_size", "a", "q", "r"});
  REQUIRE(t.rows.size() == 100);
  CHECK(t.rows.front()[0] == "1000");
  CHECK(t.rows.back()[0] == "100000");
  CHECK(t.column("t").back() == 99999);
  // gamma_k = 1 for k <= 100, then (k - 100)^-0.6.
  CHECK(t.column("step_size").back() == Approx(std::pow(100000.0 - 100, -0.6)).epsilon(1e-12));
  // The last row is the last iterate.
  CHECK(t.column("a").back() == Approx(j["last"]["a"].get<double>()).epsilon(1e-15));
}

TEST_CASE("rml: the parameters stay in their support; series in turn; --save", "[rml]") {
  const std::string& exe = example_exe("lgssm1");
  const std::string data = scratch_path("rml-series.csv"),
                    path = scratch_path("rml-series-path.csv");
  const std::string saved = scratch_path("rml-saved.json");
  run_ok({exe, "simulate", "--T", "300", "--seed", "4", "--out", data});
  // Two series: the first 150 rows and the last 150; row 10 entirely missing.
  Table sim = read_table(data);
  sim.header.insert(sim.header.begin(), "series");
  for (size_t i = 0; i < sim.rows.size(); ++i)
    sim.rows[i].insert(sim.rows[i].begin(), i < 150 ? "first" : "second");
  sim.rows[10][sim.column_index("y")] = "NA";
  write_table(data, sim);
  // Huge steps: every move is clipped, but a in (-1, 1) and q, r > 0 throughout. bis, with r
  // kept at 0.7 (a fixed parameter between learned ones) and a row every 7 steps.
  const nlohmann::json j = nlohmann::json::parse(
      run_ok({exe,           "rml",   "--method",    "bis",    "--data", data,      "--fix",
              "m0",          "--fix", "s0",          "--fix",  "q",      "--param", "q=0.7",
              "--particles", "200",   "--step-size", "1000",   "--clip", "0.5",     "--thin",
              "7",           "--out", path,          "--save", saved,    "--json"})
          .out);
  CHECK(j["method"] == "bis");
  CHECK(j["chosen_by"] == "user");
  CHECK(j["observations"] == 299); // the missing row takes no step
  CHECK(j["average_from"] == 150); // the second half
  CHECK(j["averaged_over"] == 150);
  CHECK(j["series"] == nlohmann::json{"first", "second"});
  CHECK(j["learned"] == nlohmann::json{"a", "r"});
  CHECK(j["params"]["q"] == 0.7);
  CHECK(j["last"]["q"] == 0.7);
  CHECK(j["clipped_steps"].get<int>() > 250);
  const Table t = read_table(path);
  CHECK(t.header == std::vector<std::string>{"observation", "series", "t", "step_size", "a", "r"});
  // Steps 7, 14, ..., 294, then the last, 299.
  REQUIRE(t.rows.size() == 43);
  CHECK(t.rows[0][0] == "7");
  CHECK(t.rows[0][2] == "6");
  CHECK(t.rows[1][2] == "14");      // step 14 is row 14: row 10 took no step
  CHECK(t.rows[20][1] == "first");  // step 147, t = 147
  CHECK(t.rows[21][1] == "second"); // step 154, t = 4 of the second series
  CHECK(t.rows[21][2] == "4");
  CHECK(t.rows.back()[0] == "299");
  CHECK(t.rows.back()[2] == "149");
  CHECK(t.column("a").back() == Approx(j["last"]["a"].get<double>()).epsilon(1e-15));
  for (double a : t.column("a"))
    CHECK(std::abs(a) < 1);
  for (double v : t.column("r"))
    CHECK(v > 0);
  // --save writes the averaged estimate as a --params file, which filter reads.
  const nlohmann::json s = nlohmann::json::parse(read_file(saved));
  CHECK(s["a"].get<double>() == j["params"]["a"].get<double>());
  run_ok({exe, "filter", "--data", data, "--params", saved, "--json"});

  // A stream shorter than --average-from: the last iterate, with a warning.
  const ProcessResult short_run = run_ok(
      {exe, "rml", "--data", data, "--particles", "100", "--average-from", "1000", "--json"});
  const nlohmann::json k = nlohmann::json::parse(short_run.out);
  CHECK(k["averaged_over"] == 0);
  CHECK(k["params"] == k["last"]);
  CHECK(short_run.err.find("the stream ended before observation 1000") != std::string::npos);
}

TEST_CASE("rml refuses what it cannot run, with the reason", "[rml]") {
  const std::string& exe = example_exe("lgssm1");
  const std::string data = scratch_path("rml-refusals.csv");
  run_ok({exe, "simulate", "--T", "20", "--out", data});
  // Everything fixed: nothing to learn.
  ProcessResult r = run_process({exe, "rml", "--data", data, "--fix", "a", "--fix", "q", "--fix",
                                 "r", "--fix", "m0", "--fix", "s0"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("rml: no parameter to learn: --fix keeps a, q, r, m0 and s0") !=
        std::string::npos);
  // A step size far too large: every step is clipped, which is said (the run itself goes on).
  r = run_process({exe, "rml", "--data", data, "--step-size", "1e6"});
  INFO(r.describe());
  CHECK(r.exit_code == 0);
  CHECK(r.err.find("rml: the step was clipped (--clip 1) at 20 of 20 observations") !=
        std::string::npos);
  // The trajectory may not overwrite the data.
  r = run_process({exe, "rml", "--data", data, "--out", data});
  CHECK(r.exit_code == 1);
  CHECK(read_table(data).rows.size() == 20);
  // Step sizes that cannot converge, and smoother options that do not apply, named as rml's.
  r = run_process({exe, "rml", "--data", data, "--step-decay", "0.4"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("--step-decay must be in (0.5, 1]") != std::string::npos);
  r = run_process({exe, "rml", "--data", data, "--step-size", "-1"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("--step-size must be positive") != std::string::npos);
  r = run_process({exe, "rml", "--method", "bis", "--data", data, "--backward", "mcmc"});
  INFO(r.describe());
  CHECK(r.exit_code == 2); // bis reads no --backward: a usage error
  CHECK(r.err.find("rml: --backward does not apply to --method bis (it applies to paris)") !=
        std::string::npos);
  r = run_process({exe, "rml", "--method", "online", "--data", data, "--backward", "mcmc"});
  CHECK(r.exit_code == 2);
  r = run_process(
      {exe, "rml", "--method", "paris", "--data", data, "--backward", "mcmc", "--filter", "apf"});
  INFO(r.describe());
  CHECK(r.exit_code == 1); // paris reads it, and refuses the combination
  CHECK(r.err.find("rml --method paris: --backward mcmc starts each chain") != std::string::npos);
  // A failure inside the run names the step and the parameters reached.
  r = run_process({exe, "rml", "--data", data, "--param", "r=1e-300", "--fix", "r"});
  INFO(r.describe());
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("rml: after 0 steps, at a=0.9, q=0.5") != std::string::npos);
  // A model whose score the compiler did not derive: a deterministic state reads a parameter.
  const std::string& drift = model_exe("rml_drift", R"(
model rml_drift {
  param b : real = 0.1;
  state level : real;
  obs   y : real;
  level[0] = 0;
  level[t] = level[t-1] + b;
  y[t] ~ normal(level[t], 1);
}
)");
  r = run_process({drift, "rml", "--data", scratch_path("none.csv")});
  INFO(r.describe());
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("rml: the compiler derived no score for model 'rml_drift'") !=
        std::string::npos);
}
