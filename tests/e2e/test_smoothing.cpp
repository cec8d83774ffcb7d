// End-to-end tests of the particle smoothers on a linear-Gaussian model, against the exact
// smoothing distribution obtained by conditioning the joint Gaussian of all states and
// observations directly (independent of any Kalman or RTS recursion): per-t smoothing means, a
// per-t functional E[x_t^2 | y], and the additive functionals sum_t x_t and sum_t x_{t-1} x_t
// (which needs the lag-one smoothing covariances). Each method runs over several seeds; its mean
// must lie within a few Monte Carlo standard errors of the exact value. Also: bit-identical output
// for any thread count, and the refusals that happen before any work.
#include "support.h"

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

using namespace e2e;
using Catch::Contains;

namespace {

const double a = 0.8, q = 0.6, r = 0.7;

const char* kSmoothingModel = R"(
model smooth_lg {
  param a ~ uniform(-1, 1) = 0.8;
  param q ~ half_normal(1) = 0.6;
  param r ~ half_normal(1) = 0.7;
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ normal(a * x[t-1], q);
  y[t] ~ normal(x[t], r);
  functional level = sum_t x[t];
  functional cross = sum_t (t == 0 ? 0 : x[t-1] * x[t]);
  functional square = x[t]^2;
}
)";

// The same model with the locally optimal proposal q(x[t] | x[t-1], y[t]) = p(x[t] | x[t-1], y[t]).
std::string guided_model() {
  std::string m = kSmoothingModel;
  m.replace(m.find("smooth_lg"), 9, "smooth_lg_guided");
  m.insert(m.rfind('}'), R"(  let s2 = 1 / (1 / q^2 + 1 / r^2);
  proposal x[t] ~ normal(s2 * (a * x[t-1] / q^2 + y[t] / r^2), sqrt(s2));
)");
  return m;
}

struct Exact {
  Eigen::VectorXd mean;
  Eigen::MatrixXd cov;
  double level = 0, cross = 0;
};

// x ~ N(0, C) with C from the AR(1) recursion, y = x + N(0, r^2 I): condition directly.
Exact exact_smoother(const std::vector<double>& y) {
  const int T = static_cast<int>(y.size());
  Eigen::MatrixXd C(T, T);
  std::vector<double> var(T);
  var[0] = 1;
  for (int t = 1; t < T; ++t)
    var[t] = a * a * var[t - 1] + q * q;
  for (int s = 0; s < T; ++s)
    for (int t = s; t < T; ++t)
      C(s, t) = C(t, s) = std::pow(a, t - s) * var[s];
  Eigen::MatrixXd S = C + r * r * Eigen::MatrixXd::Identity(T, T);
  Eigen::VectorXd yv = Eigen::Map<const Eigen::VectorXd>(y.data(), T);
  Eigen::LLT<Eigen::MatrixXd> llt(S);
  Exact e;
  e.mean = C * llt.solve(yv);
  e.cov = C - C * llt.solve(C);
  for (int t = 0; t < T; ++t) {
    e.level += e.mean[t];
    if (t > 0)
      e.cross += e.cov(t - 1, t) + e.mean[t - 1] * e.mean[t];
  }
  return e;
}

struct Replicates {
  std::vector<std::vector<double>> mean, square; // [replicate][t]
  std::vector<double> level, cross;
};

} // namespace

