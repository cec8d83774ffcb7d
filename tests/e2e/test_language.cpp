// End-to-end tests of the language constructs (let, fn, conditionals, integer arithmetic,
// discrete states with categorical transitions and P[z[t-1]] row indexing, deterministic states):
// a compiled HMM's particle filter against the exact forward algorithm, and its simulator against
// the transition matrix; deterministic states through the filters, RTS and EM.
#include "support.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <set>

using namespace e2e;

namespace {

// Two-state HMM with Poisson counts, written with the constructs under test. The `t % 2` term
// and the conditional are identities that must survive lowering, folding and codegen unchanged.
const char* kLanguageHmm = R"(
model hmm {
  param P : matrix[2, 2] = [[0.9, 0.1], [0.25, 0.75]];
  param rate : vector[2] = [1, 6];
  param p0 : simplex[2] = [0.3, 0.7];
  state z : int[0..1];
  obs y : int;
  fn pick(v : vector[2], i : int) -> real { let w = v[i]; return w; }
  let prev = z[t-1];
  z[0] ~ categorical(p0);
  z[t] ~ categorical(P[prev]);
  y[t] ~ poisson(pick(rate, z[t]) * (t % 2 == 0 ? 1 : 2 - 1) + (z[t] > 5 || !(z[t] >= 0) ? 100 : 0));
  functional occupancy = sum_t (z[t] == 1 ? 1 : 0);
}
)";

// Exact log p(y_0:T-1) by the forward algorithm, normalised at each step.
double forward_loglik(const std::vector<double>& y) {
  const double P[2][2] = {{0.9, 0.1}, {0.25, 0.75}}, rate[2] = {1, 6};
  double alpha[2] = {0.3, 0.7}, ll = 0;
  for (size_t t = 0; t < y.size(); ++t) {
    if (t > 0) {
      double next[2] = {alpha[0] * P[0][0] + alpha[1] * P[1][0],
                        alpha[0] * P[0][1] + alpha[1] * P[1][1]};
      alpha[0] = next[0], alpha[1] = next[1];
    }
    if (std::isnan(y[t]))
      continue;
    double a0 = alpha[0] * std::exp(log_poisson(y[t], rate[0]));
    double a1 = alpha[1] * std::exp(log_poisson(y[t], rate[1]));
    ll += std::log(a0 + a1);
    alpha[0] = a0 / (a0 + a1), alpha[1] = a1 / (a0 + a1);
  }
  return ll;
}

} // namespace

TEST_CASE("a discrete-state HMM written with let, fn and conditionals filters exactly",
          "[e2e][language]") {
  const std::string& exe = model_exe("hmm_lang", kLanguageHmm);

  // The simulator: transition frequencies match P within 5 standard errors.
  const std::string sim = scratch_path("hmm-sim-long.csv");
  run_ok({exe, "simulate", "--T", "20000", "--seed", "3", "--out", sim});
  std::vector<double> z = read_table(sim).column("z");
  double count[2] = {0, 0}, stay[2] = {0, 0};
  for (size_t t = 1; t < z.size(); ++t) {
    REQUIRE((z[t] == 0 || z[t] == 1));
    int from = static_cast<int>(z[t - 1]);
    count[from] += 1;
    stay[from] += z[t] == z[t - 1];
  }
  const double p_stay[2] = {0.9, 0.75};
  for (int i = 0; i < 2; ++i) {
    double se = std::sqrt(p_stay[i] * (1 - p_stay[i]) / count[i]);
    INFO(fmt::format("state {}: stayed {} of {}", i, stay[i], count[i]));
    CHECK(std::fabs(stay[i] / count[i] - p_stay[i]) < 5 * se);
  }

  // The filter: the mean log-likelihood estimate over R seeds, corrected for the -var/2 bias of
  // log Z-hat, agrees with the forward algorithm within 4 standard errors.
  const std::string data = scratch_path("hmm-sim.csv");
  run_ok({exe, "simulate", "--T", "80", "--seed", "5", "--out", data});
  const double exact = forward_loglik(read_table(data).column("y"));
  const int R = 24;
  std::vector<double> ll;
  for (int r = 0; r < R; ++r) {
    FilterRun f =
        run_filter(exe, {"--data", data, "--particles", "400", "--seed", std::to_string(100 + r)},
                   scratch_path("hmm-filter.csv"));
    ll.push_back(f.summary.at("log_likelihood").get<double>());
  }
  double mean = sample_mean(ll), var = sample_variance(ll);
  INFO(fmt::format("exact {:.6f}, mean estimate {:.6f}, sd {:.4f}", exact, mean, std::sqrt(var)));
  CHECK(std::fabs(mean + var / 2 - exact) < 4 * std::sqrt(var / R) + 1e-9);
  CHECK(var > 0);
  // A simplex parameter is checked when it is set.
  ProcessResult off = run_process({exe, "--param", "p0=[0.6, 0.6]", "info"});
  CHECK(off.exit_code == 1);
  CHECK(off.err.find("parameter 'p0' (simplex[2]) must be on the simplex, but its components sum "
                     "to 1.2") != std::string::npos);
}

