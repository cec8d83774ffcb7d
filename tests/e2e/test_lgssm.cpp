// The linear-Gaussian examples against the exact Kalman filter: data simulated by the compiled
// model, some observations blanked out (empty cells and NA), then R particle filter runs compared
// with the reference (compare.cpp explains the tolerances). Also: every --resampling scheme's
// log-likelihood against Kalman, results identical for any --threads, and long simulations with
// the exact stationary moments. Then the exact methods themselves: `filter --method kalman` and
// `smooth --method rts` against the reference Kalman filter and brute-force conditioning.
#include "compare.h"
#include "kalman.h"
#include "support.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <numbers>

using namespace e2e;

namespace {

// Blanks the given columns of the given rows of a simulated CSV, alternating between an empty cell
// and NA so both spellings are exercised.
Table with_missing(Table table, const std::vector<std::string>& columns,
                   const std::vector<size_t>& rows) {
  int n = 0;
  for (size_t row : rows)
    for (const auto& col : columns) {
      const int j = table.column_index(col);
      REQUIRE(j >= 0);
      table.rows.at(row).at(j) = n++ % 2 ? "NA" : "";
    }
  return table;
}

std::vector<Eigen::VectorXd> observations(const Table& data, const std::vector<std::string>& cols) {
  std::vector<Eigen::VectorXd> ys(data.rows.size(), Eigen::VectorXd(cols.size()));
  for (size_t k = 0; k < cols.size(); ++k) {
    std::vector<double> c = data.column(cols[k]);
    for (size_t t = 0; t < c.size(); ++t)
      ys[t][k] = c[t];
  }
  return ys;
}

std::vector<std::string> indexed(const std::string& name, int n) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i)
    v.push_back(fmt::format("{}[{}]", name, i));
  return v;
}

Eigen::MatrixXd matrix_from_json(const nlohmann::json& j) {
  Eigen::MatrixXd m(j.size(), j.at(0).size());
  for (size_t i = 0; i < j.size(); ++i)
    for (size_t k = 0; k < j[i].size(); ++k)
      m(i, k) = j[i][k].get<double>();
  return m;
}

// examples/lgssm1.ssm with parameters other than its defaults (m0 != 0 in particular): the
// --param arguments and the matching reference model.
struct Lgssm1 {
  double a = 0.8, q = 0.7, r = 0.6, m0 = 0.5, s0 = 2;
  std::vector<std::string> params() const {
    return {"--param", fmt::format("a={}", a),  "--param", fmt::format("q={}", q),
            "--param", fmt::format("r={}", r),  "--param", fmt::format("m0={}", m0),
            "--param", fmt::format("s0={}", s0)};
  }
  LinearGaussianModel model() const {
    LinearGaussianModel m;
    m.m0 = Eigen::VectorXd::Constant(1, m0);
    m.P0 = Eigen::MatrixXd::Constant(1, 1, s0 * s0);
    m.A = Eigen::MatrixXd::Constant(1, 1, a);
    m.Q = Eigen::MatrixXd::Constant(1, 1, q * q);
    m.B = Eigen::MatrixXd::Constant(1, 1, 1.0);
    m.R = Eigen::MatrixXd::Constant(1, 1, r * r);
    return m;
  }
};

// examples/lgssm1.ssm renamed `name`, with `extra` statements at the end of the model.
std::string lgssm1_source(const std::string& name, const std::string& extra) {
  std::string source = read_file(example_path("lgssm1.ssm"));
  source.replace(source.find("model lgssm1 "), 13, "model " + name + " ");
  source.insert(source.rfind('}'), extra);
  return source;
}

// examples/lgssm.ssm (10-D) with the parameters of a --params file; x[0] ~ mvnormal(0, Q).
LinearGaussianModel lgssm_model(const std::string& params_file) {
  const nlohmann::json p = nlohmann::json::parse(read_file(params_file));
  LinearGaussianModel m;
  m.A = matrix_from_json(p.at("A"));
  m.Q = matrix_from_json(p.at("Q"));
  m.B = matrix_from_json(p.at("B"));
  m.R = matrix_from_json(p.at("R"));
  m.m0 = Eigen::VectorXd::Zero(m.A.rows());
  m.P0 = m.Q;
  return m;
}

} // namespace

TEST_CASE("lgssm1 (1-D): particle filter against Kalman with missing observations", "[e2e][stat]") {
  const std::string& exe = example_exe("lgssm1");
  // Parameters other than the model's defaults, to exercise --param (m0 != 0 in particular).
  const Lgssm1 model;
  const std::vector<std::string> params = model.params();
  const std::string sim = scratch_path("lgssm1-sim.csv"), data = scratch_path("lgssm1-data.csv");
  std::vector<std::string> argv = {exe, "simulate", "--T", "100", "--seed", "11", "--out", sim};
  argv.insert(argv.end(), params.begin(), params.end());
  run_ok(argv);
  // Missing at t=0 (the filter starts from the prior), in a run of two, and at the end.
  const std::vector<size_t> missing_rows = {0, 13, 14, 50, 99};
  Table table = with_missing(read_table(sim), {"y"}, missing_rows);
  write_table(data, table);

  const KalmanResult exact = kalman_filter(model.model(), observations(table, {"y"}));

  PfVsKalman c;
  c.label = "lgssm1";
  c.exe = exe;
  c.args = params;
  c.args.insert(c.args.end(), {"--data", data});
  c.state_cols = {"x"};
  c.particles = 10000; // Var(log Z^) ~ 0.02: the correction s2/2 is ~0.5 standard errors
  c.runs = 48;
  c.seed0 = 1000;
  c.missing.assign(100, false);
  for (size_t t : missing_rows)
    c.missing[t] = true;
  compare_with_kalman(c, exact);

  // The auxiliary particle filter (look-ahead: the transition's mean) on the same data: its
  // likelihood is unbiased too.
  PfVsKalman apf = c;
  apf.label = "lgssm1-apf";
  apf.args.insert(apf.args.end(), {"--method", "apf"});
  apf.seed0 = 5000;
  compare_with_kalman(apf, exact);
}

