// End-to-end tests of `sample --method gibbs` against exact answers: on the affine regression of
// Argouarc'h (2024, ch. 3), the discriminative model's coefficients and predictive against the
// Bayesian linear regression's closed form (and a Kolmogorov-Smirnov test of the predictive's
// draws), the inverse-gamma conditional of its variance against the closed-form posterior, the
// generative model's predictive against quadrature, supervised and semi-supervised (unlabelled
// items join the labelled ones); a two-component Gaussian mixture's
// parameters and labels against the posterior by enumeration of every labelling; a local level
// model's variances (its state path by forward filtering and backward sampling) against
// quadrature. Means within 4 Monte Carlo standard errors (from the bulk ESS), sds within 6%. Then
// the refusals.
#include "support.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>
#include <random>
#include <string>
#include <vector>

using namespace e2e;

namespace {

// The running example: y = x + N(0, 1), training labels x ~ N(0, 1), the label to predict x0 ~
// N(7.5, 1) (outside the training labels' range: where the two predictives part).
const char* kDiscriminative = R"(
model affine_d {
  param b0 ~ normal(0, 1) = 0;
  param b1 ~ normal(0, 1) = 0.5;
  param s2 : real(0, inf) ~ inverse_gamma(2, 1) = 0.5;
  latent y[n] ~ normal(0, 10);
  obs x[n] ~ normal(b1 * y[n] + b0, sqrt(s2));
}
)";

const char* kGenerative = R"(
model affine_g {
  param b0 ~ normal(0, 1) = 0;
  param b1 ~ normal(0, 1) = 1;
  param s2 : real(0, inf) ~ inverse_gamma(2, 1) = 1;
  latent x[n] ~ normal(7.5, 1);
  obs y[n] ~ normal(b1 * x[n] + b0, sqrt(s2));
}
)";

const char* kGibbsMixture = R"(
model gmm2 {
  const K = 2;
  param w     : simplex[K] ~ dirichlet(ones(K)) = [0.5, 0.5];
  param mu    : vector[K]  ~ normal([-2, 2], 1) = [-1, 1];
  latent z[n] : int[0..K-1] ~ categorical(w);
  obs    y[n] ~ normal(mu[z[n]], 1);
}
)";

struct Affine {
  std::vector<double> x, y;
  double x0 = 0, y0 = 0;
};

Affine affine_data(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto normal = [&] { // Box-Muller on the engine's raw bits: the same numbers on every platform
    const double u = (static_cast<double>(rng() >> 11) + 0.5) * 0x1p-53,
                 v = (static_cast<double>(rng() >> 11) + 0.5) * 0x1p-53;
    return std::sqrt(-2 * std::log(u)) * std::cos(2 * std::numbers::pi * v);
  };
  Affine a;
  for (int i = 0; i < n; ++i) {
    a.x.push_back(normal());
    a.y.push_back(a.x.back() + normal());
  }
  a.x0 = 7.5 + normal();
  a.y0 = a.x0 + normal();
  return a;
}

// Labelled rows, then the query with its label empty.
std::string affine_csv(const Affine& a) {
  std::string csv = "x,y\n";
  for (size_t i = 0; i < a.x.size(); ++i)
    csv += std::to_string(a.x[i]) + "," + std::to_string(a.y[i]) + "\n";
  return csv + "," + std::to_string(a.y0) + "\n";
}

// The posterior of (b0, b1) under N(0, I) for the regression target = b0 + b1 feature + N(0, s2):
// mean m and covariance S.
struct Regression {
  double m[2], S[2][2];
};
Regression regression(const std::vector<double>& feature, const std::vector<double>& target,
                      double s2) {
  double P[2][2] = {{1, 0}, {0, 1}}, r[2] = {0, 0};
  for (size_t i = 0; i < feature.size(); ++i) {
    const double f[2] = {1, feature[i]};
    for (int a = 0; a < 2; ++a) {
      r[a] += f[a] * target[i] / s2;
      for (int b = 0; b < 2; ++b)
        P[a][b] += f[a] * f[b] / s2;
    }
  }
  const double det = P[0][0] * P[1][1] - P[0][1] * P[1][0];
  Regression out;
  out.S[0][0] = P[1][1] / det;
  out.S[1][1] = P[0][0] / det;
  out.S[0][1] = out.S[1][0] = -P[0][1] / det;
  for (int a = 0; a < 2; ++a)
    out.m[a] = out.S[a][0] * r[0] + out.S[a][1] * r[1];
  return out;
}