namespace {

// A scalar linear-Gaussian model driven by an input u[t], data b (from --data-file) and the
// previous observation: conditionally on those it is still linear-Gaussian, so the exact
// likelihood comes from a Kalman filter with known additive terms.
const char* kArx = R"(
model arx {
  input u : real;
  data b : vector[2];
  param a = 0.8;
  state x : real;
  obs y : real;
  x[0] ~ normal(b[0] * u[0], 1);
  x[t] ~ normal(a * x[t-1] + b[0] * u[t] + b[1] * y[t-1], 0.5);
  y[t] ~ normal(x[t], 0.7);
}
)";

double arx_kalman_loglik(const std::vector<double>& u, const std::vector<double>& y, double b0,
                         double b1) {
  const double a = 0.8, q = 0.25, r = 0.49;
  double m = b0 * u[0], p = 1, ll = 0;
  for (size_t t = 0; t < y.size(); ++t) {
    if (t > 0) {
      m = a * m + b0 * u[t] + b1 * y[t - 1];
      p = a * a * p + q;
    }
    double s = p + r, e = y[t] - m;
    ll += -0.5 * (std::log(2 * M_PI * s) + e * e / s);
    m += p / s * e;
    p -= p * p / s;
  }
  return ll;
}

} // namespace

TEST_CASE("inputs, data and reads of y[t-1] reach the kernels through the frame",
          "[e2e][language]") {
  const std::string& exe = model_exe("arx_lang", kArx);
  // info, --help and ssmc check list what the run needs besides the observations.
  const std::string info = run_ok({exe, "info"}).out;
  CHECK_THAT(info,
             Catch::Contains("inputs (--inputs FILE.csv, a value per time step):\n  u : real"));
  CHECK_THAT(info, Catch::Contains("data items (--data-file FILE.json):\n  b : vector[2]"));
  CHECK_THAT(run_ok({exe, "--help"}).out,
             Catch::Contains("Data items of this model (--data-file FILE.json):\n  b : vector[2]"));
  const std::string source = scratch_path("arx_lang_check.ssm");
  write_file(source, kArx);
  const std::string check = run_ok({ssmc_path(), "check", source}).out;
  CHECK_THAT(check, Catch::Contains("inputs (--inputs FILE.csv): u : real\n"));
  CHECK_THAT(check, Catch::Contains("data items (--data-file FILE.json): b : vector[2]\n"));
  const double b0 = 0.6, b1 = -0.3;
  const std::string data_json = scratch_path("arx-data.json");
  write_file(data_json, fmt::format(R"({{"b": [{}, {}]}})", b0, b1));
  const int T = 60;
  std::string inputs_csv = "t,u\n";
  std::vector<double> u;
  for (int t = 0; t < T; ++t) {
    u.push_back(std::sin(0.3 * t) * 2);
    inputs_csv += fmt::format("{},{}\n", t, u.back());
  }
  const std::string inputs = scratch_path("arx-inputs.csv");
  write_file(inputs, inputs_csv);

  // simulate writes the states, the observations and the inputs it read: a data file as it stands.
  const std::string sim = scratch_path("arx-sim.csv");
  run_ok({exe, "simulate", "--T", std::to_string(T), "--seed", "4", "--inputs", inputs,
          "--data-file", data_json, "--out", sim});
  Table table = read_table(sim);
  std::vector<double> x = table.column("x"), y = table.column("y");
  // The simulated transition uses u[t] and the simulated y[t-1]: its innovations are N(0, 0.25).
  std::vector<double> z;
  for (int t = 1; t < T; ++t)
    z.push_back((x[t] - 0.8 * x[t - 1] - b0 * u[t] - b1 * y[t - 1]) / 0.5);
  CHECK(std::fabs(sample_mean(z)) < 4 / std::sqrt(z.size()));
  const std::vector<double> u_written = table.column("u");
  REQUIRE(u_written.size() == u.size());
  for (int t = 0; t < T; ++t)
    CHECK(u_written[t] == u[t]); // written exactly (shortest round-trip text)
  const std::string& data = sim;

  const double exact = arx_kalman_loglik(u, y, b0, b1);
  const int R = 24;
  std::vector<double> ll;
  for (int r = 0; r < R; ++r) {
    FilterRun f = run_filter(exe,
                             {"--data", data, "--data-file", data_json, "--particles", "500",
                              "--seed", std::to_string(200 + r)},
                             scratch_path("arx-filter.csv"));
    ll.push_back(f.summary.at("log_likelihood").get<double>());
  }
  double mean = sample_mean(ll), var = sample_variance(ll);
  INFO(fmt::format("exact {:.6f}, mean estimate {:.6f}, sd {:.4f}", exact, mean, std::sqrt(var)));
  CHECK(std::fabs(mean + var / 2 - exact) < 4 * std::sqrt(var / R) + 1e-9);

  // Without the data file, or with a missing y[t-1], the run stops and says why.
  ProcessResult no_data = run_process({exe, "filter", "--data", data});
  CHECK(no_data.exit_code == 1);
  CHECK(no_data.err.find("declares data ('b'): give their values with --data-file") !=
        std::string::npos);
  Table holed = table;
  holed.rows[10][holed.column_index("y")] = "NA";
  const std::string holed_csv = scratch_path("arx-holed.csv");
  write_table(holed_csv, holed);
  ProcessResult missing =
      run_process({exe, "filter", "--data", holed_csv, "--data-file", data_json});
  CHECK(missing.exit_code == 1);
  CHECK(
      missing.err.find("the transition to t=11 reads the observation at t=10, which is missing") !=
      std::string::npos);
  ProcessResult no_inputs = run_process({exe, "simulate", "--T", "5", "--data-file", data_json});
  CHECK(no_inputs.exit_code == 1);
  CHECK(no_inputs.err.find("give their values for each time step with --inputs FILE.csv") !=
        std::string::npos);
}

