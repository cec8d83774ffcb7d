// Unit tests of the MCMC diagnostics (learning/diagnostics.h) on chains with known answers:
// independent draws (R-hat 1, ESS the number of draws), an AR(1) chain (ESS n (1 - phi) / (1 +
// phi)), chains that disagree (R-hat far above 1), and the summary's quantiles; importance
// weights: k-hat of generalised Pareto tails, the log mean weight and ESS of log-normal weights,
// Pareto smoothing's lower error on a light-tailed proposal.
#include "learning/diagnostics.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

using ssm::DrawSummary;

namespace {

std::vector<std::vector<double>> ar1_chains(int chains, int n, double phi, double shift,
                                            unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<std::vector<double>> out(chains);
  for (int c = 0; c < chains; ++c) {
    double x = normal(rng) / std::sqrt(1 - phi * phi);
    for (int i = 0; i < n; ++i) {
      x = phi * x + normal(rng);
      out[c].push_back(x + shift * c);
    }
  }
  return out;
}

} // namespace

TEST_CASE("independent draws: R-hat near 1 and ESS near the number of draws", "[diagnostics]") {
  const auto chains = ar1_chains(4, 2000, 0.0, 0.0, 1);
  const DrawSummary s = ssm::summarize_draws(chains);
  CHECK(s.rhat < 1.01);
  CHECK(s.ess_bulk == Approx(8000).epsilon(0.1));
  CHECK(s.ess_tail == Approx(8000).epsilon(0.15));
  CHECK(s.mean == Approx(0).margin(4 / std::sqrt(8000.0)));
  CHECK(s.sd == Approx(1).epsilon(0.03));
  CHECK(s.q5 == Approx(-1.645).margin(0.06));
  CHECK(s.q95 == Approx(1.645).margin(0.06));
}

TEST_CASE("an AR(1) chain: ESS n (1 - phi) / (1 + phi)", "[diagnostics]") {
  const double phi = 0.8;
  const auto chains = ar1_chains(4, 5000, phi, 0.0, 2);
  const double expected = 20000 * (1 - phi) / (1 + phi);
  CHECK(ssm::effective_sample_size(chains) == Approx(expected).epsilon(0.15));
  CHECK(ssm::summarize_draws(chains).ess_bulk == Approx(expected).epsilon(0.15));
}

TEST_CASE("chains that disagree have R-hat far above 1", "[diagnostics]") {
  const auto chains = ar1_chains(4, 1000, 0.5, 1.0, 3);
  CHECK(ssm::summarize_draws(chains).rhat > 1.3); // the raw ratio: sqrt(1 + 1.67 / 1.33) ~ 1.5
  // Same means but one chain with a wider spread: the folded R-hat sees it.
  auto wide = ar1_chains(4, 1000, 0.0, 0.0, 4);
  for (double& x : wide[0])
    x *= 3;
  CHECK(ssm::summarize_draws(wide).rhat > 1.05);
}

namespace {

// n draws of log w, w from a generalised Pareto distribution of shape xi and scale 1.
std::vector<double> pareto_log_weights(int n, double xi, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<double> lw;
  for (int i = 0; i < n; ++i)
    lw.push_back(std::log((std::pow(1 - uniform(rng), -xi) - 1) / xi));
  return lw;
}

} // namespace

TEST_CASE("Pareto k-hat recovers the shape of a generalised Pareto tail", "[diagnostics]") {
  // 20 replicates of 20,000 draws: each fits ceil(3 sqrt(20000)) = 425 excesses, whose estimate's
  // sd is about (1 + k) / sqrt(425) ~ 0.08; their mean's, 0.02. The prior shrinks k towards 0.5 by
  // 10/435.
  for (const double xi : {0.3, 0.7, 1.2}) {
    double mean = 0;
    for (unsigned r = 0; r < 20; ++r)
      mean += ssm::pareto_khat(pareto_log_weights(20000, xi, 100 + r)) / 20;
    const double shrunk = (425 * xi + 5) / 435;
    CHECK(mean == Approx(shrunk).margin(0.07));
  }
}