TEST_CASE("particle smoothers agree with the exact smoothing distribution (1-D linear Gaussian)",
          "[smooth]") {
  const std::string& exe = model_exe("smooth_lg", kSmoothingModel);
  const std::string data = scratch_path("smooth_lg_data.csv");
  const int T = 30;
  run_ok({exe, "simulate", "--T", std::to_string(T), "--seed", "11", "--out", data});
  const std::vector<double> y = read_table(data).column("y");
  const Exact exact = exact_smoother(y);

  const std::string& guided_exe = model_exe("smooth_lg_guided", guided_model());
  struct Case {
    std::string label, method;
    std::vector<std::string> args;
    std::string filter = "bootstrap"; // of the forward pass (guided: the model with a proposal)
  };
  // ffbsi draws by rejection by default (the model has a density bound), paris by mcmc moves
  // after the bootstrap filter and by rejection after the others.
  const std::vector<Case> cases = {
      {"ffbsm", "ffbsm", {}},
      {"ffbsi rejection", "ffbsi", {}},
      {"ffbsi exact", "ffbsi", {"--backward", "exact"}},
      {"genealogy", "genealogy", {}},
      {"fixed-lag", "fixed-lag", {"--lag", "15"}},
      {"online", "online", {"--marginals"}},
      {"paris rejection",
       "paris",
       {"--marginals", "--backward-samples", "2", "--backward", "rejection"}},
      {"paris exact", "paris", {"--marginals", "--backward-samples", "2", "--backward", "exact"}},
      {"paris mcmc (auto)", "paris", {"--marginals", "--backward-samples", "2"}},
      // Several moves per draw take the sequential path, one move the precomputed ratios.
      {"paris mcmc 3 moves",
       "paris",
       {"--marginals", "--backward-samples", "2", "--backward", "mcmc", "--mcmc-steps", "3"}},
      {"bis", "bis", {"--marginals", "--backward-samples", "200"}},
      // Backward kernels use the filtering weights, whichever filter produced them.
      {"ffbsm after guided", "ffbsm", {}, "guided"},
      {"paris after guided", "paris", {"--marginals"}, "guided"},
      {"genealogy after guided", "genealogy", {}, "guided"},
      {"ffbsi after apf", "ffbsi", {}, "apf"},
      {"paris after apf", "paris", {"--marginals", "--backward", "exact"}, "apf"},
  };
  const int R = 20;
  for (const Case& c : cases) {
    SECTION(c.label) {
      Replicates rep;
      for (int k = 0; k < R; ++k) {
        const std::string out = scratch_path(fmt::format("smooth_{}_{}.csv", c.method, k));
        std::vector<std::string> argv = {c.filter == "guided" ? guided_exe : exe,
                                         "smooth",
                                         "--data",
                                         data,
                                         "--method",
                                         c.method,
                                         "--particles",
                                         "300",
                                         "--seed",
                                         std::to_string(100 + k),
                                         "--json",
                                         "--out",
                                         out};
        if (c.filter == "apf")
          argv.insert(argv.end(), {"--filter", "apf"});
        argv.insert(argv.end(), c.args.begin(), c.args.end());
        const ProcessResult p = run_ok(argv);
        const nlohmann::json j = nlohmann::json::parse(p.out);
        REQUIRE(j["method"] == c.method);
        REQUIRE(j["filter"] == c.filter); // guided: auto's choice for a model with a proposal
        rep.level.push_back(j["functionals"]["level"].get<double>());
        rep.cross.push_back(j["functionals"]["cross"].get<double>());
        const Table table = read_table(out);
        rep.mean.push_back(table.column("mean_x"));
        rep.square.push_back(table.column("square"));
        REQUIRE(rep.mean.back().size() == static_cast<size_t>(T));
      }
      check_mean_close(rep.level, exact.level, 4, c.label + " sum_t x[t]");
      check_mean_close(rep.cross, exact.cross, 4, c.label + " sum_t x[t-1] x[t]");
      // Per-t: every t within 5 standard errors (60 comparisons per method; 20 seeds keep the
      // standard-error estimate itself steady).
      for (int t = 0; t < T; ++t) {
        std::vector<double> m, s;
        for (int k = 0; k < R; ++k) {
          m.push_back(rep.mean[k][t]);
          s.push_back(rep.square[k][t]);
        }
        check_mean_close(m, exact.mean[t], 5, fmt::format("{} E[x_{}]", c.label, t));
        check_mean_close(s, exact.cov(t, t) + exact.mean[t] * exact.mean[t], 5,
                         fmt::format("{} E[x_{}^2]", c.label, t));
      }
    }
  }
}

