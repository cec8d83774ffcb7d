// Convergence diagnostics and summaries of MCMC draws, as Vehtari, Gelman, Simpson, Carpenter &
// Bürkner (2021) define them and Stan and the `posterior` package report them: rank-normalised
// split-R-hat (the larger of the bulk and folded ones), bulk and tail effective sample sizes
// (Geyer's initial monotone sequence over the chains' autocorrelations), quantiles; and the
// diagnostics of importance weights that check draws from an approximation (PSIS's k̂).
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

// Importance weights w_i = p̃(x_i) / q(x_i) of independent draws from q, by which a variational fit
// is checked (Yao, Vehtari, Simpson & Gelman 2018): log mean w, an estimate of log ∫ p̃ (the log
// evidence when p̃ is the joint density), with its delta-method standard error sd(w) / (sqrt(n)
// mean(w)); Kish's effective sample size (Σ w)² / Σ w²; and the Pareto k̂ of the weights' upper
// tail, whose estimates are reliable below 0.7 (Vehtari, Simpson, Gelman, Yao & Gabry 2024).
// A non-finite log weight counts as a weight of 0.
struct ImportanceDiagnostics {
  double log_mean_weight = 0, log_mean_weight_se = 0, ess = 0, pareto_k = 0;
};
ImportanceDiagnostics importance_diagnostics(const std::vector<double>& log_weights);

// The shape k̂ of a generalised Pareto distribution fitted to the largest min(n / 5, 3 sqrt(n))
// of the n finite weights' excesses over the next one, by Zhang & Stephens's (2009) empirical
// Bayes estimate with PSIS's weakly informative prior (k̂ shrunk towards 0.5 as by 10
// observations). NaN with fewer than 5 excesses (under 21 finite weights) or when the tail is
// constant.
double pareto_khat(const std::vector<double>& log_weights);

// Pareto-smoothed importance sampling (Vehtari et al. 2024): the log weights with the tail that
// pareto_khat fits replaced by the fitted distribution's quantiles at (i - 1/2) / M (in the
// tail's order), none above the largest raw weight; the others as given (a non-finite one -inf,
// never smoothed).
// Unchanged when no tail can be fitted.
std::vector<double> psis_log_weights(const std::vector<double>& log_weights);

} // namespace ssm
