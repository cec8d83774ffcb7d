// The General Poisson estimator of the transition density (and of its log's gradient,
// poisson_gradient.cpp) of a scalar SDE dX = a(X) dt + s(X) dW (Beskos, Papaspiliopoulos &
// Roberts 2006; Fearnhead, Papaspiliopoulos & Roberts 2008; Martin 2022, appendix C.1.1). In
// Lamperti's coordinate u = eta(x), eta' = 1 / |s|, the SDE has unit diffusion and drift
// b = a / |s| - |s|' / 2 (at x = eta^-1(u)), and by Girsanov
//   q(x, y) = phi_dt(v - u) exp(B(v) - B(u)) E[exp(-int_0^dt psi(w_r) dr)] / |s(y)|,
// B' = b, psi = (b^2 + b') / 2, w a Brownian bridge from u to v. For a constant coefficient,
// u = x / s; for one that reads the path, v - u = int_x^y dz / |s| and
// B(v) - B(u) = int_x^y a / s^2 dz - log(|s(y)| / |s(x)|) / 2 (Gauss-Legendre, graded where |s|
// varies), and a bridge point is taken back to x by RK4 (sde/lamperti.h); for a constant one,
// B(v) - B(u) is an integral of the drift (Gauss-Legendre, to rounding). The expectation is
// estimated without bias by
// exp((lambda - c) dt) prod_{j <= K} (c - psi(w_{U_j})) / lambda, K ~ Poisson(lambda dt), U_j
// uniform on (0, dt), for any c and lambda > 0. With c >= sup psi the estimate is positive (the
// bounds of psi, when finite: c = upper, lambda = upper - lower; with a gradient, c rises until
// lambda dt >= 1, see prepare()); otherwise c and lambda come from psi near the pair, and Wald's
// identity makes the estimates positive (density_estimator.h).
#pragma once

#include "sde/density_estimator.h"
#include "sde/lamperti.h"
#include "sde/path_quadrature.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace ssm {

// The Philox sites of the estimator's draws: round r uses kSiteSde + 3r (the Poisson count),
// + 3r + 1 (the bridge's times), + 3r + 2 (its normals); the counter's n is the pair's id.
inline constexpr uint32_t kSiteSde = 0xFFFF1000u;
// A Poisson rate lambda dt above this is an error (psi's bounds too far apart for the pair).
inline constexpr double kMaxPoissonRate = 1e5;
// The gradient's exact bridges: proposal r of a pair uses kSiteBridge + 5r (the Poisson count),
// + 5r + 1 (its times), + 5r + 2 (the bridge's normals), + 5r + 3 (the marks), + 5r + 4 (the
// uniform time); after kMaxBridgeRounds proposals without acceptance, an error.
inline constexpr uint32_t kSiteBridge = 0xFFFF2000u;
inline constexpr int kMaxBridgeRounds = 10000;

// Why the General Poisson estimator cannot weigh the model's SDE transition; empty when it can.
std::string poisson_estimator_problem(const ssm_model& model, const ModelInfo& info);

class PoissonEstimator final : public DensityEstimator {
public:
  // Throws Error with the reason when the estimator does not apply to the model.
  PoissonEstimator(const ssm_model& model, const ModelInfo& info);
  // The estimator keeps a reference to the model: a temporary would dangle.
  PoissonEstimator(const ssm_model&& model, const ModelInfo& info) = delete;

  // Unbiased estimates of the gradient of log q(prev[p], cur[p]) in theta, out[k * P + p] for the
  // theta components k (0 for a pair with a non-finite end); Martin (2022), appendix C.1,
  // Proposition 2, with the coefficient s and dt free of theta:
  //   d/dtheta log q = (1 / s^2) int_x^y d drift/dtheta - dt d psi/dtheta (s w_U),
  // w_U the exact diffusion bridge from u to v at a uniform time, drawn by the exact algorithm
  // EA1 (Beskos & Roberts 2005): a Brownian bridge is accepted when psi - lower stays below the
  // marks of a Poisson process of rate upper - lower at its points, which needs psi bounded
  // above. Pair p's draws are keyed by (seed, t, first_id + p) on the kSiteBridge sites. Throws
  // Error when the model has no gradient rows (ModelInfo::Sde::gradient_reason).
  void gradient(const double* frame, int64_t t, const double* prev, const double* cur, int64_t P,
                uint64_t seed, uint64_t first_id, double* out, EstimatorCounts* counts = nullptr);
  // Whether gradient()'s exact bridges can be drawn at step t: the compiler said so
  // (ModelInfo::Sde::exact_bridges) and psi's upper bound is finite there. Else
  // estimate()'s gradient, the derivative of the estimate itself with c and lambda held,
  //   d/dtheta log Q = (1 / s^2) int_x^y d drift/dtheta - sum_j psi'(w_j) / (c - psi(w_j))
  // (psi' its derivative in theta), is the one to use (by bis, which weighs by Q).
  bool exact_bridges(const double* frame, int64_t t);

