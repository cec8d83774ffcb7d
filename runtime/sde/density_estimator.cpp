// DensityEstimator: see density_estimator.h.
#include "sde/density_estimator.h"

#include "core/error.h"
#include "sde/parametrix_estimator.h"
#include "sde/poisson_estimator.h"

#include <fmt/format.h>

#include <algorithm>

namespace ssm {

namespace {

// Adds sign exp(log_abs), a round's estimate, to a Wald sum held as exp(top) * scaled (no
// overflow or underflow); with K > 0, also its derivative, the estimate times dlog[0, K), to
// the sums of derivatives held as exp(top) * dscaled[0, K).
void add_to_wald_sum(double& top, double& scaled, double log_abs, double sign, int K = 0,
                     const double* dlog = nullptr, double* dscaled = nullptr) {
  if (sign == 0)
    return;
  double w = sign;
  if (log_abs > top) {
    const double shrink = std::exp(top - log_abs); // 0 for the first term (top = -inf)
    scaled *= shrink;
    for (int k = 0; k < K; ++k)
      dscaled[k] *= shrink;
    top = log_abs;
  } else {
    w *= std::exp(log_abs - top);
  }
  scaled += w;
  for (int k = 0; k < K; ++k)
    dscaled[k] += w * dlog[k];
}

} // namespace

DensityEstimator::DensityEstimator(const ssm_model& model, const ModelInfo& info, std::string name)
    : terms_(model, info), relation_(info.sde->relation), dim_(info.sde->dim),
      gradient_reason_(info.sde->gradient_reason), name_(std::move(name)) {}

void DensityEstimator::require_gradient(int64_t t) const {
  if (gradient_size() == 0)
    throw Error(
        fmt::format("{}: the gradient of the log density cannot be estimated: {}", error_prefix(t),
                    gradient_reason_.empty() ? "the model has no parameters" : gradient_reason_));
}

std::string DensityEstimator::error_prefix(int64_t t) const {
  return fmt::format("the {} estimator for {} at t={}", name_, relation_, t);
}

void DensityEstimator::check_ids(int64_t t, int64_t P, uint64_t first_id) const {
  if (first_id + static_cast<uint64_t>(P) > (uint64_t{1} << 32))
    throw Error(fmt::format("{}: {} pairs from id {} exceed the 2^32 random streams of a step",
                            error_prefix(t), P, first_id));
}

void DensityEstimator::find_bad(const double* prev, const double* cur, int64_t P) {
  bad_.assign(P, false);
  for (int64_t p = 0; p < P; ++p)
    for (int c = 0; c < dim_; ++c)
      if (!(std::isfinite(prev[c * P + p]) && std::isfinite(cur[c * P + p])))
        bad_[p] = true;
}

std::vector<int64_t> DensityEstimator::finite_pairs() const {
  std::vector<int64_t> out;
  for (int64_t p = 0; p < static_cast<int64_t>(bad_.size()); ++p)
    if (!bad_[p])
      out.push_back(p);
  return out;
}

std::string DensityEstimator::point_text(const double* x, int64_t stride) const {
  if (dim_ == 1)
    return fmt::format("{}", x[0]);
  std::string out = "(";
  for (int c = 0; c < dim_; ++c)
    out += fmt::format("{}{}", c ? ", " : "", x[c * stride]);
  return out + ")";
}

std::string DensityEstimator::pair_text(const double* prev, const double* cur, int64_t P,
                                        int64_t p) const {
  return point_text(prev + p, P) + " -> " + point_text(cur + p, P);
}

void DensityEstimator::prepare_with_gradient(const double* frame, int64_t t, const double* prev,
                                             const double* cur, int64_t P, bool gradient) {
  if (gradient)
    require_gradient(t);
  with_gradient_ = gradient;
  prepare(frame, t, prev, cur, P);
  if (gradient) {
    base_grad_.assign(static_cast<size_t>(P) * gradient_size(), 0.0);
    prepare_gradient(frame, t);
  }
}

void DensityEstimator::single(const double* frame, int64_t t, const double* prev, const double* cur,
                              int64_t P, uint64_t seed, uint64_t first_id, int r, double* log_base,
                              double* factor, EstimatorCounts* counts, double* grad) {
  check_ids(t, P, first_id);
  prepare_with_gradient(frame, t, prev, cur, P, grad != nullptr);
  single_round(frame, t, P, seed, first_id, r, log_base, factor, counts, grad);
}

void DensityEstimator::single_rounds(const double* frame, int64_t t, const double* prev,
                                     const double* cur, int64_t P, uint64_t seed, uint64_t first_id,
                                     const std::vector<int>& rounds, bool gradient,
                                     const RoundSink& take) {
  check_ids(t, P, first_id);
  prepare_with_gradient(frame, t, prev, cur, P, gradient);
  const int K = gradient ? gradient_size() : 0;
  std::vector<double> log_base(P), factor(P), grad(static_cast<size_t>(K) * P);
  for (int r : rounds) {
    single_round(frame, t, P, seed, first_id, r, log_base.data(), factor.data(), nullptr,
                 gradient ? grad.data() : nullptr);
    take(r, log_base.data(), factor.data(), gradient ? grad.data() : nullptr);
  }
}

void DensityEstimator::single_round(const double* frame, int64_t t, int64_t P, uint64_t seed,
                                    uint64_t first_id, int r, double* log_base, double* factor,
                                    EstimatorCounts* counts, double* grad) {
  const int K = grad ? gradient_size() : 0;
  std::vector<double> log_abs(P, -INFINITY), sign(P, 0.0), dlog(static_cast<size_t>(P) * K, 0.0);
  round(frame, t, finite_pairs(), r, seed, first_id, log_abs.data(), sign.data(), counts,
        grad ? dlog.data() : nullptr);
  for (int64_t p = 0; p < P; ++p) { // a diverged pair's log_base_ is -inf
    log_base[p] = log_base_[p];
    factor[p] = sign[p] * std::exp(log_abs[p]);
    for (int k = 0; k < K; ++k)
      grad[k * P + p] = bad_[p] ? 0.0 : base_grad_[p * K + k] + dlog[p * K + k];
  }
}

void DensityEstimator::estimate(const double* frame, int64_t t, const double* prev,
                                const double* cur, int64_t P, int64_t per, uint64_t seed,
                                uint64_t first_id, double* log_q, EstimatorCounts* counts,
                                double* grad) {
  if (per < 1 || P % per != 0)
    throw Error(fmt::format("internal error: {} pairs in sets of {}", P, per));
  check_ids(t, P, first_id);
  prepare_with_gradient(frame, t, prev, cur, P, grad != nullptr);
  const int64_t sets = P / per;
  const int K = grad ? gradient_size() : 0;
  // Each pair's Wald sum, sum_r sign_r exp(l_r), held as exp(top) * scaled: no overflow or
  // underflow; with the gradient, the sums of the rounds' derivatives as exp(top) * dscaled
  // (pair p's at [p K, p K + K)). A pair with a non-finite end takes no part.
  std::vector<double> top(P, -INFINITY), scaled(P, 0.0), log_abs(P), sign(P);
  std::vector<double> dlog(static_cast<size_t>(P) * K), dscaled(static_cast<size_t>(P) * K, 0.0);
  std::vector<bool> active(sets, true);
  std::vector<int64_t> pending = finite_pairs();
  // Wald: every pair of a set whose sums are not all positive gets a fresh estimate, until none.
  for (int r = 0; !pending.empty(); ++r) {
    if (r == kMaxWaldRounds) { // name a pair whose sum is still not positive
      const int64_t p = *std::find_if(pending.begin(), pending.end(),
                                      [&](int64_t q) { return !(scaled[q] > 0); });
      throw Error(fmt::format("{}: after {} rounds of Wald's loop the estimates of the pair {} "
                              "(set {}) are still not all positive (the signed estimates are "
                              "heavy-tailed for a pair far apart for the transition's noise over "
                              "dt, or for a drift that varies much over dt: see "
                              "docs/language.md, SDE transitions)",
                              error_prefix(t), kMaxWaldRounds, pair_text(prev, cur, P, p),
                              p / per));
    }
    round(frame, t, pending, r, seed, first_id, log_abs.data(), sign.data(), counts,
          K > 0 ? dlog.data() : nullptr);
    for (int64_t p : pending)
      add_to_wald_sum(top[p], scaled[p], log_abs[p], sign[p], K,
                      K > 0 ? dlog.data() + p * K : nullptr,
                      K > 0 ? dscaled.data() + p * K : nullptr);
    std::vector<int64_t> next;
    for (int64_t set = 0; set < sets; ++set) {
      if (!active[set])
        continue;
      const int64_t b = set * per;
      bool done = true;
      for (int64_t p = b; p < b + per; ++p)
        done = done && (bad_[p] || scaled[p] > 0);
      active[set] = !done;
      if (active[set])
        for (int64_t p = b; p < b + per; ++p)
          if (!bad_[p])
            next.push_back(p);
    }
    if (counts && !next.empty())
      ++counts->extra_rounds;
    pending.swap(next);
  }
  for (int64_t p = 0; p < P; ++p) {
    log_q[p] = bad_[p] ? -INFINITY : log_base_[p] + top[p] + std::log(scaled[p]);
    for (int k = 0; k < K; ++k) // Q' / Q = d log_base + (sum of the rounds' derivatives) / sum
      grad[k * P + p] = bad_[p] ? 0.0 : base_grad_[p * K + k] + dscaled[p * K + k] / scaled[p];
  }
}

void DensityEstimator::estimate_one_set(const ssm_model& model, const ModelInfo& info,
                                        ThreadPool& pool, const double* frame, int64_t t,
                                        const double* prev, const double* cur, int64_t P,
                                        uint64_t seed, uint64_t first_id, double* log_q,
                                        EstimatorCounts* counts) {
  const int d = info.sde->dim;
  const int64_t blocks = (P + kEstimateBlock - 1) / kEstimateBlock;
  auto size_of = [&](int64_t b) {
    return std::min(P, (b + 1) * kEstimateBlock) - b * kEstimateBlock;
  };
  std::vector<std::unique_ptr<DensityEstimator>> est(blocks);
  std::vector<std::vector<int64_t>> finite(blocks);
  std::vector<std::vector<double>> log_abs(blocks), sign(blocks);
  std::vector<EstimatorCounts> block_counts(blocks);
  pool.parallel_for(blocks, [&](int64_t b) {
    const int64_t begin = b * kEstimateBlock, n = size_of(b);
    std::vector<double> from(d * n), to(d * n); // the block's pairs, component-major
    for (int c = 0; c < d; ++c)
      for (int64_t k = 0; k < n; ++k) {
        from[c * n + k] = prev[c * P + begin + k];
        to[c * n + k] = cur[c * P + begin + k];
      }
    est[b] = make_density_estimator(model, info);
    est[b]->check_ids(t, n, first_id + static_cast<uint64_t>(begin));
    est[b]->prepare(frame, t, from.data(), to.data(), n);
    finite[b] = est[b]->finite_pairs();
    log_abs[b].assign(n, -INFINITY);
    sign[b].assign(n, 0.0);
  });
  // Each pair's Wald sum as exp(top) * scaled (see estimate()); every finite pair gets a fresh
  // estimate each round until all sums are positive.
  std::vector<double> top(P, -INFINITY), scaled(P, 0.0);
  for (int r = 0;; ++r) {
    if (r == kMaxWaldRounds) {
      int64_t p = 0;
      while (p < P && !(scaled[p] <= 0 && !est[p / kEstimateBlock]->bad_[p % kEstimateBlock]))
        ++p;
      throw Error(fmt::format("{}: after {} rounds of Wald's loop the estimates of the {} pairs "
                              "weighed together are still not all positive (pair {}: {})",
                              est[0]->error_prefix(t), kMaxWaldRounds, P, p,
                              est[0]->pair_text(prev, cur, P, std::min(p, P - 1))));
    }
    pool.parallel_for(blocks, [&](int64_t b) {
      est[b]->round(frame, t, finite[b], r, seed,
                    first_id + static_cast<uint64_t>(b * kEstimateBlock), log_abs[b].data(),
                    sign[b].data(), &block_counts[b], nullptr);
    });
    bool done = true;
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t k : finite[b]) {
        const int64_t p = b * kEstimateBlock + k;
        add_to_wald_sum(top[p], scaled[p], log_abs[b][k], sign[b][k]);
        done = done && scaled[p] > 0;
      }
    if (done)
      break;
    if (counts)
      ++counts->extra_rounds;
  }
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t k = 0; k < size_of(b); ++k) {
      const int64_t p = b * kEstimateBlock + k;
      log_q[p] = est[b]->bad_[k] ? -INFINITY : est[b]->log_base_[k] + top[p] + std::log(scaled[p]);
    }
    if (counts) {
      counts->estimates += block_counts[b].estimates;
      counts->skeleton_points += block_counts[b].skeleton_points;
      counts->bridge_points += block_counts[b].bridge_points;
    }
  }
}

