// End-to-end tests of plate models run as their items (passes/plate_items.cpp) and of
// `optimize --method em`: the Gaussian mixture's EM path equals the closed-form EM written here
// (same start, with and without --fix) and never decreases; a two-state HMM's EM (Baum-Welch,
// which needs the pairwise marginals; its rates closed-form, its stay probabilities numerical)
// equals Baum-Welch written here; EM and L-BFGS reach the same maximum, with and without --map;
// the mixture's exact log-likelihood equals a sum over items written here. Linear-Gaussian EM
// (Shumway & Stoffer): the local level model's path equals the scalar EM written here and
// reaches the Nile MLE; a 2-D model's matrices follow the EM step computed here from the
// brute-force smoothing moments. Monte Carlo EM (a particle E-step) averages what exact EM's path
// averages over the same iterations.
#include "kalman.h"
#include "lgssm_support.h"
#include "support.h"

#include <Eigen/LU>
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <map>
#include <numbers>
#include <string>
#include <vector>

using namespace e2e;

namespace {

double normal_logpdf_sd(double x, double mu, double sigma) {
  const double z = (x - mu) / sigma;
  return -0.5 * z * z - std::log(sigma) - 0.5 * std::log(2 * std::numbers::pi);
}

struct Mixture {
  std::array<double, 2> w, mu;
  double sigma;
};

// log p(y) of the two-component mixture, summed over the items.
double mixture_loglik(const std::vector<double>& y, const Mixture& m) {
  double ll = 0;
  for (double x : y) {
    const double a = std::log(m.w[0]) + normal_logpdf_sd(x, m.mu[0], m.sigma),
                 b = std::log(m.w[1]) + normal_logpdf_sd(x, m.mu[1], m.sigma);
    const double top = std::max(a, b);
    ll += top + std::log(std::exp(a - top) + std::exp(b - top));
  }
  return ll;
}

// One EM step with the closed-form M-step of a mixture of normals with a common sd (kept at its
// value with fix_sigma).
Mixture mixture_em_step(const std::vector<double>& y, const Mixture& m, bool fix_sigma = false) {
  std::array<double, 2> n{}, s{};
  std::vector<double> r(y.size());
  for (size_t i = 0; i < y.size(); ++i) {
    const double a = std::log(m.w[0]) + normal_logpdf_sd(y[i], m.mu[0], m.sigma),
                 b = std::log(m.w[1]) + normal_logpdf_sd(y[i], m.mu[1], m.sigma);
    r[i] = 1 / (1 + std::exp(b - a)); // responsibility of component 0
    n[0] += r[i];
    n[1] += 1 - r[i];
    s[0] += r[i] * y[i];
    s[1] += (1 - r[i]) * y[i];
  }
  Mixture next;
  const double N = static_cast<double>(y.size());
  next.w = {n[0] / N, n[1] / N};
  next.mu = {s[0] / n[0], s[1] / n[1]};
  double ss = 0;
  for (size_t i = 0; i < y.size(); ++i)
    ss += r[i] * std::pow(y[i] - next.mu[0], 2) + (1 - r[i]) * std::pow(y[i] - next.mu[1], 2);
  next.sigma = fix_sigma ? m.sigma : std::sqrt(ss / N);
  return next;
}

// A two-state HMM of counts with a uniform first state: stay probabilities and Poisson rates.
const char* kHmm = R"(
model hmm_em {
  param stay0 : real(0, 1) = 0.7;
  param stay1 : real(0, 1) = 0.6;
  param rate : vector[2] = [1, 4];
  state z : int[0..1];
  obs y : int;
  z[0] ~ categorical([0.5, 0.5]);
  z[t] ~ bernoulli(z[t-1] == 0 ? 1 - stay0 : stay1);
  y[t] ~ poisson(rate[z[t]]);
}
)";

struct Hmm {
  double stay0, stay1;
  std::array<double, 2> rate;
};

double poisson_logpmf(double y, double rate) {
  return y * std::log(rate) - rate - std::lgamma(y + 1);
}

// Baum-Welch written here: the log-likelihood at `h` and, in `next`, the closed-form update.
double baum_welch_step(const std::vector<double>& y, const Hmm& h, Hmm& next) {
  const size_t T = y.size();
  const double A[2][2] = {{h.stay0, 1 - h.stay0}, {1 - h.stay1, h.stay1}};
  std::vector<std::array<double, 2>> alpha(T), beta(T), e(T);
  std::vector<double> c(T);
  double ll = 0;
  for (size_t t = 0; t < T; ++t) {
    for (int k = 0; k < 2; ++k)
      e[t][k] = std::exp(poisson_logpmf(y[t], h.rate[k]));
    for (int k = 0; k < 2; ++k)
      alpha[t][k] =
          (t == 0 ? 0.5 : alpha[t - 1][0] * A[0][k] + alpha[t - 1][1] * A[1][k]) * e[t][k];
    c[t] = alpha[t][0] + alpha[t][1];
    alpha[t][0] /= c[t];
    alpha[t][1] /= c[t];
    ll += std::log(c[t]);
  }
  beta[T - 1] = {1, 1};
  for (size_t t = T - 1; t-- > 0;)
    for (int i = 0; i < 2; ++i)
      beta[t][i] =
          (A[i][0] * e[t + 1][0] * beta[t + 1][0] + A[i][1] * e[t + 1][1] * beta[t + 1][1]) /
          c[t + 1];
  double xi[2][2] = {}, g_rate[2] = {}, gy[2] = {};
  for (size_t t = 0; t < T; ++t) {
    for (int k = 0; k < 2; ++k) {
      const double g = alpha[t][k] * beta[t][k];
      g_rate[k] += g;
      gy[k] += g * y[t];
    }
    if (t > 0)
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j)
          xi[i][j] += alpha[t - 1][i] * A[i][j] * e[t][j] * beta[t][j] / c[t];
  }
  next.stay0 = xi[0][0] / (xi[0][0] + xi[0][1]);
  next.stay1 = xi[1][1] / (xi[1][0] + xi[1][1]);
  next.rate = {gy[0] / g_rate[0], gy[1] / g_rate[1]};
  return ll;
}

