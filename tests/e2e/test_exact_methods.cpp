// The exact methods on linear-Gaussian models: `filter --method kalman|ekf|ukf` and
// `smooth --method rts` against the reference Kalman filter and brute-force conditioning of the
// joint Gaussian (kalman.h), closed-form UKF/EKF cases, refusals, and lags that the compiler
// augments into the state.
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
  CHECK(p.err.find("use --method bootstrap") != std::string::npos); // auto's particle filter
  CHECK(p.out.empty());
  const ProcessResult g = run_process({exe, "filter", "--data", sim, "--method", "guided"});
  INFO(g.describe());
  CHECK(g.exit_code == 1);
  CHECK(g.err.find("filter --method guided: the model has no proposal") != std::string::npos);
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