void check_moments(const nlohmann::json& j, const std::string& name, double mean, double sd) {
  const nlohmann::json& s = j["summary"][name];
  INFO(name << ": " << s.dump() << " vs exact mean " << mean << ", sd " << sd);
  CHECK(std::abs(s["mean"].get<double>() - mean) < 4 * s["mcse_mean"].get<double>());
  CHECK(std::abs(s["sd"].get<double>() / sd - 1) < 0.06);
  CHECK(s["rhat"].get<double>() < 1.01);
}

// sqrt(n) times the Kolmogorov-Smirnov distance of the draws from N(mean, sd^2).
double ks_statistic(std::vector<double> draws, double mean, double sd) {
  std::sort(draws.begin(), draws.end());
  const double n = static_cast<double>(draws.size());
  double d = 0;
  for (size_t i = 0; i < draws.size(); ++i) {
    const double F = 0.5 * std::erfc(-(draws[i] - mean) / (sd * std::sqrt(2.0)));
    d = std::max({d, F - static_cast<double>(i) / n, static_cast<double>(i + 1) / n - F});
  }
  return d * std::sqrt(n);
}

nlohmann::json gibbs(const std::string& exe, const std::string& data,
                     std::vector<std::string> extra) {
  std::vector<std::string> argv = {exe,    "sample",   "--method", "gibbs", "--data",
                                   data,   "--json",   "--seed",   "3",     "--iterations",
                                   "4000", "--warmup", "500"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return nlohmann::json::parse(run_ok(argv).out);
}

} // namespace

TEST_CASE("gibbs: the discriminative predictive and coefficients are Bayesian linear "
          "regression's",
          "[sample][gibbs]") {
  const std::string& exe = model_exe("affine_d", kDiscriminative);
  const Affine a = affine_data(40, 1);
  const std::string data = scratch_path("affine_d.csv");
  write_file(data, affine_csv(a));
  const std::string out = scratch_path("affine_d-draws.csv");
  const nlohmann::json j = gibbs(exe, data, {"--fix", "s2", "--out", out});
  CHECK(j["details"]["items_given"] == 41); // every row gives its covariate y
  CHECK(j["details"]["observations_drawn"] == 1);
  CHECK(j["details"]["conditionals"]["b1"] == "normal, jointly with b0");
  // x | y: the regression of the labels on the observations; the predictive at y0 is Gaussian.
  const Regression r = regression(a.y, a.x, 0.5);
  check_moments(j, "b0", r.m[0], std::sqrt(r.S[0][0]));
  check_moments(j, "b1", r.m[1], std::sqrt(r.S[1][1]));
  const double mean = r.m[0] + r.m[1] * a.y0,
               var = r.S[0][0] + 2 * a.y0 * r.S[0][1] + a.y0 * a.y0 * r.S[1][1] + 0.5;
  check_moments(j, "x.41", mean, std::sqrt(var));
  // The draws of chain 1, every 4th (ESS / N is near 1): the KS statistic at the 1% level.
  std::string csv, text = read_file(scratch_path("affine_d-draws_1.csv"));
  for (size_t at = 0, end; at < text.size(); at = end + 1) { // Stan's comment lines dropped
    end = text.find('\n', at);
    if (text[at] != '#')
      csv += text.substr(at, end - at + 1);
  }
  const std::vector<double> x = parse_table(csv).column("x.41");
  REQUIRE(x.size() == 4000);
  std::vector<double> thinned;
  for (size_t i = 0; i < x.size(); i += 4)
    thinned.push_back(x[i]);
  CHECK(ks_statistic(thinned, mean, std::sqrt(var)) < 1.63);
}

