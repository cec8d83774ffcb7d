// The score, the gradient of the log-likelihood with respect to the parameters, by Fisher's
// identity: the smoothed expectation of the additive functional sum_t d/dtheta [log p(x_t |
// x_{t-1}) + log p(y_t | x_t)] whose terms the compiler derives (the score_terms kernel). Any
// registered smoother estimates it: exactly (rts, forward-backward) or by particles, then with a
// Monte Carlo standard error from independent replicates.
#pragma once

#include "core/method_registry.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ssm {

struct ScoreResult {
  std::string method;                   // the smoother that estimated it
  bool exact = false;                   // an exact smoother: no Monte Carlo error
  int64_t replicates = 1;               // independent runs averaged (particle smoothers)
  std::vector<double> score, se;        // per theta component; se 0 when exact
  double log_likelihood = 0;            // mean over the replicates
  std::vector<double> replicate_loglik; // per replicate
  double elapsed_s = 0;
};

// The model and its description as the smoothers must see them to smooth the score: the score
// terms as the functional terms, one `sum_t` functional per parameter. Throws ssm::Error, with
// the reason, when the model has no score terms.
struct ScoreModel {
  ssm_model model;
  ModelInfo info;
};
ScoreModel score_model(const ssm_model& model, const ModelInfo& info);
// Why the model has no score (score_model's error without its "score: "), or nullopt.
Refusal score_refusal(const ssm_model& model, const ModelInfo& info);

// Runs `smoother` (checked by the caller against score.model and score.info) `replicates` times
// with seeds seed, seed + 1, ... on `run`'s data; run.model and run.info must be score's.
ScoreResult estimate_score(const Method& smoother, const MethodRun& run, int64_t replicates);

} // namespace ssm
