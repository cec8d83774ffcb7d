// The standard model library (stdlib/models/*.ssm): every model found in the directory compiles,
// simulates with its default parameters inside the supports its relations declare, and filters its
// own simulation with a finite log-likelihood. The models with an exact filter are compared with
// it: local_level, local_linear_trend and linear_gaussian with the Kalman filter (compare.cpp
// explains the tolerances), markov_switching with the forward algorithm. Parameter values are read
// from the compiled model (`info --json`), so retuning a default keeps the comparisons exact.
#include "compare.h"
#include "kalman.h"
#include "lgssm_support.h"
#include "support.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#ifndef SSM_E2E_STDLIB_MODELS
#error "SSM_E2E_STDLIB_MODELS (the stdlib/models directory) must be defined"
#endif

using namespace e2e;
using nlohmann::json;

namespace {

std::string model_path(const std::string& name) {
  return std::string(SSM_E2E_STDLIB_MODELS) + "/" + name + ".ssm";
}

// The stems of stdlib/models/*.ssm, sorted.
std::vector<std::string> stdlib_models() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(SSM_E2E_STDLIB_MODELS))
    if (entry.path().extension() == ".ssm")
      names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Compiles stdlib/models/NAME.ssm in place (so imports resolve as they do for a user), once per
// run.
const std::string& stdlib_exe(const std::string& name) {
  static std::map<std::string, std::string> built;
  auto it = built.find(name);
  if (it != built.end())
    return it->second;
  // A directory of their own: the executables are named after the models.
  std::filesystem::create_directories(scratch_path("stdlib-bin"));
  const std::string exe = scratch_path("stdlib-bin/" + name);
  ProcessResult r = run_process({ssmc_path(), "build", model_path(name), "-o", exe});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  return built.emplace(name, exe).first->second;
}

// Parameter name -> current (default) value, from `info --json`.
std::map<std::string, json> param_values(const json& info) {
  std::map<std::string, json> values;
  for (const auto& p : info.at("params"))
    values[p.at("name").get<std::string>()] = p.at("value");
  return values;
}

Eigen::MatrixXd to_matrix(const json& j) {
  if (j.is_number())
    return Eigen::MatrixXd::Constant(1, 1, j.get<double>());
  if (!j.at(0).is_array()) { // a vector: one column
    Eigen::MatrixXd m(j.size(), 1);
    for (size_t i = 0; i < j.size(); ++i)
      m(i, 0) = j[i].get<double>();
    return m;
  }
  Eigen::MatrixXd m(j.size(), j.at(0).size());
  for (size_t i = 0; i < j.size(); ++i)
    for (size_t k = 0; k < j[i].size(); ++k)
      m(i, k) = j[i][k].get<double>();
  return m;
}

// The support a relation's distribution gives its target (components independently).
struct Support {
  bool integer = false;
  double lo = -INFINITY, hi = INFINITY;
};

Support distribution_support(const std::string& dist) {
  static const std::set<std::string> counts = {"poisson", "negative_binomial", "binomial",
                                               "categorical", "multinomial"};
  static const std::set<std::string> positive = {"half_normal", "exponential", "gamma", "lognormal",
                                                 "inverse_gamma"};
  Support s;
  if (counts.count(dist))
    s.integer = true, s.lo = 0;
  else if (dist == "bernoulli")
    s.integer = true, s.lo = 0, s.hi = 1;
  else if (dist == "beta" || dist == "dirichlet")
    s.lo = 0, s.hi = 1;
  else if (positive.count(dist))
    s.lo = 0;
  return s;
}

// The variable a relation's target names: "x[t]" -> "x".
std::string target_variable(const std::string& target) {
  return target.substr(0, target.find('['));
}

} // namespace