TEST_CASE("particle smoothers agree with RTS on a 10-D linear-Gaussian model", "[smooth]") {
  // x[t] = A x[t-1] + N(0, 0.5^2 I), A = 0.6 I + 0.2 (cyclic shift); y[t] = x[t] + N(0, 2^2 I).
  const int d = 10, T = 15, R = 20;
  std::string rows;
  for (int i = 0; i < d; ++i) {
    std::vector<std::string> row;
    for (int k = 0; k < d; ++k)
      row.push_back(k == i ? "0.6" : k == (i + 1) % d ? "0.2" : "0");
    rows += fmt::format("{}[{}]", i ? ", " : "", fmt::join(row, ", "));
  }
  const std::string model = fmt::format(R"(
model smooth_lg10 {{
  param A : matrix[10, 10] = [{}];
  state x : vector[10];
  obs y : vector[10];
  x[0] ~ normal(0, 1);
  x[t] ~ normal(A * x[t-1], 0.5);
  y[t] ~ normal(x[t], 2);
  functional level = sum_t x[t];
  functional cross = sum_t (t == 0 ? 0 : dot(x[t-1], x[t]));
}}
)",
                                        rows);
  const std::string& exe = model_exe("smooth_lg10", model);
  const std::string data = scratch_path("smooth_lg10.csv"), rts_out = scratch_path("lg10_rts.csv");
  run_ok({exe, "simulate", "--T", std::to_string(T), "--seed", "8", "--out", data});
  const nlohmann::json exact = nlohmann::json::parse(
      run_ok({exe, "smooth", "--data", data, "--method", "rts", "--json", "--out", rts_out}).out);
  const Table exact_table = read_table(rts_out);

  struct Case {
    std::string label, method;
    std::vector<std::string> args;
  };
  const std::vector<Case> cases = {
      {"ffbsm", "ffbsm", {}},
      {"ffbsi", "ffbsi", {}},
      {"paris rejection", "paris", {"--marginals"}},
      {"paris mcmc", "paris", {"--marginals", "--backward", "mcmc"}},
      // bis' self-normalised weights are biased by O(1/Ñ), with a constant that grows with the
      // dimension: at Ñ = 100 the bias here is about 5 standard errors of 20 seeds.
      {"bis", "bis", {"--marginals", "--backward-samples", "800"}},
      {"genealogy", "genealogy", {}},
  };
  for (const Case& c : cases) {
    SECTION(c.label) {
      std::vector<std::vector<double>> level(d), mean(T * d);
      std::vector<double> cross;
      for (int k = 0; k < R; ++k) {
        const std::string out = scratch_path(fmt::format("lg10_{}_{}.csv", c.method, k));
        std::vector<std::string> argv = {
            exe,      "smooth",      "--data", data,     "--method",
            c.method, "--particles", "400",    "--seed", std::to_string(500 + k),
            "--json", "--out",       out};
        argv.insert(argv.end(), c.args.begin(), c.args.end());
        const nlohmann::json j = nlohmann::json::parse(run_ok(argv).out);
        for (int i = 0; i < d; ++i)
          level[i].push_back(j["functionals"]["level"][i].get<double>());
        cross.push_back(j["functionals"]["cross"].get<double>());
        const Table table = read_table(out);
        for (int i = 0; i < d; ++i) {
          const std::vector<double> m = table.column(fmt::format("mean_x[{}]", i));
          for (int t = 0; t < T; ++t)
            mean[t * d + i].push_back(m[t]);
        }
      }
      for (int i = 0; i < d; ++i)
        check_mean_close(level[i], exact["functionals"]["level"][i].get<double>(), 4,
                         fmt::format("{} sum_t x[t][{}]", c.label, i));
      check_mean_close(cross, exact["functionals"]["cross"].get<double>(), 4,
                       c.label + " sum_t dot(x[t-1], x[t])");
      for (int i = 0; i < d; ++i) {
        const std::vector<double> m = exact_table.column(fmt::format("mean_x[{}]", i));
        for (int t = 0; t < T; ++t)
          check_mean_close(mean[t * d + i], m[t], 5, fmt::format("{} E[x_{}[{}]]", c.label, t, i));
      }
    }
  }
}

