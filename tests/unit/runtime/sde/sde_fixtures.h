// What the sde room's unit tests share: a model table whose only kernel is a hand-written
// diffusion_terms, and the description of a scalar SDE state x whose transition is that SDE.
#pragma once

#include "core/metadata.h"
#include "kernel/abi.h"
#include "sde/density_estimator.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <numbers>
#include <vector>

namespace sde_fixtures {

inline ssm_model model_with(ssm_functional_terms_fn terms) {
  ssm_model m{};
  m.abi_version = SSM_ABI_VERSION;
  m.diffusion_terms = terms;
  return m;
}

// The terms have no gradient rows unless `gradient_rows` (2 per theta component: a scalar SDE).
inline ssm::ModelInfo sde_info(int gradient_rows = 0) {
  ssm::ModelInfo info;
  info.name = "sde";
  info.n_state = 1;
  ssm::VarInfo x;
  x.name = "x";
  x.offset = 0;
  info.state.push_back(x);
  ssm::ModelInfo::Sde sde;
  sde.state = 0;
  sde.dim = 1;
  sde.steps = 20;
  sde.coefficient_size = 1;
  sde.coefficient_constant = true;
  sde.exact_bridges = true; // as the compiler says with its own bounds of psi
  sde.relation = "x[t]";
  sde.estimator = "gpe";
  if (gradient_rows > 0) {
    sde.gradient_reason.clear();
    sde.gradient_rows = gradient_rows;
  }
  info.sde = sde;
  return info;
}

// A d-dimensional SDE state x whose estimator is the parametrix one: the terms end with its
// d + 1 rows; the coefficient has `coefficient_size` elements (1, d or d * d).
inline ssm::ModelInfo parametrix_info(int dim, int coefficient_size, bool coefficient_constant) {
  ssm::ModelInfo info = sde_info();
  info.n_state = dim;
  info.state[0].shape = {dim};
  info.state[0].size = dim;
  info.sde->dim = dim;
  info.sde->coefficient_size = coefficient_size;
  info.sde->coefficient_constant = coefficient_constant;
  info.sde->gpe_reason = "not a scalar SDE with a constant coefficient";
  info.sde->parametrix_reason.clear();
  info.sde->parametrix_rows = dim + 1;
  info.sde->estimator = "parametrix";
  return info;
}

// Wald's sums for `sets` sets of two pairs, (xa, ya) and (xb, yb) (scalar SDE, step 2, seed 11):
// every sum finite, and the ratio of their means, E[rounds] q_a / (E[rounds] q_b), within 4
// delta-method standard errors of `exact` = q_a / q_b; the loop was exercised (some sets needed
// more than one round); the same seed gives the same sums.
inline void check_wald_ratio(ssm::DensityEstimator& estimator, const std::vector<double>& frame,
                             double xa, double ya, double xb, double yb, double exact,
                             int64_t sets) {
  const int64_t P = 2 * sets;
  std::vector<double> prev(P), cur(P), log_q(P);
  for (int64_t i = 0; i < sets; ++i) {
    prev[2 * i] = xa, cur[2 * i] = ya;
    prev[2 * i + 1] = xb, cur[2 * i + 1] = yb;
  }
  ssm::EstimatorCounts counts;
  estimator.estimate(frame.data(), 2, prev.data(), cur.data(), P, 2, 11, 0, log_q.data(), &counts);
  double ma = 0, mb = 0, vaa = 0, vbb = 0, vab = 0;
  std::vector<double> ea(sets), eb(sets);
  for (int64_t i = 0; i < sets; ++i) {
    REQUIRE(std::isfinite(log_q[2 * i]));
    REQUIRE(std::isfinite(log_q[2 * i + 1]));
    ea[i] = std::exp(log_q[2 * i]);
    eb[i] = std::exp(log_q[2 * i + 1]);
    ma += ea[i] / static_cast<double>(sets);
    mb += eb[i] / static_cast<double>(sets);
  }
  const auto n1 = static_cast<double>(sets - 1);
  for (int64_t i = 0; i < sets; ++i) {
    vaa += (ea[i] - ma) * (ea[i] - ma) / n1;
    vbb += (eb[i] - mb) * (eb[i] - mb) / n1;
    vab += (ea[i] - ma) * (eb[i] - mb) / n1;
  }
  const double ratio = ma / mb;
  const double se = ratio * std::sqrt((vaa / (ma * ma) + vbb / (mb * mb) - 2 * vab / (ma * mb)) /
                                      static_cast<double>(sets));
  INFO(estimator.name() << ": ratio " << ratio << " (se " << se << "), exact " << exact
                        << ", extra rounds " << counts.extra_rounds);
  CHECK(std::fabs(ratio - exact) <= 4 * se);
  CHECK(counts.extra_rounds > 0);
  std::vector<double> again(P);
  estimator.estimate(frame.data(), 2, prev.data(), cur.data(), P, 2, 11, 0, again.data());
  CHECK(again == log_q);
}

// Points and pairs of a d-dimensional SDE state.
using Point = std::vector<double>;

// The pairs (x[i], y[i]) repeated R times, component-major as the estimators take them: pair
// r K + i is (x[i], y[i]).
struct Pairs {
  std::vector<double> prev, cur;
  int64_t P = 0;
  Pairs(const std::vector<Point>& x, const std::vector<Point>& y, int64_t R) {
    const auto K = static_cast<int64_t>(x.size()), d = static_cast<int64_t>(x[0].size());
    P = K * R;
    prev.resize(d * P);
    cur.resize(d * P);
    for (int64_t p = 0; p < P; ++p)
      for (int64_t c = 0; c < d; ++c) {
        prev[c * P + p] = x[p % K][c];
        cur[c * P + p] = y[p % K][c];
      }
  }
};

// R independent single estimates of each pair (step 3, seed 7): their mean within 4 standard
// errors of `exact`, the standard error below `power` of it (a test with power). Returns the
// estimates' counts.
inline ssm::EstimatorCounts
check_density_unbiased(ssm::DensityEstimator& estimator, const std::vector<double>& frame,
                       const std::vector<Point>& x, const std::vector<Point>& y,
                       const std::vector<double>& exact, int64_t R, double power) {
  const auto K = static_cast<int64_t>(x.size());
  Pairs pairs(x, y, R);
  std::vector<double> log_base(pairs.P), factor(pairs.P);
  ssm::EstimatorCounts counts;
  estimator.single(frame.data(), 3, pairs.prev.data(), pairs.cur.data(), pairs.P, 7, 0, 0,
                   log_base.data(), factor.data(), &counts);
  for (int64_t k = 0; k < K; ++k) {
    double sum = 0, sum2 = 0;
    int64_t negative = 0;
    for (int64_t r = 0; r < R; ++r) {
      const double e = std::exp(log_base[r * K + k]) * factor[r * K + k];
      sum += e;
      sum2 += e * e;
      negative += e < 0;
    }
    const auto Rd = static_cast<double>(R);
    const double mean = sum / Rd, se = std::sqrt((sum2 / Rd - mean * mean) / (Rd - 1));
    INFO(estimator.name() << ", pair " << k << ": mean " << mean << " (se " << se << "), exact "
                          << exact[k] << ", " << negative << " negative of " << R);
    CHECK(std::fabs(mean - exact[k]) <= 4 * se);
    CHECK(se < power * exact[k]);
  }
  return counts;
}

// The Ornstein-Uhlenbeck SDE with gradient rows for the General Poisson estimator (sde_info(4)).
// dX = k (mu - X) dt + s dW with theta = (k, mu): frame [k, mu, s, dt]; psi = (k^2 (mu - x)^2 /
// s^2 - k) / 2, bounded below by -k / 2 and unbounded above; d drift / d(k, mu) = (mu - x, k),
// d drift' / d(k, mu) = (-1, 0).
inline void ou_gpe_terms(const double* theta, int64_t, int64_t begin, int64_t end, int64_t stride,
                         const double*, const int64_t*, const double* x, const double*,
                         double* out) {
  const double k = theta[0], mu = theta[1];
  for (int64_t n = begin; n < end; ++n) {
    const double row[] = {k * (mu - x[n]), -k,       theta[2],  theta[3], -k / 2, INFINITY,
                          -INFINITY,       INFINITY, mu - x[n], k,        -1,     0};
    for (int r = 0; r < 12; ++r)
      out[r * stride + n] = row[r];
  }
}

// Its transition density N(y; mu + (x - mu) e^{-k dt}, s^2 (1 - e^{-2 k dt}) / (2 k)).
inline double ou_gpe_q(const std::vector<double>& f, const Point& x, const Point& y) {
  const double a = std::exp(-f[0] * f[3]), var = f[2] * f[2] * (1 - a * a) / (2 * f[0]);
  const double m = f[1] + (x[0] - f[1]) * a;
  return std::exp(-(y[0] - m) * (y[0] - m) / (2 * var)) / std::sqrt(2 * std::numbers::pi * var);
}

// q at the frame and its central differences in the frame's first K entries (an error near
// 1e-10 for these smooth closed forms).
using Density =
    std::function<double(const std::vector<double>& frame, const Point& x, const Point& y)>;
inline void exact_and_derivatives(const Density& q, const std::vector<double>& frame, int K,
                                  const std::vector<Point>& x, const std::vector<Point>& y,
                                  std::vector<double>& value,
                                  std::vector<std::vector<double>>& dq) {
  const double h = 1e-5;
  for (size_t i = 0; i < x.size(); ++i) {
    value.push_back(q(frame, x[i], y[i]));
    dq.emplace_back();
    for (int c = 0; c < K; ++c) {
      std::vector<double> up = frame, down = frame;
      up[c] += h;
      down[c] -= h;
      dq.back().push_back((q(up, x[i], y[i]) - q(down, x[i], y[i])) / (2 * h));
    }
  }
}

// The derivatives of single estimates (step 3, seed 7), Q' = Q d log|Q| for R draws of each
// pair i: their mean within 4 standard errors of dq[i][c] for every theta component c, the
// standard error below `power` times max(|dq|, q[i]) (a test with power). Returns whether some
// estimate was negative.
inline bool check_gradient_unbiased(ssm::DensityEstimator& estimator,
                                    const std::vector<double>& frame, const std::vector<Point>& x,
                                    const std::vector<Point>& y, const std::vector<double>& q,
                                    const std::vector<std::vector<double>>& dq, int64_t R,
                                    double power) {
  const auto n = static_cast<int64_t>(x.size());
  const int K = estimator.gradient_size();
  REQUIRE(K == static_cast<int>(dq[0].size()));
  Pairs pairs(x, y, R);
  std::vector<double> log_base(pairs.P), factor(pairs.P), grad(K * pairs.P);
  estimator.single(frame.data(), 3, pairs.prev.data(), pairs.cur.data(), pairs.P, 7, 0, 0,
                   log_base.data(), factor.data(), nullptr, grad.data());
  bool negative = false;
  for (int64_t i = 0; i < n; ++i)
    for (int c = 0; c < K; ++c) {
      double sum = 0, sum2 = 0;
      for (int64_t r = 0; r < R; ++r) {
        const int64_t p = r * n + i;
        const double e = std::exp(log_base[p]) * factor[p], de = e * grad[c * pairs.P + p];
        REQUIRE(std::isfinite(de));
        negative = negative || e < 0;
        sum += de;
        sum2 += de * de;
      }
      const auto Rd = static_cast<double>(R);
      const double mean = sum / Rd, se = std::sqrt((sum2 / Rd - mean * mean) / (Rd - 1));
      INFO(estimator.name() << ", pair " << i << ", theta component " << c << ": Q' " << mean
                            << " (se " << se << "), q' " << dq[i][c] << ", q " << q[i]);
      CHECK(std::fabs(mean - dq[i][c]) <= 4 * se);
      CHECK(se < power * std::max(std::fabs(dq[i][c]), q[i]));
    }
  return negative;
}

// Wald's sums with their derivatives (step 2, seed 11) for sets of `per` copies of the pair
// (x, y), P pairs in all: E[sum Q'] = E[rounds] q' and E[sum Q] = E[rounds] q, so the ratio of
// the means of Q grad and Q, what self-normalised weights make of the gradient, is within 4
// delta-method standard errors (over the sets, whose pairs share their rounds) of dlogq[c] =
// d log q / d theta_c, that error below `power` |dlogq[c]|; Wald's loop ran (some set needed a
// second round); the estimates are those drawn without the gradient.
inline void check_wald_gradient(ssm::DensityEstimator& estimator, const std::vector<double>& frame,
                                const Point& x, const Point& y, int64_t per, int64_t P,
                                const std::vector<double>& dlogq, double power) {
  const int K = estimator.gradient_size();
  REQUIRE(K == static_cast<int>(dlogq.size()));
  Pairs pairs({x}, {y}, P);
  std::vector<double> log_q(P), grad(K * P);
  ssm::EstimatorCounts counts;
  estimator.estimate(frame.data(), 2, pairs.prev.data(), pairs.cur.data(), P, per, 11, 0,
                     log_q.data(), &counts, grad.data());
  CHECK(counts.extra_rounds > 0);
  const int64_t sets = P / per;
  const auto n = static_cast<double>(sets);
  for (int c = 0; c < K; ++c) {
    std::vector<double> q(sets, 0.0), dq(sets, 0.0); // each set's sums
    for (int64_t p = 0; p < P; ++p) {
      REQUIRE(std::isfinite(log_q[p]));
      q[p / per] += std::exp(log_q[p]);
      dq[p / per] += std::exp(log_q[p]) * grad[c * P + p];
    }
    double mq = 0, mdq = 0;
    for (int64_t i = 0; i < sets; ++i) {
      mq += q[i] / n;
      mdq += dq[i] / n;
    }
    double vqq = 0, vdd = 0, vqd = 0;
    for (int64_t i = 0; i < sets; ++i) {
      vqq += (q[i] - mq) * (q[i] - mq) / (n - 1);
      vdd += (dq[i] - mdq) * (dq[i] - mdq) / (n - 1);
      vqd += (q[i] - mq) * (dq[i] - mdq) / (n - 1);
    }
    const double ratio = mdq / mq;
    const double se = std::fabs(ratio) *
                      std::sqrt((vdd / (mdq * mdq) + vqq / (mq * mq) - 2 * vqd / (mdq * mq)) / n);
    INFO(estimator.name() << ", theta component " << c << ": weighted gradient " << ratio << " (se "
                          << se << "), d log q " << dlogq[c] << ", extra rounds "
                          << counts.extra_rounds);
    CHECK(std::fabs(ratio - dlogq[c]) <= 4 * se);
    CHECK(se < power * std::fabs(dlogq[c]));
  }
  std::vector<double> plain(P);
  estimator.estimate(frame.data(), 2, pairs.prev.data(), pairs.cur.data(), P, per, 11, 0,
                     plain.data());
  CHECK(plain == log_q);
}

} // namespace sde_fixtures
