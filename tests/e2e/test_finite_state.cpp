// End-to-end tests of the exact finite-state methods on a compiled three-state hidden Markov model
// whose emissions depend on t, with a missing observation: `filter` (forward algorithm), `smooth`
// (forward-backward) and `decode` (Viterbi, posterior) against brute-force enumeration of all 3^T
// paths;
// then the particle smoothers against forward-backward on a longer series, within Monte Carlo
// error; and the refusals on a model whose state is not finite.
#include "support.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

using namespace e2e;

namespace {

const double kP[3][3] = {{0.8, 0.15, 0.05}, {0.1, 0.7, 0.2}, {0.25, 0.25, 0.5}};
const double kRate[3] = {1, 4, 9}, kP0[3] = {0.5, 0.3, 0.2};

const char* kFiniteStateModel = R"(
model hmm3 {
  param P : matrix[3, 3] = [[0.8, 0.15, 0.05], [0.1, 0.7, 0.2], [0.25, 0.25, 0.5]];
  param rate : vector[3] = [1, 4, 9];
  param p0 : simplex[3] = [0.5, 0.3, 0.2];
  state z : int[0..2];
  obs y : int;
  z[0] ~ categorical(p0);
  z[t] ~ categorical(P[z[t-1]]);
  y[t] ~ poisson(rate[z[t]] * (1 + 0.1 * (t % 3)));
  functional level = sum_t z[t];
  functional switches = sum_t (t == 0 ? 0 : (z[t] != z[t-1] ? 1 : 0));
  functional intensity = rate[z[t]];
}
)";

// Every path of length T with its log joint density; the quantities the tests compare.
struct BruteForce {
  double log_likelihood = 0, level = 0, switches = 0, best_log_joint = -INFINITY;
  std::vector<double> mean, var, intensity, filter_mean, increment;
  std::vector<int> best_path;
  std::vector<std::vector<double>> marginal; // p(z_t = k | y) at [t][k]
};

double log_joint(const std::vector<int>& z, const std::vector<double>& y, size_t upto) {
  double lp = std::log(kP0[z[0]]);
  for (size_t t = 0; t <= upto; ++t) {
    if (t > 0)
      lp += std::log(kP[z[t - 1]][z[t]]);
    if (!std::isnan(y[t]))
      lp += log_poisson(y[t], kRate[z[t]] * (1 + 0.1 * static_cast<double>(t % 3)));
  }
  return lp;
}

// Sums over all paths of length `len` of f(path, weight) with weights p(path, y_0..y_{len-1}).
template <class F> double over_paths(size_t len, const std::vector<double>& y, F f) {
  std::vector<int> z(len, 0);
  double total = 0;
  for (;;) {
    const double w = std::exp(log_joint(z, y, len - 1));
    total += w;
    f(z, w);
    size_t k = 0;
    while (k < len && ++z[k] == 3)
      z[k++] = 0;
    if (k == len)
      return total;
  }
}

BruteForce brute_force(const std::vector<double>& y) {
  const size_t T = y.size();
  BruteForce b;
  b.mean.assign(T, 0);
  b.var.assign(T, 0);
  b.intensity.assign(T, 0);
  std::vector<double> m2(T, 0);
  b.marginal.assign(T, std::vector<double>(3, 0.0));
  const double Z = over_paths(T, y, [&](const std::vector<int>& z, double w) {
    for (size_t t = 0; t < T; ++t) {
      b.marginal[t][z[t]] += w;
      b.level += w * z[t];
      b.mean[t] += w * z[t];
      m2[t] += w * z[t] * z[t];
      b.intensity[t] += w * kRate[z[t]];
      if (t > 0 && z[t] != z[t - 1])
        b.switches += w;
    }
    const double lj = std::log(w);
    if (lj > b.best_log_joint) {
      b.best_log_joint = lj;
      b.best_path = z;
    }
  });
  b.log_likelihood = std::log(Z);
  b.level /= Z;
  b.switches /= Z;
  for (size_t t = 0; t < T; ++t) {
    b.mean[t] /= Z;
    b.var[t] = m2[t] / Z - b.mean[t] * b.mean[t];
    b.intensity[t] /= Z;
    for (double& p : b.marginal[t])
      p /= Z;
  }
  // Filtering: prefixes of the series.
  double previous = 0;
  for (size_t len = 1; len <= T; ++len) {
    double m = 0;
    const double Zt =
        over_paths(len, y, [&](const std::vector<int>& z, double w) { m += w * z[len - 1]; });
    b.filter_mean.push_back(m / Zt);
    b.increment.push_back(std::log(Zt) - previous);
    previous = std::log(Zt);
  }
  return b;
}

} // namespace