TEST_CASE("lgssm (10-D): particle filter against Kalman with missing rows", "[e2e][stat]") {
  const std::string& exe = example_exe("lgssm");
  const std::string params_file = example_path("data/lgssm_params.json");
  const std::string sim = scratch_path("lgssm-sim.csv"), data = scratch_path("lgssm-data.csv");
  // T is small: a bootstrap filter's weights degenerate with 10 informative observations a step
  // (the ESS falls to a few hundred of 50000), and Var(log Z^) grows linearly in T.
  const int T = 12, d = 10;
  run_ok({exe, "simulate", "--T", std::to_string(T), "--seed", "21", "--params", params_file,
          "--out", sim});
  const std::vector<size_t> missing_rows = {3, 7, 8}; // whole rows: y is jointly distributed
  Table table = with_missing(read_table(sim), indexed("y", d), missing_rows);
  write_table(data, table);

  const KalmanResult exact =
      kalman_filter(lgssm_model(params_file), observations(table, indexed("y", d)));

  PfVsKalman c;
  c.label = "lgssm";
  c.exe = exe;
  c.args = {"--params", params_file, "--data", data};
  c.state_cols = indexed("x", d);
  c.particles = 50000; // Var(log Z^) ~ 0.02 over the 9 observed steps: s2/2 ~ 0.4 SE
  c.runs = 32;
  c.seed0 = 2000;
  c.missing.assign(T, false);
  for (size_t t : missing_rows)
    c.missing[t] = true;
  compare_with_kalman(c, exact);
}