TEST_CASE("gibbs: a variance's inverse-gamma conditional gives its closed-form posterior",
          "[sample][gibbs]") {
  const std::string& exe = model_exe("affine_d", kDiscriminative);
  const Affine a = affine_data(30, 2);
  const std::string data = scratch_path("affine_d-var.csv");
  write_file(data, affine_csv(a));
  const nlohmann::json j = gibbs(exe, data, {"--fix", "b0", "--fix", "b1"});
  CHECK(j["details"]["conditionals"]["s2"] == "inverse-gamma");
  // The query's label is drawn with s2 and integrates out: s2 | D ~ IG(2 + n/2, 1 + SSR/2).
  double ssr = 0;
  for (size_t i = 0; i < a.x.size(); ++i)
    ssr += std::pow(a.x[i] - 0.5 * a.y[i], 2);
  const double shape = 2 + a.x.size() / 2.0, scale = 1 + ssr / 2;
  check_moments(j, "s2", scale / (shape - 1), scale / (shape - 1) / std::sqrt(shape - 2));
}

TEST_CASE("gibbs: the generative predictive matches quadrature", "[sample][gibbs]") {
  const std::string& exe = model_exe("affine_g", kGenerative);
  const Affine a = affine_data(40, 3);
  const std::string data = scratch_path("affine_g.csv");
  write_file(data, affine_csv(a));
  const nlohmann::json j = gibbs(exe, data, {"--fix", "s2"});
  CHECK(j["likelihood"] == "kalman");
  CHECK(j["details"]["items_drawn"] == 1);
  // p(x0 | y0, D) is proportional to N(x0; 7.5, 1) N(y0; b(x0)' m, b(x0)' S b(x0) + 1) with
  // b(x0) = (1, x0) and (m, S) the coefficients' posterior given the labelled items.
  const Regression r = regression(a.x, a.y, 1.0);
  double z = 0, m1 = 0, m2 = 0;
  for (int i = 0; i < 20000; ++i) {
    const double x0 = -5 + 25.0 * (i + 0.5) / 20000;
    const double mean = r.m[0] + r.m[1] * x0,
                 var = r.S[0][0] + 2 * x0 * r.S[0][1] + x0 * x0 * r.S[1][1] + 1.0;
    const double w =
        std::exp(-0.5 * (x0 - 7.5) * (x0 - 7.5) - 0.5 * (a.y0 - mean) * (a.y0 - mean) / var) /
        std::sqrt(var);
    z += w;
    m1 += w * x0;
    m2 += w * x0 * x0;
  }
  check_moments(j, "x.41", m1 / z, std::sqrt(m2 / z - (m1 / z) * (m1 / z)));
}

