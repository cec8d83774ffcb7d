// ParametrixEstimator: see parametrix_estimator.h.
#include "sde/parametrix_estimator.h"

#include "core/error.h"
#include "kernel/distributions.h"
#include "kernel/rng.h"

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

namespace ssm {

namespace {

using Matrix = Eigen::Map<Eigen::MatrixXd>; // column-major d x d in a pair's slice of a buffer
using ConstMatrix = Eigen::Map<const Eigen::MatrixXd>;
using ConstVector = Eigen::Map<const Eigen::VectorXd>;

const double kLog2Pi = std::log(2 * std::numbers::pi);

} // namespace

ParametrixEstimator::ParametrixEstimator(const ssm_model& model, const ModelInfo& info)
    : DensityEstimator(model, info, "parametrix") {
  if (!info.sde->parametrix_reason.empty())
    throw Error(fmt::format("the parametrix estimator does not apply to {}: {}", relation_,
                            info.sde->parametrix_reason));
  if (info.sde->parametrix_rows != dim_ + 1)
    throw Error(fmt::format("internal error: {} parametrix rows for a {}-dimensional SDE",
                            info.sde->parametrix_rows, dim_));
  gradient_reason_ = density_gradient_problem(info, "parametrix");
}

std::string ParametrixEstimator::ends_text(int64_t p) const {
  return pair_text(&x_[p * dim_], &y_[p * dim_], 1, 0); // one pair-major pair
}

void ParametrixEstimator::Frozen::resize(int64_t n, int dim, int gradient_size) {
  d = dim;
  K = gradient_size;
  alpha_theta.resize(n * K * d);
  divergence_theta.resize(n * K);
  alpha.resize(n * d);
  gamma.resize(n * d * d);
  L.resize(n * d * d);
  half_logdet.resize(n);
  trace_j.resize(n);
  norm_j.resize(n);
  c1.resize(n * d);
  c2.resize(n);
}

void ParametrixEstimator::Frozen::copy(int64_t to, const Frozen& from, int64_t k) {
  const int dd = d * d;
  std::copy_n(&from.alpha[k * d], d, &alpha[to * d]);
  std::copy_n(&from.gamma[k * dd], dd, &gamma[to * dd]);
  std::copy_n(&from.L[k * dd], dd, &L[to * dd]);
  std::copy_n(&from.c1[k * d], d, &c1[to * d]);
  std::copy_n(from.alpha_theta.data() + k * K * d, K * d, alpha_theta.data() + to * K * d);
  std::copy_n(from.divergence_theta.data() + k * K, K, divergence_theta.data() + to * K);
  half_logdet[to] = from.half_logdet[k];
  trace_j[to] = from.trace_j[k];
  norm_j[to] = from.norm_j[k];
  c2[to] = from.c2[k];
}

void ParametrixEstimator::freeze(int64_t q, const double* point, int64_t t, int64_t pair, Frozen& f,
                                 int64_t k) const {
  const int d = dim_, dd = d * d;
  auto where = [&] {
    return fmt::format("{} (a skeleton of the pair {})", point_text(point, 1), ends_text(pair));
  };
  double* gamma = &f.gamma[k * dd];
  terms_.gamma(q, gamma);
  double* l = &f.L[k * dd];
  std::copy_n(gamma, dd, l);
  Matrix m(l, d, d);
  const bool finite = m.allFinite();
  Eigen::LLT<Eigen::Ref<Eigen::MatrixXd>> llt(m); // in place: the lower triangle becomes L
  if (!finite || llt.info() != Eigen::Success || !(m.diagonal().array() > 0).all())
    throw Error(fmt::format("{}: the diffusion coefficient at {} is {} (sigma sigma^T must be "
                            "finite and positive definite)",
                            error_prefix(t), where(), finite ? "singular" : "not finite"));
  m.triangularView<Eigen::StrictlyUpper>().setZero(); // LLT left gamma there
  f.half_logdet[k] = m.diagonal().array().log().sum();
  Eigen::MatrixXd J(d, d);
  for (int i = 0; i < d; ++i) {
    f.alpha[k * d + i] = terms_.drift(q, i);
    f.c1[k * d + i] = terms_.gamma_divergence(q, i);
    for (int j = 0; j < d; ++j)
      J(i, j) = terms_.jacobian(q, i, j);
  }
  f.c2[k] = terms_.gamma_second_divergence(q);
  f.trace_j[k] = J.trace();
  for (int c = 0; c < f.K; ++c) {
    for (int i = 0; i < d; ++i)
      f.alpha_theta[(k * f.K + c) * d + i] = terms_.drift_theta(q, c, i);
    f.divergence_theta[k * f.K + c] = terms_.divergence_theta(q, c);
  }
  Eigen::MatrixXd scaled = J * m; // L^-1 J L: J in the coordinates where gamma is I
  m.triangularView<Eigen::Lower>().solveInPlace(scaled);
  f.norm_j[k] = scaled.norm();
  if (!(ConstVector(&f.alpha[k * d], d).allFinite() && std::isfinite(f.trace_j[k]) &&
        std::isfinite(f.norm_j[k]) && ConstVector(&f.c1[k * d], d).allFinite() &&
        std::isfinite(f.c2[k]) &&
        ConstVector(f.alpha_theta.data() + k * f.K * d, f.K * d).allFinite() &&
        ConstVector(f.divergence_theta.data() + k * f.K, f.K).allFinite()))
    throw Error(fmt::format("{}: the drift, its Jacobian, their derivatives in the parameters or "
                            "the coefficient's derivatives at {} are not finite",
                            error_prefix(t), where()));
}

double ParametrixEstimator::segment_rate(const Frozen& f, int64_t k, const double* z,
                                         const double* y, double rest) const {
  const int d = dim_;
  ConstMatrix L(&f.L[k * d * d], d, d);
  Eigen::VectorXd v = (ConstVector(y, d) - ConstVector(z, d)) / rest;
  Eigen::VectorXd pull = v - ConstVector(&f.alpha[k * d], d);
  Eigen::VectorXd c1 = ConstVector(&f.c1[k * d], d);
  L.triangularView<Eigen::Lower>().solveInPlace(v); // the norms in gamma^-1
  L.triangularView<Eigen::Lower>().solveInPlace(pull);
  L.triangularView<Eigen::Lower>().solveInPlace(c1);
  // theta~ = A0 + A1 / a, the gap u about 1 / a: a = 4 theta~ solved for a.
  const double p = pull.norm(), c = c1.norm();
  const double a0 = std::fabs(f.trace_j[k]) + c * p + 0.5 * std::fabs(f.c2[k]);
  const double a1 = f.norm_j[k] * v.norm() * p + 0.5 * c * v.norm() * p * p;
  constexpr double kappa = 4;
  const double a =
      std::max(kParametrixEvents / (2 * dt_),
               0.5 * (kappa * a0 + std::sqrt(kappa * kappa * a0 * a0 + 4 * kappa * a1)));
  return std::isfinite(a) ? a : kParametrixEvents / (2 * dt_);
}

void ParametrixEstimator::prepare(const double* frame, int64_t t, const double* prev,
                                  const double* cur, int64_t P) {
  const int d = dim_;
  find_bad(prev, cur, P);
  x_.assign(P * d, 0.0);
  y_.assign(P * d, 0.0);
  std::vector<double> points(P * d, 0.0); // component-major, for the kernel
  for (int64_t p = 0; p < P; ++p)
    for (int c = 0; c < d && !bad_[p]; ++c) {
      x_[p * d + c] = points[c * P + p] = prev[c * P + p];
      y_[p * d + c] = cur[c * P + p];
    }
  log_base_.assign(P, 0.0);
  start_.resize(P, d, with_gradient_ ? gradient_size() : 0); // the gradient rows only if asked
  if (P == 0)
    return;
  terms_.evaluate(frame, t, points.data(), P);
  dt_ = terms_.dt(0); // dt reads no point
  if (!(std::isfinite(dt_) && dt_ > 0))
    throw Error(fmt::format("dt of {} at t={} is {}: it must be positive", relation_, t, dt_));
  for (int64_t p = 0; p < P; ++p) {
    if (bad_[p])
      log_base_[p] = -INFINITY;
    else
      freeze(p, &x_[p * d], t, p, start_, p);
  }
}

void ParametrixEstimator::round(const double* frame, int64_t t, const std::vector<int64_t>& pairs,
                                int r, uint64_t seed, uint64_t first_id, double* log_abs,
                                double* sign, EstimatorCounts* counts, double* dlog) {
  const int d = dim_, dd = d * d, K = dlog ? start_.K : 0;
  const auto n = static_cast<int64_t>(pairs.size());
  const auto ut = static_cast<uint32_t>(t);
  const uint32_t site = kSiteParametrix + 2u * static_cast<uint32_t>(r);
  const double b = 0.5 * std::sqrt(kParametrixEvents / dt_); // the hazard's u^(-1/2) part
  // Each pair's skeleton: its last point z, the time s it was reached at, the terms frozen
  // there and the segment's rate a, the weight so far (log |w| and sign), its events so far.
  Frozen at;
  at.resize(n, d, start_.K);
  std::vector<double> z(n * d), s(n, 0.0), rate(n), lw(n, 0.0), sg(n, 1.0), dlw(n * K, 0.0);
  // l_c = L^-1 d alpha / d theta_c at slot k of `at` (the segment's start), and the derivative
  // of the Euler density's log there: delta . l_c, delta = L^-1 (w - z - u alpha).
  Eigen::VectorXd l(d);
  auto scaled_alpha_theta = [&](int64_t k, int c) {
    l = ConstVector(&at.alpha_theta[(k * at.K + c) * d], d);
    ConstMatrix(&at.L[k * dd], d, d).triangularView<Eigen::Lower>().solveInPlace(l);
  };
  std::vector<int64_t> events(n, 0), live(n);
  for (int64_t k = 0; k < n; ++k) {
    const int64_t p = pairs[k];
    std::copy_n(&x_[p * d], d, &z[k * d]);
    at.copy(k, start_, p);
    rate[k] = segment_rate(at, k, &z[k * d], &y_[p * d], dt_);
    live[k] = k;
  }
  // Per continuing pair of an iteration: its gap u, the new point w (pair-major), v = L^-1 (w -
  // z - u alpha), and log m(z, w, u) - log r(w).
  std::vector<double> u, points, v, log_ratio, eps(d);
  std::vector<int64_t> next;
  Frozen moved; // the terms at the new points, slot q
  int64_t skeleton_points = 0;
  while (!live.empty()) {
    next.clear();
    u.clear();
    points.clear();
    v.clear();
    log_ratio.clear();
    for (int64_t k : live) {
      const int64_t p = pairs[k];
      const auto id = static_cast<uint32_t>(first_id + static_cast<uint64_t>(p));
      if (events[k] >= kMaxSkeletonEvents)
        throw Error(fmt::format("{}: a skeleton of the pair {} has over {} events", error_prefix(t),
                                ends_text(p), kMaxSkeletonEvents));
      double u0, u1;
      philox_u01x2(seed, id, ut, site, static_cast<uint32_t>(events[k]), u0, u1);
      const double e1 = -std::log(u0) / rate[k], e2 = -std::log(u1) / (2 * b);
      const double gap = std::min(e1, e2 * e2), rest = dt_ - s[k];
      ConstMatrix Lk(&at.L[k * dd], d, d);
      ConstVector zk(&z[k * d], d), ak(&at.alpha[k * d], d), yk(&y_[p * d], d);
      if (gap >= rest) { // no event before dt: the Euler density from z to y closes the estimate
        Eigen::VectorXd delta = yk - zk - rest * ak;
        Lk.triangularView<Eigen::Lower>().solveInPlace(delta);
        lw[k] += -0.5 * delta.squaredNorm() / rest - 0.5 * d * (kLog2Pi + std::log(rest)) -
                 at.half_logdet[k];
        for (int c = 0; c < K; ++c) {
          scaled_alpha_theta(k, c);
          dlw[k * K + c] += delta.dot(l);
        }
        continue;
      }
      // The modified bridge's draw towards y, and the log-ratio of the Euler density to it.
      const double c = gap * (rest - gap) / rest;
      for (int i = 0; i < d; ++i)
        eps[i] =
            sample_std_normal_k(seed, id, ut, site + 1, static_cast<uint32_t>(events[k] * d + i));
      ConstVector e(eps.data(), d);
      Eigen::VectorXd w = zk + (gap / rest) * (yk - zk) + std::sqrt(c) * (Lk * e);
      // L^-1 (w - z - u alpha) without w - z, which cancels for a small gap.
      Eigen::VectorXd delta = (gap / rest) * (yk - zk) - gap * ak;
      Lk.triangularView<Eigen::Lower>().solveInPlace(delta);
      delta += std::sqrt(c) * e;
      const double log_m = -0.5 * delta.squaredNorm() / gap - 0.5 * d * std::log(gap);
      const double log_r = -0.5 * e.squaredNorm() - 0.5 * d * std::log(c);
      log_ratio.push_back(log_m - log_r); // the 2 pi and the determinant cancel
      v.insert(v.end(), delta.data(), delta.data() + d);
      points.insert(points.end(), w.data(), w.data() + d);
      u.push_back(gap);
      next.push_back(k);
    }
    const auto m = static_cast<int64_t>(next.size());
    if (m == 0)
      break;
    std::vector<double> component_major(m * d);
    for (int64_t q = 0; q < m; ++q)
      for (int i = 0; i < d; ++i)
        component_major[i * m + q] = points[q * d + i];
    terms_.evaluate(frame, t, component_major.data(), m);
    skeleton_points += m;
    moved.resize(m, d, start_.K);
    for (int64_t q = 0; q < m; ++q)
      freeze(q, &points[q * d], t, pairs[next[q]], moved, q);
    for (int64_t q = 0; q < m; ++q) {
      const int64_t k = next[q];
      ConstMatrix Lk(&at.L[k * dd], d, d);
      // g = grad log m(z, ., u) at w = -gamma^-1 (w - mu) / u = -L^-T v / u.
      Eigen::VectorXd g = ConstVector(&v[q * d], d);
      Lk.transpose().triangularView<Eigen::Upper>().solveInPlace(g);
      g /= -u[q];
      double theta = -moved.trace_j[q] + 0.5 * moved.c2[q];
      for (int i = 0; i < d; ++i)
        theta += (moved.c1[q * d + i] - (moved.alpha[q * d + i] - at.alpha[k * d + i])) * g[i];
      ConstMatrix G(&moved.gamma[q * dd], d, d), G0(&at.gamma[k * dd], d, d);
      const Eigen::MatrixXd D = G - G0;
      if (D.cwiseAbs().maxCoeff() > 0) { // a coefficient that moves with the path
        // H = -gamma^-1 / u: sum_il D_il H_il = -tr(L^-1 D L^-T) / u.
        Eigen::MatrixXd M = D;
        Lk.triangularView<Eigen::Lower>().solveInPlace(M);
        Eigen::MatrixXd Mt = M.transpose();
        Lk.triangularView<Eigen::Lower>().solveInPlace(Mt);
        theta += 0.5 * (g.dot(D * g) - Mt.trace() / u[q]);
      }
      const double lambda = rate[k] + b / std::sqrt(u[q]), rho = 1 + theta / lambda;
      if (!std::isfinite(rho))
        throw Error(fmt::format("{}: the weight of a skeleton of the pair {} is not finite at "
                                "s = {:g}",
                                error_prefix(t), ends_text(pairs[k]), s[k] + u[q]));
      lw[k] += log_ratio[q] + std::log(std::fabs(rho));
      sg[k] = rho < 0 ? -sg[k] : rho > 0 ? sg[k] : 0.0;
      for (int c = 0; c < K && rho != 0; ++c) {
        // g moves with alpha(z): d g / d theta_c = gamma(z)^-1 d alpha(z) / d theta_c = L^-T l.
        scaled_alpha_theta(k, c);
        const ConstVector delta(&v[q * d], d);
        const double dlog_m = delta.dot(l);
        Eigen::VectorXd h = l;
        Lk.transpose().triangularView<Eigen::Upper>().solveInPlace(h);
        double dtheta = -moved.divergence_theta[q * moved.K + c];
        for (int i = 0; i < d; ++i)
          dtheta += -(moved.alpha_theta[(q * moved.K + c) * d + i] -
                      at.alpha_theta[(k * at.K + c) * d + i]) *
                        g[i] +
                    (moved.c1[q * d + i] - (moved.alpha[q * d + i] - at.alpha[k * d + i])) * h[i];
        if (D.cwiseAbs().maxCoeff() > 0)
          dtheta += g.dot(D * h); // (1/2) g' D g, D symmetric
        dlw[k * K + c] += dlog_m + dtheta / (lambda * rho);
      }
      // The skeleton moves on to w, its coefficients frozen there.
      std::copy_n(&points[q * d], d, &z[k * d]);
      at.copy(k, moved, q);
      s[k] += u[q];
      ++events[k];
      rate[k] = segment_rate(at, k, &z[k * d], &y_[pairs[k] * d], dt_ - s[k]);
    }
    live.clear();
    for (int64_t k : next)
      if (sg[k] != 0) // a factor 0: the estimate is 0 whatever follows
        live.push_back(k);
  }
  for (int64_t k = 0; k < n; ++k) {
    const int64_t p = pairs[k];
    log_abs[p] = sg[k] == 0 ? -INFINITY : lw[k];
    sign[p] = sg[k];
    if (K > 0)
      std::copy_n(&dlw[k * K], K, dlog + p * K);
  }
  if (counts) {
    counts->estimates += n;
    counts->skeleton_points += skeleton_points;
  }
}

} // namespace ssm
