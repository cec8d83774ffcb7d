// End-to-end tests of likelihood-free inference for simulators (runtime/lfi): simulation that
// does not depend on the thread count and follows the prior and the likelihood; every
// ratio-based sampler, fed the exact likelihood of a conjugate simulator, samples its analytic
// posterior (moments within 4 Monte Carlo standard errors from the run's own effective sample
// size, and a Kolmogorov-Smirnov test); neural ratio estimation (NRE-A and NRE-B) on the 10-D
// gaussian_linear comes within the Monte Carlo error of the Bayes-optimal validation loss, which
// the test computes with the exact ratio, and its posterior's mean and covariance within what
// that loss allows of the analytic posterior's (and a C2ST near 0.5); the C2ST, mean error and
// MMD themselves; draws independent of --threads; the Bernoulli GLM's summaries against the
// moments its design matrix implies; bad input.
#include "support.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace e2e;

namespace {

// sbibm's gaussian_linear in 3-D: theta ~ N(0, 0.1 I), x | theta ~ N(theta, 0.1 I). The posterior
// given x_o is N(x_o / 2, 0.05 I); the evidence is N(0, 0.2 I).
const char* kGaussianLinear = R"(simulator gaussian_linear {
  param theta : vector[3] ~ normal(0, sqrt(0.1));
  obs x : vector[3] ~ normal(theta, sqrt(0.1));
}
)";
constexpr double kPriorVar = 0.1, kNoiseVar = 0.1, kPostVar = 0.05;
const std::vector<double> kObserved = {0.5, -0.3, 0.1};

// Observations log(theta) are NaN for the half of the prior below 0.
const char* kHalfUndefined = R"(simulator half_undefined {
  param theta ~ normal(0, 1);
  obs x = log(theta);
}
)";

const std::string& gaussian_linear() {
  return model_exe("gaussian_linear_3d", kGaussianLinear);
}

std::string observed_file() {
  const std::string path = scratch_path("gl_observed.json");
  write_file(path, nlohmann::json{{"x", kObserved}}.dump());
  return path;
}

double normal_cdf(double x, double mean, double var) {
  return 0.5 * std::erfc(-(x - mean) / std::sqrt(2 * var));
}

// sup |F_N - F| below the asymptotic critical value at level 0.001 for n_eff independent draws.
void check_ks(std::vector<double> xs, double mean, double var, double n_eff) {
  std::sort(xs.begin(), xs.end());
  const double n = static_cast<double>(xs.size());
  double d = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double f = normal_cdf(xs[i], mean, var);
    d = std::max({d, (static_cast<double>(i) + 1) / n - f, f - static_cast<double>(i) / n});
  }
  const double critical = std::sqrt(-0.5 * std::log(0.001 / 2)) / std::sqrt(n_eff);
  INFO("KS statistic " << d << ", critical " << critical << " for " << n_eff << " draws");
  CHECK(d < critical);
}

// The columns of Stan CSV files (chains appended), comment lines skipped.
Table read_stan_chains(const std::vector<std::string>& paths) {
  Table all;
  for (const std::string& path : paths) {
    std::string text, line;
    std::istringstream in(read_file(path));
    while (std::getline(in, line))
      if (!line.empty() && line[0] != '#')
        text += line + "\n";
    Table t = parse_table(text);
    all.header = t.header;
    all.rows.insert(all.rows.end(), t.rows.begin(), t.rows.end());
  }
  return all;
}

// A simulator with a data item, for a ratio trained with one value and used with another.
const char* kWithData = R"(simulator with_data {
  data s : real(0, inf);
  param theta ~ normal(0, 1);
  obs x ~ normal(theta, s);
}
)";

// The Bayes-optimal validation loss of NRE-A or NRE-B on gaussian_linear in `dim` dimensions, and
// the loss's sensitivity S to an error in the log ratio, both with the exact log ratio
// log N(x; theta, 0.1 I) - log N(x; 0, 0.2 I) on fresh pairs. A learned log ratio log r + eps
// has, to second order in eps, an excess loss of E[sum over NRE-A's two binary terms of
// d (1 - d) eps^2] / 2 (d the exact classifier's probability), or of E[Var_p(eps)] / 2 over
// NRE-B's atoms (p the exact softmax). For an error spread evenly, of variance s^2 wherever the
// pair falls and independent across parameters, that is s^2 S / 2 with S = E[sum d (1 - d)] or
// E[1 - sum_k p_k^2].
struct LossFacts {
  double mean = 0, sd = 0; // the loss of one validation pair (NRE-A) or atom set (NRE-B)
  double sensitivity = 0;
};

