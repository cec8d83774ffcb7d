// The linear-Gaussian examples against the exact Kalman filter: data simulated by the compiled
// model, some observations blanked out (empty cells and NA), then R particle filter runs compared
// with the reference (compare.cpp explains the tolerances). Also: every --resampling scheme's
// log-likelihood against Kalman, results identical for any --threads, and long simulations with
// the exact stationary moments. The exact methods themselves: test_exact_methods.cpp.
#include "compare.h"
#include "kalman.h"
#include "lgssm_support.h"
#include "support.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <numbers>

using namespace e2e;

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
