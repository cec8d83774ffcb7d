// Exact filtering and smoothing of linear-Gaussian models: the Kalman filter and the
// Rauch-Tung-Striebel smoother and draws of the state path by backward sampling, on the matrices
// that the compiled model's linear_gaussian kernel computes at each step (docs/abi.md); and the
// unscented Kalman filter for nonlinear models with Gaussian noise. Missing observation components
// (NaN) drop their rows.
#pragma once

#include "core/csv.h"
#include "core/metadata.h"
#include "core/results.h"
#include "exact/weighted_points.h"
#include "kernel/abi.h"

#include <Eigen/Core>

#include <cstdint>
#include <functional>
#include <vector>

namespace ssm {

// The eight matrices the linear_gaussian kernel writes for step t (docs/abi.md), read from
// `frame` (that step's) through `buffer`: x_0 ~ N(m0, P0), x_t = F x_{t-1} + c + N(0, Q),
// y_t = H x_t + d + N(0, R).
struct LinearGaussianStep {
  Eigen::VectorXd m0, c, d;
  Eigen::MatrixXd P0, F, Q, H, R;
};
LinearGaussianStep linear_gaussian_step(const ssm_model& model, const double* frame, int64_t t,
                                        int64_t n, int64_t m, std::vector<double>& buffer);

// Runs the Kalman filter on data.T steps. `fixed` is the parameters followed by the data values.
// The FilterResult has the filtering means and variances, the log-likelihood and its increments;
// ess is empty and particles 0. Throws ssm::Error, naming the time step, if an innovation
// covariance is not positive definite or the model has no linear_gaussian kernel.
FilterResult kalman_filter(const ssm_model& model, const ModelInfo& info,
                           const std::vector<double>& fixed, const ObsData& data);

// The unscented Kalman filter (Julier & Uhlmann; Wan & van der Merwe) on the gaussian_moments
// kernel: 2n + 1 sigma points with alpha = 1, beta = 2, kappa = 0, propagated through the
// transition and observation means; the noise covariances (which may depend on the state) are
// averaged over the sigma points. On a linear-Gaussian model it equals the Kalman filter. Throws
// ssm::Error naming the time step if a covariance stops being positive definite.
FilterResult unscented_kalman_filter(const ssm_model& model, const ModelInfo& info,
                                     const std::vector<double>& fixed, const ObsData& data);

// The extended Kalman filter: the transition and observation means linearised at the current
// mean with the Jacobians the compiler derives (the gaussian_jacobian kernel, from its
// differentiation pass), noise covariances evaluated at the mean. Equals the Kalman filter on a
// linear-Gaussian model.
FilterResult extended_kalman_filter(const ssm_model& model, const ModelInfo& info,
                                    const std::vector<double>& fixed, const ObsData& data);

// Kalman filter, then RTS: per-t smoothing means and variances, the lag-one covariances
// Cov[x_t, x_{t-1} | y], and the model's functionals as expectations under the smoothing
// distribution of (x_{t-1}, x_t), a Gaussian, by a symmetric cubature rule (2d points): exact for
// terms that are polynomials of degree at most 3 in the state (sums of x, squares, products),
// an approximation otherwise (the JSON details say which rule was used).
SmoothResult smooth_rts(const ssm_model& model, const ModelInfo& info,
                        const std::vector<double>& fixed, const ObsData& data);

// The smoothing Gaussian of each step as the points of the same cubature rule (x_0's at t = 0,
// (x_{t-1}, x_t)'s after), which is exact for the log-density of a linear-Gaussian model and its
// gradients (quadratic in the state): EM's E-step. The hidden copies that carry x[t-k] (x@lagK)
// are exactly equal to their sources at every point, as their densities need. The
// log-likelihood in `log_likelihood`.
std::vector<StepPoints> rts_points(const ssm_model& model, const ModelInfo& info,
                                   const std::vector<double>& fixed, const ObsData& data,
                                   double& log_likelihood);

// One draw of the whole state path from the exact smoothing distribution, by forward filtering
// and backward sampling (Carter & Kohn 1994; Frühwirth-Schnatter 1994): x_t's component c at
// [t * n_state + c], `normal(t, c)` giving the standard normal draws (the caller's random
// streams); the log-likelihood in `log_likelihood`.
std::vector<double> kalman_path_draw(const ssm_model& model, const ModelInfo& info,
                                     const std::vector<double>& fixed, const ObsData& data,
                                     const std::function<double(int64_t, int64_t)>& normal,
                                     double& log_likelihood);

} // namespace ssm