TEST_CASE("rts gives the exact smoothing distribution and functionals (1-D linear Gaussian)",
          "[smooth]") {
  const std::string& exe = model_exe("smooth_lg", kSmoothingModel);
  const std::string data = scratch_path("smooth_lg_rts.csv"), out = scratch_path("rts_out.csv");
  const int T = 30;
  run_ok({exe, "simulate", "--T", std::to_string(T), "--seed", "11", "--out", data});
  const Exact exact = exact_smoother(read_table(data).column("y"));
  const nlohmann::json j = nlohmann::json::parse(
      run_ok({exe, "smooth", "--data", data, "--method", "rts", "--json", "--out", out}).out);
  // The functionals' terms are polynomials of degree <= 2: the cubature rule is exact.
  CHECK(j["functionals"]["level"].get<double>() == Approx(exact.level).epsilon(1e-10));
  CHECK(j["functionals"]["cross"].get<double>() == Approx(exact.cross).epsilon(1e-10));
  const Table table = read_table(out);
  const std::vector<double> mean = table.column("mean_x"), var = table.column("var_x"),
                            square = table.column("square"), lag = table.column("lagcov_x_x");
  for (int t = 0; t < T; ++t) {
    INFO("t = " << t);
    CHECK(mean[t] == Approx(exact.mean[t]).epsilon(1e-10).margin(1e-12));
    CHECK(var[t] == Approx(exact.cov(t, t)).epsilon(1e-10));
    CHECK(square[t] == Approx(exact.cov(t, t) + exact.mean[t] * exact.mean[t]).epsilon(1e-10));
    if (t > 0)
      CHECK(lag[t] == Approx(exact.cov(t, t - 1)).epsilon(1e-10));
  }
}

TEST_CASE("rejection sampling uses the compiled density bound; mcmc moves from the ancestor",
          "[smooth]") {
  const std::string& exe = model_exe("smooth_lg", kSmoothingModel);
  const std::string data = scratch_path("smooth_lg_bound.csv");
  run_ok({exe, "simulate", "--T", "40", "--seed", "5", "--out", data});
  // The bound of normal(a x[t-1], q) over x[t] is its density at the mean, 1 / (q sqrt(2 pi)).
  const double log_bound = -std::log(q * std::sqrt(2 * M_PI));
  for (const char* method : {"ffbsi", "paris"}) {
    const nlohmann::json j =
        nlohmann::json::parse(run_ok({exe, "smooth", "--data", data, "--method", method,
                                      "--backward", "rejection", "--marginals", "--json"})
                                  .out);
    INFO(j.dump());
    REQUIRE(j["details"]["backward"] == "rejection");
    CHECK(j["details"]["log_bound"]["min"].get<double>() == Approx(log_bound).epsilon(1e-12));
    CHECK(j["details"]["log_bound"]["max"].get<double>() == Approx(log_bound).epsilon(1e-12));
    CHECK(j["details"]["log_bound"]["steps_without_bound"] == 0);
    // Every accepted proposal was a draw; the rest fell back to exact draws.
    const double rate = j["details"]["acceptance_rate"].get<double>();
    CHECK(rate > 0);
    CHECK(rate <= 1);
  }
  const nlohmann::json m =
      nlohmann::json::parse(run_ok({exe, "smooth", "--data", data, "--method", "paris",
                                    "--backward", "mcmc", "--marginals", "--mcmc-steps", "3",
                                    "--backward-samples", "4", "--particles", "500", "--json"})
                                .out);
  CHECK(m["details"]["backward"] == "mcmc");
  CHECK(m["details"]["mcmc_steps"] == 3);
  CHECK(m["details"]["proposals"] == 500 * 39 * 4 * 3); // steps 1..T-1, Ñ draws, S moves each
  CHECK(m["details"]["exact_draws"] == 0);
  // --backward auto: mcmc for paris after the bootstrap filter, whose ancestors start the chains;
  // rejection after the filters whose ancestors are not draws from the backward kernel, and for
  // ffbsi.
  const std::string guided = model_exe("smooth_lg_guided", guided_model());
  const std::vector<std::pair<std::vector<std::string>, std::string>> automatic = {
      {{exe, "--method", "paris"}, "mcmc"},
      {{exe, "--method", "paris", "--filter", "apf"}, "rejection"},
      {{guided, "--method", "paris", "--filter", "guided"}, "rejection"},
      {{exe, "--method", "ffbsi"}, "rejection"}};
  for (const auto& [args, chosen] : automatic) {
    std::vector<std::string> cmd = {args[0], "smooth", "--data", data, "--marginals", "--json"};
    cmd.insert(cmd.end(), args.begin() + 1, args.end());
    INFO(fmt::format("{}", fmt::join(cmd, " ")));
    CHECK(nlohmann::json::parse(run_ok(cmd).out)["details"]["backward"] == chosen);
  }
}

