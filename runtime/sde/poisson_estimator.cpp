// PoissonEstimator: see poisson_estimator.h.
#include "sde/poisson_estimator.h"

#include "core/error.h"
#include "kernel/distributions.h"
#include "kernel/rng.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

namespace ssm {

namespace {

// 8-point Gauss-Legendre on [-1, 1]: exact for polynomials of degree 15 on each panel.
constexpr double kNodes[] = {-0.9602898564975363, -0.7966664774136267, -0.5255324099163290,
                             -0.1834346424956498, 0.1834346424956498,  0.5255324099163290,
                             0.7966664774136267,  0.9602898564975363};
constexpr double kWeights[] = {0.1012285362903763, 0.2223810344533745, 0.3137066458778873,
                               0.3626837833783620, 0.3626837833783620, 0.3137066458778873,
                               0.2223810344533745, 0.1012285362903763};
constexpr int kNodesPerPanel = 8;
constexpr int kMaxPanels = 1000;
constexpr int kEndpoints = 3; // u, v and their midpoint: psi there sets c when psi is unbounded

int panels(double u, double v) {
  return static_cast<int>(std::clamp(std::ceil(std::fabs(v - u)), 1.0, double(kMaxPanels)));
}

} // namespace

std::string poisson_estimator_problem(const ssm_model& model, const ModelInfo& info) {
  if (!info.sde)
    return "the model has no SDE transition";
  if (!info.sde->why_not.empty())
    return info.sde->why_not;
  if (!info.sde->gpe_reason.empty())
    return info.sde->gpe_reason;
  if (!model.diffusion_terms)
    return "the model table has no diffusion_terms kernel";
  return {};
}

PoissonEstimator::PoissonEstimator(const ssm_model& model, const ModelInfo& info)
    : DensityEstimator(model, info, "General Poisson"), lower_given_(info.sde->psi_lower_given),
      upper_given_(info.sde->psi_upper_given) {
  if (!info.sde->gpe_reason.empty())
    throw Error(fmt::format("the General Poisson estimator does not apply to {}: {}", relation_,
                            info.sde->gpe_reason));
}

void PoissonEstimator::check_psi(int64_t t, double value, double x) const {
  const double slack =
      1e-9 * (1 + std::fabs(lower_) + (std::isfinite(upper_) ? std::fabs(upper_) : 0));
  const bool below = value < lower_ - slack;
  const bool above = value > upper_ + slack;
  if (!below && !above)
    return;
  const double bound = below ? lower_ : upper_;
  if (below ? lower_given_ : upper_given_) // the tighter of the model's and the compiler's
    throw Error(fmt::format("{}: psi = {} at x = {} is {} {}, the model's {}: the bound "
                            "does not hold, and estimates that rely on it would be wrong",
                            error_prefix(t), value, x, below ? "below" : "above", bound,
                            below ? "psi_lower" : "psi_upper"));
  throw Error(fmt::format("{}: psi = {} at x = {} is {} {}, the {} bound the compiler "
                          "derived",
                          error_prefix(t), value, x, below ? "below" : "above", bound,
                          below ? "lower" : "upper"));
}

int64_t PoissonEstimator::panels_of(int64_t p) const {
  return (first_node_[p + 1] - first_node_[p] - kEndpoints) / kNodesPerPanel;
}

int64_t PoissonEstimator::node_count(int64_t p) const {
  return panels_of(p) * kNodesPerPanel;
}

int64_t PoissonEstimator::node_point(int64_t p, int64_t q) const {
  return first_node_[p] + kEndpoints + q;
}

double PoissonEstimator::node_weight(int64_t p, int64_t q) const {
  return kWeights[q % kNodesPerPanel] * 0.5 * (y_[p] - x_[p]) / static_cast<double>(panels_of(p));
}

double PoissonEstimator::psi(int64_t point) const {
  const double b = terms_.drift(point) / scale_; // b(u) = a(s u) / s, b'(u) = a'(s u)
  return 0.5 * (b * b + terms_.jacobian(point));
}

double PoissonEstimator::psi_theta(int64_t point, int k) const {
  const double a = terms_.drift(point);
  return a * terms_.drift_theta(point, k) / (scale_ * scale_) +
         0.5 * terms_.divergence_theta(point, k);
}

double PoissonEstimator::drift_integral_theta(int64_t p, int k) const {
  double integral = 0;
  for (int64_t q = 0; q < node_count(p); ++q)
    integral += node_weight(p, q) * terms_.drift_theta(node_point(p, q), k);
  return integral / (scale_ * scale_);
}

bool PoissonEstimator::exact_bridges(const double* frame, int64_t t) {
  constants(frame, t, 0.0);
  return std::isfinite(upper_) && !lower_given_ && !upper_given_;
}

void PoissonEstimator::prepare_gradient(const double* /*frame*/, int64_t /*t*/) {
  // c, lambda and the bridge (u, v fixed: s and dt do not read theta) are held: only B moves.
  const int K = gradient_size();
  for (int64_t p : finite_pairs())
    for (int k = 0; k < K; ++k)
      base_grad_[p * K + k] = drift_integral_theta(p, k);
}

double PoissonEstimator::log_bound(const double* frame, int64_t t) {
  constants(frame, t, 0.0);
  if (!(std::isfinite(upper_) && std::isfinite(drift_lower_) && std::isfinite(drift_upper_)))
    return INFINITY;
  const double m = std::max(std::fabs(drift_lower_), std::fabs(drift_upper_)) / scale_;
  return -lower_ * dt_ + 0.5 * m * m * dt_ - 0.5 * std::log(2 * std::numbers::pi * dt_) -
         std::log(scale_);
}

void PoissonEstimator::constants(const double* frame, int64_t t, double probe) {
  terms_.evaluate(frame, t, &probe, 1);
  scale_ = terms_.coefficient(0);
  dt_ = terms_.dt(0);
  lower_ = terms_.psi_lower(0);
  upper_ = terms_.psi_upper(0);
  drift_lower_ = terms_.drift_lower(0);
  drift_upper_ = terms_.drift_upper(0);
  if (!(std::isfinite(scale_) && scale_ != 0))
    throw Error(fmt::format("the diffusion coefficient of {} at t={} is {}: it must be finite and "
                            "not 0",
                            relation_, t, scale_));
  scale_ = std::fabs(scale_); // s dW and -s dW are the same process
  if (!(std::isfinite(dt_) && dt_ > 0))
    throw Error(fmt::format("dt of {} at t={} is {}: it must be positive", relation_, t, dt_));
  if (!std::isfinite(lower_) || !(upper_ >= lower_))
    throw Error(fmt::format("{}: psi's bounds are [{}, {}] for these parameters (a finite lower "
                            "bound is needed)",
                            error_prefix(t), lower_, upper_));
}

void PoissonEstimator::prepare(const double* frame, int64_t t, const double* prev,
                               const double* cur, int64_t P) {
  // The coefficient, dt and the bounds read no point: one evaluation gives them.
  constants(frame, t, P > 0 ? prev[0] : 0.0);

  // Points: per pair, u, v, the midpoint, then the quadrature nodes of [x, y] (x-coordinates).
  // A pair with a non-finite end (a path that diverged) has density estimate 0: only its
  // endpoints, as 0, are evaluated, and it gets log q = -inf.
  first_node_.assign(P + 1, 0);
  u_.resize(P);
  v_.resize(P);
  x_.resize(P);
  y_.resize(P);
  find_bad(prev, cur, P);
  for (int64_t p = 0; p < P; ++p) {
    x_[p] = bad_[p] ? 0.0 : prev[p];
    y_[p] = bad_[p] ? 0.0 : cur[p];
    u_[p] = x_[p] / scale_;
    v_[p] = y_[p] / scale_;
    const int n = bad_[p] ? 0 : panels(u_[p], v_[p]);
    first_node_[p + 1] = first_node_[p] + kEndpoints + n * kNodesPerPanel;
  }
  points_.resize(first_node_[P]);
  for (int64_t p = 0; p < P; ++p) {
    double* x = &points_[first_node_[p]];
    x[0] = x_[p];
    x[1] = y_[p];
    x[2] = 0.5 * (x_[p] + y_[p]);
    const int64_t n = panels_of(p);
    const double width = (y_[p] - x_[p]) / n;
    for (int64_t k = 0; k < n; ++k)
      for (int q = 0; q < kNodesPerPanel; ++q)
        x[kEndpoints + k * kNodesPerPanel + q] = x_[p] + width * (k + 0.5 * (kNodes[q] + 1.0));
  }
  terms_.evaluate(frame, t, points_.data(), first_node_[P]);

  log_base_.resize(P);
  c_.resize(P);
  lambda_.resize(P);
  const double log_norm = 0.5 * std::log(2 * std::numbers::pi * dt_) + std::log(scale_);
  for (int64_t p = 0; p < P; ++p) {
    if (bad_[p]) { // no estimate to make: log q = -inf
      log_base_[p] = -INFINITY;
      c_[p] = lambda_[p] = 0;
      continue;
    }
    const int64_t f = first_node_[p];
    double integral = 0; // of the drift a over [x, y]; B(v) - B(u) is it over s^2
    for (int64_t q = 0; q < node_count(p); ++q)
      integral += node_weight(p, q) * terms_.drift(node_point(p, q));
    for (int64_t e = f; e < first_node_[p + 1]; ++e) // the ends, the midpoint, the nodes
      check_psi(t, psi(e), points_[e]);
    const double d = v_[p] - u_[p];
    log_base_[p] = -d * d / (2 * dt_) - log_norm + integral / (scale_ * scale_);
    if (std::isfinite(upper_)) {
      c_[p] = upper_;
      lambda_[p] = upper_ - lower_;
    } else { // any c works; near psi's values around the pair, the estimates are rarely negative
      const double a = psi(f), b = psi(f + 1), m = psi(f + 2);
      const double hi = std::max({a, b, m}), lo = std::min({a, b, m});
      c_[p] = hi + std::max(1.0, hi - lo);
      lambda_[p] = c_[p] - lower_;
    }
    log_base_[p] += (lambda_[p] - c_[p]) * dt_; // the Poisson part's constant factor
    if (!std::isfinite(log_base_[p]) || !(lambda_[p] >= 0))
      throw Error(fmt::format("the General Poisson estimator for {} at t={}: the drift or psi is "
                              "not finite between {} and {}",
                              relation_, t, x_[p], y_[p]));
  }
}

void PoissonEstimator::round(const double* frame, int64_t t, const std::vector<int64_t>& pairs,
                             int round, uint64_t seed, uint64_t first_id, double* log_abs,
                             double* sign, EstimatorCounts* counts, double* dlog) {
  const auto ut = static_cast<uint32_t>(t);
  const uint32_t site = kSiteSde + 3u * static_cast<uint32_t>(round);
  const int64_t n = static_cast<int64_t>(pairs.size());
  count_.resize(n);
  bridge_first_.assign(n + 1, 0);
  for (int64_t k = 0; k < n; ++k) {
    const int64_t p = pairs[k];
    const double rate = lambda_[p] * dt_;
    if (rate > kMaxPoissonRate)
      throw Error(fmt::format("the General Poisson estimator for {} at t={}: the Poisson rate "
                              "lambda dt = {:g} exceeds {:g} for the pair {} -> {} (psi's bounds "
                              "are too far apart)",
                              relation_, t, rate, kMaxPoissonRate, x_[p], y_[p]));
    const auto id = static_cast<uint32_t>(first_id + static_cast<uint64_t>(p));
    count_[k] = rate > 0 ? static_cast<int64_t>(sample_poisson(seed, id, ut, site, rate)) : 0;
    bridge_first_[k + 1] = bridge_first_[k] + count_[k];
  }
  // The Brownian bridge from u to v at the sorted uniform times, point by point (x-coordinates).
  bridge_.resize(bridge_first_[n]);
  for (int64_t k = 0; k < n; ++k) {
    const int64_t p = pairs[k], K = count_[k];
    const auto id = static_cast<uint32_t>(first_id + static_cast<uint64_t>(p));
    times_.resize(K);
    for (int64_t j = 0; j < K; ++j)
      times_[j] = dt_ * philox_u01(seed, id, ut, site + 1, static_cast<uint32_t>(j));
    std::sort(times_.begin(), times_.end());
    double s = 0, w = u_[p];
    for (int64_t j = 0; j < K; ++j) {
      const double step = times_[j] - s, rest = dt_ - s;
      const double mean = w + (v_[p] - w) * step / rest;
      const double var = step * (dt_ - times_[j]) / rest;
      w = mean + std::sqrt(std::max(var, 0.0)) *
                     sample_std_normal_k(seed, id, ut, site + 2, static_cast<uint32_t>(j));
      s = times_[j];
      bridge_[bridge_first_[k] + j] = w * scale_;
    }
  }
  terms_.evaluate(frame, t, bridge_.data(), bridge_first_[n]);
  // In logarithms: a product of many factors below 1 would underflow. The derivative of
  // log|prod_j (c - psi_j)| is -sum_j psi_j' / (c - psi_j); a factor exactly 0 (probability 0)
  // leaves the estimate out of Wald's sums, and its derivative with it.
  const int K = dlog ? gradient_size() : 0;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t p = pairs[k];
    const double log_lambda = std::log(lambda_[p]);
    double l = 0, sg = 1;
    if (K > 0)
      std::fill_n(dlog + p * K, K, 0.0);
    for (int64_t j = bridge_first_[k]; j < bridge_first_[k + 1]; ++j) {
      const double f = c_[p] - psi(j);
      if (std::isnan(f))
        throw Error(fmt::format("the General Poisson estimator for {} at t={}: psi is not finite "
                                "at {} on a bridge from {} to {}",
                                relation_, t, bridge_[j], x_[p], y_[p]));
      check_psi(t, psi(j), bridge_[j]);
      sg = f < 0 ? -sg : f > 0 ? sg : 0.0;
      l += std::log(std::fabs(f)) - log_lambda;
      for (int c = 0; c < K && f != 0; ++c)
        dlog[p * K + c] -= psi_theta(j, c) / f;
    }
    for (int c = 0; c < K; ++c)
      if (!std::isfinite(dlog[p * K + c]))
        throw Error(fmt::format("the General Poisson estimator for {} at t={}: d psi / d theta "
                                "is not finite on a bridge from {} to {}",
                                relation_, t, x_[p], y_[p]));
    log_abs[p] = sg == 0 ? -INFINITY : l;
    sign[p] = sg;
  }
  if (counts) {
    counts->estimates += n;
    counts->bridge_points += bridge_first_[n];
  }
}

} // namespace ssm