LossFacts optimal_loss(int dim, const std::string& variant, int atoms) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> z(0, 1);
  auto log_ratio = [dim](const double* th, const double* x) {
    double s = 0;
    for (int k = 0; k < dim; ++k)
      s += -0.5 * (x[k] - th[k]) * (x[k] - th[k]) / kNoiseVar +
           0.5 * x[k] * x[k] / (kPriorVar + kNoiseVar) -
           0.5 * std::log(kNoiseVar / (kPriorVar + kNoiseVar));
    return s;
  };
  const int n = 100000;
  std::vector<double> theta(dim * n), x(dim * n);
  for (int i = 0; i < dim * n; ++i) {
    theta[i] = std::sqrt(kPriorVar) * z(rng);
    x[i] = theta[i] + std::sqrt(kNoiseVar) * z(rng);
  }
  auto softplus = [](double v) {
    return v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v));
  };
  auto other = [&](int i) { return (i + 1 + static_cast<int>(rng() % (n - 1))) % n; };
  double sum = 0, sum2 = 0, s = 0;
  for (int i = 0; i < n; ++i) {
    double loss = 0;
    if (variant == "a") {
      const double joint = log_ratio(&theta[dim * i], &x[dim * i]);
      const double shuffled = log_ratio(&theta[dim * other(i)], &x[dim * i]);
      loss = softplus(-joint) + softplus(shuffled);
      for (double l : {joint, shuffled})
        s += 1 / ((1 + std::exp(-l)) * (1 + std::exp(l)));
    } else {
      std::vector<double> logits = {log_ratio(&theta[dim * i], &x[dim * i])};
      for (int k = 1; k < atoms; ++k)
        logits.push_back(log_ratio(&theta[dim * other(i)], &x[dim * i]));
      const double top = *std::max_element(logits.begin(), logits.end());
      double total = 0, squares = 0;
      for (double l : logits)
        total += std::exp(l - top);
      for (double l : logits)
        squares += std::exp(2 * (l - top)) / (total * total);
      loss = top + std::log(total) - logits[0];
      s += 1 - squares;
    }
    sum += loss;
    sum2 += loss * loss;
  }
  const double mean = sum / n;
  return {mean, std::sqrt(sum2 / n - mean * mean), s / n};
}

// The MMD^2 that c2st estimates between two samples of 3-D Gaussians of one covariance whose
// theta.1 means are one sd apart: on the draws standardised by the pooled ones, theta.1 has
// variance 1 / 1.25 in each sample and the means delta = 1 / sqrt(1.25) apart, and with the
// kernel exp(-|u - v|^2 / (2 h^2)), E k(u, v) = prod_j (1 + 2 S_j / h^2)^(-1/2)
// exp(-delta^2 / (2 (h^2 + 2 S_1))) for u - v ~ N(delta e_1, 2 S). h is the median distance
// between the pooled standardised draws, computed here as c2st does.
double expected_mmd2(const Table& a, const Table& b) {
  std::vector<std::vector<double>> z; // pooled rows
  for (int k = 0; k < 3; ++k) {
    const std::string name = fmt::format("theta.{}", k + 1);
    std::vector<double> v = a.column(name), w = b.column(name);
    v.insert(v.end(), w.begin(), w.end());
    const double mean = sample_mean(v), sd = std::sqrt(sample_variance(v));
    z.resize(v.size(), std::vector<double>(3));
    for (size_t i = 0; i < v.size(); ++i)
      z[i][k] = (v[i] - mean) / sd;
  }
  std::vector<double> distances;
  for (size_t i = 0; i < z.size(); ++i)
    for (size_t j = i + 1; j < z.size(); ++j)
      distances.push_back(std::hypot(z[i][0] - z[j][0], z[i][1] - z[j][1], z[i][2] - z[j][2]));
  std::nth_element(distances.begin(), distances.begin() + distances.size() / 2, distances.end());
  const double h2 = std::pow(distances[distances.size() / 2], 2);
  const double s1 = 1 / 1.25, delta2 = 1 / 1.25;
  const double at_zero =
      std::pow(1 + 2 * s1 / h2, -0.5) * std::pow(1 + 2 / h2, -1.0); // the other two: S_j = 1
  return 2 * at_zero * (1 - std::exp(-delta2 / (2 * (h2 + 2 * s1))));
}

} // namespace

