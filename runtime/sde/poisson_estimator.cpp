// PoissonEstimator: see poisson_estimator.h.
#include "sde/poisson_estimator.h"

#include "core/error.h"
#include "kernel/distributions.h"
#include "kernel/rng.h"
#include "sde/lamperti.h"
#include "sde/path_quadrature.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

namespace ssm {

namespace {

constexpr int kEndpoints = 3; // u, v and their midpoint: psi there sets c when psi is unbounded

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
      upper_given_(info.sde->psi_upper_given), lamperti_(!info.sde->coefficient_constant),
      exact_bridges_(info.sde->exact_bridges) {
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

double PoissonEstimator::sigma_at(int64_t t, double s, double x, int64_t p) const {
  if (!lamperti_)
    return scale_;
  if (!keeps_sign(s, quadrature_.sign(p)))
    throw Error(fmt::format("{}: the diffusion coefficient is {} at x = {}, reached from the "
                            "pair {} -> {} in Lamperti's coordinate: it must be finite and keep "
                            "its sign, and 1 / |coefficient| must not be integrable up to its "
                            "zeros, so that the coordinate spans the real line (true of x, not "
                            "of sqrt(x)); --estimator parametrix otherwise",
                            error_prefix(t), s, x, x_[p], y_[p]));
  return std::fabs(s);
}

UnitDrift PoissonEstimator::unit_drift(int64_t point) const {
  if (lamperti_)
    return lamperti_drift(terms_, point);
  return {terms_.drift(point) / scale_, terms_.jacobian(point)}; // b(u) = a(s u) / s, a'(s u)
}

double PoissonEstimator::psi(int64_t point) const {
  const UnitDrift d = unit_drift(point);
  return 0.5 * (d.b * d.b + d.db);
}

double PoissonEstimator::psi_theta(int64_t point, int k) const {
  // With s free of theta: b_theta = a_theta / |s|, b'_theta = a'_theta - a_theta |s|' / |s|.
  const double a_theta = terms_.drift_theta(point, k);
  const double s = lamperti_ ? std::fabs(terms_.coefficient(point)) : scale_;
  const double ds = lamperti_ ? terms_.gamma_divergence(point, 0) / (2 * s) : 0.0;
  const double b_theta = a_theta / s;
  const double db_theta = terms_.divergence_theta(point, k) - a_theta * ds / s;
  const UnitDrift d = unit_drift(point);
  if (!terms_.coefficient_reads_theta())
    return d.b * b_theta + 0.5 * db_theta;
  // A constant s(theta): b = a / s also moves with s at a fixed x.
  return d.b * (b_theta - d.b * scale_theta(point, k) / s) + 0.5 * db_theta;
}

double PoissonEstimator::scale_theta(int64_t point, int k) const {
  return scale_sign_ * terms_.coefficient_theta(point, k); // d|s| / d theta_k
}

double PoissonEstimator::psi_x(int64_t point) const {
  // psi = ((a / s)^2 + a') / 2 as a function of x at a fixed theta (a constant s).
  const double a = terms_.drift(point);
  return a * terms_.jacobian(point) / (scale_ * scale_) + 0.5 * terms_.drift_second(point);
}

double PoissonEstimator::drift_integral_theta(int64_t p, int k) const {
  double integral = 0; // of a_theta / s^2 over [x, y]
  for (int64_t q = 0; q < quadrature_.node_count(p); ++q) {
    const int64_t e = quadrature_.node(p, q);
    const double s = lamperti_ ? terms_.coefficient(e) : scale_;
    integral += quadrature_.weight(p, q) * terms_.drift_theta(e, k) / (s * s);
  }
  return integral;
}

bool PoissonEstimator::exact_bridges(const double* frame, int64_t t) {
  constants(frame, t, 0.0);
  return std::isfinite(upper_) && exact_bridges_ && !terms_.coefficient_reads_theta();
}

void PoissonEstimator::prepare_gradient(const double* /*frame*/, int64_t /*t*/) {
  // c, lambda and the draws are held. With s free of theta only B moves; with a constant
  // s(theta), u = x / s and v = y / s move too: d/dtheta of -(v - u)^2 / (2 dt) + A / s^2 -
  // log s, A = int_x^y a, adds s_theta ((v - u)^2 / (s dt) - 2 A / s^3 - 1 / s).
  const int K = gradient_size();
  for (int64_t p : finite_pairs())
    for (int k = 0; k < K; ++k) {
      base_grad_[p * K + k] = drift_integral_theta(p, k);
      if (terms_.coefficient_reads_theta()) {
        const double d = v_[p] - u_[p], s = scale_;
        base_grad_[p * K + k] += scale_theta(quadrature_.first(p), k) *
                                 (d * d / (s * dt_) - 2 * drift_integral_[p] / (s * s * s) - 1 / s);
      }
    }
}

double PoissonEstimator::log_bound(const double* frame, int64_t t) {
  constants(frame, t, 0.0);
  if (lamperti_ ||
      !(std::isfinite(upper_) && std::isfinite(drift_lower_) && std::isfinite(drift_upper_)))
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
  if (!lamperti_ && !(std::isfinite(scale_) && scale_ != 0))
    throw Error(fmt::format("the diffusion coefficient of {} at t={} is {}: it must be finite and "
                            "not 0",
                            relation_, t, scale_));
  scale_sign_ = scale_ < 0 ? -1.0 : 1.0;
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
  // dt and the bounds read no point (nor does a constant coefficient): one evaluation gives them.
  constants(frame, t, P > 0 ? prev[0] : 0.0);

  // Points: per pair, u, v, the midpoint, then the quadrature nodes of [x, y] (x-coordinates).
  // A pair with a non-finite end (a path that diverged) has density estimate 0: only its
  // endpoints, as 0, are evaluated, and it gets log q = -inf.
  u_.resize(P);
  v_.resize(P);
  x_.resize(P);
  y_.resize(P);
  find_bad(prev, cur, P);
  for (int64_t p = 0; p < P; ++p) {
    x_[p] = bad_[p] ? 0.0 : prev[p];
    y_[p] = bad_[p] ? 0.0 : cur[p];
  }
  quadrature_.build(terms_, frame, t, x_.data(), y_.data(), P, kEndpoints, lamperti_ ? 0.0 : scale_,
                    &bad_);
  std::vector<double>& points = quadrature_.points();
  for (int64_t p = 0; p < P; ++p) {
    // The path stays where the coefficient keeps the sign it has at x (Lamperti's coordinate
    // spans the real line there): a pair across a zero of it, or out of its domain, has
    // density 0, like a diverged one.
    if (quadrature_.outside(p))
      bad_[p] = true;
    double* x = &points[quadrature_.first(p)];
    x[0] = x_[p];
    x[1] = y_[p];
    x[2] = 0.5 * (x_[p] + y_[p]);
  }
  terms_.evaluate(frame, t, points.data(), quadrature_.size());

  log_base_.resize(P);
  c_.resize(P);
  lambda_.resize(P);
  drift_integral_.assign(P, 0.0);
  const double log_norm = 0.5 * std::log(2 * std::numbers::pi * dt_);
  for (int64_t p = 0; p < P; ++p) {
    if (!bad_[p] && lamperti_ && quadrature_.crosses_zero(terms_, p))
      bad_[p] = true; // a zero between the pilot points: density 0 too
    if (bad_[p]) {    // no estimate to make: log q = -inf
      log_base_[p] = -INFINITY;
      c_[p] = lambda_[p] = u_[p] = v_[p] = 0;
      continue;
    }
    const int64_t f = quadrature_.first(p);
    // v - u = int dz / |s| and int a / s^2 over [x, y]; with a constant coefficient,
    // B(v) - B(u) is the latter, and u = x / s.
    const double s_x = sigma_at(t, terms_.coefficient(f), x_[p], p);
    const double s_y = sigma_at(t, terms_.coefficient(f + 1), y_[p], p);
    double distance = 0, integral = 0;
    for (int64_t q = 0; q < quadrature_.node_count(p); ++q) {
      const int64_t e = quadrature_.node(p, q);
      const double s = sigma_at(t, terms_.coefficient(e), points[e], p);
      distance += quadrature_.weight(p, q) / s;
      integral += quadrature_.weight(p, q) * terms_.drift(e) / (s * s);
    }
    drift_integral_[p] = integral * s_x * s_x; // int a, for a constant s's derivative
    if (lamperti_) { // the bridge runs from u = 0 at x; the Jacobian 1 / |s(y)|
      u_[p] = 0;
      v_[p] = distance;
      integral += -0.5 * std::log(s_y / s_x) - std::log(s_y);
    } else {
      u_[p] = x_[p] / scale_;
      v_[p] = y_[p] / scale_;
      integral -= std::log(scale_);
    }
    for (int64_t e = f; e < quadrature_.first(p + 1); ++e) // the ends, the midpoint, the nodes
      check_psi(t, psi(e), points[e]);
    const double d = v_[p] - u_[p];
    log_base_[p] = -d * d / (2 * dt_) - log_norm + integral;
    if (std::isfinite(upper_)) {
      c_[p] = upper_;
      lambda_[p] = upper_ - lower_;
    } else { // any c works; near psi's values around the pair, the estimates are rarely negative
      const double a = psi(f), b = psi(f + 1), m = psi(f + 2);
      const double hi = std::max({a, b, m}), lo = std::min({a, b, m});
      c_[p] = hi + std::max(1.0, hi - lo);
      lambda_[p] = c_[p] - lower_;
    }
    // The estimate's derivative holds c and lambda: unbiased for q' where the estimate stays
    // unbiased at every theta near, which needs lambda > 0 (with none there are no Poisson
    // points, and exp(-c dt) is right only where psi = c, as with equal bounds of a constant
    // psi). With a gradient, c rises until lambda dt is at least 1, so that psi < c strictly.
    if (with_gradient_ && lambda_[p] * dt_ < 1) {
      c_[p] += 1 / dt_ - lambda_[p];
      lambda_[p] = 1 / dt_;
    }
    log_base_[p] += (lambda_[p] - c_[p]) * dt_; // the Poisson part's constant factor
    if (!std::isfinite(log_base_[p]) || !(lambda_[p] >= 0))
      throw Error(fmt::format("the General Poisson estimator for {} at t={}: the drift or psi is "
                              "not finite between {} and {}",
                              relation_, t, x_[p], y_[p]));
  }
}

void PoissonEstimator::lamperti_inverse(const double* frame, int64_t t,
                                        const std::vector<int64_t>& pairs) {
  std::vector<double> start(pairs.size());
  std::vector<int64_t> group(bridge_.size());
  for (size_t k = 0; k < pairs.size(); ++k) {
    start[k] = x_[pairs[k]];
    std::fill(group.begin() + bridge_first_[k], group.begin() + bridge_first_[k + 1],
              static_cast<int64_t>(k));
  }
  const std::vector<double> w = bridge_;
  ssm::lamperti_inverse(terms_, frame, t, start, group, w.data(), static_cast<int64_t>(w.size()),
                        bridge_.data(),
                        [&](int64_t k, double x, double s) { return sigma_at(t, s, x, pairs[k]); });
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
  bridge_deviation_.resize(bridge_first_[n]);
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
      bridge_[bridge_first_[k] + j] = lamperti_ ? w : w * scale_;
      // Its distance from the line from u to v, which a constant s(theta) scales in x.
      bridge_deviation_[bridge_first_[k] + j] = w - (u_[p] + (v_[p] - u_[p]) * s / dt_);
    }
  }
  if (lamperti_)
    lamperti_inverse(frame, t, pairs);
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
      for (int c = 0; c < K && f != 0; ++c) {
        double d_psi = psi_theta(j, c);
        if (terms_.coefficient_reads_theta()) // the point x = s w moves: d x = s_theta deviation
          d_psi += psi_x(j) * scale_theta(j, c) * bridge_deviation_[j];
        dlog[p * K + c] -= d_psi / f;
      }
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