nlohmann::json optimize(const std::string& exe, std::vector<std::string> args) {
  std::vector<std::string> argv = {exe, "optimize", "--json"};
  argv.insert(argv.end(), args.begin(), args.end());
  return nlohmann::json::parse(run_ok(argv).out);
}

} // namespace

TEST_CASE("a plate model runs as its items: the mixture's exact log-likelihood", "[em][plate]") {
  const std::string& exe = example_exe("gmm");
  const std::string data = example_path("data/nile.csv");
  const std::vector<double> y = read_table(data).column("y");
  const nlohmann::json f =
      nlohmann::json::parse(run_ok({exe, "filter", "--data", data, "--json"}).out);
  CHECK(f["method"] == "forward");
  CHECK(f["log_likelihood"].get<double>() ==
        Approx(mixture_loglik(y, {{0.5, 0.5}, {1200, 700}, 200})).epsilon(1e-12));
  // Each item's posterior: smooth's mean of z is the responsibility of component 1.
  const std::string smoothed = scratch_path("gmm-smooth.csv");
  run_ok({exe, "smooth", "--data", data, "--out", smoothed});
  const Table s = read_table(smoothed);
  REQUIRE(s.header.front() == "n"); // items, not times
  const std::vector<double> mean = s.column("mean_z");
  REQUIRE(mean.size() == y.size());
  for (size_t i = 0; i < y.size(); i += 17) {
    const double a = std::log(0.5) + normal_logpdf_sd(y[i], 1200, 200),
                 b = std::log(0.5) + normal_logpdf_sd(y[i], 700, 200);
    CHECK(mean[i] == Approx(1 / (1 + std::exp(a - b))).epsilon(1e-10));
  }
}

TEST_CASE("optimize --method em: a Gaussian mixture's path is closed-form EM's", "[em][plate]") {
  const std::string& exe = example_exe("gmm");
  const std::string data = example_path("data/nile.csv");
  const std::vector<double> y = read_table(data).column("y");
  const std::string path = scratch_path("gmm-em-path.csv");
  // Twelve iterations exactly: a tolerance of 0 stops only on a decrease.
  const nlohmann::json j = optimize(exe, {"--method", "em", "--data", data, "--max-iterations",
                                          "12", "--tolerance", "0", "--out", path});
  CHECK(j["method"] == "em");
  for (const char* p : {"w", "mu", "sigma"})
    CHECK(j["m_step"][p].get<std::string>().starts_with("closed form"));
  const Table t = read_table(path);
  REQUIRE(t.rows.size() == 13);
  const std::vector<double> ll = t.column("log_likelihood"), w0 = t.column("w[0]"),
                            mu1 = t.column("mu[1]"), sigma = t.column("sigma");
  Mixture m{{0.5, 0.5}, {1200, 700}, 200};
  for (size_t it = 0; it < ll.size(); ++it) {
    INFO("iteration " << it);
    CHECK(std::abs(ll[it] - mixture_loglik(y, m)) < 1e-6);
    CHECK(w0[it] == Approx(m.w[0]).epsilon(1e-6));
    CHECK(mu1[it] == Approx(m.mu[1]).epsilon(1e-6));
    CHECK(sigma[it] == Approx(m.sigma).epsilon(1e-6));
    if (it > 0)
      CHECK(ll[it] >= ll[it - 1]);
    m = mixture_em_step(y, m);
  }
  // With sigma fixed, the other updates are the same ratios at that sigma.
  const std::string fixed_path = scratch_path("gmm-em-fixed-path.csv");
  const nlohmann::json fixed =
      optimize(exe, {"--method", "em", "--data", data, "--max-iterations", "6", "--tolerance", "0",
                     "--fix", "sigma", "--param", "sigma=150", "--out", fixed_path});
  CHECK(fixed["m_step"].count("sigma") == 0);
  const Table ft = read_table(fixed_path);
  REQUIRE(ft.rows.size() == 7);
  Mixture f{{0.5, 0.5}, {1200, 700}, 150};
  for (size_t it = 0; it < ft.rows.size(); ++it) {
    INFO("iteration " << it << " with sigma fixed");
    CHECK(ft.column("log_likelihood")[it] == Approx(mixture_loglik(y, f)).epsilon(1e-10));
    CHECK(ft.column("mu[0]")[it] == Approx(f.mu[0]).epsilon(1e-10));
    CHECK(ft.column("w[1]")[it] == Approx(f.w[1]).epsilon(1e-10));
    f = mixture_em_step(y, f, true);
  }
  CHECK(fixed["params"]["sigma"].get<double>() == 150);

  // To convergence: the maximum that L-BFGS finds on the exact likelihood.
  const nlohmann::json em = optimize(
      exe, {"--method", "em", "--data", data, "--tolerance", "1e-12", "--max-iterations", "1000"});
  const nlohmann::json lbfgs = optimize(exe, {"--method", "lbfgs", "--data", data});
  CHECK(em["converged"] == true);
  CHECK(std::abs(em["log_likelihood"].get<double>() - lbfgs["log_likelihood"].get<double>()) <
        1e-6);
  CHECK(em["params"]["sigma"].get<double>() ==
        Approx(lbfgs["params"]["sigma"].get<double>()).epsilon(1e-4));
  // With --map both maximise the same log posterior.
  const nlohmann::json em_map = optimize(exe, {"--method", "em", "--data", data, "--map",
                                               "--tolerance", "1e-12", "--max-iterations", "1000"});
  const nlohmann::json lbfgs_map = optimize(exe, {"--method", "lbfgs", "--data", data, "--map"});
  CHECK(std::abs(em_map["log_posterior"].get<double>() - lbfgs_map["log_posterior"].get<double>()) <
        1e-6);
  CHECK(em_map["log_posterior"].get<double>() < em["log_likelihood"].get<double>());
  // Every parameter has a prior: with --map none has a closed-form update.
  CHECK(em_map["m_step"]["mu"].get<std::string>().find("--map: its prior") != std::string::npos);
}

