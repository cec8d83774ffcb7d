// The parametrix estimator of the transition density of an SDE dX = alpha(X) dt + sigma(X) dW in
// R^d, any drift and coefficient (Andersson & Kohatsu-Higa 2017; Fearnhead, Latuszynski, Roberts
// & Sermaidis 2017; Martin 2022, appendix C.1.2). With m(z, ., u) the Euler density from z over a
// time u (coefficients frozen at z), K the forward operator of the SDE and K_z the frozen one,
// Duhamel's formula q_dt = m_dt + int_0^dt (K - K_z) m_s q_{dt - s} ds unrolls into an
// expectation over a skeleton x = z_0, z_1, ... at the events of a renewal process of hazard
// lambda(u) (u the time since the last event):
//   q(x, y) = E[prod_j rho_j m(z_J, y, dt - s_J)],
//   rho_j = 1 + theta(z_{j-1}, z_j, u_j) / lambda(u_j),
//   theta(z, w, u) = [(K - K_z) m(z, ., u)](w) / m(z, w, u)
//     = -div alpha(w) - (alpha(w) - alpha(z)) . g + c1(w) . g + c2(w) / 2
//       + (1/2) sum_il (gamma(w) - gamma(z))_il (g_i g_l + H_il),
// gamma = sigma sigma^T, g and H the gradient and Hessian of log m(z, ., u) at w, c1 and c2 the
// divergences of gamma (the compiler's parametrix rows). Any hazard keeps it unbiased, even one
// that depends on the skeleton so far; here, on the segment from z (the time left r):
// lambda(u) = a + b / sqrt(u), b = sqrt(K / dt) / 2 and a = max(K / (2 dt), 4 theta~), theta~ a
// scale of theta at a gap u = 1 / a from z's terms and the pull towards y, v = (y - z) / r:
//   theta~ = |tr J| + |c1|_g |v - alpha|_g + |c2| / 2
//            + (|L^-1 J L| |v|_g |v - alpha|_g + |c1|_g |v|_g |v - alpha|_g^2 / 2) / a
// (|.|_g the norm in gamma(z)^-1, L its Cholesky factor; c1 standing in for gamma's gradient in
// the change of gamma over the gap), solved for a: about K events where theta is
// moderate, more where the drift is stiff or y far, so that rho stays near 1 and signs rarely
// flip (a far pair's estimates would otherwise be negative half the time). K =
// kParametrixEvents. The b part tames theta's u^(-1/2) growth when gamma moves with the path;
// even so the estimates are then heavy-tailed (the bridge's weight m / r compares Gaussians of
// different covariances): where a Lamperti transform makes the coefficient constant (log
// coordinates for diag(x) G), the model is better written in it. The skeleton is drawn towards y,
// z_j ~ N(z + u (y - z) / r, u (r - u) / r gamma(z)) (Durham & Gallant's modified bridge), weighted
// by m / that density: a forward skeleton would have to land near y by chance. The estimates are
// signed; Wald's identity makes them positive (density_estimator.h).
#pragma once

#include "sde/density_estimator.h"
#include "sde/poisson_estimator.h" // its sites, below ours

#include <cstdint>
#include <string>
#include <vector>

namespace ssm {

// The Philox sites of round r: kSiteParametrix + 2r (event j's two exponential clocks, draw j),
// + 2r + 1 (event j's normals, component c at k = j * dim + c); the counter's n is the pair's id.
// Above the General Poisson gradient's bridges, whose sites a score by bis draws beside these.
inline constexpr uint32_t kSiteParametrix = 0xFFFFE800u;
static_assert(kSiteBridge + 5u * kMaxBridgeRounds <= kSiteParametrix &&
                  kSiteSde + 3u * kMaxWaldRounds <= kSiteBridge,
              "the estimators' random streams overlap");
static_assert(uint64_t{kSiteParametrix} + 2u * kMaxWaldRounds <= 0xFFFFFFFFull,
              "the parametrix estimator's sites overflow");
// The skeleton's expected number of events over dt (the hazard's scale).
inline constexpr int kParametrixEvents = 10;
// A skeleton with more events than this is an error (the hazard's clocks are broken).
inline constexpr int64_t kMaxSkeletonEvents = 1000000;

class ParametrixEstimator final : public DensityEstimator {
public:
  // Throws Error with the reason when the estimator does not apply to the model.
  ParametrixEstimator(const ssm_model& model, const ModelInfo& info);
  // The estimator keeps a reference to the model: a temporary would dangle.
  ParametrixEstimator(const ssm_model&& model, const ModelInfo& info) = delete;
  bool positive() const override { return false; }

private:
  void prepare(const double* frame, int64_t t, const double* prev, const double* cur,
               int64_t P) override;
  // With dlog, the derivative in theta of log|estimate| with the skeleton and the hazard held
  // (they do not depend on theta when gamma does not): the Euler densities' terms read
  // d alpha / d theta at each segment's start, theta(z, w, u) reads it at both ends and
  // d (div alpha) / d theta at w; d log|rho| = (d theta / d theta_k) / (lambda rho).
  void round(const double* frame, int64_t t, const std::vector<int64_t>& pairs, int r,
             uint64_t seed, uint64_t first_id, double* log_abs, double* sign,
             EstimatorCounts* counts, double* dlog) override;

  // What a skeleton point's segment reads of the terms there, for n points (k < n); with K > 0
  // gradient components, d alpha_i / d theta_c at [(k K + c) d + i] and d (div alpha) / d
  // theta_c at [k K + c].
  struct Frozen {
    int d = 1, K = 0;
    std::vector<double> alpha, gamma, L, half_logdet, trace_j, norm_j, c1, c2;
    std::vector<double> alpha_theta, divergence_theta;
    void resize(int64_t n, int dim, int gradient_size);
    void copy(int64_t to, const Frozen& from, int64_t k);
  };
  // Point q of the last evaluation (at `point`, dim values, on a skeleton of `pair`) into slot k
  // of f; throws naming the step, the point and the pair where the drift is not finite or gamma
  // not positive definite.
  void freeze(int64_t q, const double* point, int64_t t, int64_t pair, Frozen& f, int64_t k) const;
  // The rate a of the segment from slot k of f towards y with `rest` of dt left.
  double segment_rate(const Frozen& f, int64_t k, const double* z, const double* y,
                      double rest) const;

  std::string ends_text(int64_t p) const; // pair p's ends, for errors

  double dt_ = 1;
  // Per pair, after prepare(): its ends (dim each, pair-major) and the start's frozen terms.
  std::vector<double> x_, y_;
  Frozen start_;
};

} // namespace ssm
