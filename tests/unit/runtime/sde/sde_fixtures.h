// What the sde room's unit tests share: a model table whose only kernel is a hand-written
// diffusion_terms, and the description of a scalar SDE state x whose transition is that SDE.
#pragma once

#include "core/metadata.h"
#include "kernel/abi.h"
#include "sde/density_estimator.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

namespace sde_fixtures {

inline ssm_model model_with(ssm_functional_terms_fn terms) {
  ssm_model m{};
  m.abi_version = SSM_ABI_VERSION;
  m.diffusion_terms = terms;
  return m;
}

// The terms have no gradient rows unless `gradient_rows` (2 per theta component).
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

} // namespace sde_fixtures