TEST_CASE("optimize --method em on an HMM is Baum-Welch", "[em]") {
  const std::string& exe = model_exe("hmm_em", kHmm);
  const std::string data = scratch_path("hmm-em.csv");
  run_ok({exe, "simulate", "--T", "300", "--seed", "3", "--param", "stay0=0.95", "--param",
          "stay1=0.9", "--param", "rate=[1,6]", "--out", data});
  const std::vector<double> y = read_table(data).column("y");
  const std::string path = scratch_path("hmm-em-path.csv");
  const nlohmann::json j = optimize(exe, {"--method", "em", "--data", data, "--max-iterations",
                                          "15", "--tolerance", "0", "--out", path});
  // The rates are Poisson means (closed form); the stay probabilities enter through a
  // conditional, so their M-step is numerical.
  INFO(j["m_step"].dump());
  CHECK(j["m_step"]["rate"].get<std::string>().starts_with("closed form: y[t] ~ poisson"));
  CHECK(j["m_step"]["stay0"].get<std::string>().starts_with("numerical"));
  CHECK(j["m_step"]["stay1"].get<std::string>().starts_with("numerical"));
  const Table t = read_table(path);
  // Up to 15 iterations after the start; with --tolerance 0 EM also stops at the first iteration
  // that does not raise the log-likelihood, which here happens at rounding level (~1e-12) after
  // a dozen iterations.
  REQUIRE(t.rows.size() >= 10);
  REQUIRE(t.rows.size() <= 16);
  const std::vector<double> ll = t.column("log_likelihood"), stay0 = t.column("stay0"),
                            stay1 = t.column("stay1"), rate1 = t.column("rate[1]");
  Hmm h{0.7, 0.6, {1, 4}};
  for (size_t it = 0; it < ll.size(); ++it) {
    INFO("iteration " << it);
    Hmm next{};
    CHECK(std::abs(ll[it] - baum_welch_step(y, h, next)) < 1e-6);
    CHECK(stay0[it] == Approx(h.stay0).epsilon(1e-6));
    CHECK(stay1[it] == Approx(h.stay1).epsilon(1e-6));
    CHECK(rate1[it] == Approx(h.rate[1]).epsilon(1e-6));
    if (it > 0) // never lower, up to rounding (the step EM stops at)
      CHECK(ll[it] >= ll[it - 1] - 1e-9 * std::abs(ll[it - 1]));
    h = next;
  }
}

TEST_CASE("optimize --method em: starts, and the models it refuses", "[em]") {
  const std::string& exe = example_exe("gmm");
  const std::string data = example_path("data/nile.csv");
  const nlohmann::json j =
      optimize(exe, {"--method", "em", "--data", data, "--inits", "3", "--seed", "2"});
  REQUIRE(j["starts"].size() == 3);
  double best = -INFINITY;
  for (const nlohmann::json& s : j["starts"]) {
    CHECK(s["log_likelihood"].get<double>() >= s["initial_objective"].get<double>());
    best = std::max(best, s["log_likelihood"].get<double>());
  }
  CHECK(j["log_likelihood"].get<double>() == best);

  const std::string& sunspots = example_exe("sunspots"); // neither finite-state nor LG
  const ProcessResult r = run_process({sunspots, "optimize", "--method", "em", "--e-step", "exact",
                                       "--data", example_path("data/sunspots.csv")});
  INFO(r.describe());
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("neither finite-state (forward-backward) nor linear-Gaussian") !=
        std::string::npos);
  CHECK(r.err.find("--e-step ffbsi runs Monte Carlo EM") != std::string::npos);
}