namespace {

// Observations whose distribution does not depend on the state's value (the state enters through
// `0 * x[t]`): every particle has the same weight, so the filter's log-likelihood is the exact
// log-density of the data, computed here independently.
const char* kJoint = R"(
model joint {
  param alpha : vector[3] = [2, 3, 5];
  param p : vector[3] = [1, 2, 1];
  param L : matrix[2, 2] = [[1, 0], [0.5, 2]];
  state x : real;
  obs u : vector[3];
  obs c : vector[3];
  obs v : vector[2];
  x[0] ~ normal(0, 1);
  x[t] ~ normal(x[t-1], 1);
  u[t] ~ dirichlet(alpha + 0 * x[t]);
  c[t] ~ multinomial(10, p + 0 * x[t]);
  v[t] ~ mvnormal_chol([1, -1] + 0 * x[t], L);
}
)";

} // namespace

TEST_CASE("dirichlet, multinomial and mvnormal_chol sample and evaluate their densities",
          "[e2e][language]") {
  const std::string& exe = model_exe("joint_lang", kJoint);
  const std::string sim = scratch_path("joint-sim.csv");
  const int T = 4000;
  run_ok({exe, "simulate", "--T", std::to_string(T), "--seed", "8", "--out", sim});
  Table table = read_table(sim);

  // Moments: Dirichlet mean alpha / 10, multinomial mean 10 p / 4 and variance 10 p (1 - p) / 4
  // per component, mvnormal_chol covariance L L^T = [[1, 0.5], [0.5, 4.25]].
  const double alpha[3] = {2, 3, 5}, p[3] = {0.25, 0.5, 0.25};
  for (int i = 0; i < 3; ++i) {
    std::vector<double> ui = table.column(fmt::format("u[{}]", i));
    std::vector<double> ci = table.column(fmt::format("c[{}]", i));
    double m = alpha[i] / 10, var = m * (1 - m) / 11;
    CHECK(std::fabs(sample_mean(ui) - m) < 5 * std::sqrt(var / T));
    CHECK(std::fabs(sample_mean(ci) - 10 * p[i]) < 5 * std::sqrt(10 * p[i] * (1 - p[i]) / T));
    CHECK(std::fabs(sample_variance(ci) / (10 * p[i] * (1 - p[i])) - 1) < 5 * std::sqrt(2.0 / T));
  }
  for (int t = 0; t < T; ++t) {
    double s = 0, n = 0;
    for (int i = 0; i < 3; ++i) {
      s += table.column(fmt::format("u[{}]", i))[t];
      n += table.column(fmt::format("c[{}]", i))[t];
    }
    REQUIRE(std::fabs(s - 1) < 1e-12);
    REQUIRE(n == 10);
    if (t > 50)
      break;
  }
  std::vector<double> v0 = table.column("v[0]"), v1 = table.column("v[1]");
  std::vector<double> z0, z1; // whitened by L^-1: independent standard normals
  for (int t = 0; t < T; ++t) {
    z0.push_back(v0[t] - 1);
    z1.push_back((v1[t] + 1 - 0.5 * (v0[t] - 1)) / 2);
  }
  check_standard_normal(z0, "mvnormal_chol component 0");
  check_standard_normal(z1, "mvnormal_chol component 1, whitened");

  // Densities: the filter's log-likelihood on 30 steps equals the exact log-density.
  Table head = table;
  head.rows.resize(30);
  const std::string data = scratch_path("joint-data.csv");
  write_table(data, head);
  double exact = 0;
  for (int t = 0; t < 30; ++t) {
    double lp = std::lgamma(10.0);
    double lm = std::lgamma(11.0);
    for (int i = 0; i < 3; ++i) {
      double u = std::stod(head.rows[t][head.column_index(fmt::format("u[{}]", i))]);
      double c = std::stod(head.rows[t][head.column_index(fmt::format("c[{}]", i))]);
      lp += (alpha[i] - 1) * std::log(u) - std::lgamma(alpha[i]);
      lm += c * std::log(p[i]) - std::lgamma(c + 1);
    }
    double a = std::stod(head.rows[t][head.column_index("v[0]")]) - 1;
    double b = (std::stod(head.rows[t][head.column_index("v[1]")]) + 1 - 0.5 * a) / 2;
    double lv = -0.5 * (a * a + b * b) - std::log(2.0) - std::log(2 * M_PI);
    exact += lp + lm + lv;
  }
  FilterRun f = run_filter(exe, {"--data", data, "--particles", "64", "--seed", "1"},
                           scratch_path("joint-filter.csv"));
  double ll = f.summary.at("log_likelihood").get<double>();
  INFO(fmt::format("exact {:.12f}, filter {:.12f}", exact, ll));
  CHECK(std::fabs(ll - exact) < 1e-8 * std::fabs(exact));
}

