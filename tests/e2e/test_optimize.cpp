// End-to-end tests of `optimize` (L-BFGS with the exact score): the local level model on the Nile
// data with a diffuse-like initial law gives Durbin & Koopman's published maximum-likelihood
// estimates, and the optimum of an independent optimiser (Nelder-Mead on a Kalman filter written
// here); --fix, --inits, --save (read back by filter), the path CSV; lbfgs's refusal of a model
// without an exact likelihood, and adam (stochastic gradients of the particle score, iterates
// averaged) reaching the exact MLE's log-likelihood within half a nat.
#include "lgssm_support.h"
#include "support.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <Eigen/Dense>

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

using namespace e2e;

namespace {

// The local level model's log-likelihood (a diffuse start).
double local_level_loglik_diffuse(const std::vector<double>& y, double var_eps, double var_eta) {
  return scalar_kalman_loglik(y, 1, var_eta, 1, var_eps, 1e10);
}

// Nelder-Mead on f over R^2 (a minimiser), from x0 with initial steps of 0.5.
std::array<double, 2> nelder_mead(const auto& f, std::array<double, 2> x0) {
  std::array<std::array<double, 2>, 3> s = {x0, x0, x0};
  s[1][0] += 0.5;
  s[2][1] += 0.5;
  std::array<double, 3> v = {f(s[0]), f(s[1]), f(s[2])};
  for (int it = 0; it < 2000; ++it) {
    std::array<int, 3> o = {0, 1, 2};
    std::sort(o.begin(), o.end(), [&](int a, int b) { return v[a] < v[b]; });
    const int best = o[0], worst = o[2], second = o[1];
    if (std::abs(v[worst] - v[best]) < 1e-13)
      break;
    std::array<double, 2> c{}, r{}, e{}, k{};
    for (int d = 0; d < 2; ++d)
      c[d] = (s[best][d] + s[second][d]) / 2;
    for (int d = 0; d < 2; ++d)
      r[d] = c[d] + (c[d] - s[worst][d]);
    const double fr = f(r);
    if (fr < v[best]) {
      for (int d = 0; d < 2; ++d)
        e[d] = c[d] + 2 * (c[d] - s[worst][d]);
      const double fe = f(e);
      s[worst] = fe < fr ? e : r;
      v[worst] = std::min(fe, fr);
    } else if (fr < v[second]) {
      s[worst] = r;
      v[worst] = fr;
    } else {
      for (int d = 0; d < 2; ++d)
        k[d] = c[d] + 0.5 * (s[worst][d] - c[d]);
      const double fk = f(k);
      if (fk < v[worst]) {
        s[worst] = k;
        v[worst] = fk;
      } else {
        for (int i : {second, worst}) {
          for (int d = 0; d < 2; ++d)
            s[i][d] = s[best][d] + 0.5 * (s[i][d] - s[best][d]);
          v[i] = f(s[i]);
        }
      }
    }
  }
  return s[std::min_element(v.begin(), v.end()) - v.begin()];
}

} // namespace