namespace {

// One EM step of the local level model written here (Shumway & Stoffer 1982): the Kalman filter,
// the RTS smoother with its lag-one covariances, then the two variances in closed form. Returns
// the log-likelihood at (var_eps, var_eta).
double local_level_em_step(const std::vector<double>& y, double& var_eps, double& var_eta) {
  const size_t T = y.size();
  std::vector<double> m(T), P(T), mp(T), Pp(T);
  double ll = 0;
  for (size_t t = 0; t < T; ++t) {
    mp[t] = t == 0 ? 0 : m[t - 1];
    Pp[t] = t == 0 ? 1e10 : P[t - 1] + var_eta;
    const double S = Pp[t] + var_eps, v = y[t] - mp[t];
    ll += -0.5 * (std::log(2 * std::numbers::pi * S) + v * v / S);
    m[t] = mp[t] + Pp[t] / S * v;
    P[t] = Pp[t] - Pp[t] * Pp[t] / S;
  }
  std::vector<double> ms(m), Ps(P), lag(T); // lag[t] = Cov(x_t, x_{t-1} | y)
  for (size_t t = T - 1; t-- > 0;) {
    const double J = P[t] / Pp[t + 1];
    ms[t] = m[t] + J * (ms[t + 1] - mp[t + 1]);
    Ps[t] = P[t] + J * J * (Ps[t + 1] - Pp[t + 1]);
    lag[t + 1] = J * Ps[t + 1];
  }
  double eps = 0, eta = 0;
  for (size_t t = 0; t < T; ++t) {
    eps += std::pow(y[t] - ms[t], 2) + Ps[t];
    if (t > 0)
      eta += std::pow(ms[t] - ms[t - 1], 2) + Ps[t] + Ps[t - 1] - 2 * lag[t];
  }
  var_eps = eps / static_cast<double>(T);
  var_eta = eta / static_cast<double>(T - 1);
  return ll;
}

} // namespace

TEST_CASE("optimize --method em on a linear-Gaussian model: Shumway-Stoffer to the Nile MLE",
          "[em]") {
  const std::string& exe = model_exe("nile_diffuse", kNileDiffuse);
  const std::string data = example_path("data/nile.csv");
  const std::vector<double> y = read_table(data).column("y");
  const std::string path = scratch_path("nile-em-path.csv");
  const nlohmann::json j = optimize(exe, {"--method", "em", "--data", data, "--max-iterations",
                                          "10", "--tolerance", "0", "--out", path});
  INFO(j.dump());
  CHECK(j["m_step"]["sigma_eps"].get<std::string>().starts_with("closed form: y[t] ~ normal"));
  CHECK(j["m_step"]["sigma_eta"].get<std::string>().starts_with("closed form: level[t] ~ normal"));
  const Table t = read_table(path);
  REQUIRE(t.rows.size() == 11);
  double var_eps = 100 * 100, var_eta = 20 * 20;
  const std::vector<double> ll = t.column("log_likelihood"), eps = t.column("sigma_eps"),
                            eta = t.column("sigma_eta");
  for (size_t it = 0; it < t.rows.size(); ++it) {
    INFO("iteration " << it);
    CHECK(eps[it] == Approx(std::sqrt(var_eps)).epsilon(1e-8));
    CHECK(eta[it] == Approx(std::sqrt(var_eta)).epsilon(1e-8));
    CHECK(ll[it] == Approx(local_level_em_step(y, var_eps, var_eta)).epsilon(1e-10));
    if (it > 0)
      CHECK(ll[it] >= ll[it - 1]);
  }
  // To convergence: Durbin & Koopman's MLE (as test_optimize.cpp's L-BFGS finds it).
  const nlohmann::json em = optimize(
      exe, {"--method", "em", "--data", data, "--tolerance", "1e-14", "--max-iterations", "5000"});
  CHECK(em["converged"] == true);
  CHECK(std::abs(std::pow(em["params"]["sigma_eps"].get<double>(), 2) / 15099 - 1) < 2e-3);
  CHECK(std::abs(std::pow(em["params"]["sigma_eta"].get<double>(), 2) / 1469.1 - 1) < 2e-3);
}

