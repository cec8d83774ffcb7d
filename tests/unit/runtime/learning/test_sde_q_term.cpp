// EM's Q term of an SDE transition (learning/sde_q_term.h) on the Ornstein-Uhlenbeck SDE, whose
// density is known: the log of the mean of R General Poisson estimates (signed: psi is unbounded
// above) and its gradient, sum Q' / sum Q, against log q and d log q, over independent seeds
// (their spread gives the standard errors); the same seed gives the same Q at any theta (common
// random numbers); pairs whose few estimates sum to a nonpositive value get further rounds.
#include "core/thread_pool.h"
#include "learning/sde_q_term.h"
#include "runtime/sde/sde_fixtures.h"
#include "sde/poisson_estimator.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

namespace {

using sde_fixtures::exact_and_derivatives;
using sde_fixtures::model_with;
using sde_fixtures::ou_gpe_q;
using sde_fixtures::ou_gpe_terms;
using sde_fixtures::Point;

// Steps 0 and 1 of a series: step 1 holds the pairs (x[i], y[i]), weights w.
std::vector<ssm::StepPoints> one_step(const std::vector<double>& x, const std::vector<double>& y,
                                      const std::vector<double>& w) {
  std::vector<ssm::StepPoints> steps(2);
  steps[1].count = static_cast<int64_t>(x.size());
  steps[1].prev = x;
  steps[1].cur = y;
  steps[1].weight = w;
  return steps;
}

ssm::ModelInfo ou_info() {
  ssm::ModelInfo info = sde_fixtures::sde_info(4);
  info.n_frame = 4; // [k, mu, s, dt]
  return info;
}

} // namespace

TEST_CASE("EM's SDE term: the log of R estimates' mean and its gradient estimate log q and "
          "d log q",
          "[sde][em]") {
  const std::vector<double> frame = {0.8, 0.3, 0.6, 0.5};
  const std::vector<double> frames = {frame[0], frame[1], frame[2], frame[3],
                                      frame[0], frame[1], frame[2], frame[3]};
  const ssm_model model = model_with(ou_gpe_terms);
  const ssm::ModelInfo info = ou_info();
  ssm::ThreadPool pool(2);
  // A pair near the mean and one in psi's tail (estimates of either sign there).
  for (const auto& [x, y] : {std::pair{0.3, -0.2}, std::pair{-2.5, -2.4}}) {
    std::vector<double> q;
    std::vector<std::vector<double>> dq;
    exact_and_derivatives(ou_gpe_q, frame, 2, {Point{x}}, {Point{y}}, q, dq);
    const std::vector<ssm::StepPoints> steps = one_step({x}, {y}, {1.0});
    // Seeds' terms with R = 500: the log of a mean is biased by about -Var / (2 R q^2), far
    // below their spread here.
    const int seeds = 40;
    const int64_t R = ssm::kMaxSdeEstimates;
    double m = 0, m2 = 0, g[2] = {0, 0}, g2[2] = {0, 0};
    for (int s = 0; s < seeds; ++s) {
      std::vector<double> grad(2, 0.0);
      const double v = ssm::sde_q_term(model, info, frames, steps, R, 100 + s, pool, &grad);
      m += v / seeds;
      m2 += v * v / seeds;
      for (int c = 0; c < 2; ++c) {
        g[c] += grad[c] / seeds;
        g2[c] += grad[c] * grad[c] / seeds;
      }
    }
    const double se = std::sqrt((m2 - m * m) / (seeds - 1));
    INFO("pair " << x << " -> " << y << ": Q " << m << " (se " << se << "), log q "
                 << std::log(q[0]));
    CHECK(std::fabs(m - std::log(q[0])) <= 4 * se);
    CHECK(se < 0.04); // power: a bias of 0.16 in log q would fail
    // Outside [1, kMaxSdeEstimates] (Wald's rounds would leave the estimators' streams).
    CHECK_THROWS(ssm::sde_q_term(model, info, frames, steps, R + 1, 1, pool, nullptr));
    for (int c = 0; c < 2; ++c) {
      const double gse = std::sqrt((g2[c] - g[c] * g[c]) / (seeds - 1)), exact = dq[0][c] / q[0];
      INFO("theta component " << c << ": gradient " << g[c] << " (se " << gse << "), d log q "
                              << exact);
      CHECK(std::fabs(g[c] - exact) <= 4 * gse);
      CHECK(gse < 0.05 * std::max(1.0, std::fabs(exact)));
    }
  }
}

TEST_CASE("EM's SDE term: common random numbers, weights, and further rounds for nonpositive "
          "sums",
          "[sde][em]") {
  const std::vector<double> frame = {0.8, 0.3, 0.6, 0.5};
  std::vector<double> frames(8);
  for (int i = 0; i < 8; ++i)
    frames[i] = frame[i % 4];
  const ssm_model model = model_with(ou_gpe_terms);
  const ssm::ModelInfo info = ou_info();
  ssm::ThreadPool one(1), two(2);
  // 400 copies of a pair far in psi's tail, R = 1: single estimates there are negative at times.
  const int64_t P = 400;
  std::vector<ssm::StepPoints> steps = one_step(
      std::vector<double>(P, -2.5), std::vector<double>(P, -2.4), std::vector<double>(P, 1.0 / P));
  std::vector<double> grad(2, 0.0), again(2, 0.0);
  const double v = ssm::sde_q_term(model, info, frames, steps, 1, 9, one, &grad);
  REQUIRE(std::isfinite(v));
  CHECK(ssm::sde_q_term(model, info, frames, steps, 1, 9, two, &again) == v); // any threads
  CHECK(again == grad);
  // Round 0 alone has nonpositive estimates among these pairs: the term is finite only because
  // their sums got further rounds.
  ssm::PoissonEstimator estimator(model, info);
  std::vector<double> log_base(P), factor(P);
  estimator.single(frames.data() + 4, 1, steps[1].prev.data(), steps[1].cur.data(), P, 9, 0, 0,
                   log_base.data(), factor.data());
  CHECK(std::count_if(factor.begin(), factor.end(), [](double f) { return !(f > 0); }) > 0);
  // The same seed at another theta: the same draws, so Q moves little for a small change.
  std::vector<double> moved = frames;
  moved[4] += 1e-4;
  const double w = ssm::sde_q_term(model, info, moved, steps, 1, 9, one, nullptr);
  CHECK(std::fabs(w - v) < 1e-2);
  CHECK(ssm::sde_q_term(model, info, frames, steps, 1, 10, one, nullptr) != v); // a new seed
  // A pair of weight 0 takes no part.
  steps[1].weight.assign(P, 0.0);
  steps[1].weight[0] = 1.0;
  const double first = ssm::sde_q_term(model, info, frames, steps, 1, 9, one, nullptr);
  steps[1].count = 1;
  steps[1].prev.resize(1);
  steps[1].cur.resize(1);
  steps[1].weight.resize(1);
  CHECK(ssm::sde_q_term(model, info, frames, steps, 1, 9, one, nullptr) == first);
}
