// The backward kernel (runtime/smoothing/backward_kernel.h) on a tiny AR(1): its exact
// cumulative weights equal W_i f(x | x_i) normalised, and its rejection draws (with and without
// the exact fallback), Metropolis-Hastings draws and Euler proposals (the AR(1) written as an SDE
// whose one Euler step is exact) have those probabilities, within 5 standard errors of the Monte
// Carlo estimate (fixed seeds, so the checks are deterministic).
#include "runtime/sde/sde_fixtures.h"
#include "runtime_test_models.h"
#include "sde/euler_step.h"
#include "smoothing/backward_kernel.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace {

constexpr int64_t kParticles = 5, kStride = 8;

struct TinySystem {
  ssm_model model = rt_test::ar1_model();
  std::vector<double> frame{0.8, 0.7, 0.6}; // phi, sigma, tau
  std::vector<double> x_prev = std::vector<double>(kStride, 0.0);
  std::vector<double> x_cur = std::vector<double>(kStride, 0.4);
  std::vector<double> W{0.1, 0.3, 0.2, 0.25, 0.15};
  std::vector<double> b; // the exact backward probabilities of any current particle
  TinySystem() {
    const double xs[kParticles] = {-1.0, -0.2, 0.3, 0.9, 1.6};
    std::copy(xs, xs + kParticles, x_prev.begin());
    double total = 0;
    for (int64_t i = 0; i < kParticles; ++i) {
      const double m = frame[0] * xs[i], s = frame[1];
      b.push_back(W[i] * std::exp(-0.5 * (0.4 - m) * (0.4 - m) / (s * s)));
      total += b.back();
    }
    for (double& v : b)
      v /= total;
  }
  double log_bound() const { return -0.5 * std::log(2 * M_PI * frame[1] * frame[1]); }
};

// Frame [phi, sigma, tau]: dX = (phi - 1) X dt + sigma dW over dt = 1, whose one Euler step is
// the AR(1)'s transition N(phi x, sigma^2) (with Widen = 10; else a wider law). Rows: drift, its
// Jacobian, the coefficient, dt, then psi's and the drift's bounds (unused).
template <int Widen> // the coefficient sigma * Widen / 10
void ar1_as_sde_terms(const double* theta, int64_t, int64_t begin, int64_t end, int64_t stride,
                      const double*, const int64_t*, const double* x, const double*, double* out) {
  for (int64_t n = begin; n < end; ++n) {
    const double rows[8] = {(theta[0] - 1) * x[n],
                            theta[0] - 1,
                            theta[1] * Widen / 10.0,
                            1.0,
                            -INFINITY,
                            INFINITY,
                            -INFINITY,
                            INFINITY};
    for (int r = 0; r < 8; ++r)
      out[r * stride + n] = rows[r];
  }
}

void check_frequencies(const std::vector<double>& count, const std::vector<double>& p) {
  double n = 0;
  for (double c : count)
    n += c;
  for (size_t i = 0; i < p.size(); ++i) {
    INFO("index " << i << ": frequency " << count[i] / n << ", probability " << p[i]);
    CHECK(std::abs(count[i] / n - p[i]) <= 5 * std::sqrt(p[i] * (1 - p[i]) / n) + 1e-12);
  }
}

} // namespace

TEST_CASE("backward kernel: exact cumulative weights", "[runtime][smooth]") {
  const TinySystem sys;
  const ssm::BackwardDensity density(sys.model, 1, kStride);
  std::vector<double> bc(kStride), l(kStride);
  ssm::exact_backward_cumulative(density, sys.frame.data(), 1, kParticles, sys.x_prev.data(),
                                 sys.x_cur.data(), 0, sys.W.data(), bc.data(), l.data(), false);
  for (int64_t i = 0; i < kParticles; ++i) {
    const double p = (l[i] - (i > 0 ? l[i - 1] : 0.0)) / l[kParticles - 1];
    CHECK(std::abs(p - sys.b[i]) < 1e-12);
  }
}

TEST_CASE("backward kernel: rejection draws, with the exact fallback", "[runtime][smooth]") {
  const TinySystem sys;
  const ssm::BackwardDensity density(sys.model, 1, kStride);
  ssm::AliasTable from_weights;
  from_weights.build(sys.W.data(), kParticles);
  const ssm::BackwardStep step{sys.frame.data(),
                               1,
                               kParticles,
                               sys.x_prev.data(),
                               sys.x_cur.data(),
                               sys.W.data(),
                               &from_weights,
                               sys.log_bound(),
                               42};
  for (const int64_t max_trials : {int64_t(100), int64_t(1)}) {
    ssm::RejectionSampler sampler(density, max_trials, false);
    std::vector<double> count(kParticles, 0.0);
    int64_t tries = 0, accepts = 0, exact = 0;
    const int64_t M = 40000;
    for (int64_t m = 0; m < M; ++m) {
      sampler.next_particle();
      ++count[sampler.draw(step, static_cast<uint32_t>(m), 0, 0, tries, accepts, exact)];
    }
    INFO("max_trials " << max_trials);
    CHECK(accepts + exact == M);
    if (max_trials == 1)
      CHECK(exact > 0);
    check_frequencies(count, sys.b);
  }
}