TEST_CASE("optimize --method em: a 2-D linear-Gaussian model's matrices, step by step", "[em]") {
  const std::string& exe = model_exe("lg2_em", R"(
model lg2_em {
  param A : matrix[2, 2] = [[0.5, 0.1], [0.0, 0.6]];
  param Q : cov_matrix[2] = [[1.0, 0.2], [0.2, 0.8]];
  param B : matrix[2, 2] = [[1.0, 0.0], [0.3, 1.0]];
  param R : cov_matrix[2] = [[0.5, 0.0], [0.0, 0.4]];
  state x : vector[2];
  obs y : vector[2];
  x[0] ~ mvnormal(zeros(2), Q);
  x[t] ~ mvnormal(A * x[t-1], Q);
  y[t] ~ mvnormal(B * x[t], R);
}
)");
  const std::string data = scratch_path("lg2-em.csv");
  run_ok({exe, "simulate", "--T", "40", "--seed", "5", "--param", "A=[[0.8,0],[0.2,0.7]]", "--out",
          data});
  const Table d = read_table(data);
  std::vector<Eigen::VectorXd> ys;
  for (size_t t = 0; t < d.rows.size(); ++t)
    ys.push_back(Eigen::Vector2d(d.column("y[0]")[t], d.column("y[1]")[t]));
  const std::string path = scratch_path("lg2-em-path.csv");
  const nlohmann::json j = optimize(exe, {"--method", "em", "--data", data, "--max-iterations", "4",
                                          "--tolerance", "0", "--out", path});
  for (const char* p : {"A", "Q", "B", "R"})
    CHECK(j["m_step"][p].get<std::string>().starts_with("closed form"));
  const Table t = read_table(path);
  REQUIRE(t.rows.size() == 5);
  LinearGaussianModel m;
  m.m0 = Eigen::Vector2d::Zero();
  m.A = (Eigen::Matrix2d() << 0.5, 0.1, 0.0, 0.6).finished();
  m.Q = (Eigen::Matrix2d() << 1.0, 0.2, 0.2, 0.8).finished();
  m.B = (Eigen::Matrix2d() << 1.0, 0.0, 0.3, 1.0).finished();
  m.R = (Eigen::Matrix2d() << 0.5, 0.0, 0.0, 0.4).finished();
  const int T = static_cast<int>(ys.size());
  for (size_t it = 0; it < t.rows.size(); ++it) {
    INFO("iteration " << it);
    m.P0 = m.Q;
    const SmoothingReference s = brute_force_smoother(m, ys);
    CHECK(t.column("log_likelihood")[it] == Approx(s.log_likelihood).epsilon(1e-9));
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 2; ++c) {
        const std::string at = fmt::format("[{},{}]", r, c);
        CHECK(t.column("A" + at)[it] == Approx(m.A(r, c)).margin(1e-8));
        CHECK(t.column("B" + at)[it] == Approx(m.B(r, c)).margin(1e-8));
        CHECK(t.column("Q" + at)[it] == Approx(m.Q(r, c)).margin(1e-8));
        CHECK(t.column("R" + at)[it] == Approx(m.R(r, c)).margin(1e-8));
      }
    if (it > 0)
      CHECK(t.column("log_likelihood")[it] >= t.column("log_likelihood")[it - 1]);
    // The EM step from the smoothing moments E[x_t x_s'] = Cov + mean mean'.
    auto second = [&](int a, int b) {
      return Eigen::Matrix2d(s.cov.block(2 * a, 2 * b, 2, 2) +
                             s.mean.segment(2 * a, 2) * s.mean.segment(2 * b, 2).transpose());
    };
    Eigen::Matrix2d S10 = Eigen::Matrix2d::Zero(), S00 = Eigen::Matrix2d::Zero(),
                    S11 = Eigen::Matrix2d::Zero(), Sxx = Eigen::Matrix2d::Zero(),
                    Syx = Eigen::Matrix2d::Zero(), Syy = Eigen::Matrix2d::Zero();
    for (int k = 0; k < T; ++k) {
      Sxx += second(k, k);
      Syx += ys[k] * s.mean.segment(2 * k, 2).transpose();
      Syy += ys[k] * ys[k].transpose();
      if (k > 0) {
        S10 += second(k, k - 1);
        S00 += second(k - 1, k - 1);
        S11 += second(k, k);
      }
    }
    const Eigen::Matrix2d A = S10 * S00.inverse(), B = Syx * Sxx.inverse();
    m.Q =
        (second(0, 0) + S11 - A * S10.transpose() - S10 * A.transpose() + A * S00 * A.transpose()) /
        T;
    m.R = (Syy - B * Syx.transpose() - Syx * B.transpose() + B * Sxx * B.transpose()) / T;
    m.A = A;
    m.B = B;
  }
}

