// The law of one Euler-Maruyama step of an SDE transition over the whole dt from each of many
// points, N(x + drift(x) dt, dt sigma sigma^T(x)): a Gaussian whose density is known, close to
// the transition's when dt is short. The random-weight filter draws from it (its weights are
// estimate / Euler density), and bis can draw its backward indices from the filter weights times
// it (BackwardProposal::Euler), so that pairs far apart, whose estimates are the least reliable,
// are seldom drawn. Where the run's estimator works in Lamperti's coordinate (sde/lamperti.h: a
// scalar coefficient that reads the path) the step is taken there, u = eta(x): N(eta(x) + b(x)
// dt, dt) pushed back to x, whose density at y is N(eta(y); eta(x) + b dt, dt) / |s(y)|, eta
// by quadrature from a reference point (the first finite one) to each point and target.
#pragma once

#include "core/metadata.h"
#include "kernel/abi.h"
#include "sde/diffusion_terms.h"
#include "sde/path_quadrature.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ssm {

class EulerStep {
public:
  // Throws Error when the model has no SDE transition whose terms can be evaluated.
  EulerStep(const ssm_model& model, const ModelInfo& info);

  // The laws from the P points x (the SDE state's dim x P values, component-major). A point with
  // a non-finite component (a diverged path) has no law (finite(p) false); any other point whose
  // drift is not finite, or whose dt or covariance is not finite and positive definite, is an
  // error naming `who` (the command), the step and the point.
  void evaluate(const double* frame, int64_t t, const double* x, int64_t P, const char* who);

  int dim() const { return dim_; }
  int64_t size() const { return P_; }
  bool finite(int64_t p) const { return finite_[p] != 0; }
  // In Lamperti's coordinate (lamperti()), after evaluate(): eta and log |s| at the n points y
  // (y[j * stride]) whose densities log_densities will be asked for, as targets 0 .. n-1.
  void targets(const double* frame, int64_t t, const double* y, int64_t stride, int64_t n);
  bool lamperti() const { return lamperti_; }
  // out[p] = the log density at y (dim values, y[c * stride]) of the law from every point p
  // (-inf for a point without one); in Lamperti's coordinate y is targets()'s point `target`.
  // Thread-safe: bis calls it from every block.
  void log_densities(const double* y, int64_t stride, double* out, int64_t target = -1) const;
  // mean + L z into out (out[c * stride]) for standard normal z (dim values), L the covariance's
  // Cholesky factor; returns the draw's log density. Not in Lamperti's coordinate.
  double draw(int64_t p, const double* z, double* out, int64_t stride = 1) const;

private:
  // In Lamperti's coordinate: eta at the points (and their means eta + b dt, mean_), with
  // chol_ sqrt(dt); at the targets, eta and log |s| (eta NaN: outside the points' interval).
  void evaluate_lamperti(const double* frame, int64_t t, const double* x, int64_t P,
                         const char* who);
  // int from reference_ to each of the n points x (x[i * stride]) of dz / |s| into out (NaN
  // where the coefficient is 0 or changes sign on the way), and log |s| at them into log_s.
  void eta(const double* frame, int64_t t, const double* x, int64_t stride, int64_t n, double* out,
           double* log_s);
  const double* mean(int64_t p) const { return &mean_[p * dim_]; }
  const double* chol(int64_t p) const { return &chol_[p * dim_ * dim_]; } // lower, row-major

  DiffusionTerms terms_;
  std::string relation_;
  int dim_ = 1;
  int64_t P_ = 0;
  std::vector<double> mean_, chol_, log_norm_; // log_norm: -sum log L_cc - dim/2 log(2 pi)
  std::vector<char> finite_;
  bool lamperti_ = false;
  double reference_ = 0;
  PathQuadrature quadrature_;
  std::vector<double> from_, to_, target_eta_, target_log_s_, log_s_;
};

} // namespace ssm