TEST_CASE("every stdlib model compiles, simulates inside its supports and filters",
          "[e2e][stdlib]") {
  const std::vector<std::string> models = stdlib_models();
  // The models issue 3 asks for; any other file in the directory is covered too.
  for (const char* required :
       {"local_level", "local_linear_trend", "stochastic_volatility", "linear_gaussian",
        "poisson_count", "negbin_count", "markov_switching", "lotka_volterra"})
    CHECK(std::find(models.begin(), models.end(), required) != models.end());

  const int T = 100;
  for (const std::string& name : models) {
    DYNAMIC_SECTION(name) {
      const std::string& exe = stdlib_exe(name);
      const json structure = run_json({ssmc_path(), "check", "--format=json", model_path(name)});
      const json info = run_json({exe, "info", "--json"});
      std::map<std::string, std::vector<std::string>> columns; // variable -> its CSV columns
      std::vector<std::string> header = {"t"};
      for (const char* kind : {"state", "obs"})
        for (const auto& v : info.at(kind)) {
          auto cols = v.at("columns").get<std::vector<std::string>>();
          columns[v.at("name").get<std::string>()] = cols;
          header.insert(header.end(), cols.begin(), cols.end());
        }
      // Declared bounds of discrete states (int[lo..hi]).
      std::map<std::string, std::pair<double, double>> declared;
      for (const auto& s : structure.at("finite_state").at("states"))
        if (s.at("lo").is_number() && s.at("hi").is_number())
          declared[s.at("name").get<std::string>()] = {s.at("lo").get<double>(),
                                                       s.at("hi").get<double>()};

      const std::string sim = scratch_path(name + "-stdlib-sim.csv");
      run_ok({exe, "simulate", "--T", std::to_string(T), "--seed", "17", "--out", sim});
      const Table table = read_table(sim);
      REQUIRE(table.header == header);
      REQUIRE(table.rows.size() == static_cast<size_t>(T));

      // Each relation's draws: finite, in its distribution's support and the declared bounds.
      // The initial relation holds at t = 0, the transition at t >= 1, an observation at every t.
      std::set<std::string> covered;
      for (const auto& rel : structure.at("markov").at("relations")) {
        const std::string block = rel.at("block"), dist = rel.at("dist");
        const std::string var = target_variable(rel.at("target"));
        REQUIRE(columns.count(var));
        covered.insert(var);
        Support s = distribution_support(dist);
        if (declared.count(var)) {
          s.integer = true;
          s.lo = std::max(s.lo, declared[var].first);
          s.hi = std::min(s.hi, declared[var].second);
        }
        const int t0 = block == "transition" ? 1 : 0, t1 = block == "initial" ? 1 : T;
        for (const std::string& col : columns[var]) {
          const std::vector<double> v = table.column(col);
          for (int t = t0; t < t1; ++t) {
            INFO(fmt::format("{}: column {} at t={} ({} relation, {}): {}", name, col, t, block,
                             dist, v[t]));
            REQUIRE(std::isfinite(v[t]));
            CHECK(v[t] >= s.lo);
            CHECK(v[t] <= s.hi);
            if (s.integer)
              CHECK(v[t] == std::round(v[t]));
          }
        }
      }
      CHECK(covered.size() == columns.size()); // every variable has a relation

      // The filter runs on the simulation, with the defaults, and its estimates are finite.
      FilterRun f = run_filter(exe, {"--data", sim, "--particles", "1000", "--seed", "5"},
                               scratch_path(name + "-stdlib-filter.csv"));
      const double ll = f.summary.at("log_likelihood").get<double>();
      INFO(name << ": log-likelihood " << ll);
      CHECK(std::isfinite(ll));
      REQUIRE(f.table.rows.size() == static_cast<size_t>(T));
      for (const std::string& col : f.table.header)
        for (double x : f.table.column(col)) {
          INFO(name << ": filter output column " << col);
          CHECK(std::isfinite(x));
        }
    }
  }
}

namespace {

// Simulates T steps of a linear-Gaussian stdlib model and compares R filter runs with Kalman.
void stdlib_against_kalman(const std::string& name, const LinearGaussianModel& m,
                           const std::vector<std::string>& state_cols,
                           const std::vector<std::string>& obs_cols, int T, uint64_t sim_seed,
                           int64_t particles, int runs, uint64_t seed0) {
  const std::string& exe = stdlib_exe(name);
  const std::string sim = scratch_path(name + "-kalman-sim.csv");
  run_ok({exe, "simulate", "--T", std::to_string(T), "--seed", std::to_string(sim_seed), "--out",
          sim});
  const KalmanResult exact = kalman_filter(m, observations(read_table(sim), obs_cols));
  PfVsKalman c;
  c.label = "stdlib-" + name;
  c.exe = exe;
  c.args = {"--data", sim};
  c.state_cols = state_cols;
  c.particles = particles;
  c.runs = runs;
  c.seed0 = seed0;
  compare_with_kalman(c, exact);
}

} // namespace