TEST_CASE("optimize --method em: an intercept and a noise sd shared by two observations", "[em]") {
  // x[t]'s mean is a constant matrix times x[t-1] plus the learned drift b (the features x[t-1]
  // and 1); r is the sd of both observations, pooled. EM's fixed point is L-BFGS's maximum.
  const std::string& exe = model_exe("lg_drift", R"(
model lg_drift {
  param b : vector[2] = [0, 0];
  param Q : cov_matrix[2] = [[1, 0], [0, 1]];
  param r : real(0, inf) = 1;
  state x : vector[2];
  obs y1 : real;
  obs y2 : real;
  x[0] ~ mvnormal(zeros(2), eye(2));
  x[t] ~ mvnormal([[0.8, 0.1], [0, 0.5]] * x[t-1] + b, Q);
  y1[t] ~ normal(x[t][0], r);
  y2[t] ~ normal(x[t][1], r);
}
)");
  const std::string data = scratch_path("lg-drift.csv");
  run_ok({exe, "simulate", "--T", "500", "--seed", "4", "--param", "b=[1,-0.5]", "--param",
          "Q=[[0.5,0.2],[0.2,0.3]]", "--param", "r=0.7", "--out", data});
  const nlohmann::json em = optimize(
      exe, {"--method", "em", "--data", data, "--tolerance", "1e-14", "--max-iterations", "5000"});
  const nlohmann::json lbfgs = optimize(exe, {"--method", "lbfgs", "--data", data});
  INFO(em.dump() << "\n" << lbfgs.dump());
  CHECK(em["converged"] == true);
  CHECK(em["m_step"]["r"] == "closed form: y1[t] ~ normal at 11:3; y2[t] ~ normal at 12:3");
  CHECK(em["m_step"]["b"].get<std::string>().starts_with("closed form: x[t] ~ mvnormal"));
  CHECK(std::abs(em["log_likelihood"].get<double>() - lbfgs["log_likelihood"].get<double>()) <
        1e-7);
  CHECK(em["params"]["r"].get<double>() ==
        Approx(lbfgs["params"]["r"].get<double>()).epsilon(1e-4));
  for (int i = 0; i < 2; ++i) {
    CHECK(em["params"]["b"][i].get<double>() ==
          Approx(lbfgs["params"]["b"][i].get<double>()).epsilon(1e-4));
    CHECK(em["params"]["Q"][i][1].get<double>() ==
          Approx(lbfgs["params"]["Q"][i][1].get<double>()).epsilon(1e-4));
  }
}

TEST_CASE("optimize --method em: a lag of 2 (hidden copies), numerical M-steps with --map, and "
          "missing observations that another observation reads",
          "[em]") {
  // examples/yule.ssm reads x[t-2] through a hidden copy of x[t-1]: the cubature points must
  // hold the copy equal to its source, or its dirac density makes Q -inf (numerical M-steps).
  const std::string& exe = example_exe("yule");
  const std::string data = example_path("data/sunspots.csv");
  for (const bool map : {false, true}) {
    INFO("--map " << map);
    std::vector<std::string> args = {"--data", data};
    if (map)
      args.push_back("--map");
    std::vector<std::string> em_args = args;
    em_args.insert(em_args.end(),
                   {"--method", "em", "--tolerance", "1e-12", "--max-iterations", "3000"});
    const nlohmann::json em = optimize(exe, em_args);
    args.insert(args.end(), {"--method", "lbfgs"});
    const nlohmann::json lbfgs = optimize(exe, args);
    const char* objective = map ? "log_posterior" : "log_likelihood";
    CHECK(em["converged"] == true);
    CHECK(std::abs(em[objective].get<double>() - lbfgs[objective].get<double>()) < 1e-5);
    CHECK(em["m_step"]["phi2"].get<std::string>().starts_with(map ? "numerical" : "closed form"));
  }

  const std::string& reads = model_exe("em_obs_reads_obs", R"(
model em_obs_reads_obs {
  param s : real(0, inf) = 1;
  state x : real;
  obs y1 : real;
  obs y2 : real;
  x[0] ~ normal(0, 1);
  x[t] ~ normal(0.5 * x[t-1], 1);
  y1[t] ~ normal(x[t], s);
  y2[t] ~ normal(2 * y1[t], 1);
}
)");
  const std::string missing = scratch_path("em-obs-reads-obs.csv");
  write_file(missing, "t,y1,y2\n0,0.5,1.2\n1,,0.4\n2,-0.3,-0.5\n");
  const ProcessResult r = run_process({reads, "optimize", "--method", "em", "--data", missing});
  INFO(r.describe());
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("y1 is missing at step 1, and a relation reads it") != std::string::npos);
}

TEST_CASE("optimize --method em --map: a parameter that another's prior reads is numerical",
          "[em]") {
  // tau has no prior of its own, but mu's prior reads it: with --map that prior is part of
  // tau's M-step, which is then no longer the closed form of y2's sd.
  const std::string& exe = model_exe("em_prior_reads", R"(
model em_prior_reads {
  param tau : real(0, inf) = 1;
  param mu ~ normal(0, tau) = 0;
  state x : real;
  obs y1 : real;
  obs y2 : real;
  x[0] ~ normal(0, 1);
  x[t] ~ normal(0.5 * x[t-1], 1);
  y1[t] ~ normal(x[t] + mu, 1);
  y2[t] ~ normal(x[t], tau);
}
)");
  const std::string data = scratch_path("em-prior-reads.csv");
  run_ok({exe, "simulate", "--T", "60", "--seed", "2", "--param", "mu=0.5", "--param", "tau=0.7",
          "--out", data});
  const nlohmann::json plain = optimize(exe, {"--method", "em", "--data", data});
  CHECK(plain["m_step"]["tau"].get<std::string>().starts_with("closed form"));
  const nlohmann::json em = optimize(exe, {"--method", "em", "--map", "--data", data, "--tolerance",
                                           "1e-12", "--max-iterations", "2000"});
  const nlohmann::json lbfgs = optimize(exe, {"--method", "lbfgs", "--map", "--data", data});
  INFO(em.dump());
  CHECK(em["m_step"]["tau"] == "numerical (L-BFGS): --map: another parameter's prior reads it");
  CHECK(std::abs(em["log_posterior"].get<double>() - lbfgs["log_posterior"].get<double>()) < 1e-6);
}