namespace {

// A state given by a value (`h[t] = ...`) that reads the previous observation, and nothing random
// but the observations: the likelihood is a plain recursion, which the particle filter must give
// exactly with any number of particles (they all carry the same state).
const char* kDeterministicRecursion = R"(
model recursion {
  param a : real(-1, 1) = 0.6;
  param b = 0.8;
  param s : real(0, inf) = 0.7;
  state h : vector[2];
  obs y : real;
  h[0] = zeros(2);
  h[t] = [tanh(a * h[t-1][0] + b * y[t-1]), h[t-1][0]];
  y[t] ~ normal(h[t][0] - 0.5 * h[t][1], s);
}
)";

// A local-level model with its running sum as a deterministic state: linear-Gaussian, so the RTS
// smoother's mean of the sum must be the running sum of its means of the level.
const char* kRunningSum = R"(
model running_sum {
  param q : real(0, inf) = 0.5;
  state x : real;
  state c : real;
  obs y : real;
  x[0] ~ normal(0, 2);
  c[0] = x[0];
  x[t] ~ normal(x[t-1], q);
  c[t] = c[t-1] + x[t];
  y[t] ~ normal(x[t] + 0.1 * c[t], 1);
}
)";

} // namespace

TEST_CASE("deterministic states: an exact recursion through the filter, and the running sum of a "
          "linear-Gaussian model through RTS",
          "[e2e][language]") {
  const std::string& exe = model_exe("deterministic_recursion", kDeterministicRecursion);
  const std::string sim = scratch_path("deterministic-sim.csv");
  run_ok({exe, "simulate", "--T", "60", "--seed", "5", "--out", sim});
  const Table table = read_table(sim);
  const std::vector<double> y = table.column("y"), h0 = table.column("h[0]"),
                            h1 = table.column("h[1]");
  double h[2] = {0, 0}, ll = 0;
  const double a = 0.6, b = 0.8, s = 0.7;
  for (size_t t = 0; t < y.size(); ++t) {
    if (t > 0) {
      const double next = std::tanh(a * h[0] + b * y[t - 1]);
      h[1] = h[0];
      h[0] = next;
    }
    INFO("t = " << t);
    CHECK(h0[t] == Approx(h[0]).margin(1e-12));
    CHECK(h1[t] == Approx(h[1]).margin(1e-12));
    const double r = (y[t] - (h[0] - 0.5 * h[1])) / s;
    ll += -0.5 * r * r - std::log(s) - 0.5 * std::log(2 * M_PI);
  }
  for (const char* particles : {"1", "100"}) {
    const FilterRun run = run_filter(exe, {"--data", sim, "--particles", particles},
                                     scratch_path("deterministic-filter.csv"));
    INFO(particles << " particles");
    CHECK(run.summary["log_likelihood"].get<double>() == Approx(ll).epsilon(1e-10));
  }

  const std::string& sum_exe = model_exe("deterministic_running_sum", kRunningSum);
  const std::string sum_sim = scratch_path("running-sum-sim.csv");
  run_ok({sum_exe, "simulate", "--T", "40", "--seed", "2", "--out", sum_sim});
  const std::string smoothed = scratch_path("running-sum-rts.csv");
  run_ok({sum_exe, "smooth", "--data", sum_sim, "--method", "rts", "--out", smoothed});
  const Table rts = read_table(smoothed);
  const std::vector<double> mean_x = rts.column("mean_x"), mean_c = rts.column("mean_c");
  double running = 0;
  for (size_t t = 0; t < mean_x.size(); ++t) {
    running += mean_x[t];
    INFO("t = " << t);
    CHECK(mean_c[t] == Approx(running).epsilon(1e-9).margin(1e-9));
  }
  // The sum has no density: a smoother that evaluates the transition is refused, with the reason.
  const ProcessResult refused = run_process(
      {sum_exe, "smooth", "--data", sum_sim, "--method", "ffbsi", "--out", smoothed + ".x"});
  CHECK(refused.exit_code != 0);
  CHECK_THAT(refused.err, Catch::Contains("c[t]: a deterministic relation has no density"));
}