TEST_CASE("optimize: the Nile MLE of Durbin & Koopman, and of an independent optimiser",
          "[optimize]") {
  const std::string& exe = model_exe("nile_diffuse", kNileDiffuse);
  const std::string data = example_path("data/nile.csv");
  const std::string path = scratch_path("nile-optimize-path.csv");
  const nlohmann::json j =
      nlohmann::json::parse(run_ok({exe, "optimize", "--data", data, "--json", "--out", path}).out);
  CHECK(j["method"] == "lbfgs");
  CHECK(j["converged"] == true);
  const double var_eps = std::pow(j["params"]["sigma_eps"].get<double>(), 2),
               var_eta = std::pow(j["params"]["sigma_eta"].get<double>(), 2);
  INFO("variances " << var_eps << ", " << var_eta);
  // Durbin & Koopman (2012, section 2.10.3): 15099 and 1469.1, by the exactly diffuse likelihood.
  CHECK(std::abs(var_eps / 15099 - 1) < 1e-3);
  CHECK(std::abs(var_eta / 1469.1 - 1) < 1e-3);

  const std::vector<double> y = read_table(data).column("y");
  auto minus_loglik = [&](const std::array<double, 2>& log_var) {
    return -local_level_loglik_diffuse(y, std::exp(log_var[0]), std::exp(log_var[1]));
  };
  const std::array<double, 2> nm = nelder_mead(minus_loglik, {std::log(1e4), std::log(1e3)});
  CHECK(std::abs(var_eps / std::exp(nm[0]) - 1) < 1e-4);
  CHECK(std::abs(var_eta / std::exp(nm[1]) - 1) < 1e-4);
  CHECK(j["log_likelihood"].get<double>() ==
        Approx(local_level_loglik_diffuse(y, var_eps, var_eta)).epsilon(1e-9));
  CHECK(j["log_likelihood"].get<double>() >= -minus_loglik(nm) - 1e-8);

  // The path: one row per evaluation, the log-likelihood rising to the optimum.
  const Table t = read_table(path);
  REQUIRE(t.header == std::vector<std::string>{"evaluation", "start", "log_likelihood",
                                               "gradient_norm", "sigma_eps", "sigma_eta"});
  REQUIRE(static_cast<int64_t>(t.rows.size()) == j["evaluations"].get<int64_t>());
  const std::vector<double> ll = t.column("log_likelihood");
  CHECK(*std::max_element(ll.begin(), ll.end()) == j["log_likelihood"].get<double>());
  CHECK(ll.front() < ll.back());
}

TEST_CASE("optimize --map: the posterior mode of an independent optimiser", "[optimize]") {
  const std::string& exe = model_exe("nile_diffuse", kNileDiffuse);
  const std::string data = example_path("data/nile.csv");
  const nlohmann::json j =
      nlohmann::json::parse(run_ok({exe, "optimize", "--data", data, "--json", "--map"}).out);
  CHECK(j["map"] == true);
  CHECK(j["converged"] == true);
  const double s_eps = j["params"]["sigma_eps"].get<double>(),
               s_eta = j["params"]["sigma_eta"].get<double>();
  const std::vector<double> y = read_table(data).column("y");
  // log half_normal(x; s) = log 2 - log(s sqrt(2 pi)) - x^2 / (2 s^2)
  auto log_half_normal = [](double x, double s) {
    return std::log(2.0) - std::log(s * std::sqrt(2 * std::numbers::pi)) - x * x / (2 * s * s);
  };
  auto log_posterior = [&](double se, double sh) {
    return local_level_loglik_diffuse(y, se * se, sh * sh) + log_half_normal(se, 500) +
           log_half_normal(sh, 200);
  };
  const std::array<double, 2> nm = nelder_mead(
      [&](const std::array<double, 2>& l) {
        return -log_posterior(std::exp(l[0]), std::exp(l[1]));
      },
      {std::log(100.0), std::log(30.0)});
  INFO("ssmc " << s_eps << ", " << s_eta << "; Nelder-Mead " << std::exp(nm[0]) << ", "
               << std::exp(nm[1]));
  CHECK(std::abs(s_eps / std::exp(nm[0]) - 1) < 1e-4);
  CHECK(std::abs(s_eta / std::exp(nm[1]) - 1) < 1e-4);
  CHECK(j["log_posterior"].get<double>() == Approx(log_posterior(s_eps, s_eta)).epsilon(1e-9));
  // The prior pulls the mode away from the maximum-likelihood estimate.
  const nlohmann::json ml =
      nlohmann::json::parse(run_ok({exe, "optimize", "--data", data, "--json"}).out);
  CHECK(ml["params"]["sigma_eta"].get<double>() != Approx(s_eta).epsilon(1e-4));
}