TEST_CASE("optimize --method em without a score: every M-step in closed form", "[em]") {
  // The 12-D model's score terms (6,277 operations, with mvnormal's closed-form gradient) are
  // past the compiled size, so it has no score: L-BFGS and the numerical M-step cannot run, but
  // EM's closed forms can, and its log-likelihood rises.
  const std::string& exe = model_exe("lg12_em", R"(
model lg12_em {
  const d = 12;
  param A : matrix[d, d] = 0.5 * eye(d);
  param Q : cov_matrix[d] = eye(d);
  param B : matrix[d, d] = eye(d);
  param R : cov_matrix[d] = eye(d);
  state x : vector[d];
  obs   y : vector[d];
  x[0] ~ mvnormal(zeros(d), Q);
  x[t] ~ mvnormal(A * x[t-1], Q);
  y[t] ~ mvnormal(B * x[t], R);
}
)");
  const std::string data = scratch_path("lg12-em.csv");
  run_ok({exe, "simulate", "--T", "200", "--seed", "1", "--out", data});
  const std::string path = scratch_path("lg12-em-path.csv");
  const nlohmann::json j = optimize(exe, {"--method", "em", "--data", data, "--max-iterations", "8",
                                          "--tolerance", "0", "--out", path});
  for (const char* p : {"A", "Q", "B", "R"})
    CHECK(j["m_step"][p].get<std::string>().starts_with("closed form"));
  CHECK(j["standard_errors"].is_null());
  const std::vector<double> ll = read_table(path).column("log_likelihood");
  REQUIRE(ll.size() == 9);
  for (size_t it = 1; it < ll.size(); ++it)
    CHECK(ll[it] >= ll[it - 1] - 1e-9 * std::abs(ll[it - 1]));
  CHECK(ll.back() > ll.front() + 10);
  const ProcessResult r =
      run_process({exe, "optimize", "--method", "lbfgs", "--data", data}); // needs the score
  CHECK(r.exit_code != 0);
}

namespace {

// A nonlinear model that reads x[t-2]: the state carries a copy of x[t-1], whose relation has no
// density, so no backward draw (and no particle E-step) applies.
const char* kLagTwoNonlinear = R"(
model lag_two_nonlinear {
  param a : real = 0.5;
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ normal(a * x[t-1] + 0.2 * sin(x[t-2]), 1);
  y[t] ~ normal(x[t], 1);
}
)";

// Per parameter: the log of its value averaged over rows [from, to) of an optimize path, then
// exponentiated (the average Monte Carlo EM takes, on the unconstrained scale of a sd).
double log_scale_average(const Table& path, const std::string& name, size_t from, size_t to) {
  const std::vector<double> v = path.column(name);
  double sum = 0;
  for (size_t i = from; i < to; ++i)
    sum += std::log(v[i]);
  return std::exp(sum / static_cast<double>(to - from));
}

} // namespace

// Monte Carlo EM (a particle filter and FFBSi trajectories at each iteration, the second half of
// the iterates averaged) against exact EM from the same start: with a fixed Monte Carlo size its
// iterates follow exact EM's path up to Monte Carlo noise (and a bias of order 1/N), so its
// average over the second half is exact EM's average over the same iterations, within the
// standard error that replicates with other seeds give.
TEST_CASE("optimize --method em --e-step ffbsi or paris: Monte Carlo EM follows exact EM on the "
          "Nile local level model",
          "[em]") {
  // paris's trajectories are picked among its backward draws (two per particle).
  const std::string e_step = GENERATE(as<std::string>{}, "ffbsi", "paris");
  const std::string& exe = example_exe("nile");
  const std::string data = example_path("data/nile.csv");
  const std::vector<std::string> start = {"--param", "sigma_eps=115", "--param", "sigma_eta=45"};
  const size_t iterations = 60;
  const std::string path = scratch_path("nile-exact-em-path.csv");
  std::vector<std::string> exact_args = {
      "--method",    "em", "--data", data, "--max-iterations", std::to_string(iterations),
      "--tolerance", "0",  "--out",  path};
  exact_args.insert(exact_args.end(), start.begin(), start.end());
  optimize(exe, exact_args);
  const Table exact = read_table(path); // rows: the E-step's parameters at iterations 0..60
  REQUIRE(exact.rows.size() == iterations + 1);
  const std::vector<std::string> names = {"sigma_eps", "sigma_eta"};
  std::map<std::string, double> target;
  for (const std::string& name : names) // the E-steps of the second half: iterations 30..59
    target[name] = log_scale_average(exact, name, iterations / 2, iterations);
  // The particle smoother's bias, of order 1/N, measured on this model (docs/cli.md): about -1.9
  // on sigma_eta and +1.3 on sigma_eps at 125 particles; twice that, scaled to N, is allowed.
  const double particles = 1000;
  const std::map<std::string, double> bias = {{"sigma_eps", 2 * 1.3 * 125 / particles},
                                              {"sigma_eta", 2 * 1.9 * 125 / particles}};

  const int replicates = 6;
  std::map<std::string, std::vector<double>> estimates;
  for (int r = 0; r < replicates; ++r) {
    std::vector<std::string> args = {"--method",         "em",
                                     "--e-step",         e_step,
                                     "--data",           data,
                                     "--particles",      fmt::format("{}", particles),
                                     "--max-iterations", std::to_string(iterations),
                                     "--seed",           std::to_string(11 + r)};
    args.insert(args.end(), start.begin(), start.end());
    const nlohmann::json j = optimize(exe, args);
    INFO(j.dump());
    CHECK(j["e_step"] == e_step);
    CHECK(j["m_step"]["sigma_eta"].get<std::string>().starts_with("closed form"));
    CHECK(j["iterations"] == iterations);
    CHECK(std::isfinite(j["log_likelihood"].get<double>()));
    CHECK(j["log_likelihood_se"].get<double>() > 0);
    for (const std::string& name : names)
      estimates[name].push_back(j["params"][name].get<double>());
  }
  for (const std::string& name : names) {
    const std::vector<double>& v = estimates[name];
    double mean = 0, var = 0;
    for (double e : v)
      mean += e / replicates;
    for (double e : v)
      var += (e - mean) * (e - mean) / (replicates - 1);
    const double se = std::sqrt(var / replicates);
    INFO(e_step << ", " << name << ": Monte Carlo EM " << mean << " (se " << se << "), exact EM "
                << target[name]);
    CHECK(se > 0);
    CHECK(std::abs(mean - target[name]) < 4 * se + bias.at(name));
  }
}

