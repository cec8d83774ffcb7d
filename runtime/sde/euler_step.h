// The law of one Euler-Maruyama step of an SDE transition over the whole dt from each of many
// points, N(x + drift(x) dt, dt sigma sigma^T(x)): a Gaussian whose density is known, close to
// the transition's when dt is short. The random-weight filter draws from it (its weights are
// estimate / Euler density), and bis can draw its backward indices from the filter weights times
// it (BackwardProposal::Euler), so that pairs far apart, whose estimates are the least reliable,
// are seldom drawn.
#pragma once

#include "core/metadata.h"
#include "kernel/abi.h"
#include "sde/diffusion_terms.h"

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
  // out[p] = the log density at y (dim values, y[c * stride]) of the law from every point p
  // (-inf for a point without one). Thread-safe: bis calls it from every block.
  void log_densities(const double* y, int64_t stride, double* out) const;
  // mean + L z into out (out[c * stride]) for standard normal z (dim values), L the covariance's
  // Cholesky factor; returns the draw's log density.
  double draw(int64_t p, const double* z, double* out, int64_t stride = 1) const;

private:
  const double* mean(int64_t p) const { return &mean_[p * dim_]; }
  const double* chol(int64_t p) const { return &chol_[p * dim_ * dim_]; } // lower, row-major

  DiffusionTerms terms_;
  std::string relation_;
  int dim_ = 1;
  int64_t P_ = 0;
  std::vector<double> mean_, chol_, log_norm_; // log_norm: -sum log L_cc - dim/2 log(2 pi)
  std::vector<char> finite_;
};

} // namespace ssm