TEST_CASE("backward kernel: Metropolis-Hastings draws", "[runtime][smooth]") {
  const TinySystem sys;
  const ssm::BackwardDensity density(sys.model, 1, kStride);
  ssm::AliasTable from_weights;
  from_weights.build(sys.W.data(), kParticles);
  const int64_t Nt = 4, S = 30;
  std::vector<int64_t> ancestors(kStride, 0); // every chain starts at index 0
  ssm::BackwardBlock block;
  std::vector<double> count(kParticles, 0.0);
  int64_t tries = 0, accepts = 0;
  for (int64_t t = 1; t <= 100; ++t) {
    const ssm::BackwardStep step{
        sys.frame.data(), t,   kParticles, sys.x_prev.data(), sys.x_cur.data(), sys.W.data(),
        &from_weights,    NAN, 7};
    // One block of kStride current particles, all at 0.4, each with Nt chains of S moves.
    block.propose(density, step, 0, kStride, Nt * S, 1, ancestors.data());
    block.mcmc(Nt, S, tries, accepts);
    for (int64_t k = 0; k < kStride * Nt; ++k)
      ++count[block.idx[k]];
  }
  CHECK(tries == 100 * kStride * Nt * S);
  CHECK(accepts > 0);
  check_frequencies(count, sys.b);
}

TEST_CASE("backward kernel: Euler proposals draw from W_i m(x | x_i)", "[runtime][smooth]") {
  TinySystem sys;
  sys.model.diffusion_terms = ar1_as_sde_terms<10>;
  const ssm::ModelInfo info = sde_fixtures::sde_info();
  const ssm::BackwardDensity density(sys.model, 1, kStride);
  ssm::EulerStep euler(sys.model, info);
  ssm::AliasTable from_weights; // not used by Euler draws
  from_weights.build(sys.W.data(), kParticles);
  const int64_t Nt = 4;
  ssm::BackwardBlock block;
  std::vector<double> count(kParticles, 0.0);
  for (int64_t t = 1; t <= 300; ++t) {
    euler.evaluate(sys.frame.data(), t, sys.x_prev.data(), kParticles, "test");
    const ssm::BackwardStep step{
        sys.frame.data(), t,   kParticles, sys.x_prev.data(), sys.x_cur.data(), sys.W.data(),
        &from_weights,    NAN, 7};
    block.propose(density, step, 0, kStride, Nt, 0, nullptr, &euler);
    REQUIRE(block.lm.size() == static_cast<size_t>(kStride * Nt));
    for (int64_t k = 0; k < kStride * Nt; ++k) {
      ++count[block.pi[k]];
      // The Euler density is the transition's here: the pair's log density.
      CHECK(block.lm[k] == Approx(block.lp[k]).epsilon(1e-12));
    }
  }
  check_frequencies(count, sys.b);
}

TEST_CASE("backward kernel: bis's importance weights under Euler proposals that are not the "
          "transition",
          "[runtime][smooth]") {
  // The Euler law 1.5 times wider than the AR(1)'s transition: the draws follow W_i m, and the
  // weights f / m, self-normalised over each particle's draws, make sum_k w_k 1{i_k = i} an
  // estimate of the backward probability b_i (bias O(1/Nt), small beside 5 standard errors here
  // with Nt = 400). Draws from W_i m weighed by f alone, or from W_i weighed by f / m, would be
  // off by about 0.05 in some b_i.
  TinySystem sys;
  sys.model.diffusion_terms = ar1_as_sde_terms<15>;
  const ssm::ModelInfo info = sde_fixtures::sde_info();
  const ssm::BackwardDensity density(sys.model, 1, kStride);
  ssm::EulerStep euler(sys.model, info);
  ssm::AliasTable from_weights;
  from_weights.build(sys.W.data(), kParticles);
  const int64_t Nt = 400, steps = 60;
  ssm::BackwardBlock block;
  std::vector<std::vector<double>> sets(kParticles); // per index, the per-particle estimates of b_i
  for (int64_t t = 1; t <= steps; ++t) {
    euler.evaluate(sys.frame.data(), t, sys.x_prev.data(), kParticles, "test");
    const ssm::BackwardStep step{
        sys.frame.data(), t,   kParticles, sys.x_prev.data(), sys.x_cur.data(), sys.W.data(),
        &from_weights,    NAN, 7};
    block.propose(density, step, 0, kStride, Nt, 0, nullptr, &euler);
    block.importance_weights(Nt);
    for (int64_t j = 0; j < kStride; ++j) {
      std::vector<double> mass(kParticles, 0.0);
      for (int64_t k = 0; k < Nt; ++k)
        mass[block.idx[j * Nt + k]] += block.w[j * Nt + k];
      for (int64_t i = 0; i < kParticles; ++i)
        sets[i].push_back(mass[i]);
    }
  }
  for (int64_t i = 0; i < kParticles; ++i) {
    const auto n = static_cast<double>(sets[i].size());
    double mean = 0, var = 0;
    for (double v : sets[i])
      mean += v / n;
    for (double v : sets[i])
      var += (v - mean) * (v - mean) / (n - 1);
    const double se = std::sqrt(var / n);
    INFO("index " << i << ": " << mean << " (se " << se << "), exact " << sys.b[i]);
    CHECK(std::abs(mean - sys.b[i]) <= 5 * se);
    CHECK(se < 0.005);
  }
}