TEST_CASE("guided filter with the locally optimal proposal against Kalman", "[e2e][stat]") {
  // lgssm1 with q(x[t] | x[t-1], y[t]) = p(x[t] | x[t-1], y[t]), in closed form.
  const Lgssm1 model;
  const std::string& exe = model_exe("lgssm1_guided", lgssm1_source("lgssm1_guided", R"(
  let s2 = 1 / (1 / q^2 + 1 / r^2);
  proposal x[t] ~ normal(s2 * (a * x[t-1] / q^2 + y[t] / r^2), sqrt(s2));
)"));
  const std::vector<std::string> params = model.params();
  const std::string sim = scratch_path("lgssm1g-sim.csv"), data = scratch_path("lgssm1g-data.csv");
  std::vector<std::string> argv = {exe, "simulate", "--T", "100", "--seed", "12", "--out", sim};
  argv.insert(argv.end(), params.begin(), params.end());
  run_ok(argv);
  // At a missing observation the guided filter proposes from the transition.
  const std::vector<size_t> missing_rows = {0, 30, 31, 99};
  const Table table = with_missing(read_table(sim), {"y"}, missing_rows);
  write_table(data, table);
  const KalmanResult exact = kalman_filter(model.model(), observations(table, {"y"}));

  PfVsKalman c;
  c.label = "lgssm1-guided";
  c.exe = exe;
  c.args = params;
  c.args.insert(c.args.end(), {"--data", data, "--method", "guided"});
  c.state_cols = {"x"};
  c.particles = 2000;
  c.runs = 48;
  c.seed0 = 3000;
  c.missing.assign(100, false);
  for (size_t t : missing_rows)
    c.missing[t] = true;
  compare_with_kalman(c, exact);

  // The point of a good proposal: at the same N the log-likelihood varies much less than the
  // bootstrap filter's (here by a factor of about 5 in variance).
  std::vector<double> guided, bootstrap;
  for (int k = 0; k < 24; ++k)
    for (const std::string method : {"guided", "bootstrap"}) {
      std::vector<std::string> args = c.args;
      args.back() = method;
      args.insert(args.end(), {"--particles", "500", "--seed", std::to_string(7000 + k)});
      const FilterRun f =
          run_filter(exe, args, scratch_path(fmt::format("lgssm1g-{}-{}.csv", method, k)));
      REQUIRE(f.summary.at("method") == method);
      (method == "guided" ? guided : bootstrap)
          .push_back(f.summary.at("log_likelihood").get<double>());
    }
  INFO("log-likelihood variance: guided " << sample_variance(guided) << ", bootstrap "
                                          << sample_variance(bootstrap));
  CHECK(sample_variance(guided) * 2.5 < sample_variance(bootstrap));

  // Bit-identical for any thread count (10007 particles: not a multiple of the block size).
  std::vector<std::string> outputs;
  for (const std::string threads : {"1", "3"}) {
    std::vector<std::string> args = c.args;
    args.insert(args.end(), {"--particles", "10007", "--seed", "5", "--threads", threads});
    outputs.push_back(
        run_filter(exe, args, scratch_path("lgssm1g-threads-" + threads + ".csv")).csv_text);
  }
  CHECK(outputs[0] == outputs[1]);
}

TEST_CASE("auxiliary filter with the model's own look-ahead", "[e2e][stat]") {
  const Lgssm1 model;
  auto with = [&](const std::string& name, const std::string& prediction) {
    return model_exe(name, lgssm1_source(name, "  lookahead x[t] = " + prediction + ";\n"));
  };
  const std::vector<std::string> params = model.params();
  const std::string data = scratch_path("lgssm1-lookahead.csv");
  std::vector<std::string> argv = {
      example_exe("lgssm1"), "simulate", "--T", "100", "--seed", "13", "--out", data};
  argv.insert(argv.end(), params.begin(), params.end());
  run_ok(argv);

  // The transition's mean written as a look-ahead: the same predictions as the default, so the
  // same filter, bit for bit.
  std::vector<std::string> args = params;
  args.insert(args.end(),
              {"--data", data, "--method", "apf", "--particles", "3000", "--seed", "3"});
  const FilterRun user =
      run_filter(with("lookahead_mean", "a * x[t-1]"), args, scratch_path("lookahead-user.csv"));
  const FilterRun builtin =
      run_filter(example_exe("lgssm1"), args, scratch_path("lookahead-def.csv"));
  CHECK(user.summary.at("lookahead") == "user");
  CHECK(builtin.summary.at("lookahead") == "mean");
  CHECK(user.csv_text == builtin.csv_text);

  // A different prediction (shrunk towards the observation) changes the filter, not what it
  // estimates: the likelihood stays unbiased and the filtering moments consistent.
  const KalmanResult exact = kalman_filter(model.model(), observations(read_table(data), {"y"}));
  PfVsKalman c;
  c.label = "lgssm1-lookahead";
  c.exe = with("lookahead_shrunk", "0.5 * a * x[t-1] + 0.4 * y[t]");
  c.args = params;
  c.args.insert(c.args.end(), {"--data", data, "--method", "apf"});
  c.state_cols = {"x"};
  c.particles = 5000;
  c.runs = 32;
  c.seed0 = 6000;
  c.missing.assign(100, false);
  compare_with_kalman(c, exact);
}

TEST_CASE("guided filter with a proposal for one state of two", "[e2e][stat]") {
  // v[t] reads u[t]: the proposal block draws u from the user's proposal, then v from its
  // transition (copied), in that order.
  const std::string& exe = model_exe("two_guided", R"(
model two_guided {
  state u : real;
  state v : real;
  obs y : real;
  u[0] ~ normal(0, 1);
  v[0] ~ normal(0, 1);
  u[t] ~ normal(0.8 * u[t-1], 0.7);
  v[t] ~ normal(0.5 * v[t-1] + 0.3 * u[t], 0.5);
  y[t] ~ normal(u[t] + v[t], 0.6);
  proposal u[t] ~ normal(0.4 * u[t-1] + 0.3 * y[t], 0.9);
}
)");
  const std::string data = scratch_path("two-guided-sim.csv");
  run_ok({exe, "simulate", "--T", "60", "--seed", "4", "--out", data});
  LinearGaussianModel m; // v[t] = 0.5 v[t-1] + 0.3 (0.8 u[t-1] + e_u) + e_v
  m.m0 = Eigen::VectorXd::Zero(2);
  m.P0 = Eigen::MatrixXd::Identity(2, 2);
  m.A.resize(2, 2);
  m.A << 0.8, 0, 0.24, 0.5;
  m.Q.resize(2, 2);
  m.Q << 0.49, 0.3 * 0.49, 0.3 * 0.49, 0.09 * 0.49 + 0.25;
  m.B = Eigen::MatrixXd::Ones(1, 2);
  m.R = Eigen::MatrixXd::Constant(1, 1, 0.36);
  const KalmanResult exact = kalman_filter(m, observations(read_table(data), {"y"}));

  PfVsKalman c;
  c.label = "two-guided";
  c.exe = exe;
  c.args = {"--data", data, "--method", "guided"};
  c.state_cols = {"u", "v"};
  c.particles = 5000;
  c.runs = 32;
  c.seed0 = 4000;
  c.missing.assign(60, false);
  compare_with_kalman(c, exact);
}

TEST_CASE("the same --seed gives byte-identical results for any --threads", "[e2e][repro]") {
  // 10007 particles: not a multiple of the 4096-particle block nor of any vector width.
  for (const std::string model : {"lgssm1", "lgssm"}) {
    DYNAMIC_SECTION(model) {
      const std::string& exe = example_exe(model);
      std::vector<std::string> params;
      if (model == "lgssm")
        params = {"--params", example_path("data/lgssm_params.json")};
      const std::string sim = scratch_path(model + "-repro-sim.csv");
      std::vector<std::string> argv = {exe, "simulate", "--T", "30", "--seed", "5", "--out", sim};
      argv.insert(argv.end(), params.begin(), params.end());
      run_ok(argv);
      std::string first_csv;
      double first_ll = 0;
      for (int threads : {1, 2, 3}) {
        std::vector<std::string> args = params;
        args.insert(args.end(), {"--data", sim, "--particles", "10007", "--seed", "77", "--threads",
                                 std::to_string(threads), "--ess-threshold", "0.7"});
        FilterRun f =
            run_filter(exe, args, scratch_path(fmt::format("{}-repro-{}.csv", model, threads)));
        CHECK(f.summary.at("threads").get<int>() == threads);
        const double ll = f.summary.at("log_likelihood").get<double>();
        if (threads == 1) {
          first_csv = f.csv_text;
          first_ll = ll;
          CHECK(f.summary.at("resample_count").get<int>() > 0);
          continue;
        }
        INFO("--threads " << threads << " against --threads 1");
        CHECK(f.csv_text == first_csv);
        CHECK(ll == first_ll); // exact: the same bits
      }
      // And simulate does not depend on the thread count either.
      const std::string sim3 = scratch_path(model + "-repro-sim3.csv");
      std::vector<std::string> argv3 = {exe, "simulate", "--T", "30",        "--seed",
                                        "5", "--out",    sim3,  "--threads", "3"};
      argv3.insert(argv3.end(), params.begin(), params.end());
      run_ok(argv3);
      CHECK(read_file(sim3) == read_file(sim));
    }
  }
}

TEST_CASE("lgssm1 simulate: stationary moments of a long trajectory", "[e2e][stat]") {
  const std::string& exe = example_exe("lgssm1");
  const double a = 0.9, q = 0.5, r = 1.0; // the model's defaults (examples/lgssm1.ssm)
  const std::string sim = scratch_path("lgssm1-long.csv");
  const int T = 100000, burn = 200; // a^200 ~ 7e-10: the start x[0] ~ N(0, 1) is forgotten
  run_ok({exe, "simulate", "--T", std::to_string(T), "--seed", "3", "--out", sim});
  Table table = read_table(sim);
  REQUIRE(table.header == std::vector<std::string>{"t", "x", "y"});
  REQUIRE(table.rows.size() == static_cast<size_t>(T));
  std::vector<double> tcol = table.column("t"), x = table.column("x"), y = table.column("y");
  CHECK(tcol.front() == 0);
  CHECK(tcol.back() == T - 1);
  x.erase(x.begin(), x.begin() + burn);
  y.erase(y.begin(), y.begin() + burn);
  const double n = static_cast<double>(x.size());

  // The stationary AR(1): mean 0, variance v = q^2 / (1 - a^2), lag-1 autocorrelation a. Standard
  // errors from the large-sample theory of a Gaussian AR(1): Var(mean) ~= v (1+a)/(1-a) / n,
  // Var(sample variance) ~= 2 v^2 (1+a^2)/(1-a^2) / n, Var(r1) ~= (1-a^2) / n (Bartlett).
  const double v = q * q / (1 - a * a);
  const double mean = sample_mean(x), var = sample_variance(x);
  double c1 = 0;
  for (size_t i = 1; i < x.size(); ++i)
    c1 += (x[i] - mean) * (x[i - 1] - mean);
  const double r1 = c1 / ((n - 1) * var);
  CHECK(std::abs(mean) <= 4 * std::sqrt(v * (1 + a) / (1 - a) / n));
  CHECK(std::abs(var - v) <= 4 * std::sqrt(2 * v * v * (1 + a * a) / (1 - a * a) / n));
  CHECK(std::abs(r1 - a) <= 4 * std::sqrt((1 - a * a) / n));

  // Innovations and observation noise are i.i.d. normal: e = x[t] - a x[t-1] ~ N(0, q^2) and
  // u = y - x ~ N(0, r^2), independent of each other.
  std::vector<double> e, u;
  for (size_t i = 1; i < x.size(); ++i)
    e.push_back(x[i] - a * x[i - 1]);
  for (size_t i = 0; i < x.size(); ++i)
    u.push_back(y[i] - x[i]);
  for (auto [z, s] : {std::pair{&e, q}, std::pair{&u, r}}) {
    const double m = static_cast<double>(z->size());
    CHECK(std::abs(sample_mean(*z)) <= 4 * s / std::sqrt(m));
    CHECK(std::abs(sample_variance(*z) - s * s) <= 4 * s * s * std::sqrt(2 / m));
    double lag = 0;
    const double zm = sample_mean(*z);
    for (size_t i = 1; i < z->size(); ++i)
      lag += ((*z)[i] - zm) * ((*z)[i - 1] - zm);
    CHECK(std::abs(lag / ((m - 1) * s * s)) <= 4 / std::sqrt(m));
  }
  double cross = 0; // Corr(e_t, u_t) = 0
  for (size_t i = 0; i < e.size(); ++i)
    cross += e[i] * u[i + 1];
  CHECK(std::abs(cross / (e.size() * q * r)) <= 4 / std::sqrt(static_cast<double>(e.size())));
}

TEST_CASE("lgssm1: every --resampling scheme against Kalman", "[e2e][stat]") {
  // Resampling at every step, so the scheme matters at each of the T steps. Only the
  // log-likelihood is compared (with compare.cpp's tolerance: the mean of log Z^ over R seeds
  // within 4 standard errors of log Z - s2/2); the filtering moments are covered above.
  const std::string& exe = example_exe("lgssm1");
  const int T = 50, R = 24;
  const int64_t N = 2000; // Var(log Z^) ~ 0.05 at worst (multinomial): s2/2 ~ 0.6 SE
  const std::string sim = scratch_path("lgssm1-resampling-sim.csv");
  run_ok({exe, "simulate", "--T", std::to_string(T), "--seed", "31", "--out", sim});
  const Table table = read_table(sim);
  LinearGaussianModel m; // the model's defaults (examples/lgssm1.ssm)
  m.m0 = Eigen::VectorXd::Zero(1);
  m.P0 = Eigen::MatrixXd::Constant(1, 1, 1.0);
  m.A = Eigen::MatrixXd::Constant(1, 1, 0.9);
  m.Q = Eigen::MatrixXd::Constant(1, 1, 0.25);
  m.B = Eigen::MatrixXd::Constant(1, 1, 1.0);
  m.R = Eigen::MatrixXd::Constant(1, 1, 1.0);
  const double exact = kalman_filter(m, observations(table, {"y"})).log_likelihood;

  const std::vector<std::string> base = {"--data",          sim, "--particles", std::to_string(N),
                                         "--ess-threshold", "1"};
  std::vector<double> first_ll;
  for (const std::string scheme : {"multinomial", "stratified", "systematic", "residual", "ssp"}) {
    std::vector<double> ll;
    for (int r = 0; r < R; ++r) {
      std::vector<std::string> args = base;
      args.insert(args.end(), {"--resampling", scheme, "--seed", std::to_string(3000 + r)});
      FilterRun f = run_filter(exe, args, scratch_path("lgssm1-resampling.csv"));
      REQUIRE(f.summary.at("resampling") == scheme);
      REQUIRE(f.summary.at("resample_count") == T - 1);
      ll.push_back(f.summary.at("log_likelihood").get<double>());
    }
    first_ll.push_back(ll[0]);
    const double mean = sample_mean(ll), var = sample_variance(ll), se = std::sqrt(var / R);
    fmt::print("lgssm1 --resampling {}: N={} R={} Kalman loglik {:.4f}; particle mean {:.4f}, "
               "sd {:.4f}, z = {:.2f}\n",
               scheme, N, R, exact, mean, std::sqrt(var), (mean - (exact - var / 2)) / se);
    INFO(fmt::format("--resampling {}: Kalman log-likelihood {}, particle mean {} (sd {} over {} "
                     "runs), expected mean log Z - s2/2 = {}",
                     scheme, exact, mean, std::sqrt(var), R, exact - var / 2));
    CHECK(std::abs(mean - (exact - var / 2)) <= 4 * se);
    CHECK(var / 2 <= se);
  }
  // The schemes really differ (same seed, different estimates).
  for (size_t i = 0; i < first_ll.size(); ++i)
    for (size_t k = i + 1; k < first_ll.size(); ++k)
      CHECK(first_ll[i] != first_ll[k]);

  // The default is systematic, byte for byte.
  FilterRun def = run_filter(exe, {"--data", sim, "--seed", "9"}, scratch_path("lgssm1-def.csv"));
  FilterRun sys = run_filter(exe, {"--data", sim, "--seed", "9", "--resampling", "systematic"},
                             scratch_path("lgssm1-sys.csv"));
  CHECK(def.csv_text == sys.csv_text);
  CHECK(def.summary.at("resampling") == "systematic");

  // An unknown scheme is a usage error that lists the valid ones.
  ProcessResult bad = run_process({exe, "filter", "--data", sim, "--resampling", "optimal"});
  INFO(bad.describe());
  CHECK(bad.exit_code == 2);
  for (const char* scheme : {"multinomial", "stratified", "systematic", "residual", "ssp"})
    CHECK(bad.err.find(scheme) != std::string::npos);
}

namespace {

// `filter` (auto: the Kalman filter) and `smooth --method rts` of a compiled linear-Gaussian model
// against the references of kalman.h, to 1e-8: the Kalman recursion, and the brute-force
// conditioning of the joint Gaussian for the smoother (means, variances, lag-one covariances).
void check_exact_methods(const std::string& label, const std::string& exe,
                         const std::vector<std::string>& args, const LinearGaussianModel& m,
                         const std::vector<Eigen::VectorXd>& ys,
                         const std::vector<std::string>& cols) {
  const int T = static_cast<int>(ys.size()), d = static_cast<int>(cols.size());
  auto close = [](double got, double want) {
    return std::abs(got - want) <= 1e-8 * std::max(1.0, std::abs(want));
  };
  const KalmanResult kf = kalman_filter(m, ys);
  INFO(label);
  // `auto` picks the Kalman filter; the extended and unscented ones are exact on a
  // linear-Gaussian model too.
  for (const std::string method : {"auto", "ekf", "ukf"}) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--method", method});
    const FilterRun f = run_filter(exe, a, scratch_path(label + "-" + method + ".csv"));
    INFO("filter --method " << method);
    CHECK(f.summary.at("method") == (method == "auto" ? "kalman" : method));
    CHECK(f.summary.at("chosen_by") == (method == "auto" ? "auto" : "user"));
    CHECK(close(f.summary.at("log_likelihood").get<double>(), kf.log_likelihood));
    CHECK(f.table.column_index("ess") < 0); // an exact filter has no ESS
    const std::vector<double> inc = f.table.column("loglik_increment");
    for (int t = 0; t < T; ++t) {
      INFO("t = " << t);
      CHECK(close(inc[t], kf.loglik_increment[t]));
      for (int c = 0; c < d; ++c) {
        CHECK(close(f.table.column("mean_" + cols[c])[t], kf.mean[t][c]));
        CHECK(close(f.table.column("var_" + cols[c])[t], kf.cov[t](c, c)));
      }
    }
  }

  const SmoothingReference ref = brute_force_smoother(m, ys);
  CHECK(std::abs(ref.log_likelihood - kf.log_likelihood) <= 1e-8 * std::abs(kf.log_likelihood));
  const std::string out = scratch_path(label + "-rts.csv");
  std::vector<std::string> argv = {exe, "smooth", "--method", "rts", "--json", "--out", out};
  argv.insert(argv.end(), args.begin(), args.end());
  const nlohmann::json j = nlohmann::json::parse(run_ok(argv).out);
  CHECK(j.at("method") == "rts");
  CHECK(close(j.at("log_likelihood").get<double>(), kf.log_likelihood));
  const Table s = read_table(out);
  for (int t = 0; t < T; ++t) {
    INFO("t = " << t);
    for (int a = 0; a < d; ++a) {
      CHECK(close(s.column("mean_" + cols[a])[t], ref.mean[t * d + a]));
      CHECK(close(s.column("var_" + cols[a])[t], ref.cov(t * d + a, t * d + a)));
      if (t > 0)
        for (int b = 0; b < d; ++b)
          CHECK(close(s.column(fmt::format("lagcov_{}_{}", cols[a], cols[b]))[t],
                      ref.cov(t * d + a, (t - 1) * d + b)));
    }
  }
}

} // namespace