TEST_CASE("optimize --method em --e-step ffbsi: the verdict, and what it refuses", "[em]") {
  const std::string& exe = example_exe("nile");
  const std::string data = example_path("data/nile.csv");
  // Twenty iterations from far away: EM is still climbing (about 0.97 per iteration here), and
  // the mean estimated score over the last ten says so.
  const nlohmann::json j = nlohmann::json::parse(
      run_process({exe, "optimize", "--json", "--method", "em", "--e-step", "ffbsi", "--data", data,
                   "--particles", "500", "--max-iterations", "20", "--param", "sigma_eps=80",
                   "--param", "sigma_eta=150"})
          .out);
  INFO(j.dump());
  CHECK(j["converged"] == false);
  CHECK(j["message"].get<std::string>().find("still climbing") != std::string::npos);

  const ProcessResult few = run_process({exe, "optimize", "--method", "em", "--e-step", "ffbsi",
                                         "--data", data, "--max-iterations", "10"});
  INFO(few.describe());
  CHECK(few.exit_code != 0);
  CHECK(few.err.find("--max-iterations must be at least 20") != std::string::npos);

  const ProcessResult mcmc = run_process({exe, "optimize", "--method", "em", "--e-step", "ffbsi",
                                          "--data", data, "--backward", "mcmc"});
  CHECK(mcmc.exit_code != 0);
  CHECK(mcmc.err.find("optimize --method em --e-step ffbsi: --backward mcmc applies to paris") !=
        std::string::npos);

  // The HMM example's initial probabilities: once every trajectory starts in one state, the
  // count of the other is 0 and its closed-form update would leave the simplex; it is mixed
  // with the previous value instead, and the message says how often.
  const std::string& hmm = example_exe("hmm");
  const std::string counts = scratch_path("hmm-mcem.csv");
  run_ok({hmm, "simulate", "--T", "60", "--seed", "2", "--out", counts});
  const nlohmann::json h =
      optimize(hmm, {"--method", "em", "--data", counts, "--e-step", "ffbsi", "--particles", "100",
                     "--max-iterations", "20", "--fix", "weekly", "--fix", "rate"});
  INFO(h.dump());
  CHECK(h["message"].get<std::string>().find("reached the boundary of a support") !=
        std::string::npos);
  const std::vector<double> p0 = h["params"]["p0"].get<std::vector<double>>();
  REQUIRE(p0.size() == 2);
  CHECK(p0[0] > 0);
  CHECK(p0[1] > 0);
  CHECK(std::abs(p0[0] + p0[1] - 1) < 1e-12);
  // Its per-t functional (expected_count), which paris carries only with --marginals, does not
  // refuse paris's E-step: EM's points smooth no functional.
  const nlohmann::json hp =
      optimize(hmm, {"--method", "em", "--data", counts, "--e-step", "paris", "--particles", "100",
                     "--max-iterations", "20", "--fix", "weekly", "--fix", "rate"});
  CHECK(hp["e_step"] == "paris");

  const std::string& lagged = model_exe("lag_two_nonlinear", kLagTwoNonlinear);
  const std::string sim = scratch_path("lag-two.csv");
  run_ok({lagged, "simulate", "--T", "50", "--out", sim});
  const ProcessResult r = run_process({lagged, "optimize", "--method", "em", "--data", sim});
  INFO(r.describe());
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("its transition is sample-only") != std::string::npos);
  CHECK(r.err.find("the model reads x[t-2]") != std::string::npos);
}
