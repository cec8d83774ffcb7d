// The score by Fisher's identity, smoothed by a registered smoother: see score.h.
#include "learning/score.h"
#include "core/error.h"
#include "core/series.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

namespace ssm {

Refusal score_refusal(const ssm_model& model, const ModelInfo& info) {
  if (!info.no_score_reason.empty())
    return fmt::format("the compiler derived no score for model '{}': {}", info.name,
                       info.no_score_reason);
  if (info.params.empty() || info.n_theta == 0)
    return fmt::format("model '{}' has no parameters", info.name);
  if (!model.score_terms)
    return fmt::format("the model table of '{}' has no score_terms kernel (built by an older "
                       "ssmc? rebuild it)",
                       info.name);
  return std::nullopt;
}

ScoreModel score_model(const ssm_model& model, const ModelInfo& info) {
  if (Refusal why = score_refusal(model, info))
    throw Error("score: " + *why);
  ScoreModel s{model, info};
  s.model.functional_terms = model.score_terms;
  s.info.functionals_lack_sde_term = info.score_lacks_sde_term; // bis adds the SDE's term
  s.info.functionals.clear();
  for (const ParamInfo& p : info.params) {
    FunctionalInfo f;
    f.name = p.name;
    f.shape = p.shape;
    f.offset = p.offset;
    f.size = p.size;
    f.sum = f.additive = true;
    s.info.functionals.push_back(f);
  }
  s.info.n_functional = info.n_theta;
  return s;
}

ScoreResult estimate_score(const Method& smoother, const MethodRun& run, int64_t replicates) {
  const auto start = std::chrono::steady_clock::now();
  ScoreResult r;
  r.method = smoother.name;
  r.exact = !smoother.particles;
  r.replicates = r.exact ? 1 : std::max<int64_t>(replicates, 1);
  const int64_t n = run.info.n_theta;
  std::vector<std::vector<double>> draws;
  for (int64_t k = 0; k < r.replicates; ++k) {
    MethodRun one = run;
    one.seed = run.seed + static_cast<uint64_t>(k);
    const SmoothResult s = smooth_each_series(smoother, one);
    std::vector<double> g(n, 0.0);
    for (const FunctionalEstimate& f : s.functionals) {
      const FunctionalInfo* fi = nullptr;
      for (const FunctionalInfo& i : run.info.functionals)
        if (i.name == f.name)
          fi = &i;
      if (!fi || static_cast<int64_t>(f.total.size()) != fi->size)
        throw Error(fmt::format("score: the smoother returned no estimate for '{}'", f.name));
      for (int64_t c = 0; c < fi->size; ++c)
        g[fi->offset + c] = f.total[c];
    }
    for (int64_t c = 0; c < n; ++c)
      if (!std::isfinite(g[c]))
        throw Error(
            fmt::format("score: the estimate of component {} is not finite (replicate {})", c, k));
    draws.push_back(std::move(g));
    r.replicate_loglik.push_back(s.log_likelihood);
    r.log_likelihood += s.log_likelihood / static_cast<double>(r.replicates);
  }
  r.score.assign(n, 0.0);
  r.se.assign(n, 0.0);
  const auto R = static_cast<double>(r.replicates);
  for (const std::vector<double>& g : draws)
    for (int64_t c = 0; c < n; ++c)
      r.score[c] += g[c] / R;
  if (r.replicates > 1)
    for (int64_t c = 0; c < n; ++c) {
      double ss = 0;
      for (const std::vector<double>& g : draws)
        ss += (g[c] - r.score[c]) * (g[c] - r.score[c]);
      r.se[c] = std::sqrt(ss / (R - 1) / R);
    }
  r.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

} // namespace ssm