TEST_CASE("optimize: --fix, --inits, and --save read back by filter", "[optimize]") {
  const std::string& exe = model_exe("nile_diffuse", kNileDiffuse);
  const std::string data = example_path("data/nile.csv");
  const std::string saved = scratch_path("nile-optimum.json");
  const nlohmann::json fixed =
      nlohmann::json::parse(run_ok({exe, "optimize", "--data", data, "--json", "--fix", "sigma_eps",
                                    "--param", "sigma_eps=130", "--save", saved})
                                .out);
  CHECK(fixed["learned"] == nlohmann::json({"sigma_eta"}));
  CHECK(fixed["params"]["sigma_eps"] == 130);
  CHECK(fixed["converged"] == true);
  // The saved file is a --params file: filter reads it back to the same log-likelihood.
  const nlohmann::json f = nlohmann::json::parse(
      run_ok({exe, "filter", "--data", data, "--json", "--params", saved}).out);
  CHECK(f["log_likelihood"].get<double>() ==
        Approx(fixed["log_likelihood"].get<double>()).epsilon(1e-12));
  // At the optimum with sigma_eps fixed, the score in sigma_eta vanishes.
  const nlohmann::json s = nlohmann::json::parse(
      run_ok({exe, "score", "--data", data, "--json", "--params", saved}).out);
  CHECK(std::abs(s["score"]["sigma_eta"].get<double>()) < 1e-4);

  const nlohmann::json several = nlohmann::json::parse(
      run_ok({exe, "optimize", "--data", data, "--json", "--inits", "4", "--seed", "5"}).out);
  REQUIRE(several["starts"].size() == 4);
  double best = -INFINITY;
  for (const nlohmann::json& start : several["starts"]) {
    CHECK(start["log_likelihood"].get<double>() >= start["initial_objective"].get<double>());
    CHECK(start["objective"] == start["log_likelihood"]); // maximum likelihood
    best = std::max(best, start["log_likelihood"].get<double>());
  }
  CHECK(several["log_likelihood"].get<double>() == best);

  const ProcessResult unknown = run_process({exe, "optimize", "--data", data, "--fix", "sigma"});
  INFO(unknown.describe());
  CHECK(unknown.exit_code == 1);
  CHECK(unknown.err.find("sigma") != std::string::npos);
  CHECK(unknown.err.find("sigma_eps") != std::string::npos); // the parameters it has
}

TEST_CASE("optimize: a simulated 3-D linear-Gaussian model (matrix, cov_matrix, scalar)",
          "[optimize]") {
  const std::string& exe = model_exe("lg3", R"(
model lg3 {
  param A : matrix[3, 3] = [[0.7, 0.1, 0.0], [0.0, 0.5, 0.2], [0.1, 0.0, 0.6]];
  param Q : cov_matrix[3] = [[0.5, 0.1, 0.0], [0.1, 0.4, 0.05], [0.0, 0.05, 0.3]];
  param r ~ half_normal(2) = 0.3;
  state x : vector[3];
  obs y : vector[3];
  x[0] ~ mvnormal([0, 0, 0], [[1, 0, 0], [0, 1, 0], [0, 0, 1]]);
  x[t] ~ mvnormal(A * x[t-1], Q);
  y[t] ~ normal(x[t], r);
}
)");
  const std::string data = scratch_path("lg3.csv"), saved = scratch_path("lg3-optimum.json");
  run_ok({exe, "simulate", "--T", "300", "--seed", "5", "--out", data});
  const double at_truth =
      nlohmann::json::parse(run_ok({exe, "filter", "--data", data, "--json"}).out)["log_likelihood"]
          .get<double>();
  const nlohmann::json j = nlohmann::json::parse(
      run_ok({exe, "optimize", "--data", data, "--json", "--save", saved}).out);
  CHECK(j["converged"] == true);
  CHECK(j["log_likelihood"].get<double>() > at_truth);
  // The exact score vanishes at the optimum, in every component of A, Q and r.
  const nlohmann::json s = nlohmann::json::parse(
      run_ok({exe, "score", "--data", data, "--json", "--params", saved}).out);
  for (const char* name : {"A", "Q", "r"}) {
    INFO(name << ": " << s["score"][name].dump());
    const nlohmann::json flat = s["score"][name].is_array()
                                    ? s["score"][name].flatten()
                                    : nlohmann::json{{"", s["score"][name]}};
    for (const auto& [key, value] : flat.items())
      CHECK(std::abs(value.get<double>()) < 1e-4);
  }
  // Q stays symmetric positive definite: its transform is Cholesky-based.
  const nlohmann::json& Q = j["params"]["Q"];
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 3; ++b)
      CHECK(Q[a][b].get<double>() == Approx(Q[b][a].get<double>()).epsilon(1e-12));
  CHECK(Q[0][0].get<double>() > 0);
}