  // The log of a bound of every estimate at step t, whatever the pair: with c = psi's upper
  // bound the Poisson factors are at most 1 and exp((lambda - c) dt) = exp(-lower dt), and
  // phi_dt(v - u) exp(B(v) - B(u)) <= exp(M^2 dt / 2) / sqrt(2 pi dt), M = sup |drift| / s
  // (c raised for a gradient keeps exp((lambda - c) dt) and the factors' bound). inf when psi or
  // the drift is unbounded, or in Lamperti's coordinate. For rejection sampling from the backward
  // kernel (pseudo-marginal PaRIS: a proposal accepted with probability q^ / bound is accepted with
  // probability q / bound on average).
  double log_bound(const double* frame, int64_t t) override;

  // After estimate() or single(): whether psi was bounded above at that step, so that the
  // estimates were positive by construction (else Wald's identity made them so).
  bool positive() const override { return std::isfinite(upper_); }

private:
  // The deterministic part of each pair's estimate, and the constants c, lambda of its Poisson
  // part; after prepare(), scale_ (s), dt_.
  void prepare(const double* frame, int64_t t, const double* prev, const double* cur,
               int64_t P) override;
  void prepare_gradient(const double* frame, int64_t t) override;
  // The coefficient, dt and the bounds at step t (they read no point: `probe` is any), checked.
  void constants(const double* frame, int64_t t, double probe);
  // The random part of pair p's estimate in round r (pairs in `pairs`), prod_j (c - psi_j) /
  // lambda, as log|.| and sign (0 when a factor is 0) into log_abs[p], sign[p].
  void round(const double* frame, int64_t t, const std::vector<int64_t>& pairs, int r,
             uint64_t seed, uint64_t first_id, double* log_abs, double* sign,
             EstimatorCounts* counts, double* dlog) override;
  double psi(int64_t point) const; // at a point of the last evaluation, in u coordinates
  // In u coordinates at a point of the last evaluation: the drift b and its derivative b'.
  UnitDrift unit_drift(int64_t point) const;
  // |s| from s = s(x) on pair p's way (scale_ for a constant coefficient); an error when it is
  // 0 or not finite, or of the other sign than s(x_p).
  double sigma_at(int64_t t, double s, double x, int64_t p) const;
  // The bridge_ points of round(), in u coordinates from u = 0 at x_p, taken to x coordinates.
  void lamperti_inverse(const double* frame, int64_t t, const std::vector<int64_t>& pairs);
  // psi's value at x, a point the estimates visit at step t, within [lower_, upper_]: an error
  // otherwise (a bound the model gave that does not hold would make the estimates wrong).
  void check_psi(int64_t t, double value, double x) const;
  // d psi / d theta_k at a point (at its x) of the last evaluation.
  double psi_theta(int64_t point, int k) const;
  // With a constant coefficient s(theta): d|s| / d theta_k, and d psi / dx at a fixed theta.
  double scale_theta(int64_t point, int k) const;
  double psi_x(int64_t point) const;
  // After prepare()'s evaluation: int_x^y (d drift / d theta_k) / s^2 for pair p, the gradient
  // of B(v) - B(u).
  double drift_integral_theta(int64_t p, int k) const;

  double scale_ = 1, scale_sign_ = 1, dt_ = 1, lower_ = 0, upper_ = 0, drift_lower_ = 0,
         drift_upper_ = 0;
  bool lower_given_ = false, upper_given_ = false; // by the model (psi_lower, psi_upper)
  bool lamperti_ = false;      // the coefficient reads the path: eta by quadrature
  bool exact_bridges_ = false; // ModelInfo::Sde::exact_bridges
  // Per pair: u, v and the midpoint, then the nodes of [x, y], evaluated in that order.
  PathQuadrature quadrature_;
  std::vector<double> c_, lambda_, u_, v_, x_, y_;
  std::vector<double> drift_integral_; // int_x^y a per pair (a constant s(theta)'s derivative)
  std::vector<double> times_, bridge_;
  std::vector<double> bridge_deviation_; // each bridge point's w minus the line from u to v
  std::vector<int64_t> count_, bridge_first_;
};

} // namespace ssm