std::string density_estimator_problem(const ssm_model& model, const ModelInfo& info) {
  if (!info.sde)
    return "the model has no SDE transition";
  if (!info.sde->why_not.empty())
    return info.sde->why_not;
  if (!model.diffusion_terms)
    return "the model table has no diffusion_terms kernel";
  if (info.sde->estimator == "gpe")
    return info.sde->gpe_reason;
  if (info.sde->estimator == "parametrix")
    return info.sde->parametrix_reason;
  return info.sde->gpe_reason.empty() ? "no estimator was chosen" : info.sde->gpe_reason;
}

std::unique_ptr<DensityEstimator> make_density_estimator(const ssm_model& model,
                                                         const ModelInfo& info) {
  if (std::string why = density_estimator_problem(model, info); !why.empty())
    throw Error(fmt::format("no estimator of the density of {} applies: {}",
                            info.sde ? info.sde->relation : "the transition", why));
  if (info.sde->estimator == "gpe")
    return std::make_unique<PoissonEstimator>(model, info);
  return std::make_unique<ParametrixEstimator>(model, info);
}

std::string density_gradient_problem(const ModelInfo& info, const std::string& estimator) {
  if (!info.sde)
    return "the model has no SDE transition";
  if (!info.sde->gradient_reason.empty())
    return info.sde->gradient_reason;
  const std::string& which = estimator.empty() ? info.sde->estimator : estimator;
  if (which == "parametrix" && info.sde->coefficient_gradient_rows > 0)
    return "the diffusion coefficient reads the parameters, which only the General Poisson "
           "estimate's derivative follows (--estimator gpe)";
  return {};
}

void choose_density_estimator(ModelInfo& info, const std::string& choice) {
  if (!info.sde || choice == "auto")
    return;
  ModelInfo::Sde& sde = *info.sde;
  if (!sde.why_not.empty())
    throw Error(fmt::format("--estimator {}: no estimator of the density of {} applies: {}", choice,
                            sde.relation, sde.why_not));
  const std::string& why = choice == "gpe" ? sde.gpe_reason : sde.parametrix_reason;
  if (!why.empty()) {
    const std::string other = choice == "gpe" ? "parametrix" : "gpe";
    const std::string& other_why = choice == "gpe" ? sde.parametrix_reason : sde.gpe_reason;
    throw Error(
        fmt::format("--estimator {}: the {} estimator does not apply to {}: {}{}", choice,
                    choice == "gpe" ? "General Poisson" : "parametrix", sde.relation, why,
                    other_why.empty() ? fmt::format(" (--estimator {} applies)", other) : ""));
  }
  sde.estimator = choice;
}

} // namespace ssm