TEST_CASE("optimize says when the estimate heads to a boundary of the support", "[optimize]") {
  // Yule's model on a short simulated series: the likelihood grows as the observation noise r
  // goes to 0, so there is no maximum inside the support.
  const std::string& exe = example_exe("yule");
  const std::string sim = scratch_path("yule-boundary.csv");
  run_ok({exe, "simulate", "--T", "60", "--seed", "1", "--out", sim});
  const ProcessResult p = run_process({exe, "optimize", "--data", sim, "--json"});
  INFO(p.describe());
  CHECK(p.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(p.out);
  CHECK(j["converged"] == false);
  CHECK(j["params"]["r"].get<double>() < 1e-6);
  CHECK(j["message"].get<std::string>().find("r heads to the boundary of its support") !=
        std::string::npos);
  CHECK(p.err.find("warning: optimize did not converge") != std::string::npos);
}

TEST_CASE("optimize --method lbfgs refuses a model without an exact likelihood; auto climbs the "
          "particle score",
          "[optimize]") {
  const std::string& exe = example_exe("sv");
  const std::string sim = scratch_path("sv-optimize-sim.csv");
  run_ok({exe, "simulate", "--T", "20", "--seed", "1", "--out", sim});
  const ProcessResult p = run_process({exe, "optimize", "--method", "lbfgs", "--data", sim});
  INFO(p.describe());
  CHECK(p.exit_code == 1);
  CHECK(p.err.find("the likelihood is not exact") != std::string::npos);
  CHECK(p.err.find("--method adam") != std::string::npos);
  CHECK(p.out.empty());
  const nlohmann::json j =
      nlohmann::json::parse(run_ok({exe, "optimize", "--data", sim, "--json", "--particles", "200",
                                    "--max-iterations", "20"})
                                .out);
  CHECK(j["method"] == "adam");
  CHECK(j["iterations"] == 20);
  // Settings adam cannot run with are refused before any work.
  ProcessResult bad =
      run_process({exe, "optimize", "--data", sim, "--json", "--learning-rate", "0"});
  CHECK(bad.exit_code == 1);
  CHECK(bad.err.find("--learning-rate must be positive") != std::string::npos);
  bad = run_process({exe, "optimize", "--data", sim, "--json", "--max-iterations", "3"});
  CHECK(bad.exit_code == 1);
  CHECK(bad.err.find("--max-iterations must be at least 4") != std::string::npos);
  bad = run_process(
      {exe, "sample", "--method", "smc2", "--data", sim, "--json", "--particles", "-1"});
  CHECK(bad.exit_code == 1);
  CHECK(bad.err.find("--particles must be at least 1") != std::string::npos);
}

TEST_CASE("optimize's standard errors and score --information: the Hessian of the exact "
          "log-likelihood",
          "[optimize]") {
  const std::string& exe = example_exe("lgssm1");
  const std::string sim = scratch_path("info-lgssm1.csv");
  run_ok({exe, "simulate", "--T", "500", "--seed", "5", "--param", "a=0.8", "--param", "q=0.5",
          "--param", "r=1", "--out", sim});
  const Table data = read_table(sim);
  const std::vector<Eigen::VectorXd> ys = observations(data, {"y"});
  // -Hessian of log p(y) in (a, q, r) by central differences of a Kalman filter written here.
  auto information = [&](double a, double q, double r) {
    auto ll = [&](double da, double dq, double dr) {
      Lgssm1 m;
      m.a = a + da;
      m.q = q + dq;
      m.r = r + dr;
      m.m0 = 0;
      m.s0 = 1;
      return kalman_filter(m.model(), ys).log_likelihood;
    };
    const double h = 1e-4;
    Eigen::Matrix3d H;
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        auto at = [&](double si, double sj) {
          std::array<double, 3> d{};
          d[i] += si * h;
          d[j] += sj * h;
          return ll(d[0], d[1], d[2]);
        };
        H(i, j) = -(at(1, 1) - at(1, -1) - at(-1, 1) + at(-1, -1)) / (4 * h * h);
      }
    return H;
  };
  // score --information at the defaults (a = 0.9, q = 0.5, r = 1): the (a, q, r) block.
  const nlohmann::json s =
      nlohmann::json::parse(run_ok({exe, "score", "--data", sim, "--information", "--json"}).out);
  REQUIRE(s["information"]["components"] == nlohmann::json{"a", "q", "r", "m0", "s0"});
  const Eigen::Matrix3d want = information(0.9, 0.5, 1.0);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      INFO("information[" << i << "][" << j << "]");
      CHECK(s["information"]["matrix"][i][j].get<double>() ==
            Approx(want(i, j)).epsilon(1e-4).margin(1e-3));
    }
  // optimize: the standard errors at the MLE, sqrt of the diagonal of the inverse information.
  const nlohmann::json o = nlohmann::json::parse(
      run_ok({exe, "optimize", "--data", sim, "--json", "--fix", "m0", "--fix", "s0"}).out);
  const Eigen::Matrix3d cov =
      information(o["params"]["a"].get<double>(), o["params"]["q"].get<double>(),
                  o["params"]["r"].get<double>())
          .inverse();
  const std::array<const char*, 3> names = {"a", "q", "r"};
  for (int i = 0; i < 3; ++i) {
    INFO(names[i]);
    CHECK(o["standard_errors"][names[i]].get<double>() ==
          Approx(std::sqrt(cov(i, i))).epsilon(1e-4));
  }
  CHECK(o["standard_errors"].size() == 3); // the learned parameters only
  // A particle smoother's score has no exact information.
  const ProcessResult p =
      run_process({exe, "score", "--data", sim, "--information", "--method", "paris", "--json"});
  CHECK(p.exit_code == 1);
  CHECK(p.err.find("needs an exact score") != std::string::npos);
}