TEST_CASE("EM with a deterministic state: the Kalman E-step's points carry it, and the path "
          "climbs to the maximum L-BFGS finds",
          "[e2e][language][em]") {
  const std::string& exe = model_exe("em_running_total", R"(
model em_running_total {
  param a : real(-1, 1) = 0.5;
  param q : real(0, inf) = 1;
  param r : real(0, inf) = 1;
  state level : real;
  state total : real;
  obs y : real;
  level[0] ~ normal(0, 2);
  total[0] = level[0];
  level[t] ~ normal(a * level[t-1], q);
  total[t] = total[t-1] + level[t];
  y[t] ~ normal(level[t] + 0.05 * total[t], r);
}
)");
  const std::string sim = scratch_path("em-running-total.csv");
  run_ok({exe, "simulate", "--T", "100", "--seed", "3", "--out", sim});
  const std::string path = scratch_path("em-running-total-path.csv");
  const nlohmann::json em =
      nlohmann::json::parse(run_ok({exe, "optimize", "--data", sim, "--method", "em",
                                    "--max-iterations", "1000", "--json", "--out", path})
                                .out);
  const nlohmann::json lbfgs = nlohmann::json::parse(
      run_ok({exe, "optimize", "--data", sim, "--method", "lbfgs", "--json"}).out);
  const std::vector<double> ll = read_table(path).column("log_likelihood");
  REQUIRE(ll.size() > 10);
  for (size_t k = 1; k < ll.size(); ++k)
    CHECK(ll[k] >= ll[k - 1] - 1e-9 * std::fabs(ll[k - 1]));
  CHECK(em.at("log_likelihood").get<double>() ==
        Approx(lbfgs.at("log_likelihood").get<double>()).margin(0.01));
}