// Semi-supervised (Argouarc'h 2024, 3.4.3): 20 unlabelled items, x ~ N(7.5, 1) as the query's,
// join the labelled ones, and Gibbs draws their labels too. Given the coefficients b, an unlabelled
// y is N(b0 + 7.5 b1, b1^2 + 1) and x0 | y0, b is N(7.5 + b1 (y0 - b0 - 7.5 b1) / (1 + b1^2),
// 1 / (1 + b1^2)): the coefficients' posterior (no longer conjugate, b1 in the variance) and the
// predictive by quadrature on a grid of b.
TEST_CASE("gibbs: the semi-supervised generative predictive and coefficients match quadrature",
          "[sample][gibbs]") {
  const std::string& exe = model_exe("affine_g", kGenerative);
  const Affine a = affine_data(40, 4), extra = affine_data(20, 5);
  std::vector<double> unlabelled; // the unlabelled items' y, then the query's
  for (size_t j = 0; j < extra.x.size(); ++j)
    unlabelled.push_back(7.5 + extra.y[j]); // x = 7.5 + extra.x[j], y = x + (extra.y - extra.x)
  std::string csv = affine_csv(a);
  csv.erase(csv.rfind(',')); // the query's row, moved last
  for (double y : unlabelled)
    csv += "," + std::to_string(y) + "\n";
  csv += "," + std::to_string(a.y0) + "\n";
  unlabelled.push_back(a.y0);
  const std::string data = scratch_path("affine_g-semi.csv");
  write_file(data, csv);
  const nlohmann::json j = gibbs(exe, data, {"--fix", "s2"});
  CHECK(j["details"]["items_drawn"] == 21);
  const Regression r = regression(a.x, a.y, 1.0);
  const int cells = 300;
  const double sd0 = std::sqrt(r.S[0][0]), sd1 = std::sqrt(r.S[1][1]);
  std::vector<double> log_w, b0s, b1s;
  for (int u = 0; u < cells; ++u)
    for (int v = 0; v < cells; ++v) {
      const double b0 = r.m[0] + sd0 * (-8 + 16.0 * (u + 0.5) / cells),
                   b1 = r.m[1] + sd1 * (-8 + 16.0 * (v + 0.5) / cells);
      double lw = -0.5 * (b0 * b0 + b1 * b1);
      for (size_t i = 0; i < a.x.size(); ++i)
        lw -= 0.5 * std::pow(a.y[i] - b0 - b1 * a.x[i], 2);
      const double var = b1 * b1 + 1;
      for (double y : unlabelled)
        lw -= 0.5 * (std::pow(y - b0 - 7.5 * b1, 2) / var + std::log(var));
      log_w.push_back(lw);
      b0s.push_back(b0);
      b1s.push_back(b1);
    }
  const double top = *std::max_element(log_w.begin(), log_w.end());
  double z = 0, m[3] = {}, m2[3] = {};
  for (size_t k = 0; k < log_w.size(); ++k) {
    const double w = std::exp(log_w[k] - top), b0 = b0s[k], b1 = b1s[k];
    const double x_mean = 7.5 + b1 * (a.y0 - b0 - 7.5 * b1) / (1 + b1 * b1);
    const double values[3] = {b0, b1, x_mean}, extra_var[3] = {0, 0, 1 / (1 + b1 * b1)};
    z += w;
    for (int q = 0; q < 3; ++q) {
      m[q] += w * values[q];
      m2[q] += w * (values[q] * values[q] + extra_var[q]);
    }
  }
  const char* names[3] = {"b0", "b1", "x.61"};
  for (int q = 0; q < 3; ++q)
    check_moments(j, names[q], m[q] / z, std::sqrt(m2[q] / z - (m[q] / z) * (m[q] / z)));
}