TEST_CASE("smoothers give bit-identical output for 1 and 3 threads", "[smooth]") {
  const std::string& exe = model_exe("smooth_lg", kSmoothingModel);
  const std::string data = scratch_path("smooth_threads_data.csv");
  run_ok({exe, "simulate", "--T", "20", "--seed", "2", "--out", data});
  const std::vector<std::vector<std::string>> configs = {{"ffbsm"},
                                                         {"ffbsi"},
                                                         {"ffbsi", "--backward", "exact"},
                                                         {"fixed-lag"},
                                                         {"paris"},
                                                         {"paris", "--backward", "exact"},
                                                         {"paris", "--backward", "mcmc"},
                                                         {"bis"},
                                                         {"online"}};
  for (const std::vector<std::string>& config : configs) {
    std::string outputs[2];
    for (int k = 0; k < 2; ++k) {
      std::vector<std::string> argv = {exe,
                                       "smooth",
                                       "--data",
                                       data,
                                       "--method",
                                       config[0],
                                       "--particles",
                                       "500",
                                       "--marginals",
                                       "--threads",
                                       k == 0 ? "1" : "3",
                                       "--seed",
                                       "9"};
      argv.insert(argv.end(), config.begin() + 1, config.end());
      outputs[k] = run_ok(argv).out;
    }
    INFO(fmt::format("{}", fmt::join(config, " ")));
    CHECK(outputs[0] == outputs[1]);
    CHECK(outputs[0].size() > 100);
  }
}