TEST_CASE("Kalman filter and RTS smoother equal the references (1-D, 10-D, mvnormal_chol)",
          "[e2e][exact]") {
  {
    const std::string& exe = example_exe("lgssm1");
    const Lgssm1 model;
    const std::vector<std::string> params = model.params();
    const std::string sim = scratch_path("lgssm1-exact-sim.csv"),
                      data = scratch_path("lgssm1-exact-data.csv");
    std::vector<std::string> argv = {exe, "simulate", "--T", "40", "--seed", "3", "--out", sim};
    argv.insert(argv.end(), params.begin(), params.end());
    run_ok(argv);
    Table table = with_missing(read_table(sim), {"y"}, {0, 13, 14, 39});
    write_table(data, table);
    std::vector<std::string> args = params;
    args.insert(args.end(), {"--data", data});
    check_exact_methods("lgssm1", exe, args, model.model(), observations(table, {"y"}), {"x"});
  }
  {
    const std::string& exe = example_exe("lgssm");
    const std::string params_file = example_path("data/lgssm_params.json");
    const std::string sim = scratch_path("lgssm-exact-sim.csv"),
                      data = scratch_path("lgssm-exact-data.csv");
    const int T = 15, d = 10;
    run_ok({exe, "simulate", "--T", std::to_string(T), "--seed", "4", "--params", params_file,
            "--out", sim});
    Table table = with_missing(read_table(sim), indexed("y", d), {2, 9});
    write_table(data, table);
    check_exact_methods("lgssm", exe, {"--params", params_file, "--data", data},
                        lgssm_model(params_file), observations(table, indexed("y", d)),
                        indexed("x", d));
  }
  {
    // mvnormal_chol everywhere: the analysis recognises covariance L L' from the factor.
    const std::string& exe = model_exe("lg_chol", R"(
model lg_chol {
  param L : matrix[2, 2] = [[0.7, 0], [0.2, 0.5]];
  param A : matrix[2, 2] = [[0.9, 0.1], [-0.2, 0.8]];
  param M : matrix[2, 2] = [[0.6, 0], [-0.1, 0.4]];
  state x : vector[2];
  obs y : vector[2];
  x[0] ~ mvnormal_chol([0.5, -0.5], [[1, 0], [0.3, 0.9]]);
  x[t] ~ mvnormal_chol(A * x[t-1], L);
  y[t] ~ mvnormal_chol(x[t], M);
}
)");
    const std::string sim = scratch_path("lg-chol-sim.csv"), data = scratch_path("lg-chol.csv");
    run_ok({exe, "simulate", "--T", "20", "--seed", "6", "--out", sim});
    Table table = with_missing(read_table(sim), indexed("y", 2), {5});
    write_table(data, table);
    LinearGaussianModel m;
    const Eigen::Matrix2d C{{1, 0}, {0.3, 0.9}}, L{{0.7, 0}, {0.2, 0.5}}, M{{0.6, 0}, {-0.1, 0.4}};
    m.m0 = Eigen::Vector2d(0.5, -0.5);
    m.P0 = C * C.transpose();
    m.A = Eigen::Matrix2d{{0.9, 0.1}, {-0.2, 0.8}};
    m.Q = L * L.transpose();
    m.B = Eigen::Matrix2d::Identity();
    m.R = M * M.transpose();
    check_exact_methods("lg_chol", exe, {"--data", data}, m, observations(table, indexed("y", 2)),
                        indexed("x", 2));
  }
}