TEST_CASE("stdlib local_level against Kalman", "[e2e][stdlib][stat]") {
  auto p = param_values(run_json({stdlib_exe("local_level"), "info", "--json"}));
  const double eps = p["sigma_eps"], eta = p["sigma_eta"], m0 = p["level0_mean"],
               s0 = p["level0_sd"];
  LinearGaussianModel m;
  m.m0 = Eigen::VectorXd::Constant(1, m0);
  m.P0 = Eigen::MatrixXd::Constant(1, 1, s0 * s0);
  m.A = Eigen::MatrixXd::Identity(1, 1);
  m.Q = Eigen::MatrixXd::Constant(1, 1, eta * eta);
  m.B = Eigen::MatrixXd::Identity(1, 1);
  m.R = Eigen::MatrixXd::Constant(1, 1, eps * eps);
  stdlib_against_kalman("local_level", m, {"level"}, {"y"}, 100, 41, 5000, 32, 4100);
}

TEST_CASE("stdlib local_linear_trend against Kalman", "[e2e][stdlib][stat]") {
  auto p = param_values(run_json({stdlib_exe("local_linear_trend"), "info", "--json"}));
  const double eps = p["sigma_eps"], sl = p["sigma_level"], ss = p["sigma_slope"];
  const double lm = p["level0_mean"], ls = p["level0_sd"], sm = p["slope0_mean"],
               ssd = p["slope0_sd"];
  LinearGaussianModel m; // state (level, slope)
  m.m0 = Eigen::Vector2d(lm, sm);
  m.P0 = Eigen::Vector2d(ls * ls, ssd * ssd).asDiagonal();
  m.A = Eigen::Matrix2d{{1, 1}, {0, 1}};
  m.Q = Eigen::Vector2d(sl * sl, ss * ss).asDiagonal();
  m.B = Eigen::RowVector2d(1, 0);
  m.R = Eigen::MatrixXd::Constant(1, 1, eps * eps);
  stdlib_against_kalman("local_linear_trend", m, {"level", "slope"}, {"y"}, 100, 42, 5000, 32,
                        4200);
}

TEST_CASE("stdlib linear_gaussian against Kalman", "[e2e][stdlib][stat]") {
  const json info = run_json({stdlib_exe("linear_gaussian"), "info", "--json"});
  auto p = param_values(info);
  LinearGaussianModel m;
  m.A = to_matrix(p["A"]);
  m.Q = to_matrix(p["Q"]);
  m.B = to_matrix(p["B"]);
  m.R = to_matrix(p["R"]);
  m.m0 = to_matrix(p["m0"]).col(0);
  m.P0 = to_matrix(p["P0"]);
  std::vector<std::string> state_cols, obs_cols;
  for (const auto& v : info.at("state"))
    for (const auto& c : v.at("columns"))
      state_cols.push_back(c);
  for (const auto& v : info.at("obs"))
    for (const auto& c : v.at("columns"))
      obs_cols.push_back(c);
  REQUIRE(state_cols.size() == static_cast<size_t>(m.A.rows()));
  REQUIRE(obs_cols.size() == static_cast<size_t>(m.B.rows()));
  stdlib_against_kalman("linear_gaussian", m, state_cols, obs_cols, 100, 43, 10000, 32, 4300);
}

