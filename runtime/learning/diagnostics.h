// Convergence diagnostics and summaries of MCMC draws, as Vehtari, Gelman, Simpson, Carpenter &
// Bürkner (2021) define them and Stan and the `posterior` package report them: rank-normalised
// split-R-hat (the larger of the bulk and folded ones), bulk and tail effective sample sizes
// (Geyer's initial monotone sequence over the chains' autocorrelations), quantiles.
#pragma once

#include <vector>

namespace ssm {

struct DrawSummary {
  double mean = 0, sd = 0, q5 = 0, q50 = 0, q95 = 0;
  double rhat = 0, ess_bulk = 0, ess_tail = 0;
  double mcse_mean = 0; // sd / sqrt(ess_bulk)
};

// One scalar's draws: chains[c][i], every chain the same length (at least 4 draws).
DrawSummary summarize_draws(const std::vector<std::vector<double>>& chains);

// The pieces, for tests: split-R-hat and ESS of chains as they are (no split, no ranks).
double split_rhat(const std::vector<std::vector<double>>& chains);
double effective_sample_size(const std::vector<std::vector<double>>& chains);

} // namespace ssm