TEST_CASE("unscented and extended Kalman filters on a quadratic observation, in closed form",
          "[e2e][exact]") {
  // x[0] ~ N(m, s^2), y[0] = x[0]^2 + N(0, r^2): the sigma points (alpha 1, beta 2, kappa 0)
  // reproduce E[x^2] = m^2 + s^2, Var[x^2] = 4 m^2 s^2 + 2 s^4 and Cov[x, x^2] = 2 m s^2 exactly,
  // so the first step's increment and update are those of the Gaussian with these moments.
  const double m = 0.7, s = 0.4, r = 0.3;
  const std::string& exe = model_exe("quadratic_obs", R"(
model quadratic_obs {
  param m = 0.7;
  param s = 0.4;
  param r = 0.3;
  state x : real;
  obs y : real;
  x[0] ~ normal(m, s);
  x[t] ~ normal(0.9 * x[t-1], 0.5);
  y[t] ~ normal(x[t]^2, r);
}
)");
  const std::string data = scratch_path("quadratic_obs.csv");
  write_file(data, "y\n1.3\n0.2\n");
  const FilterRun f =
      run_filter(exe, {"--data", data, "--method", "ukf"}, scratch_path("quadratic_ukf.csv"));
  const double yhat = m * m + s * s, S = 4 * m * m * s * s + 2 * std::pow(s, 4) + r * r,
               C = 2 * m * s * s, v = 1.3 - yhat;
  const double increment = -0.5 * (std::log(2 * std::numbers::pi * S) + v * v / S);
  CHECK(f.table.column("loglik_increment")[0] == Approx(increment).epsilon(1e-12));
  CHECK(f.table.column("mean_x")[0] == Approx(m + C / S * v).epsilon(1e-12));
  CHECK(f.table.column("var_x")[0] == Approx(s * s - C * C / S).epsilon(1e-12));

  // The extended filter linearises x^2 at m with the compiler's derivative 2 m: predicted y m^2,
  // S = (2 m)^2 s^2 + r^2, Cov[x, y] = 2 m s^2.
  const FilterRun e =
      run_filter(exe, {"--data", data, "--method", "ekf"}, scratch_path("quadratic_ekf.csv"));
  const double Se = 4 * m * m * s * s + r * r, ve = 1.3 - m * m;
  CHECK(e.table.column("loglik_increment")[0] ==
        Approx(-0.5 * (std::log(2 * std::numbers::pi * Se) + ve * ve / Se)).epsilon(1e-12));
  CHECK(e.table.column("mean_x")[0] == Approx(m + C / Se * ve).epsilon(1e-12));
  CHECK(e.table.column("var_x")[0] == Approx(s * s - C * C / Se).epsilon(1e-12));
}