TEST_CASE("simulate: a simulator's draws do not depend on --threads, and follow the prior and "
          "the likelihood",
          "[lfi]") {
  const std::string exe = example_exe("two_moons");
  const std::string one = run_ok({exe, "simulate", "--n", "5000", "--threads", "1"}).out;
  const std::string two = run_ok({exe, "simulate", "--n", "5000", "--threads", "2"}).out;
  CHECK(one == two);
  CHECK(one.substr(0, one.find('\n')) == "theta[0],theta[1],x[0],x[1]");
  CHECK(run_ok({exe, "simulate", "--n", "5000", "--seed", "2"}).out != one);

  const Table t = parse_table(run_ok({gaussian_linear(), "simulate", "--n", "20000"}).out);
  for (int k = 0; k < 3; ++k) {
    const std::vector<double> theta = t.column(fmt::format("theta[{}]", k));
    const std::vector<double> x = t.column(fmt::format("x[{}]", k));
    std::vector<double> noise(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      noise[i] = x[i] - theta[i];
    check_ks(theta, 0, kPriorVar, static_cast<double>(theta.size()));
    check_ks(noise, 0, kNoiseVar, static_cast<double>(noise.size()));
    // The noise is independent of theta (the kernels' draws share no random counter): their
    // correlation within 4 standard errors of 0, and var(x) = 0.1 + 0.1.
    const double n = static_cast<double>(x.size());
    double cov = 0;
    for (size_t i = 0; i < x.size(); ++i)
      cov += theta[i] * noise[i] / n;
    CHECK(std::fabs(cov / std::sqrt(kPriorVar * kNoiseVar)) < 4 / std::sqrt(n));
    CHECK(std::fabs(sample_variance(x) - (kPriorVar + kNoiseVar)) <
          4 * (kPriorVar + kNoiseVar) * std::sqrt(2 / n));
  }
}

// sbibm's Bernoulli GLM: given theta, x = Xt y with y_i ~ Bernoulli(logistic(X_i theta)), so
// E[x_k | theta] = sum_i logistic(X_i theta) X[i, k] and Var[x_k | theta] = sum_i p_i (1 - p_i)
// X[i, k]^2. Over 4000 draws, the mean standardised residual of the spike count and of two
// spike-triggered sums is within 4 standard errors of 0 and its variance near 1: the design
// matrix, the vector latent and the summary are what the task says.
TEST_CASE("simulate: the Bernoulli GLM's summaries have the moments its design matrix implies",
          "[lfi]") {
  const std::string exe = example_exe("bernoulli_glm");
  const std::string file = example_path("data/bernoulli_glm.json");
  const nlohmann::json design = nlohmann::json::parse(read_file(file));
  const std::vector<std::vector<double>> X = design["X"].get<std::vector<std::vector<double>>>();
  REQUIRE(X.size() == 100);
  const Table t =
      parse_table(run_ok({exe, "simulate", "--n", "4000", "--seed", "3", "--data-file", file}).out);
  std::vector<std::vector<double>> theta;
  for (int j = 0; j < 10; ++j)
    theta.push_back(t.column(fmt::format("theta[{}]", j)));
  for (int k : {0, 1, 5}) {
    const std::vector<double> x = t.column(fmt::format("x[{}]", k));
    std::vector<double> z(x.size());
    for (size_t d = 0; d < x.size(); ++d) {
      double mean = 0, var = 0;
      for (const std::vector<double>& row : X) {
        double psi = 0;
        for (int j = 0; j < 10; ++j)
          psi += row[j] * theta[j][d];
        const double p = 1 / (1 + std::exp(-psi));
        mean += p * row[k];
        var += p * (1 - p) * row[k] * row[k];
      }
      z[d] = (x[d] - mean) / std::sqrt(std::max(var, 1e-12));
    }
    INFO("x[" << k << "]");
    CHECK(std::fabs(sample_mean(z)) < 4 / std::sqrt(static_cast<double>(z.size())));
    CHECK(std::fabs(sample_variance(z) - 1) < 0.1);
  }
}

TEST_CASE("posterior: every sampler, fed the exact likelihood, samples the conjugate posterior",
          "[lfi]") {
  const std::string exe = gaussian_linear(), observed = observed_file();
  for (const char* sampler : {"ar", "imh", "barker", "is", "sir", "mcmc", "smc"}) {
    SECTION(sampler) {
      const std::string out = scratch_path(std::string("gl_exact_") + sampler + ".csv");
      const nlohmann::json j =
          run_json({exe, "posterior", "--ratio", "exact", "--observed", observed, "--sampler",
                    sampler, "--draws", "4000", "--out", out, "--json"});
      std::vector<std::string> files;
      for (size_t c = 0; c < j["chains"].get<size_t>(); ++c)
        files.push_back(
            j["chains"] == 1 ? out : out.substr(0, out.size() - 4) + fmt::format("_{}.csv", c + 1));
      const Table draws = read_stan_chains(files);
      const std::string s = sampler;
      for (int k = 0; k < 3; ++k) {
        const std::string name = fmt::format("theta.{}", k + 1);
        const std::vector<double> v = draws.column(name);
        const double exact_mean = kObserved[k] / 2;
        // The effective sample size each sampler's draws stand for.
        double ess = static_cast<double>(v.size());
        if (s == "is")
          ess = j["importance_ess"].get<double>();
        else if (s == "sir")
          ess = 1 / (1 / static_cast<double>(v.size()) + 1 / j["importance_ess"].get<double>());
        else if (s != "ar")
          ess = j["summary"][name]["ess_bulk"].get<double>();
        INFO(sampler << " " << name << ": effective sample size " << ess);
        double mean = 0, var = 0;
        if (s == "is") { // the weighted moments
          mean = j["summary"][name]["mean"].get<double>();
          var = std::pow(j["summary"][name]["sd"].get<double>(), 2);
        } else {
          mean = sample_mean(v);
          var = sample_variance(v);
          // Thinned to about one draw per effective draw for the KS test.
          std::vector<double> thinned;
          const size_t step = std::max<size_t>(1, static_cast<size_t>(v.size() / ess));
          for (size_t i = 0; i < v.size(); i += step)
            thinned.push_back(v[i]);
          check_ks(thinned, exact_mean, kPostVar, std::min(ess, double(thinned.size())));
        }
        INFO("mean " << mean << " (exact " << exact_mean << "), variance " << var << " (exact "
                     << kPostVar << ")");
        CHECK(std::fabs(mean - exact_mean) < 4 * std::sqrt(kPostVar / ess));
        CHECK(std::fabs(var - kPostVar) < 4 * kPostVar * std::sqrt(2 / ess));
      }
      if (s == "ar")
        CHECK(j["acceptance_rate"].get<double>() > 0.05);
      if (s == "smc") {
        // With the exact likelihood, E_prior[r] is the evidence p(x_o) = N(x_o; 0, 0.2 I). The
        // estimate's variance is about the sum over steps of 1 / ESS (each about N / 2 = 2000)
        // for the few steps this takes: sd < 0.05, so 4 sd is 0.2.
        double exact = 0;
        for (double x : kObserved)
          exact += -0.5 * x * x / (kPriorVar + kNoiseVar) -
                   0.5 * std::log(2 * M_PI * (kPriorVar + kNoiseVar));
        INFO("log evidence " << j["log_evidence"] << ", exact " << exact << ", steps "
                             << j["temperatures"].size());
        CHECK(std::fabs(j["log_evidence"].get<double>() - exact) < 0.2);
        CHECK(j["temperatures"].back() == 1.0);
      }
    }
  }
}

TEST_CASE("nre: on the 10-D gaussian_linear, the ratio-based posterior's mean and covariance are "
          "the analytic posterior's within what the validation loss allows",
          "[lfi]") {
  // sbibm's task as shipped: the posterior given x_o is N(x_o / 2, 0.05 I).
  const std::string exe = example_exe("gaussian_linear");
  const int dim = 10;
  const std::vector<double> x_o = {-0.36, -0.59, -0.11, 0.19, 0.51,
                                   0.05,  -0.25, -0.35, 0.33, 0.73}; // a draw of N(0, 0.2 I)
  const std::string observed = scratch_path("gl10_observed.json");
  write_file(observed, nlohmann::json{{"x", x_o}}.dump());
  // Exact posterior draws for the C2ST (accept-reject on the exact likelihood).
  const std::string exact = scratch_path("gl10_exact.csv");
  run_ok({exe, "posterior", "--ratio", "exact", "--observed", observed, "--sampler", "ar",
          "--draws", "2000", "--seed", "31", "--out", exact});
  for (const char* variant : {"a", "b"}) {
    SECTION(variant) {
      const std::string ratio = scratch_path(std::string("gl10_") + variant + ".ratio");
      // The defaults' schedule, on 2 x 10^4 simulations.
      const nlohmann::json fit =
          run_json({exe, "nre", "--n", "20000", "--variant", variant, "--save", ratio, "--json"});
      const LossFacts optimal = optimal_loss(dim, variant, 10);
      const double loss = fit["validation_loss"].get<double>();
      const double se = optimal.sd / std::sqrt(fit["validation_rows"].get<double>());
      // No classifier beats the Bayes-optimal loss beyond the validation set's Monte Carlo error
      // (5 standard errors: the reported loss is the least over the epochs, biased down), and a
      // classifier that learned the ratio comes within 4 of it.
      INFO(variant << ": validation loss " << loss << ", Bayes-optimal " << optimal.mean << " (se "
                   << se << "), sensitivity " << optimal.sensitivity);
      CHECK(loss > optimal.mean - 5 * se);
      CHECK(loss < optimal.mean + 4 * se);
      // The excess loss, at most the measured one plus 2 standard errors (and at least one),
      // bounds the variance of the log ratio's error, s^2 = 2 excess / S. To first order, the
      // error moves the posterior mean of theta_j by Cov(theta_j, eps) <= sd_j s, and its
      // covariance by Cov((theta_j - mu_j)(theta_k - mu_k), eps) <= sd_j sd_k s, sqrt(2) times
      // that on the diagonal. The draws' own Monte Carlo error comes on top, 4 standard errors.
      // A classifier's loss is least sensitive where the ratio is large, in the posterior's bulk:
      // S is about 0.11 for NRE-A here, and the validation set's standard error alone puts s
      // near 0.5 posterior sd, beyond where first order holds. These checks are what the loss
      // supports, loose by nature; the C2ST below is the sharp one.
      const double excess = std::max(loss - optimal.mean + 2 * se, se);
      const double s = std::sqrt(2 * excess / optimal.sensitivity);
      const std::string out = scratch_path(std::string("gl10_nre_") + variant + ".csv");
      run_ok({exe, "posterior", "--ratio", ratio, "--observed", observed, "--sampler", "ar",
              "--draws", "2000", "--bound-draws", "50000", "--out", out});
      const Table draws = read_stan_chains({out});
      const double n = static_cast<double>(draws.rows.size());
      std::vector<std::vector<double>> theta;
      std::vector<double> means;
      for (int j = 0; j < dim; ++j) {
        theta.push_back(draws.column(fmt::format("theta.{}", j + 1)));
        means.push_back(sample_mean(theta[j]));
      }
      for (int j = 0; j < dim; ++j) {
        const double mean = means[j];
        INFO(variant << " theta." << j + 1 << ": mean " << mean << " (exact " << x_o[j] / 2
                     << "), error allowed by the loss " << s << " sd");
        CHECK(std::fabs(mean - x_o[j] / 2) < std::sqrt(kPostVar) * (s + 4 / std::sqrt(n)));
        for (int k = 0; k <= j; ++k) {
          double cov = 0;
          for (size_t i = 0; i < theta[j].size(); ++i)
            cov += (theta[j][i] - mean) * (theta[k][i] - means[k]) / (n - 1);
          const double exact_cov = j == k ? kPostVar : 0.0;
          const double scale = j == k ? std::sqrt(2.0) : 1.0;
          INFO("cov(theta." << j + 1 << ", theta." << k + 1 << ") " << cov << " (exact "
                            << exact_cov << ")");
          CHECK(std::fabs(cov - exact_cov) < kPostVar * scale * (s + 4 / std::sqrt(n)));
        }
      }
      // The C2ST is sharper than the loss: sbi's NRE reaches 0.56 on this task at 10^4
      // simulations (this run scores about 0.50; its sd under the null is about 0.01), and the
      // prior scores 0.88 against these exact draws.
      const nlohmann::json c2st =
          run_json({ssmc_path(), "c2st", out, exact, "--json", "--max-draws", "2000"});
      INFO(variant << ": c2st " << c2st["c2st"] << ", mean error " << c2st["mean_error"]);
      CHECK(c2st["c2st"].get<double>() < 0.56);
    }
  }
}

TEST_CASE("nre: the patience is at least --patience-steps Adam steps, each plateau halves the "
          "step size until --decays are used, and the batch grows with the pairs",
          "[lfi]") {
  const std::string exe = gaussian_linear();
  const std::string ratio = scratch_path("gl_schedule.ratio");
  // 500 pairs: 450 to train on, 9 batches of 50 an epoch; a floor of 50 steps makes the patience
  // ceil(50 / 9) = 6 epochs, not 2.
  const nlohmann::json fit =
      run_json({exe, "nre", "--n", "500", "--patience", "2", "--patience-steps", "50", "--decays",
                "2", "--learning-rate", "0.004", "--save", ratio, "--json"});
  CHECK(fit["train_rows"] == 450);
  CHECK(fit["patience_epochs"] == 6);
  CHECK(fit["steps"] == 9 * fit["epochs"].get<int64_t>());
  REQUIRE(fit["stopped_early"] == true);
  // Two halvings, then the third plateau stops training: 0.004 / 4. Each plateau is 6 epochs
  // without a better loss: the last ends at least 6 epochs after the best network's, and the
  // three took at least 1 + 3 x 6 epochs.
  CHECK(fit["decays"] == 2);
  CHECK(fit["final_learning_rate"].get<double>() == 0.001);
  CHECK(fit["epochs"].get<int64_t>() >= fit["best_epoch"].get<int64_t>() + 6);
  CHECK(fit["epochs"].get<int64_t>() >= 19);
  // Without the floor, sbi's rule: the patience is the 2 epochs given.
  const nlohmann::json sbi_rule =
      run_json({exe, "nre", "--n", "500", "--patience", "2", "--patience-steps", "0", "--decays",
                "0", "--save", ratio, "--json"});
  CHECK(sbi_rule["patience_epochs"] == 2);
  CHECK(sbi_rule["decays"] == 0);
  CHECK(fit["batch_size"] == 50);
  // The default batch grows past 9,000 training pairs so that an epoch stays at 180 steps:
  // 18,000 pairs take batches of 100; a batch given is kept.
  const nlohmann::json large =
      run_json({exe, "nre", "--n", "20000", "--epochs", "1", "--save", ratio, "--json"});
  CHECK(large["batch_size"] == 100);
  CHECK(large["steps"] == 180);
  const nlohmann::json given = run_json({exe, "nre", "--n", "20000", "--epochs", "1",
                                         "--batch-size", "60", "--save", ratio, "--json"});
  CHECK(given["batch_size"] == 60);
  CHECK(given["steps"] == 300);
}

TEST_CASE("c2st: 0.5 between two samples of one law, more between two laws", "[lfi]") {
  const std::string exe = gaussian_linear(), observed = observed_file();
  const std::string a = scratch_path("c2st_a.csv"), b = scratch_path("c2st_b.csv");
  for (const auto& [path, seed] : {std::pair{a, "41"}, std::pair{b, "42"}})
    run_ok({exe, "posterior", "--ratio", "exact", "--observed", observed, "--sampler", "ar",
            "--draws", "1000", "--seed", seed, "--out", path});
  const nlohmann::json same_json = run_json({ssmc_path(), "c2st", a, b, "--json"});
  const double same = same_json["c2st"].get<double>();
  // Each fold tests 400 draws: the mean over 5 folds has sd about 0.5 / sqrt(2000) = 0.011 under
  // the null, plus the classifiers' own variation.
  CHECK(std::fabs(same - 0.5) < 0.06);
  // The distance between the means, in sd: its square is 2 / 1000 chi^2_3 under the null, below
  // 0.21^2 with probability 0.9999. The unbiased MMD^2's sd is about 0.0009 at these sizes.
  CHECK(same_json["mean_error"].get<double>() < 0.21);
  CHECK(std::fabs(same_json["mmd2"].get<double>()) < 0.0036);
  // theta.1 shifted by one posterior sd: the Bayes classifier's accuracy is Phi(1/2) = 0.69.
  Table shifted = read_stan_chains({b});
  const int column = shifted.column_index("theta.1");
  for (auto& row : shifted.rows)
    row[column] = fmt::format("{}", std::stod(row[column]) + std::sqrt(kPostVar));
  const std::string c = scratch_path("c2st_shifted.csv");
  write_table(c, shifted);
  const nlohmann::json apart_json = run_json({ssmc_path(), "c2st", a, c, "--json"});
  const double apart = apart_json["c2st"].get<double>();
  CHECK(apart > 0.62);
  CHECK(apart < 0.76);
  // The means one sd apart, within 4 standard errors, sqrt(2 / 1000) each.
  CHECK(std::fabs(apart_json["mean_error"].get<double>() - 1) < 0.19);
  CHECK_THAT(apart_json["mmd2"].get<double>(),
             Catch::WithinAbs(expected_mmd2(read_stan_chains({a}), shifted), 0.022));
  // The columns are matched by name: `theta[0]` is Stan's `theta.1`.
  Table renamed = read_stan_chains({b});
  for (auto& name : renamed.header)
    if (name.starts_with("theta."))
      name = fmt::format("theta[{}]", std::stoi(name.substr(6)) - 1);
  const std::string d = scratch_path("c2st_renamed.csv");
  write_table(d, renamed);
  CHECK(run_json({ssmc_path(), "c2st", a, d, "--json"})["c2st"].get<double>() == same);
}

TEST_CASE("posterior: accept-reject counts the proposals that raised its bound", "[lfi]") {
  const std::string exe = gaussian_linear(), observed = observed_file();
  // One prior draw sets the starting bound, so later proposals with larger ratios raise it.
  const ProcessResult p = run_ok({exe, "posterior", "--ratio", "exact", "--observed", observed,
                                  "--sampler", "ar", "--draws", "200", "--bound-draws", "1",
                                  "--out", scratch_path("ar_raises.csv"), "--json"});
  const nlohmann::json j = nlohmann::json::parse(p.out);
  const int64_t raises = j["bound_raises"].get<int64_t>();
  CHECK(raises >= 1);
  CHECK(j["log_bound"].get<double>() > j["log_bound_start"].get<double>());
  // Each proposal that raised C was accepted (with probability 1), all but the last of them
  // before C took its final value.
  CHECK(j["accepted_under_lower_bound"].get<int64_t>() >= raises - 1);
  CHECK_THAT(p.err, Catch::Contains(fmt::format("{} proposal(s) had a larger ratio", raises)));
  CHECK_THAT(p.err, Catch::Contains("raised the bound"));
}

TEST_CASE("posterior: the draws do not depend on --threads", "[lfi]") {
  const std::string exe = gaussian_linear(), observed = observed_file();
  const std::string ratio = scratch_path("gl_threads.ratio");
  run_ok({exe, "nre", "--n", "2000", "--epochs", "3", "--save", ratio});
  for (const std::string& r : {std::string("exact"), ratio})
    for (const char* sampler : {"ar", "sir", "mcmc"}) {
      std::vector<std::string> outs;
      for (const char* threads : {"1", "2"}) {
        const std::string out = scratch_path(fmt::format("threads_{}_{}.csv", sampler, threads));
        run_ok({exe, "posterior", "--ratio", r, "--observed", observed, "--sampler", sampler,
                "--draws", "500", "--chains", "1", "--threads", threads, "--out", out});
        outs.push_back(read_file(out));
      }
      INFO(sampler << " with ratio " << r);
      CHECK(outs[0] == outs[1]);
    }
}

TEST_CASE("abc: rejection and SMC-ABC approach the conjugate posterior", "[lfi]") {
  const std::string exe = gaussian_linear(), observed = observed_file();
  // The tolerance's own effect is small here: within a ball of radius r around x_o the posterior
  // mean moves by about r^2 / (d + 2) of the evidence's log-gradient (< 0.01) and the variance
  // grows by r^2 / (4 (d + 2)) (about 2% of it at the radii these runs reach, r < 0.25 raw).
  for (const char* method : {"rejection", "smc"}) {
    SECTION(method) {
      const nlohmann::json j =
          run_json({exe, "abc", "--observed", observed, "--method", method, "--simulations",
                    "200000", "--quantile", "0.005", "--population", "1000", "--json"});
      CHECK(j["draws"] == 1000);
      CHECK(j["simulations"].get<int64_t>() <= 200000);
      for (int k = 0; k < 3; ++k) {
        const std::string name = fmt::format("theta.{}", k + 1);
        const double mean = j["summary"][name]["mean"].get<double>();
        const double sd = j["summary"][name]["sd"].get<double>();
        INFO(method << " " << name << ": mean " << mean << ", sd " << sd << ", epsilon "
                    << j["epsilon"]);
        // SMC-ABC's draws are resampled from about its effective sample size.
        const double n_eff = std::string(method) == "smc" ? j["ess"].get<double>() : 1000.0;
        CHECK(std::fabs(mean - kObserved[k] / 2) < 4 * std::sqrt(kPostVar / n_eff) + 0.01);
        CHECK(sd / std::sqrt(kPostVar) > 1 - 4 * std::sqrt(0.5 / n_eff));
        CHECK(sd / std::sqrt(kPostVar) < 1.05 + 4 * std::sqrt(0.5 / n_eff));
      }
      if (std::string(method) == "smc") {
        const std::vector<nlohmann::json> eps = j["epsilons"];
        REQUIRE(eps.size() >= 3);
        for (size_t g = 2; g < eps.size(); ++g)
          CHECK(eps[g].get<double>() < eps[g - 1].get<double>());
      }
    }
  }
}

TEST_CASE("lfi: bad input is refused or reported, and nothing is silently dropped", "[lfi]") {
  const std::string gl = gaussian_linear(), moons = example_exe("two_moons");
  const std::string observed = observed_file();

  // The exact ratio needs an exact likelihood.
  auto r = run_process({moons, "posterior", "--ratio", "exact", "--observed", observed});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("latent variable(s) a, r"));

  // An observation of the wrong shape, or one the simulator does not have.
  const std::string short_x = scratch_path("short_x.json");
  write_file(short_x, R"({"x": [0.5, 0.1]})");
  r = run_process({gl, "posterior", "--ratio", "exact", "--observed", short_x});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains(short_x) && Catch::Contains("'x'"));
  const std::string other = scratch_path("other_obs.json");
  write_file(other, R"({"y": 1})");
  r = run_process({gl, "posterior", "--ratio", "exact", "--observed", other});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("'y' is not an observation of model 'gaussian_linear'"));

  // A ratio trained on another simulator; an observation beyond the training simulations.
  const std::string ratio = scratch_path("gl_small.ratio");
  run_ok({gl, "nre", "--n", "2000", "--epochs", "3", "--save", ratio});
  const std::string moons_x = scratch_path("moons_x.json");
  write_file(moons_x, R"({"x": [0.1, 0.2]})");
  r = run_process({moons, "posterior", "--ratio", ratio, "--observed", moons_x});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("trained on simulator 'gaussian_linear'"));
  const std::string far = scratch_path("far_x.json");
  write_file(far, R"({"x": [40, 0, 0]})");
  r = run_process(
      {gl, "posterior", "--ratio", ratio, "--observed", far, "--sampler", "sir", "--draws", "100"});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("the observed x[0] = 40 is outside the range"));

  // A ratio trained with other values of the data items.
  const std::string with_data = model_exe("with_data", kWithData);
  const std::string s1 = scratch_path("s1.json"), s2 = scratch_path("s2.json");
  write_file(s1, R"({"s": 1})");
  write_file(s2, R"({"s": 2})");
  const std::string data_ratio = scratch_path("with_data.ratio");
  run_ok(
      {with_data, "nre", "--n", "1000", "--epochs", "2", "--data-file", s1, "--save", data_ratio});
  const std::string x1 = scratch_path("x1.json");
  write_file(x1, R"({"x": 0.5})");
  r = run_process({with_data, "posterior", "--ratio", data_ratio, "--observed", x1, "--data-file",
                   s2, "--draws", "10"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("other values of the data items (1) than this run's (2)"));
  CHECK(run_process({with_data, "posterior", "--ratio", data_ratio, "--observed", x1, "--data-file",
                     s1, "--draws", "10"})
            .exit_code == 0);

  // A pairs file without the simulator's columns names the one missing.
  const std::string pairs = scratch_path("pairs_missing.csv");
  write_file(pairs, "theta[0],theta[1],theta[2],x[0],x[1]\n0,0,0,0,0\n");
  r = run_process({gl, "nre", "--pairs", pairs, "--save", scratch_path("never.ratio")});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("no column 'x[2]'"));
  CHECK_FALSE(file_exists(scratch_path("never.ratio")));

  // Non-finite observations are counted, reported and dropped.
  const std::string half = model_exe("half_undefined", kHalfUndefined);
  r = run_process({half, "simulate", "--n", "4000", "--json"});
  REQUIRE(r.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const int64_t dropped = j["dropped"].get<int64_t>();
  CHECK(dropped + j["kept"].get<int64_t>() == 4000);
  CHECK(std::fabs(dropped - 2000.0) < 4 * std::sqrt(4000 * 0.25)); // P(theta < 0) = 1/2
  CHECK_THAT(r.err, Catch::Contains(fmt::format("{} of 4000 simulations gave a non-finite "
                                                "observation and were dropped",
                                                dropped)));
  const std::string written = scratch_path("half.csv");
  run_ok({half, "simulate", "--n", "4000", "--out", written});
  CHECK(static_cast<int64_t>(read_table(written).rows.size()) == 4000 - dropped);
  // ... and so are a pairs file's, which nre names by their line and never trains on.
  const std::string with_nan = scratch_path("pairs_nan.csv");
  write_file(with_nan, "theta[0],theta[1],theta[2],x[0],x[1],x[2]\n0.1,0,0,0.2,0,0\n"
                       "0,0.1,0,nan,0,0\n0,0,0.1,0,0,0.2\n0.2,0,0,0,NA,0\n0,0.2,0,0,0,0.1\n"
                       "0,0,0.2,0.1,0,0\n0.3,0,0,0,0.1,0\n");
  r = run_process({gl, "nre", "--pairs", with_nan, "--epochs", "1", "--validation", "0.5", "--save",
                   scratch_path("nan.ratio"), "--json"});
  REQUIRE(r.exit_code == 0);
  const nlohmann::json fit = nlohmann::json::parse(r.out);
  CHECK(fit["pairs"] == 5);
  CHECK(fit["dropped"] == 2);
  CHECK(fit["train_rows"].get<int64_t>() + fit["validation_rows"].get<int64_t>() == 5);
  CHECK_THAT(r.err, Catch::Contains("2 pairs with a non-finite observation were dropped (the "
                                    "first: " +
                                    with_nan + " line 3)"));
}