TEST_CASE("sum of a vector state and of a matrix parameter in a compiled model: the Kalman "
          "log-likelihood equals the model written with components",
          "[e2e][language]") {
  // sum(x[t]) is linear in the state, so the model stays linear-Gaussian; sum(B) is 1. The two
  // models differ only in how the transition's and the observation's means are written.
  auto model = [](const std::string& name, const std::string& transition,
                  const std::string& observation) {
    return "model " + name + R"( {
  param B : matrix[2, 2] = [[0.1, 0.2], [0.3, 0.4]];
  state x : vector[2];
  obs y : real;
  x[0] ~ mvnormal(zeros(2), eye(2));
  x[t] ~ mvnormal()" +
           transition + R"(, eye(2));
  y[t] ~ normal()" +
           observation + ", 0.5);\n}\n";
  };
  const std::string with_sum =
      model("with_sum", "0.8 * x[t-1] + zeros(2, 2) * x[t-1]", "sum(B) * sum(x[t])");
  const std::string by_hand = model(
      "by_hand", "0.8 * x[t-1]", "(B[0, 0] + B[0, 1] + B[1, 0] + B[1, 1]) * (x[t][0] + x[t][1])");
  const std::string& a = model_exe("with_sum", with_sum);
  const std::string& b = model_exe("by_hand", by_hand);
  const std::string sim = scratch_path("sum-sim.csv");
  run_ok({b, "simulate", "--T", "50", "--seed", "4", "--out", sim});
  const FilterRun fa =
      run_filter(a, {"--data", sim, "--method", "kalman"}, scratch_path("sum-a.csv"));
  const FilterRun fb =
      run_filter(b, {"--data", sim, "--method", "kalman"}, scratch_path("sum-b.csv"));
  CHECK(fa.summary["log_likelihood"].get<double>() ==
        Approx(fb.summary["log_likelihood"].get<double>()).epsilon(1e-12));
  // A changed parameter reaches both the same way.
  const FilterRun ga =
      run_filter(a, {"--data", sim, "--method", "kalman", "--param", "B=[[1,0],[0,1]]"},
                 scratch_path("sum-a2.csv"));
  const FilterRun gb =
      run_filter(b, {"--data", sim, "--method", "kalman", "--param", "B=[[1,0],[0,1]]"},
                 scratch_path("sum-b2.csv"));
  CHECK(ga.summary["log_likelihood"].get<double>() ==
        Approx(gb.summary["log_likelihood"].get<double>()).epsilon(1e-12));
  CHECK(ga.summary["log_likelihood"].get<double>() != fa.summary["log_likelihood"].get<double>());
}

TEST_CASE("matrix ranges with an index read at run time take the column or row it names",
          "[e2e][language]") {
  // M's column c is [c + 1, c + 4], its row r's last two entries [3 r + 2, 3 r + 3]: each draw's
  // observations must be those of one column and one row, and every column and row must occur.
  const std::string& exe = model_exe("run_time_ranges", R"(
simulator run_time_ranges {
  const M = [[1, 2, 3], [4, 5, 6]];
  param u ~ uniform(0, 1);
  latent c ~ categorical([1, 1, 1]);
  latent r ~ bernoulli(0.5);
  obs column = M[0:2, c] + u;
  obs row = M[r, 1:3] + u;
}
)");
  const Table table = parse_table(run_ok({exe, "simulate", "--n", "300", "--seed", "4"}).out);
  const std::vector<double> u = table.column("u");
  std::set<int> columns, rows;
  for (size_t i = 0; i < u.size(); ++i) {
    const double top = table.column("column[0]")[i] - u[i];
    const double bottom = table.column("column[1]")[i] - u[i];
    const double first = table.column("row[0]")[i] - u[i];
    const double second = table.column("row[1]")[i] - u[i];
    INFO(fmt::format("draw {}: column [{}, {}], row [{}, {}]", i, top, bottom, first, second));
    CHECK(std::fabs(bottom - top - 3) < 1e-12);
    CHECK(std::fabs(second - first - 1) < 1e-12);
    columns.insert(static_cast<int>(std::lround(top)) - 1);
    rows.insert((static_cast<int>(std::lround(first)) - 2) / 3);
  }
  CHECK(columns == std::set<int>{0, 1, 2});
  CHECK(rows == std::set<int>{0, 1});
}