TEST_CASE("filter --method kalman is refused on a model that is not linear-Gaussian",
          "[e2e][exact]") {
  const std::string& exe = example_exe("sv");
  const std::string sim = scratch_path("sv-kalman-sim.csv");
  run_ok({exe, "simulate", "--T", "5", "--seed", "1", "--out", sim});
  const ProcessResult p = run_process({exe, "filter", "--data", sim, "--method", "kalman"});
  INFO(p.describe());
  CHECK(p.exit_code == 1);
  CHECK(p.err.find("not linear-Gaussian") != std::string::npos);
  CHECK(p.out.empty());
  const nlohmann::json j =
      nlohmann::json::parse(run_ok({exe, "filter", "--data", sim, "--json"}).out);
  CHECK(j.at("method") == "bootstrap");
  // The unscented filter needs Gaussian relations: the HMM's state is categorical.
  const std::string& hmm = example_exe("hmm");
  const std::string hmm_sim = scratch_path("hmm-ukf-sim.csv");
  run_ok({hmm, "simulate", "--T", "5", "--seed", "1", "--out", hmm_sim});
  const ProcessResult u = run_process({hmm, "filter", "--data", hmm_sim, "--method", "ukf"});
  INFO(u.describe());
  CHECK(u.exit_code == 1);
  const ProcessResult ekf = run_process({hmm, "filter", "--data", hmm_sim, "--method", "ekf"});
  CHECK(ekf.exit_code == 1);
  CHECK(ekf.err.find("filter --method ekf: the model is not Gaussian (z[0] ~ categorical") !=
        std::string::npos);
  CHECK(u.err.find("not Gaussian (z[0] ~ categorical is not Gaussian (at 19:3))") !=
        std::string::npos);
}