TEST_CASE("forward, forward-backward and Viterbi equal brute-force enumeration", "[finite]") {
  const std::string& exe = model_exe("hmm3", kFiniteStateModel);
  const std::string sim = scratch_path("hmm3-sim.csv"), data = scratch_path("hmm3-data.csv");
  run_ok({exe, "simulate", "--T", "7", "--seed", "4", "--out", sim});
  Table table = read_table(sim);
  table.rows.at(3).at(table.column_index("y")) = "NA";
  write_table(data, table);
  const std::vector<double> y = table.column("y");
  const BruteForce b = brute_force(y);
  auto close = [](double got, double want) {
    return std::abs(got - want) <= 1e-10 * std::max(1.0, std::abs(want));
  };

  const std::string filter_out = scratch_path("hmm3-forward.csv");
  const nlohmann::json f = nlohmann::json::parse(
      run_ok({exe, "filter", "--data", data, "--json", "--out", filter_out}).out);
  CHECK(f["method"] == "forward");
  CHECK(f["chosen_by"] == "auto");
  CHECK(close(f["log_likelihood"].get<double>(), b.log_likelihood));
  const Table ft = read_table(filter_out);
  for (size_t t = 0; t < y.size(); ++t) {
    INFO("t = " << t);
    CHECK(close(ft.column("mean_z")[t], b.filter_mean[t]));
    CHECK(close(ft.column("loglik_increment")[t], b.increment[t]));
  }

  const std::string smooth_out = scratch_path("hmm3-fb.csv");
  const nlohmann::json s = nlohmann::json::parse(
      run_ok({exe, "smooth", "--data", data, "--json", "--out", smooth_out}).out);
  CHECK(s["method"] == "forward-backward");
  CHECK(close(s["log_likelihood"].get<double>(), b.log_likelihood));
  CHECK(close(s["functionals"]["level"].get<double>(), b.level));
  CHECK(close(s["functionals"]["switches"].get<double>(), b.switches));
  const Table st = read_table(smooth_out);
  for (size_t t = 0; t < y.size(); ++t) {
    INFO("t = " << t);
    CHECK(close(st.column("mean_z")[t], b.mean[t]));
    CHECK(close(st.column("var_z")[t], b.var[t]));
    CHECK(close(st.column("intensity")[t], b.intensity[t]));
  }

  const std::string decode_out = scratch_path("hmm3-viterbi.csv");
  const nlohmann::json d = nlohmann::json::parse(
      run_ok({exe, "decode", "--data", data, "--json", "--out", decode_out}).out);
  CHECK(close(d["log_joint"].get<double>(), b.best_log_joint));
  CHECK(close(d["log_likelihood"].get<double>(), b.log_likelihood));
  CHECK(d["states"] == 3);
  const Table dt = read_table(decode_out);
  REQUIRE(dt.header == std::vector<std::string>{"t", "z"});
  for (size_t t = 0; t < y.size(); ++t)
    CHECK(dt.column("z")[t] == b.best_path[t]);

  // Posterior decoding: each t's most probable state, its probability, and the path's density.
  const std::string posterior_out = scratch_path("hmm3-posterior.csv");
  const nlohmann::json pd =
      nlohmann::json::parse(run_ok({exe, "decode", "--data", data, "--method", "posterior",
                                    "--json", "--out", posterior_out})
                                .out);
  CHECK(pd["method"] == "posterior");
  CHECK(pd["chosen_by"] == "user");
  const Table pt = read_table(posterior_out);
  REQUIRE(pt.header == std::vector<std::string>{"t", "z", "probability"});
  std::vector<int> mpm;
  double expected_correct = 0;
  for (size_t t = 0; t < y.size(); ++t) {
    INFO("t = " << t);
    const std::vector<double>& p = b.marginal[t];
    mpm.push_back(static_cast<int>(std::max_element(p.begin(), p.end()) - p.begin()));
    expected_correct += p[mpm.back()];
    CHECK(pt.column("z")[t] == mpm.back());
    CHECK(close(pt.column("probability")[t], p[mpm.back()]));
  }
  CHECK(close(pd["expected_correct"].get<double>(), expected_correct));
  CHECK(close(pd["log_joint"].get<double>(), log_joint(mpm, y, y.size() - 1)));
  CHECK(close(pd["log_likelihood"].get<double>(), b.log_likelihood));
}

