// End-to-end tests of plate models run as their items (passes/plate_items.cpp) and of
// `optimize --method em`: the Gaussian mixture's EM path equals the closed-form EM written here
// (same start) and never decreases; a two-state HMM's EM (Baum-Welch, which needs the pairwise
// marginals) equals Baum-Welch written here; EM and L-BFGS reach the same maximum, with and
// without --map; the mixture's exact log-likelihood equals a sum over items written here.
#include "support.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

using namespace e2e;

namespace {

double normal_logpdf(double x, double mu, double sigma) {
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
    const double a = std::log(m.w[0]) + normal_logpdf(x, m.mu[0], m.sigma),
                 b = std::log(m.w[1]) + normal_logpdf(x, m.mu[1], m.sigma);
    const double top = std::max(a, b);
    ll += top + std::log(std::exp(a - top) + std::exp(b - top));
  }
  return ll;
}

// One EM step with the closed-form M-step of a mixture of normals with a common sd.
Mixture mixture_em_step(const std::vector<double>& y, const Mixture& m) {
  std::array<double, 2> n{}, s{};
  std::vector<double> r(y.size());
  for (size_t i = 0; i < y.size(); ++i) {
    const double a = std::log(m.w[0]) + normal_logpdf(y[i], m.mu[0], m.sigma),
                 b = std::log(m.w[1]) + normal_logpdf(y[i], m.mu[1], m.sigma);
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
  next.sigma = std::sqrt(ss / N);
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
    const double a = std::log(0.5) + normal_logpdf(y[i], 1200, 200),
                 b = std::log(0.5) + normal_logpdf(y[i], 700, 200);
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
}

TEST_CASE("optimize --method em on an HMM is Baum-Welch", "[em]") {
  const std::string& exe = model_exe("hmm_em", kHmm);
  const std::string data = scratch_path("hmm-em.csv");
  run_ok({exe, "simulate", "--T", "300", "--seed", "3", "--param", "stay0=0.95", "--param",
          "stay1=0.9", "--param", "rate=[1,6]", "--out", data});
  const std::vector<double> y = read_table(data).column("y");
  const std::string path = scratch_path("hmm-em-path.csv");
  optimize(exe, {"--method", "em", "--data", data, "--max-iterations", "15", "--tolerance", "0",
                 "--out", path});
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

  const std::string& nile = example_exe("nile"); // linear-Gaussian, not finite-state
  const ProcessResult r =
      run_process({nile, "optimize", "--method", "em", "--data", example_path("data/nile.csv")});
  INFO(r.describe());
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("not finite-state") != std::string::npos);
}