TEST_CASE("smooth refuses what the model cannot support, before any work", "[smooth]") {
  const std::string& exe = model_exe("smooth_lg", kSmoothingModel);
  const std::string data = scratch_path("smooth_refuse_data.csv");
  run_ok({exe, "simulate", "--T", "5", "--seed", "2", "--out", data});
  auto refused = [&](std::vector<std::string> args, const std::string& expected) {
    std::vector<std::string> argv = {exe, "smooth", "--data", data};
    argv.insert(argv.end(), args.begin(), args.end());
    const ProcessResult p = run_process(argv);
    INFO(p.describe());
    CHECK(p.exit_code == 1);
    CHECK(p.err.find(expected) != std::string::npos);
    CHECK(p.out.empty());
  };
  // A per-t functional with an online method needs --marginals; the message names the methods.
  refused({"--method", "paris", "--no-marginals"}, "functional 'square' is a quantity at each t");
  refused({"--method", "paris", "--no-marginals"}, "ffbsm, ffbsi, genealogy, fixed-lag");
  // The model is not finite-state.
  refused({"--method", "forward-backward"}, "the model's state is not finite");
  // Rejection sampling outside ffbsi and paris.
  // A flag of other methods only: a usage error (exit 2) naming the methods that read it.
  const ProcessResult bis =
      run_process({exe, "smooth", "--data", data, "--method", "bis", "--backward", "rejection"});
  INFO(bis.describe());
  CHECK(bis.exit_code == 2);
  CHECK(bis.err.find("smooth: --backward does not apply to --method bis (it applies to ffbsi, "
                     "paris)") != std::string::npos);
  refused({"--method", "ffbsi", "--backward", "mcmc"}, "applies to paris only");
  refused({"--method", "paris", "--backward", "mcmc", "--filter", "apf"},
          "a draw from the backward kernel only under the bootstrap filter");
  refused({"--method", "ffbsm", "--filter", "guided"}, "the model has no proposal");
  refused({"--functional", "nope"}, "the model has no such functional (it declares level, cross, "
                                    "square)");
  // Leaving the per-t functional out makes the online method acceptable.
  const ProcessResult ok = run_ok(
      {exe, "smooth", "--data", data, "--method", "paris", "--functional", "level", "--json"});
  const nlohmann::json j = nlohmann::json::parse(ok.out);
  CHECK(j["functionals"].contains("level"));
  CHECK(!j["functionals"].contains("cross"));
  CHECK(j["marginals"] == false);
}

TEST_CASE("rejection sampling with the density bounds of beta, inverse_gamma, truncated_normal "
          "and dirichlet transitions draws from the backward kernel",
          "[smooth]") {
  // Each transition's bound depends on x[t-1] (maximised over the particles at each step). A bound
  // below the density stops the run (check_within_bound); a valid one gives exact backward draws,
  // so ffbsi by rejection agrees with ffbsm on the same filter particles within the Monte Carlo
  // error of M trajectories.
  struct Case {
    std::string name, state, x0, transition, observation;
  };
  const std::vector<Case> cases = {
      {"bound_beta", "real", "beta(2, 2)", "beta(20 * x[t-1] + 1, 20 * (1 - x[t-1]) + 1)",
       "normal(x[t], 0.1)"},
      {"bound_inverse_gamma", "real", "inverse_gamma(5, 4)", "inverse_gamma(5, 4 * x[t-1] + 1)",
       "lognormal(log(x[t]), 0.3)"},
      {"bound_truncated_normal", "real", "truncated_normal(1, 1, 0, inf)",
       "truncated_normal(0.9 * x[t-1], 0.5, 0, inf)", "normal(x[t], 0.5)"},
      {"bound_dirichlet", "vector[3]", "dirichlet([2, 2, 2])", "dirichlet(10 * x[t-1] + 1)",
       "normal(x[t][0], 0.1)"},
  };
  const int M = 400;
  for (const Case& c : cases) {
    SECTION(c.name) {
      const std::string source =
          fmt::format("model {} {{\n  state x : {};\n  obs y : real;\n  x[0] ~ {};\n"
                      "  x[t] ~ {};\n  y[t] ~ {};\n}}\n",
                      c.name, c.state, c.x0, c.transition, c.observation);
      const std::string& exe = model_exe(c.name, source);
      const std::string data = scratch_path(c.name + ".csv");
      run_ok({exe, "simulate", "--T", "30", "--seed", "4", "--out", data});
      auto smooth = [&](const std::vector<std::string>& extra, const std::string& out) {
        std::vector<std::string> argv = {exe,           "smooth",          "--data", data,
                                         "--particles", std::to_string(M), "--seed", "9",
                                         "--json",      "--out",           out};
        argv.insert(argv.end(), extra.begin(), extra.end());
        return nlohmann::json::parse(run_ok(argv).out);
      };
      const std::string exact_csv = scratch_path(c.name + "_ffbsm.csv");
      const std::string rejection_csv = scratch_path(c.name + "_ffbsi.csv");
      smooth({"--method", "ffbsm"}, exact_csv);
      const nlohmann::json j = smooth(
          {"--method", "ffbsi", "--backward", "rejection", "--trajectories", std::to_string(M)},
          rejection_csv);
      INFO(j["details"].dump());
      REQUIRE(j["details"]["backward"] == "rejection");
      CHECK(j["details"]["log_bound"]["steps_without_bound"] == 0);
      CHECK(j["details"]["acceptance_rate"].get<double>() > 0.02);
      const Table exact = read_table(exact_csv), rejected = read_table(rejection_csv);
      const std::string column = exact.header.at(1); // the first state component's mean
      REQUIRE(column.rfind("mean_", 0) == 0);
      const std::vector<double> mean = exact.column(column), var = exact.column(exact.header.at(2));
      const std::vector<double> drawn = rejected.column(column);
      double worst = 0;
      for (size_t t = 0; t < mean.size(); ++t)
        worst = std::max(worst, std::abs(drawn[t] - mean[t]) / std::sqrt(var[t] / M + 1e-300));
      CHECK(worst < 4.5); // 30 steps: a |z| this large has probability ~2e-4 under the null
      // paris draws by rejection with the same bound.
      const nlohmann::json p = smooth({"--method", "paris", "--backward", "rejection"},
                                      scratch_path(c.name + "_paris.csv"));
      CHECK(p["details"]["log_bound"]["steps_without_bound"] == 0);
    }
  }
}