namespace {

// The posterior of a two-component mixture of unit-noise Gaussians with means mu_k ~ N(m_k, 1),
// m = (-2, 2), by enumeration of the labellings z of the six items (bit i: item i's label):
// p(z | y) ∝ p(z) Π_k N(r_k; 0, I + 11') (r_k the residuals of component k's items from m_k;
// det 1 + n_k, inverse I - 11' / (1 + n_k)), and given z each mu_k is conjugate.
// `log_label_prior(z, counts)` is log p(z); `visit(p, counts)` sees each labelling's unnormalised
// posterior weight. The moments of mu and P(z_i = 1), normalised.
struct MixturePosterior {
  double total = 0, mu_mean[2] = {}, mu_sd[2] = {}, label[6] = {};
};
MixturePosterior
enumerate_labellings(const std::vector<double>& y,
                     const std::function<double(int z, const double* counts)>& log_label_prior,
                     const std::function<void(double p, const double* counts)>& visit = {}) {
  const double prior_mean[2] = {-2, 2};
  MixturePosterior out;
  double mu[2] = {0, 0}, mu2[2] = {0, 0};
  for (int z = 0; z < 64; ++z) {
    double log_p = 0, count[2] = {0, 0}, mean[2], var[2];
    for (int k = 0; k < 2; ++k) {
      double n = 0, sum = 0, sum2 = 0;
      for (int i = 0; i < 6; ++i)
        if (((z >> i) & 1) == k) {
          n += 1;
          sum += y[i] - prior_mean[k];
          sum2 += (y[i] - prior_mean[k]) * (y[i] - prior_mean[k]);
        }
      count[k] = n;
      log_p += -0.5 *
               (n * std::log(2 * std::numbers::pi) + std::log(1 + n) + sum2 - sum * sum / (1 + n));
      var[k] = 1 / (1 + n);
      mean[k] = prior_mean[k] + sum * var[k];
    }
    const double p = std::exp(log_p + log_label_prior(z, count));
    out.total += p;
    if (visit)
      visit(p, count);
    for (int k = 0; k < 2; ++k) {
      mu[k] += p * mean[k];
      mu2[k] += p * (var[k] + mean[k] * mean[k]);
    }
    for (int i = 0; i < 6; ++i)
      out.label[i] += p * ((z >> i) & 1);
  }
  for (int k = 0; k < 2; ++k) {
    out.mu_mean[k] = mu[k] / out.total;
    out.mu_sd[k] = std::sqrt(mu2[k] / out.total - out.mu_mean[k] * out.mu_mean[k]);
  }
  for (double& l : out.label)
    l /= out.total;
  return out;
}

// The draws' moments of mu and of each label against the enumeration.
void check_mixture(const nlohmann::json& j, const MixturePosterior& e) {
  for (int k = 0; k < 2; ++k)
    check_moments(j, "mu[" + std::to_string(k) + "]", e.mu_mean[k], e.mu_sd[k]);
  for (int i = 0; i < 6; ++i) {
    const nlohmann::json& zi = j["summary"]["z." + std::to_string(i + 1)];
    INFO("z." << i + 1 << ": " << zi.dump() << " vs P(z = 1) = " << e.label[i]);
    CHECK(std::abs(zi["mean"].get<double>() - e.label[i]) <
          4 * zi["mcse_mean"].get<double>() + 1e-3);
  }
}

} // namespace

TEST_CASE("gibbs: a Gaussian mixture's parameters and labels match enumeration",
          "[sample][gibbs]") {
  const std::string& exe = model_exe("gmm2", kGibbsMixture);
  const std::vector<double> y = {-2.1, -1.7, -2.5, 1.9, 2.4, 0.3};
  const std::string data = scratch_path("gmm2.csv");
  std::string csv = "y\n";
  for (double v : y)
    csv += std::to_string(v) + "\n";
  write_file(data, csv);
  const nlohmann::json j = gibbs(exe, data, {});
  CHECK(j["likelihood"] == "forward");
  CHECK(j["details"]["conditionals"]["w"] == "dirichlet");
  // Every labelling z: p(z) from the Dirichlet-multinomial (w ~ Dirichlet(1, 1)); given z, w is
  // conjugate too: E[w_0 | z] = (1 + n_0) / 8.
  double w0 = 0;
  const MixturePosterior e = enumerate_labellings(
      y,
      [](int, const double* count) {
        return std::lgamma(1 + count[0]) + std::lgamma(1 + count[1]);
      },
      [&](double p, const double* count) { w0 += p * (1 + count[0]) / 8; });
  check_mixture(j, e);
  const double p0 = w0 / e.total;
  const nlohmann::json& s = j["summary"]["w[0]"];
  CHECK(std::abs(s["mean"].get<double>() - p0) < 4 * s["mcse_mean"].get<double>());
}