// Each t's most probable state can make an impossible path: z_0 = 0 is absorbing and the most
// probable start, but z_1 = 1 is reached from both 1 and 2. Viterbi's path stays possible.
TEST_CASE("posterior decoding reports an impossible path; Viterbi's is possible", "[finite]") {
  const std::string& exe = model_exe("absorbing", R"(
model absorbing {
  param P : matrix[3, 3] = [[1, 0, 0], [0, 1, 0], [0, 1, 0]];
  state z : int[0..2];
  obs y : int;
  z[0] ~ categorical([0.4, 0.3, 0.3]);
  z[t] ~ categorical(P[z[t-1]]);
  y[t] ~ poisson(z[t] == 0 ? 2 : 2.5);
}
)");
  const std::string data = scratch_path("absorbing.csv");
  write_table(data, Table{{"t", "y"}, {{"0", "2"}, {"1", "2"}}});
  // The three possible paths (0, 0), (1, 1), (2, 1) and their weights.
  const double w00 = 0.4 * std::exp(2 * log_poisson(2, 2)),
               w11 = 0.3 * std::exp(2 * log_poisson(2, 2.5)), Z = w00 + 2 * w11;
  REQUIRE(w00 > w11); // so 0 is the most probable state at t = 0, and 1 at t = 1
  REQUIRE(2 * w11 > w00);
  const std::string out = scratch_path("absorbing-posterior.csv");
  const nlohmann::json pd = nlohmann::json::parse(
      run_ok({exe, "decode", "--data", data, "--method", "posterior", "--json", "--out", out}).out);
  CHECK(pd["log_joint"].is_null());
  CHECK(std::abs(pd["expected_correct"].get<double>() - (w00 / Z + 2 * w11 / Z)) < 1e-12);
  const Table t = read_table(out);
  CHECK(t.column("z") == std::vector<double>{0, 1});
  CHECK(std::abs(t.column("probability")[0] - w00 / Z) < 1e-12);
  CHECK(std::abs(t.column("probability")[1] - 2 * w11 / Z) < 1e-12);
  const nlohmann::json vd =
      nlohmann::json::parse(run_ok({exe, "decode", "--data", data, "--json"}).out);
  CHECK(vd["method"] == "viterbi");
  CHECK(std::abs(vd["log_joint"].get<double>() - std::log(w00)) < 1e-12);
}

TEST_CASE("particle smoothers agree with forward-backward on an HMM", "[finite][smooth]") {
  const std::string& exe = model_exe("hmm3", kFiniteStateModel);
  const std::string data = scratch_path("hmm3-long.csv"), fb_out = scratch_path("hmm3-fb40.csv");
  const int T = 40, R = 20;
  run_ok({exe, "simulate", "--T", std::to_string(T), "--seed", "9", "--out", data});
  const nlohmann::json exact =
      nlohmann::json::parse(run_ok({exe, "smooth", "--data", data, "--method", "forward-backward",
                                    "--json", "--out", fb_out})
                                .out);
  const std::vector<double> exact_mean = read_table(fb_out).column("mean_z");
  struct Case {
    std::string label, method;
    std::vector<std::string> args;
  };
  const std::vector<Case> cases = {
      {"ffbsm", "ffbsm", {}},
      {"ffbsi", "ffbsi", {}},
      {"paris rejection", "paris", {"--marginals"}},
      {"paris mcmc", "paris", {"--marginals", "--backward", "mcmc"}},
      {"online", "online", {"--marginals"}},
  };
  for (const Case& c : cases) {
    SECTION(c.label) {
      std::vector<double> level, switches;
      std::vector<std::vector<double>> mean(T);
      for (int k = 0; k < R; ++k) {
        const std::string out = scratch_path(fmt::format("hmm3_{}_{}.csv", c.method, k));
        std::vector<std::string> argv = {
            exe,      "smooth",      "--data", data,     "--method",
            c.method, "--particles", "300",    "--seed", std::to_string(40 + k),
            "--json", "--out",       out};
        argv.insert(argv.end(), c.args.begin(), c.args.end());
        const nlohmann::json j = nlohmann::json::parse(run_ok(argv).out);
        level.push_back(j["functionals"]["level"].get<double>());
        switches.push_back(j["functionals"]["switches"].get<double>());
        const std::vector<double> m = read_table(out).column("mean_z");
        for (int t = 0; t < T; ++t)
          mean[t].push_back(m[t]);
      }
      auto check_close = [&](const std::vector<double>& v, double want, double z,
                             const std::string& what) {
        const double m = sample_mean(v), se = std::sqrt(sample_variance(v) / v.size());
        INFO(fmt::format("{}: mean {} (se {}), exact {}", what, m, se, want));
        CHECK(std::abs(m - want) <= z * se);
      };
      check_close(level, exact["functionals"]["level"].get<double>(), 4, c.label + " level");
      check_close(switches, exact["functionals"]["switches"].get<double>(), 4,
                  c.label + " switches");
      for (int t = 0; t < T; ++t)
        check_close(mean[t], exact_mean[t], 5, fmt::format("{} E[z_{}]", c.label, t));
    }
  }
}