TEST_CASE("smooth with no options writes the per-t moments and every functional, per-t ones "
          "included",
          "[smooth]") {
  // A particle model (auto chooses an online smoother) with a per-t and a summed functional.
  const std::string& exe = model_exe("smooth_newcomer", R"(
model smooth_newcomer {
  state x : real;
  obs y : int[0..inf];
  x[0] ~ normal(0, 1);
  x[t] ~ normal(0.9 * x[t-1], 0.5);
  y[t] ~ poisson(exp(x[t]));
  functional level = x[t];
  functional total = sum_t x[t];
}
)");
  const std::string sim = scratch_path("newcomer-sim.csv");
  run_ok({exe, "simulate", "--T", "30", "--seed", "2", "--out", sim});
  const std::string out = scratch_path("newcomer-smooth.csv");
  run_ok({exe, "smooth", "--data", sim, "--particles", "500", "--out", out});
  const Table t = read_table(out);
  CHECK(t.header == std::vector<std::string>{"t", "mean_x", "var_x", "level"});
  REQUIRE(t.rows.size() == 30);
  const std::vector<double> mean = t.column("mean_x"), level = t.column("level");
  for (size_t k = 0; k < mean.size(); ++k) {
    CHECK(std::isfinite(mean[k]));
    CHECK(level[k] == Approx(mean[k]).epsilon(1e-9)); // level is x[t]: its mean is mean_x
  }
  const nlohmann::json j = nlohmann::json::parse(
      run_ok({exe, "smooth", "--data", sim, "--particles", "500", "--json"}).out);
  CHECK(j.at("chosen_by") == "auto");
  CHECK(j.at("marginals") == true);
  CHECK(j.at("functionals").contains("total"));
  // ffbsi: an online smoother's marginals cost O(N T^2) (docs/cli.md); without them, paris.
  CHECK(j.at("method") == "ffbsi");
  const nlohmann::json no_marginals = nlohmann::json::parse(
      run_ok({exe, "smooth", "--data", sim, "--no-marginals", "--functional", "total", "--json"})
          .out);
  CHECK(no_marginals.at("method") == "paris");
  CHECK(no_marginals.at("chosen_by") == "auto");
  // A flag only paris reads keeps it, with its marginals: the user asked for what it does.
  for (const std::vector<std::string>& flag : std::vector<std::vector<std::string>>{
           {"--backward-samples", "4"}, {"--backward", "mcmc"}, {"--mcmc-steps", "2"}}) {
    std::vector<std::string> argv = {exe, "smooth", "--data", sim, "--json", "--out", "/dev/null"};
    argv.insert(argv.end(), flag.begin(), flag.end());
    const ProcessResult r = run_ok(argv);
    INFO(flag[0]);
    CHECK(r.err.empty()); // no "does not apply" warning
    const nlohmann::json kept = nlohmann::json::parse(r.out);
    CHECK(kept.at("method") == "paris");
    CHECK(kept.at("marginals") == true);
  }
  // And one only ffbsi reads picks it, where the rule would have run paris.
  const ProcessResult trajectories =
      run_ok({exe, "smooth", "--data", sim, "--no-marginals", "--trajectories", "100", "--json",
              "--out", "/dev/null"});
  CHECK(trajectories.err.empty());
  CHECK(nlohmann::json::parse(trajectories.out).at("method") == "ffbsi");
  // Named, an online method keeps its constant memory unless --marginals asks for them.
  const nlohmann::json online = nlohmann::json::parse(
      run_ok({exe, "smooth", "--data", sim, "--method", "paris", "--functional", "total", "--json"})
          .out);
  CHECK(online.at("marginals") == false);
}