// The same mixture with each item's label prior read from its covariate: P(z_n = 1) =
// logistic(2 x_n), so each free item's labels are drawn from a prior of its own. By enumeration
// of the 2^6 labellings, with the Bernoulli prior per item in place of w's.
TEST_CASE("gibbs: labels whose prior reads a covariate match enumeration", "[sample][gibbs]") {
  const std::string& exe = model_exe("gmm_covariate", R"(
model gmm_covariate {
  param mu    : vector[2] ~ normal([-2, 2], 1) = [-1, 1];
  input x[n];
  latent z[n] : int[0..1] ~ bernoulli(logistic(2 * x[n]));
  obs    y[n] ~ normal(mu[z[n]], 1);
}
)");
  const std::vector<double> y = {-2.1, -1.7, 0.1, 1.9, 2.4, 0.3}, x = {-1, -0.5, 1.5, 1, 0, -1.5};
  const std::string data = scratch_path("gmm_covariate.csv");
  std::string csv = "x,y\n";
  for (size_t i = 0; i < y.size(); ++i)
    csv += std::to_string(x[i]) + "," + std::to_string(y[i]) + "\n";
  write_file(data, csv);
  const nlohmann::json j = gibbs(exe, data, {});
  CHECK(j["likelihood"] == "forward");
  const MixturePosterior e = enumerate_labellings(y, [&](int z, const double*) {
    double log_prior = 0;
    for (int i = 0; i < 6; ++i) {
      const double p1 = 1 / (1 + std::exp(-2 * x[i]));
      log_prior += std::log(((z >> i) & 1) ? p1 : 1 - p1);
    }
    return log_prior;
  });
  check_mixture(j, e);
}

// A local level model with inverse-gamma priors on both variances: the classic data-augmentation
// Gibbs sampler of a dynamic linear model (the state path by forward filtering and backward
// sampling, then each variance), against the posterior by quadrature with the Kalman likelihood.
const char* kLocalLevel = R"(
model local_level {
  param v_eta : real(0, inf) ~ inverse_gamma(3, 2) = 1;
  param v_eps : real(0, inf) ~ inverse_gamma(3, 2) = 1;
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 10);
  x[t] ~ normal(x[t-1], sqrt(v_eta));
  y[t] ~ normal(x[t], sqrt(v_eps));
}
)";

double local_level_loglik_x0_var100(const std::vector<double>& y, double v_eta, double v_eps) {
  return scalar_kalman_loglik(y, 1, v_eta, 1, v_eps, 100);
}

TEST_CASE("gibbs: a local level model's variances match quadrature", "[sample][gibbs]") {
  const std::string& exe = model_exe("local_level", kLocalLevel);
  const std::string data = scratch_path("local_level.csv");
  run_ok({exe, "simulate", "--T", "60", "--seed", "4", "--out", data});
  std::vector<double> y = read_table(data).column("y");
  y[20] = std::nan(""); // a missing observation is marginalised
  std::string csv = "y\n";
  for (double v : y)
    csv += std::isnan(v) ? std::string("\n") : std::to_string(v) + "\n";
  write_file(data, csv);
  // The midpoint rule on (0, 4] x (0, 4] under the IG(3, 2) priors.
  auto log_prior = [](double v) { return -4 * std::log(v) - 2 / v; };
  const GridPosterior g = grid_posterior(
      [&](double a, double b) {
        return local_level_loglik_x0_var100(y, a, b) + log_prior(a) + log_prior(b);
      },
      0, 4, 0, 4, 300);
  const nlohmann::json j = gibbs(exe, data, {});
  CHECK(j["likelihood"] == "kalman");
  CHECK(j["details"]["conditionals"]["v_eta"] == "inverse-gamma");
  check_moments(j, "v_eta", g.mean_a, g.sd_a);
  check_moments(j, "v_eps", g.mean_b, g.sd_b);
  CHECK(j["summary"].contains("x.60")); // the state path, as generated quantities
}