TEST_CASE("the auxiliary particle filter with simulated look-ahead is unbiased on an HMM",
          "[finite]") {
  // hmm3 has no Gaussian moments, so the look-ahead is one draw from the transition. log Z^ is
  // unbiased for log Z - s2/2 (s2 its variance over seeds; compare.cpp explains).
  const std::string& exe = model_exe("hmm3", kFiniteStateModel);
  const std::string data = scratch_path("hmm3-apf.csv");
  run_ok({exe, "simulate", "--T", "60", "--seed", "12", "--out", data});
  const double exact = nlohmann::json::parse(run_ok({exe, "filter", "--data", data, "--json"}).out)
                           .at("log_likelihood")
                           .get<double>();
  std::vector<double> ll;
  for (int k = 0; k < 32; ++k) {
    const nlohmann::json j = nlohmann::json::parse(
        run_ok({exe, "filter", "--data", data, "--method", "apf", "--particles", "10000", "--seed",
                std::to_string(70 + k), "--json"})
            .out);
    REQUIRE(j.at("lookahead") == "simulated");
    ll.push_back(j.at("log_likelihood").get<double>());
  }
  const double m = sample_mean(ll), v = sample_variance(ll), se = std::sqrt(v / ll.size());
  INFO(
      fmt::format("exact {}, mean {} (sd {}), expected {}", exact, m, std::sqrt(v), exact - v / 2));
  CHECK(std::abs(m - (exact - v / 2)) <= 4 * se);
  CHECK(v / 2 <= se);
}

TEST_CASE("exact finite-state methods are refused on a model whose state is not finite",
          "[finite]") {
  const std::string& exe = example_exe("sv");
  const std::string sim = scratch_path("sv-finite-sim.csv");
  run_ok({exe, "simulate", "--T", "5", "--seed", "1", "--out", sim});
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"decode", "--data", sim},
        std::vector<std::string>{"filter", "--data", sim, "--method", "forward"},
        std::vector<std::string>{"smooth", "--data", sim, "--method", "forward-backward"}}) {
    std::vector<std::string> argv = {exe};
    argv.insert(argv.end(), args.begin(), args.end());
    const ProcessResult p = run_process(argv);
    INFO(p.describe());
    CHECK(p.exit_code == 1);
    CHECK(p.err.find("not finite") != std::string::npos);
    CHECK(p.out.empty());
  }
}

TEST_CASE("info lists the methods that apply, auto's choice first", "[finite]") {
  const nlohmann::json hmm =
      nlohmann::json::parse(run_ok({model_exe("hmm3", kFiniteStateModel), "info", "--json"}).out);
  CHECK(hmm["methods"]["filter"] == nlohmann::json({"forward", "bootstrap", "apf"}));
  CHECK(hmm["methods"]["smooth"][0] == "forward-backward");
  CHECK(hmm["methods"]["decode"] == nlohmann::json({"viterbi", "posterior"}));
  CHECK(run_ok({model_exe("hmm3", kFiniteStateModel), "info"}).out.find("  z : int[0..2]\n") !=
        std::string::npos);
  const nlohmann::json lg =
      nlohmann::json::parse(run_ok({example_exe("lgssm1"), "info", "--json"}).out);
  CHECK(lg["methods"]["filter"] == nlohmann::json({"kalman", "bootstrap", "apf", "ekf", "ukf"}));
  CHECK(lg["methods"]["smooth"][0] == "rts");
  CHECK(lg["methods"]["decode"] == nlohmann::json::array());
  const nlohmann::json sv =
      nlohmann::json::parse(run_ok({example_exe("sv"), "info", "--json"}).out);
  CHECK(sv["methods"]["filter"][0] == "bootstrap");
  CHECK(sv["methods"]["smooth"][0] == "ffbsi"); // paris with --no-marginals (docs/cli.md)
}