namespace {

double log_normal_pdf(double y, double mu, double sigma) {
  const double z = (y - mu) / sigma;
  return -0.5 * z * z - std::log(sigma) - 0.5 * std::log(2 * M_PI);
}

struct ForwardResult {
  double log_likelihood = 0;
  std::vector<double> p1; // Pr(z_t = 1 | y_0..y_t)
};

// The forward algorithm of the two-state model, normalised at each step; z_0 from the chain's
// stationary law.
ForwardResult forward(const Eigen::MatrixXd& P, const Eigen::VectorXd& mu,
                      const Eigen::VectorXd& sigma, const std::vector<double>& y) {
  // The model's rows are normalised by categorical.
  Eigen::MatrixXd Pn = P;
  for (int i = 0; i < 2; ++i)
    Pn.row(i) /= Pn.row(i).sum();
  Eigen::RowVector2d alpha(Pn(1, 0), Pn(0, 1));
  alpha /= alpha.sum();
  ForwardResult r;
  for (size_t t = 0; t < y.size(); ++t) {
    if (t > 0)
      alpha = alpha * Pn;
    for (int k = 0; k < 2; ++k)
      alpha[k] *= std::exp(log_normal_pdf(y[t], mu[k], sigma[k]));
    r.log_likelihood += std::log(alpha.sum());
    alpha /= alpha.sum();
    r.p1.push_back(alpha[1]);
  }
  return r;
}

} // namespace

TEST_CASE("stdlib markov_switching against the forward algorithm", "[e2e][stdlib][stat]") {
  const std::string& exe = stdlib_exe("markov_switching");
  auto p = param_values(run_json({exe, "info", "--json"}));
  const int T = 100, R = 24;
  const int64_t N = 1000;
  const std::string sim = scratch_path("markov_switching-forward-sim.csv");
  run_ok({exe, "simulate", "--T", std::to_string(T), "--seed", "44", "--out", sim});
  const Table table = read_table(sim);
  const ForwardResult exact = forward(to_matrix(p["P"]), to_matrix(p["mu"]).col(0),
                                      to_matrix(p["sigma"]).col(0), table.column("y"));

  std::vector<double> ll;
  std::vector<std::vector<double>> p1(T); // p1[t][r]
  std::vector<double> ess_sum(T, 0.0);
  for (int r = 0; r < R; ++r) {
    FilterRun f = run_filter(
        exe, {"--data", sim, "--particles", std::to_string(N), "--seed", std::to_string(4400 + r)},
        scratch_path("markov_switching-forward.csv"));
    ll.push_back(f.summary.at("log_likelihood").get<double>());
    const std::vector<double> mean = f.table.column("mean_z"), ess = f.table.column("ess");
    for (int t = 0; t < T; ++t) {
      p1[t].push_back(mean[t]);
      ess_sum[t] += ess[t];
    }
  }
  // The log-likelihood: as compare.cpp, the mean of log Z^ is log Z - s2/2 within 4 standard
  // errors, in the regime where that correction is below one standard error.
  const double mean = sample_mean(ll), var = sample_variance(ll), se = std::sqrt(var / R);
  fmt::print("stdlib-markov_switching: N={} R={} forward loglik {:.4f}; particle mean {:.4f}, "
             "sd {:.4f}, bias correction {:.4f}, z = {:.2f}\n",
             N, R, exact.log_likelihood, mean, std::sqrt(var), var / 2,
             (mean + var / 2 - exact.log_likelihood) / se);
  {
    INFO(fmt::format("exact {:.6f}, mean estimate {:.6f}, sd {:.4f}", exact.log_likelihood, mean,
                     std::sqrt(var)));
    CHECK(std::abs(mean + var / 2 - exact.log_likelihood) <= 4 * se);
    CHECK(var / 2 <= se);
  }
  // The filtering probabilities Pr(z_t = 1 | y_0..y_t), the filter's mean of z: within 4 standard
  // errors plus the self-normalisation bias bound s/sqrt(ESS) of compare.cpp, plus 1/N, the
  // resolution of an N-particle estimate (a probability far below 1/N is usually estimated as 0
  // by every run, which leaves no spread to estimate the error from).
  double zmax = 0;
  for (int t = 0; t < T; ++t) {
    const double m = sample_mean(p1[t]), s = std::sqrt(sample_variance(p1[t]));
    const double tol = 4 * s / std::sqrt(R) + s / std::sqrt(ess_sum[t] / R) + 1.0 / N;
    if (s > 0)
      zmax = std::max(zmax, std::abs(m - exact.p1[t]) / (s / std::sqrt(R)));
    INFO(fmt::format("t={}: exact Pr(z=1) {}, particle mean {} (sd {})", t, exact.p1[t], m, s));
    CHECK(std::abs(m - exact.p1[t]) <= tol);
  }
  fmt::print("stdlib-markov_switching: max |z| of the filtering probabilities {:.2f}\n", zmax);
}