TEST_CASE("a lag of 2 (examples/yule.ssm): exact methods on the augmented state, particle filter, "
          "simulation",
          "[e2e][exact]") {
  const std::string& exe = example_exe("yule");
  const double mu = 48, phi1 = 1.34, phi2 = -0.65, sigma = 15, r = 5;
  // The reference: the state (x[t], x[t-1]) with x[-1] = x[0], observed as y - mu.
  LinearGaussianModel m;
  m.m0 = Eigen::Vector2d::Zero();
  m.P0 = Eigen::Matrix2d::Constant(1600);
  m.A = Eigen::Matrix2d{{phi1, phi2}, {1, 0}};
  m.Q = Eigen::Matrix2d{{sigma * sigma, 0}, {0, 0}};
  m.B = Eigen::MatrixXd{{1, 0}};
  m.R = Eigen::MatrixXd::Constant(1, 1, r * r);
  const std::string data = example_path("data/sunspots.csv");
  std::vector<Eigen::VectorXd> ys = observations(read_table(data), {"y"});
  for (Eigen::VectorXd& y : ys)
    y[0] -= mu;
  const int T = static_cast<int>(ys.size());
  auto close = [](double got, double want) {
    return std::abs(got - want) <= 1e-8 * std::max(1.0, std::abs(want));
  };

  // filter: auto is the Kalman filter; the CSV shows x only.
  const KalmanResult kf = kalman_filter(m, ys);
  const FilterRun f =
      run_filter(exe, {"--data", data, "--method", "auto"}, scratch_path("yule-kalman.csv"));
  CHECK(f.summary.at("method") == "kalman");
  CHECK(f.table.header == std::vector<std::string>{"t", "mean_x", "var_x", "loglik_increment"});
  CHECK(close(f.summary.at("log_likelihood").get<double>(), kf.log_likelihood));
  for (int t = 0; t < T; ++t) {
    INFO("t = " << t);
    CHECK(close(f.table.column("mean_x")[t], kf.mean[t][0]));
    CHECK(close(f.table.column("var_x")[t], kf.cov[t](0, 0)));
  }

  // smooth: RTS against the joint Gaussian conditioned directly, and the lag-2 functional
  // sum_{t>=2} E[x[t-2] x[t] | y] from its covariances.
  const SmoothingReference ref = brute_force_smoother(m, ys);
  const std::string out = scratch_path("yule-rts.csv");
  const nlohmann::json j = nlohmann::json::parse(
      run_ok({exe, "smooth", "--data", data, "--method", "rts", "--json", "--out", out}).out);
  const Table s = read_table(out);
  CHECK(s.column_index("mean_x@lag1") < 0);
  double cross2 = 0;
  for (int t = 0; t < T; ++t) {
    INFO("t = " << t);
    CHECK(close(s.column("mean_x")[t], ref.mean[2 * t]));
    CHECK(close(s.column("var_x")[t], ref.cov(2 * t, 2 * t)));
    if (t >= 2)
      cross2 += ref.cov(2 * t, 2 * (t - 2)) + ref.mean[2 * t] * ref.mean[2 * (t - 2)];
  }
  CHECK(close(j.at("functionals").at("cross2").get<double>(), cross2));

  // The bootstrap filter agrees with Kalman within Monte Carlo error, on data from the model (on
  // the real series, with r = 5, the particles degenerate at the 1957 maximum).
  const std::string short_sim = scratch_path("yule-short.csv");
  run_ok({exe, "simulate", "--T", "100", "--seed", "10", "--out", short_sim});
  std::vector<Eigen::VectorXd> ys_sim = observations(read_table(short_sim), {"y"});
  for (Eigen::VectorXd& y : ys_sim)
    y[0] -= mu;
  PfVsKalman c;
  c.label = "yule";
  c.exe = exe;
  c.args = {"--data", short_sim};
  c.state_cols = {"x"};
  c.particles = 10000; // Var(log Z^) ~ 0.07: the correction s2/2 is below one standard error
  c.runs = 24;
  c.seed0 = 8000;
  c.missing.assign(100, false);
  compare_with_kalman(c, kalman_filter(m, ys_sim));

  // simulate: the innovations (x[t] - phi1 x[t-1] - phi2 x[t-2]) / sigma, with x[-1] = x[0], are
  // standard normal, and no hidden column appears.
  const std::string sim = scratch_path("yule-sim.csv");
  run_ok({exe, "simulate", "--T", "20000", "--seed", "9", "--out", sim});
  const Table st = read_table(sim);
  CHECK(st.header == std::vector<std::string>{"t", "x", "y"});
  const std::vector<double> x = st.column("x");
  std::vector<double> e;
  for (size_t t = 1; t < x.size(); ++t)
    e.push_back((x[t] - phi1 * x[t - 1] - phi2 * x[t < 2 ? 0 : t - 2]) / sigma);
  check_standard_normal(e, "yule: innovations");
}