TEST_CASE("importance diagnostics of log-normal weights", "[diagnostics]") {
  // log w ~ N(0, s^2): E[w] = exp(s^2 / 2) and Kish's ESS n / E[w^2] * E[w]^2 = n exp(-s^2); a
  // tail this light has k-hat near 0.
  const double s = 0.5;
  const int n = 40000;
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0.0, s);
  std::vector<double> lw;
  for (int i = 0; i < n; ++i)
    lw.push_back(normal(rng));
  lw.push_back(-INFINITY); // a draw where the target is 0: a weight of 0
  const ssm::ImportanceDiagnostics d = ssm::importance_diagnostics(lw);
  const double exact = s * s / 2 + std::log(double(n) / (n + 1));
  CHECK(d.log_mean_weight == Approx(exact).margin(4 * d.log_mean_weight_se));
  CHECK(d.log_mean_weight_se == Approx(std::sqrt((std::exp(s * s) - 1) / n)).epsilon(0.05));
  CHECK(d.ess == Approx(n * std::exp(-s * s)).epsilon(0.03));
  CHECK(d.pareto_k < 0.3);
  CHECK(std::isnan(ssm::pareto_khat({0.0, 1.0, 2.0}))); // too few draws for a tail
}

TEST_CASE("Pareto-smoothed importance weights: the tail smoothed, the bulk kept, less error",
          "[diagnostics]") {
  // Target N(0, 1), proposal N(0, 0.7^2): the weights' tail is heavy (k = 1 - 0.7^2 ~ 0.5).
  // E[x^2] = 1.
  const double s = 0.7;
  const int n = 2000, replicates = 200;
  double raw_sq = 0, psis_sq = 0, psis_mean = 0;
  for (int r = 0; r < replicates; ++r) {
    std::mt19937_64 rng(1000 + r);
    std::normal_distribution<double> normal(0.0, s);
    std::vector<double> x(n), lw(n);
    for (int i = 0; i < n; ++i) {
      x[i] = normal(rng);
      lw[i] = -0.5 * x[i] * x[i] + 0.5 * x[i] * x[i] / (s * s) + std::log(s);
    }
    const std::vector<double> smoothed = ssm::psis_log_weights(lw);
    // Below the tail's cutoff nothing moves; the tail stays below the largest raw weight.
    const double top = *std::max_element(lw.begin(), lw.end());
    int moved = 0;
    for (int i = 0; i < n; ++i)
      moved += smoothed[i] != lw[i];
    CHECK(moved <= 135); // ceil(3 sqrt(2000)) = 135 tail weights
    CHECK(*std::max_element(smoothed.begin(), smoothed.end()) <= top);
    auto estimate = [&](const std::vector<double>& l) {
      double num = 0, den = 0;
      for (int i = 0; i < n; ++i) {
        const double w = std::exp(l[i] - top);
        num += w * x[i] * x[i];
        den += w;
      }
      return num / den;
    };
    const double a = estimate(lw), b = estimate(smoothed);
    raw_sq += (a - 1) * (a - 1) / replicates;
    psis_sq += (b - 1) * (b - 1) / replicates;
    psis_mean += b / replicates;
  }
  INFO("RMSE raw " << std::sqrt(raw_sq) << ", PSIS " << std::sqrt(psis_sq) << "; PSIS mean "
                   << psis_mean);
  const double bias2 = (psis_mean - 1) * (psis_mean - 1);
  CHECK(psis_sq < raw_sq);                  // smoothing lowers the error
  CHECK(bias2 < psis_sq - bias2);           // and its bias is smaller than its spread
  const std::vector<double> flat(100, 0.5); // equal weights: no tail to fit, nothing changes
  CHECK(ssm::psis_log_weights(flat) == flat);
  // Draws of weight 0 (-inf, NaN) stay out of the tail: never smoothed into a weight.
  std::vector<double> some_zero = {-INFINITY, NAN};
  std::mt19937_64 rng(5);
  std::exponential_distribution<double> exponential(1.0);
  for (int i = 0; i < 100; ++i)
    some_zero.push_back(exponential(rng));
  const std::vector<double> smoothed = ssm::psis_log_weights(some_zero);
  CHECK(smoothed[0] == -INFINITY);
  CHECK(smoothed[1] == -INFINITY);
  CHECK(std::isfinite(ssm::pareto_khat(some_zero)));
}
