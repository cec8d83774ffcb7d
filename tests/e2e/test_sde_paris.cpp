// paris's backward draws when the transition is an SDE whose density is only estimated: its
// pseudo-marginal Metropolis-Hastings moves (Martin 2022, end of 7.3.3) against its exact
// pseudo-marginal rejection draws on the Sine SDE, seed by seed. (Against exact smoothing laws on
// Ornstein-Uhlenbeck SDEs: test_sde.cpp, test_sde_parametrix.cpp.)
#include "support.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

using namespace e2e;

TEST_CASE("diffusion: paris's pseudo-marginal Metropolis-Hastings draws agree with its exact "
          "pseudo-marginal rejection draws on the Sine SDE",
          "[e2e][stat][sde]") {
  // After the bootstrap filter, whose ancestors are draws from the backward kernel (of the Euler
  // scheme; the same filter for both samplers, seed by seed): the moves' smoothing means against
  // those of rejection sampling with a fresh estimate per proposal, the differences paired by
  // seed, within 4 standard errors over 20 seeds at every t. The start's estimate is drawn among
  // 10 in proportion to them; with one fresh estimate the moves are accepted too often and
  // some mean is off by more than 4 standard errors (about 8 on this data).
  const std::string& exe = example_exe("sine_sde");
  const std::string data = scratch_path("sine-sde-mh-sim.csv");
  run_ok({exe, "simulate", "--T", "11", "--seed", "7", "--out", data});
  auto means = [&](const std::vector<std::string>& backward, const std::string& name) {
    std::vector<std::vector<double>> out;
    for (int k = 0; k < 20; ++k) {
      const std::string path = scratch_path(fmt::format("sine-sde-{}-{}.csv", name, k));
      std::vector<std::string> args = {exe,
                                       "smooth",
                                       "--data",
                                       data,
                                       "--method",
                                       "paris",
                                       "--filter",
                                       "bootstrap",
                                       "--particles",
                                       "1000",
                                       "--backward-samples",
                                       "10",
                                       "--marginals",
                                       "--seed",
                                       std::to_string(130 + k),
                                       "--out",
                                       path};
      args.insert(args.end(), backward.begin(), backward.end());
      run_ok(args);
      out.push_back(read_table(path).column("mean_x"));
    }
    return out;
  };
  const auto rejection = means({"--backward", "rejection"}, "rejection");
  const auto moves = means({"--backward", "mcmc"}, "moves");
  const auto fresh = means({"--backward", "mcmc", "--start-estimates", "1"}, "fresh");
  double worst_fresh = 0;
  for (size_t t = 0; t < rejection[0].size(); ++t) {
    std::vector<double> d, d_fresh;
    for (size_t k = 0; k < rejection.size(); ++k) {
      d.push_back(moves[k][t] - rejection[k][t]);
      d_fresh.push_back(fresh[k][t] - rejection[k][t]);
    }
    const auto n = static_cast<double>(d.size());
    if (sample_variance(d) == 0) // the last t: the filter's weights alone
      continue;
    check_mean_close(d, 0.0, 4, fmt::format("mcmc - rejection: E[x_{} | y]", t));
    worst_fresh = std::max(worst_fresh, std::fabs(sample_mean(d_fresh)) /
                                            std::sqrt(sample_variance(d_fresh) / n));
  }
  CHECK(worst_fresh > 4);
}