namespace {

// dX = tanh(X) dt + dW over dt = frame[0]: psi in [0, 1], so the General Poisson estimates are
// positive (no Wald round), and the density is phi_dt(y - x) cosh(y) / cosh(x) exp(-dt / 2).
void tanh_sde_terms(const double* theta, int64_t, int64_t begin, int64_t end, int64_t stride,
                    const double*, const int64_t*, const double* x, const double*, double* out) {
  for (int64_t n = begin; n < end; ++n) {
    const double th = std::tanh(x[n]);
    const double rows[8] = {th, 1 - th * th, 1.0, theta[0], 0.0, 1.0, -1.0, 1.0};
    for (int r = 0; r < 8; ++r)
      out[r * stride + n] = rows[r];
  }
}

} // namespace

TEST_CASE("backward kernel: pseudo-marginal Metropolis-Hastings draws from a start whose estimate "
          "is drawn in proportion to its size",
          "[runtime][smooth][sde]") {
  // One move per draw from a start drawn from the backward kernel, as the bootstrap filter's
  // ancestor is: the move leaves the kernel invariant only if the start's estimate has its law
  // under the chain's invariant law (size-biased). Drawn among 32 estimates in proportion to them,
  // the draws have the backward probabilities b_i (W_i times the exact density) within 5 standard
  // errors, after one move or three, and from a start drawn among proposals; from one fresh
  // estimate of the ancestor's density the moves are accepted too often, which shows.
  TinySystem sys;
  sys.model.diffusion_terms = tanh_sde_terms;
  sys.frame = {1.0};
  const ssm::ModelInfo info = sde_fixtures::sde_info();
  ssm::BackwardDensity density(sys.model, 1, kStride);
  density.use_estimator(info);
  const double xs[kParticles] = {-1.0, -0.2, 0.3, 0.9, 1.6};
  std::vector<double> b(kParticles);
  double total = 0;
  for (int64_t i = 0; i < kParticles; ++i) {
    const double y = 0.4, dt = sys.frame[0];
    b[i] = sys.W[i] * std::exp(-(y - xs[i]) * (y - xs[i]) / (2 * dt)) * std::cosh(y) /
           std::cosh(xs[i]);
    total += b[i];
  }
  for (double& v : b)
    v /= total;
  ssm::AliasTable from_weights;
  from_weights.build(sys.W.data(), kParticles);
  auto frequencies = [&](int64_t starts, int64_t S, bool at_ancestor = true) {
    std::mt19937_64 rng(3);
    std::discrete_distribution<int64_t> from_b(b.begin(), b.end());
    std::vector<int64_t> ancestors(kStride);
    ssm::BackwardBlock block;
    std::vector<double> count(kParticles, 0.0);
    int64_t tries = 0, accepts = 0;
    for (int64_t t = 1; t <= 3000; ++t) {
      for (int64_t& a : ancestors)
        a = from_b(rng);
      const ssm::BackwardStep step{
          sys.frame.data(), t,   kParticles, sys.x_prev.data(), sys.x_cur.data(), sys.W.data(),
          &from_weights,    NAN, 11};
      block.propose(density, step, 0, kStride, S, starts, ancestors.data(), nullptr, at_ancestor);
      block.mcmc(1, S, tries, accepts);
      for (int64_t j = 0; j < kStride; ++j)
        ++count[block.idx[j]];
    }
    return count;
  };
  check_frequencies(frequencies(32, 1), b);
  check_frequencies(frequencies(32, 3), b); // three moves per draw: the chain's other path
  // Without ancestors (after a filter other than the bootstrap one) the start is one of 64
  // proposals from the filter weights drawn in proportion to its estimate, then three moves.
  check_frequencies(frequencies(64, 3, false), b);
  const std::vector<double> fresh = frequencies(1, 1);
  double worst = 0, n = 0;
  for (double c : fresh)
    n += c;
  for (int64_t i = 0; i < kParticles; ++i) {
    UNSCOPED_INFO("from one fresh estimate: index " << i << ": " << fresh[i] / n << " against "
                                                    << b[i]);
    worst = std::max(worst, std::abs(fresh[i] / n - b[i]) / std::sqrt(b[i] * (1 - b[i]) / n));
  }
  CHECK(worst > 5);
}