TEST_CASE("optimize --method adam: the particle score's averaged iterates reach the exact MLE",
          "[optimize]") {
  const std::string& exe = example_exe("lgssm1");
  const std::string sim = scratch_path("adam-lgssm1.csv"), path = scratch_path("adam-path.csv");
  run_ok({exe, "simulate", "--T", "500", "--seed", "5", "--param", "a=0.8", "--param", "q=0.5",
          "--param", "r=1", "--out", sim});
  const std::vector<std::string> fix = {"--fix", "m0", "--fix", "s0"};
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.end(), fix.begin(), fix.end());
    return nlohmann::json::parse(run_ok(args).out);
  };
  const nlohmann::json exact = with({exe, "optimize", "--data", sim, "--json"});
  REQUIRE(exact["method"] == "lbfgs");
  const nlohmann::json j =
      with({exe, "optimize", "--method", "adam", "--data", sim, "--json", "--particles", "500",
            "--param", "a=0.5", "--param", "q=1", "--param", "r=0.5", "--out", path});
  CHECK(j["method"] == "adam");
  CHECK(j["converged"] == true);
  CHECK(j["iterations"] == 200);
  // The exact log-likelihood (a Kalman filter written in the tests) at the averaged iterate is
  // within 0.1 nat of its maximum: the estimate is a small fraction of a standard error from the
  // MLE (a whole standard error in every direction would cost about 1.5 nats here; 0.01 is
  // typical).
  const Table data = read_table(sim);
  auto loglik = [&](const nlohmann::json& params) {
    Lgssm1 m;
    m.a = params["a"].get<double>();
    m.q = params["q"].get<double>();
    m.r = params["r"].get<double>();
    m.m0 = 0;
    m.s0 = 1;
    return kalman_filter(m.model(), observations(data, {"y"})).log_likelihood;
  };
  const double at_mle = loglik(exact["params"]), at_adam = loglik(j["params"]);
  INFO("exact MLE " << exact["params"].dump() << " (" << at_mle << "), adam " << j["params"].dump()
                    << " (" << at_adam << ")");
  CHECK(at_mle == Approx(exact["log_likelihood"].get<double>()).epsilon(1e-9));
  CHECK(at_adam <= at_mle + 1e-9);
  CHECK(at_adam > at_mle - 0.1);
  // The reported log-likelihood is the mean of 4 particle filter estimates there: within 4 of
  // their standard errors, plus the log of an unbiased estimate's downward bias (about half the
  // variance of one estimate, 4 se^2 / 2).
  const double ll_se = j["log_likelihood_se"].get<double>();
  CHECK(ll_se > 0);
  CHECK(std::abs(j["log_likelihood"].get<double>() - at_adam) < 4 * ll_se + 2 * ll_se * ll_se);
  // The path: one row per Adam step, from the start.
  const Table t = read_table(path);
  REQUIRE(t.rows.size() == 200);
  CHECK(t.column("a").front() == 0.5);
  // Ten steps from far away: the gradient has not settled, and the verdict says so.
  const nlohmann::json early =
      with({exe, "optimize", "--method", "adam", "--data", sim, "--json", "--particles", "200",
            "--param", "a=0.1", "--param", "q=2", "--param", "r=0.2", "--max-iterations", "10"});
  CHECK(early["converged"] == false);
  CHECK(early["message"].get<std::string>().find("still away from 0") != std::string::npos);
}