TEST_CASE("a lag of 3 on a finite state: forward, forward-backward and Viterbi by enumeration",
          "[finite]") {
  // z[t] depends on z[t-1] and z[t-3] (z[s] = z[0] for s < 0); the compiler carries z[t-1] and
  // z[t-2] in hidden copies, and the exact methods enumerate the 4^3 joint values.
  const std::string& exe = model_exe("lag3", R"(
model lag3 {
  param p : simplex[4] = [0.7, 0.1, 0.1, 0.1];
  state z : int[0..3];
  obs   y : real;
  z[0] ~ categorical(p);
  z[t] ~ categorical(z[t-3] == z[t-1] ? [0.1, 0.3, 0.3, 0.3] : p);
  y[t] ~ normal(z[t], 0.5);
  functional repeats = sum_t (t < 3 ? 0 : (z[t] == z[t-3] ? 1 : 0));
}
)");
  const std::string data = scratch_path("lag3.csv");
  run_ok({exe, "simulate", "--T", "6", "--seed", "5", "--out", data});
  const std::vector<double> y = read_table(data).column("y");
  const size_t T = y.size();
  const std::vector<double> p = {0.7, 0.1, 0.1, 0.1}, q = {0.1, 0.3, 0.3, 0.3};
  auto log_joint = [&](const std::vector<int>& z) {
    double lp = std::log(p[z[0]]);
    for (size_t t = 1; t < T; ++t) {
      const int back3 = z[t < 3 ? 0 : t - 3];
      lp += std::log((back3 == z[t - 1] ? q : p)[z[t]]);
    }
    for (size_t t = 0; t < T; ++t)
      lp += -0.5 * std::pow((y[t] - z[t]) / 0.5, 2) - std::log(0.5 * std::sqrt(2 * M_PI));
    return lp;
  };
  // All 4^T paths: the likelihood, smoothing means, E[repeats | y] and the best path.
  double total = 0, best = -INFINITY, repeats = 0;
  std::vector<double> mean(T, 0.0);
  std::vector<int> best_path, z(T, 0);
  for (size_t code = 0; code < (size_t{1} << (2 * T)); ++code) {
    for (size_t t = 0; t < T; ++t)
      z[t] = static_cast<int>((code >> (2 * t)) & 3);
    const double lj = log_joint(z), w = std::exp(lj);
    total += w;
    for (size_t t = 0; t < T; ++t)
      mean[t] += w * z[t];
    for (size_t t = 3; t < T; ++t)
      repeats += w * (z[t] == z[t - 3]);
    if (lj > best) {
      best = lj;
      best_path = z;
    }
  }
  auto close = [](double got, double want) {
    return std::abs(got - want) <= 1e-10 * std::max(1.0, std::abs(want));
  };
  const nlohmann::json f =
      nlohmann::json::parse(run_ok({exe, "filter", "--data", data, "--json"}).out);
  CHECK(f["method"] == "forward");
  CHECK(close(f["log_likelihood"].get<double>(), std::log(total)));
  const std::string out = scratch_path("lag3-fb.csv");
  const nlohmann::json s =
      nlohmann::json::parse(run_ok({exe, "smooth", "--data", data, "--json", "--out", out}).out);
  CHECK(s["method"] == "forward-backward");
  CHECK(close(s["functionals"]["repeats"].get<double>(), repeats / total));
  const Table st = read_table(out);
  CHECK(st.column_index("mean_z@lag1") < 0);
  for (size_t t = 0; t < T; ++t)
    CHECK(close(st.column("mean_z")[t], mean[t] / total));
  const std::string path = scratch_path("lag3-viterbi.csv");
  run_ok({exe, "decode", "--data", data, "--out", path});
  const Table dt = read_table(path);
  REQUIRE(dt.header == std::vector<std::string>{"t", "z"});
  for (size_t t = 0; t < T; ++t)
    CHECK(dt.column("z")[t] == best_path[t]);
}