// A two-state HMM of counts with a fixed transition matrix: the state path by the forward
// algorithm and backward sampling, the rates from their gamma conditionals, the initial
// probabilities from their Dirichlet one; against enumeration of the 64 paths.
TEST_CASE("gibbs: an HMM's rates and paths match enumeration", "[sample][gibbs]") {
  const std::string& exe = model_exe("hmm_gibbs", R"(
model hmm_gibbs {
  param P : matrix[2, 2] = [[0.9, 0.1], [0.4, 0.6]];
  param p0 : simplex[2] ~ dirichlet([1, 1]) = [0.5, 0.5];
  param lambda : vector[2] ~ gamma([2, 8], [1, 1]) = [2, 8];
  state z : int[0..1];
  obs y : int;
  z[0] ~ categorical(p0);
  z[t] ~ categorical(P[z[t-1]]);
  y[t] ~ poisson(lambda[z[t]]);
}
)");
  const std::vector<int> y = {1, 0, 2, 9, 7, 10};
  const std::string data = scratch_path("hmm_gibbs.csv");
  std::string csv = "y\n";
  for (int v : y)
    csv += std::to_string(v) + "\n";
  write_file(data, csv);
  const nlohmann::json j = gibbs(exe, data, {"--fix", "P"});
  CHECK(j["likelihood"] == "forward");
  CHECK(j["details"]["conditionals"]["lambda"] == "gamma");
  // p(z | y) is proportional to (1/2) prod P[z_t-1, z_t] (p0 integrated under Dirichlet(1, 1))
  // times each state's gamma-Poisson marginal; given z the rates are gamma, p0 Dirichlet.
  const double P[2][2] = {{0.9, 0.1}, {0.4, 0.6}}, a[2] = {2, 8}, b[2] = {1, 1};
  double total = 0, m1[2] = {}, m2[2] = {}, p00 = 0, ones[6] = {};
  for (int z = 0; z < 64; ++z) {
    auto state = [&](int t) { return (z >> t) & 1; };
    double log_p = std::log(0.5), S[2] = {}, n[2] = {};
    for (int t = 0; t < 6; ++t) {
      if (t > 0)
        log_p += std::log(P[state(t - 1)][state(t)]);
      S[state(t)] += y[t];
      n[state(t)] += 1;
    }
    for (int k = 0; k < 2; ++k)
      log_p += a[k] * std::log(b[k]) - std::lgamma(a[k]) + std::lgamma(a[k] + S[k]) -
               (a[k] + S[k]) * std::log(b[k] + n[k]);
    const double p = std::exp(log_p);
    total += p;
    for (int k = 0; k < 2; ++k) {
      const double shape = a[k] + S[k], rate = b[k] + n[k];
      m1[k] += p * shape / rate;
      m2[k] += p * shape * (shape + 1) / (rate * rate);
    }
    p00 += p * (1.0 + (state(0) == 0)) / 3;
    for (int t = 0; t < 6; ++t)
      ones[t] += p * state(t);
  }
  for (int k = 0; k < 2; ++k)
    check_moments(j, "lambda[" + std::to_string(k) + "]", m1[k] / total,
                  std::sqrt(m2[k] / total - std::pow(m1[k] / total, 2)));
  const nlohmann::json& s = j["summary"]["p0[0]"];
  CHECK(std::abs(s["mean"].get<double>() - p00 / total) < 4 * s["mcse_mean"].get<double>());
  for (int t = 0; t < 6; ++t) {
    const nlohmann::json& zt = j["summary"]["z." + std::to_string(t + 1)];
    INFO("z." << t + 1 << ": " << zt.dump() << " vs P(z = 1) = " << ones[t] / total);
    CHECK(std::abs(zt["mean"].get<double>() - ones[t] / total) <
          4 * zt["mcse_mean"].get<double>() + 1e-3);
  }
}

