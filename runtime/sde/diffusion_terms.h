// An SDE transition's terms at points of its path, through the model's diffusion_terms kernel
// (kernel/abi.h): the drift, its Jacobian in the path, the diffusion coefficient, dt and the
// bounds of the General Poisson estimator's psi and of the drift, and, when the compiler derived
// them, the gradients in the parameters of the drift and of its divergence and the parametrix
// estimator's divergences of sigma sigma^T, for a batch of points in one kernel call.
#pragma once

#include "core/metadata.h"
#include "kernel/abi.h"

#include <cstdint>
#include <vector>

namespace ssm {

class DiffusionTerms {
public:
  // Throws Error when the model has no SDE transition whose estimators can run.
  DiffusionTerms(const ssm_model& model, const ModelInfo& info);

  // Evaluates the terms at the P points x (the SDE state's dim x P values, component-major:
  // x[c * P + p]), placed where the kernel reads that state. Then coefficient(p, k) is sigma's
  // k-th element as written (coefficient_size() of them: 1, dim or dim * dim, row-major).
  void evaluate(const double* frame, int64_t t, const double* x, int64_t P);

  int dim() const { return dim_; }
  int coefficient_size() const { return first_dt_ - dim_ - dim_ * dim_; }
  int64_t size() const { return P_; }
  // At point p of the last evaluation:
  double drift(int64_t p, int i = 0) const { return row(i, p); }
  double jacobian(int64_t p, int i = 0, int j = 0) const { return row(dim_ + i * dim_ + j, p); }
  double coefficient(int64_t p, int k = 0) const { return row(dim_ + dim_ * dim_ + k, p); }
  // gamma = sigma sigma^T at point p (sigma I, diag(sigma) or the matrix as written), into out
  // (dim^2, symmetric: row- and column-major alike).
  void gamma(int64_t p, double* out) const;
  double dt(int64_t p) const { return row(first_dt_, p); }
  double psi_lower(int64_t p) const { return row(first_dt_ + 1, p); }
  double psi_upper(int64_t p) const { return row(first_dt_ + 2, p); }
  double drift_lower(int64_t p) const { return row(first_dt_ + 3, p); } // -inf: unbounded
  double drift_upper(int64_t p) const { return row(first_dt_ + 4, p); }
  // With the gradient rows (ModelInfo::Sde::gradient_rows, dim + 1 per theta component):
  // d drift_i / d theta_k (row i K + k) and d (div drift) / d theta_k (row dim K + k; drift'
  // for a scalar SDE), k < gradient_size().
  int gradient_size() const { return gradient_rows_ / (dim_ + 1); }
  double drift_theta(int64_t p, int k, int i = 0) const {
    return row(first_dt_ + 5 + i * gradient_size() + k, p);
  }
  double divergence_theta(int64_t p, int k) const {
    return row(first_dt_ + 5 + dim_ * gradient_size() + k, p);
  }
  // With the coefficient's gradient rows (ModelInfo::Sde::coefficient_gradient_rows, a scalar
  // coefficient constant in the path): d s / d theta_k, and drift'' (scalar SDE).
  bool coefficient_reads_theta() const { return coefficient_gradient_rows_ > 0; }
  double coefficient_theta(int64_t p, int k) const {
    return row(first_dt_ + 5 + gradient_rows_ + k, p);
  }
  double drift_second(int64_t p) const {
    return row(first_dt_ + 5 + gradient_rows_ + coefficient_gradient_rows_ - 1, p);
  }
  // With the parametrix rows (ModelInfo::Sde::parametrix_rows), gamma = sigma sigma^T:
  // sum_i d gamma_il / dx_i, and sum_il d^2 gamma_il / dx_i dx_l.
  double gamma_divergence(int64_t p, int l) const { return row(first_parametrix_ + l, p); }
  double gamma_second_divergence(int64_t p) const { return row(first_parametrix_ + dim_, p); }

private:
  double row(int r, int64_t p) const { return out_[static_cast<size_t>(r * P_ + p)]; }

  const ssm_model& model_;
  int dim_ = 0, first_dt_ = 0, rows_ = 0, gradient_rows_ = 0, first_parametrix_ = 0;
  int coefficient_gradient_rows_ = 0;
  int64_t P_ = 0, offset_ = 0; // offset_: the SDE state's first component in the state
  std::vector<double> out_, points_;
};

} // namespace ssm