TEST_CASE("optimize --map with a hierarchical prior: mu ~ normal(0, tau)", "[optimize]") {
  // y[t] = x[t] + noise with x[t] ~ N(mu, 1) independent: y[t] ~ N(mu, 2). The prior of mu reads
  // tau, whose own prior is half_normal(1).
  const std::string& exe = model_exe("hierarchical_prior", R"(
model hierarchical_prior {
  param tau ~ half_normal(1) = 0.7;
  param mu ~ normal(0, tau) = 0.7;
  state x : real;
  obs y : real;
  x[0] ~ normal(mu, 1);
  x[t] ~ normal(mu, 1);
  y[t] ~ normal(x[t], 1);
}
)");
  const std::string data = scratch_path("hierarchical-prior.csv");
  run_ok({exe, "simulate", "--T", "40", "--seed", "3", "--param", "mu=0.8", "--out", data});
  const std::vector<double> y = read_table(data).column("y");
  double sum = 0;
  for (double v : y)
    sum += v;
  const double T = static_cast<double>(y.size());
  // With tau fixed, the posterior of mu is Gaussian: its mode is (sum y / 2) / (T / 2 + 1/tau^2).
  for (const double tau : {0.3, 2.0}) {
    INFO("tau " << tau);
    const nlohmann::json j =
        nlohmann::json::parse(run_ok({exe, "optimize", "--map", "--json", "--data", data, "--fix",
                                      "tau", "--param", fmt::format("tau={}", tau)})
                                  .out);
    CHECK(j["params"]["mu"].get<double>() ==
          Approx((sum / 2) / (T / 2 + 1 / (tau * tau))).epsilon(1e-6));
  }
  // Both learned, from near it: the local mode (the log posterior also rises without bound toward
  // mu = tau = 0, the funnel of hierarchical models) solves d/dmu = (sum y - T mu) / 2 - mu / tau^2
  // = 0 and d/dtau = -1/tau + mu^2/tau^3 - tau = 0 (half_normal(1)), i.e. tau^2 = (sqrt(1 + 4 mu^2)
  // - 1) / 2.
  const nlohmann::json j =
      nlohmann::json::parse(run_ok({exe, "optimize", "--map", "--json", "--data", data}).out);
  const double mu = j["params"]["mu"].get<double>(), tau = j["params"]["tau"].get<double>();
  INFO(j.dump());
  CHECK(tau * tau == Approx((std::sqrt(1 + 4 * mu * mu) - 1) / 2).epsilon(1e-5));
  CHECK((sum - T * mu) / 2 - mu / (tau * tau) == Approx(0).margin(1e-5));
  CHECK(mu > 0.1); // not the funnel
}
