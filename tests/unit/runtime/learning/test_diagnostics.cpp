// Unit tests of the MCMC diagnostics (learning/diagnostics.h) on chains with known answers:
// independent draws (R-hat 1, ESS the number of draws), an AR(1) chain (ESS n (1 - phi) / (1 +
// phi)), chains that disagree (R-hat far above 1), and the summary's quantiles.
#include "learning/diagnostics.h"

#include <catch2/catch.hpp>

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