TEST_CASE("an observation that reads the previous state: Kalman on the augmented state, particle "
          "filter",
          "[e2e][exact]") {
  // y[t] = x[t] - 0.5 x[t-1] + noise, with x[-1] = x[0]: the compiler carries x[t-1] in a hidden
  // state that the observation reads at t.
  const double a = 0.8, q = 0.6, r = 0.4, b = -0.5;
  const std::string& exe = model_exe("obs_lag", R"(
model obs_lag {
  param a = 0.8;
  param q = 0.6;
  param r = 0.4;
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ normal(a * x[t-1], q);
  y[t] ~ normal(x[t] - 0.5 * x[t-1], r);
}
)");
  const std::string data = scratch_path("obs-lag.csv");
  run_ok({exe, "simulate", "--T", "80", "--seed", "14", "--out", data});
  LinearGaussianModel m;
  m.m0 = Eigen::Vector2d::Zero();
  m.P0 = Eigen::Matrix2d::Constant(1);
  m.A = Eigen::Matrix2d{{a, 0}, {1, 0}};
  m.Q = Eigen::Matrix2d{{q * q, 0}, {0, 0}};
  m.B = Eigen::MatrixXd{{1, b}};
  m.R = Eigen::MatrixXd::Constant(1, 1, r * r);
  const KalmanResult kf = kalman_filter(m, observations(read_table(data), {"y"}));
  const FilterRun f =
      run_filter(exe, {"--data", data, "--method", "auto"}, scratch_path("obs-lag-kalman.csv"));
  CHECK(f.summary.at("method") == "kalman");
  CHECK(std::abs(f.summary.at("log_likelihood").get<double>() - kf.log_likelihood) <=
        1e-8 * std::abs(kf.log_likelihood));
  for (int t = 0; t < 80; ++t)
    CHECK(f.table.column("mean_x")[t] == Approx(kf.mean[t][0]).epsilon(1e-8).margin(1e-10));
  PfVsKalman c;
  c.label = "obs-lag";
  c.exe = exe;
  c.args = {"--data", data};
  c.state_cols = {"x"};
  c.particles = 5000;
  c.runs = 24;
  c.seed0 = 9000;
  c.missing.assign(80, false);
  compare_with_kalman(c, kf);
}