TEST_CASE("smooth reports each pass's progress with --progress always, and nothing otherwise "
          "when standard error is not a terminal",
          "[smooth][progress]") {
  const std::string& exe = example_exe("sv");
  const std::string sim = scratch_path("progress-sim.csv");
  run_ok({exe, "simulate", "--T", "20", "--seed", "3", "--out", sim});
  const std::vector<std::string> ffbsm = {exe,     "smooth",      "--data", sim,     "--method",
                                          "ffbsm", "--particles", "50",     "--out", "/dev/null"};
  std::vector<std::string> always = ffbsm;
  always.insert(always.end(), {"--progress", "always"});
  const ProcessResult shown = run_ok(always);
  // A line each (standard error is a pipe here), the first step of each phase at once.
  CHECK_THAT(shown.err, Contains(" smooth (forward pass): 1/20 (5%)\n"));
  CHECK_THAT(shown.err, Contains(" smooth (backward pass): 1/20 (5%)\n"));
  CHECK(shown.err.find("\r") == std::string::npos);
  CHECK(shown.err.find("(forward pass)") < shown.err.find("(backward pass)"));
  CHECK_THAT(shown.err, Contains(" smooth (backward pass): 20/20 (100%)\n")); // after the last
  // An online smoother works in its forward pass; ffbsi's backward pass has T - 1 steps.
  CHECK_THAT(run_ok({exe, "smooth", "--data", sim, "--method", "paris", "--particles", "50",
                     "--progress", "always", "--out", "/dev/null"})
                 .err,
             Contains(" smooth (forward pass): 1/20 (5%)\n"));
  CHECK_THAT(run_ok({exe, "smooth", "--data", sim, "--method", "ffbsi", "--particles", "50",
                     "--progress", "always", "--out", "/dev/null"})
                 .err,
             Contains(" smooth (backward pass): 1/19 (5%)\n"));
  // The default shows progress on a terminal only; never, nowhere.
  CHECK(run_ok(ffbsm).err.empty());
  std::vector<std::string> never = ffbsm;
  never.insert(never.end(), {"--progress", "never"});
  CHECK(run_ok(never).err.empty());
  // The filter's steps, and the iterations of other commands, are counted the same way.
  const ProcessResult filter = run_ok({exe, "filter", "--data", sim, "--particles", "50",
                                       "--progress", "always", "--out", "/dev/null"});
  CHECK_THAT(filter.err, Contains(" filter: 1/20 (5%)\n"));
  const ProcessResult bad = run_process({exe, "filter", "--data", sim, "--progress", "sometimes"});
  CHECK(bad.exit_code == 2);
}