TEST_CASE("gibbs: refusals name what is missing", "[sample][gibbs]") {
  const std::string& mixture = model_exe("gmm2", kGibbsMixture);
  const std::string data = scratch_path("gmm2-bad.csv");
  auto refused = [](const std::vector<std::string>& argv, const std::string& message) {
    const ProcessResult r = run_process(argv);
    INFO(r.describe());
    CHECK(r.exit_code == 1);
    CHECK(r.err.find(message) != std::string::npos);
  };
  // A label outside the latent's values, on its line.
  write_file(data, "y,z\n-2,0\n2,5\n");
  refused({mixture, "sample", "--method", "gibbs", "--data", data, "--json"},
          "gmm2-bad.csv:3: column 'z': 5 is not a value of latent 'z' (integers 0..1)");
  // Any other method warns that it ignores latent columns (and draws those latents).
  write_file(data, "y,z\n-2,0\n2,1\n");
  const ProcessResult filtered = run_process({mixture, "filter", "--data", data, "--json"});
  CHECK(filtered.exit_code == 0);
  CHECK(filtered.err.find("has column z named as latent variables of the model: only `sample "
                          "--method gibbs` reads them") != std::string::npos);
  write_file(data, "y\n-2\n2\n");
  const std::string& generative = model_exe("affine_g_hn", R"(
model affine_g_hn {
  param b0 ~ normal(0, 1) = 0;
  param b1 ~ normal(0, 1) = 1;
  param sd : real(0, inf) ~ half_normal(1) = 1;
  latent x[n] ~ normal(7.5, 1);
  latent e[n] ~ normal(0, 1);
  obs y[n] ~ normal(b1 * x[n] + b0 + e[n], sd);
}
)");
  refused({generative, "sample", "--method", "gibbs", "--data", data, "--json"},
          "the prior of 'sd' is not inverse-gamma in the square of this sd");
  // Labelled items give every latent value, or none.
  write_file(data, "y,x\n-2,1\n2,\n");
  refused({generative, "sample", "--method", "gibbs", "--data", data, "--json", "--fix", "sd"},
          "gmm2-bad.csv:2: column 'x' is given but 'e' is not");
  // A missing observation is drawn from its relation given the latents alone: refused where
  // observations read each other (its draw would not condition on the others).
  const std::string& chained = model_exe("obs_chain", R"(
model obs_chain {
  param b ~ normal(0, 1) = 0.5;
  latent e[n] ~ normal(0, 1);
  obs u[n] ~ normal(e[n], 1);
  obs x[n] ~ normal(b * u[n], 1);
}
)");
  write_file(data, "u,x,e\n0.5,1,0.2\n0.3,,0.1\n");
  refused({chained, "sample", "--method", "gibbs", "--data", data, "--json"},
          "gmm2-bad.csv:3: column 'x' is missing, and the model's observations read each other");
  // A time series whose states are neither finite nor linear-Gaussian has no exact path draw.
  const std::string& sv = model_exe("sv_gibbs", R"(
model sv_gibbs {
  param mu ~ normal(0, 1) = 0;
  state x : real;
  obs y : real;
  x[0] ~ normal(mu, 1);
  x[t] ~ normal(0.9 * x[t-1] + mu, 0.3);
  y[t] ~ normal(0, exp(x[t] / 2));
}
)");
  write_file(data, "y\n1\n2\n");
  refused({sv, "sample", "--method", "gibbs", "--data", data, "--json"},
          "needs finite or linear-Gaussian states");
  // A lag beyond 1 lives in a hidden copy of the state, which gibbs does not draw.
  const std::string& ar2 = model_exe("ar2_gibbs", R"(
model ar2_gibbs {
  param v : real(0, inf) ~ inverse_gamma(2, 1) = 1;
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ normal(0.5 * x[t-2], sqrt(v));
  y[t] ~ normal(x[t], 1);
}
)");
  refused({ar2, "sample", "--method", "gibbs", "--data", data, "--json"},
          "the model reads 'x' at a lag beyond 1");
  // A bounded coefficient: the compiler's conjugate pieces leave it out (its Gaussian conditional
  // would leave the bounds).
  const std::string& bounded = model_exe("bounded_gibbs", R"(
model bounded_gibbs {
  param b : real(0, inf) ~ half_normal(1) = 1;
  latent z[n] ~ normal(0, 1);
  obs y[n] ~ normal(b + z[n], 1);
}
)");
  refused({bounded, "sample", "--method", "gibbs", "--data", data, "--json"},
          "parameter 'b' has no conjugate full conditional: y[t] ~ normal at 5:3: it is bounded");
}
