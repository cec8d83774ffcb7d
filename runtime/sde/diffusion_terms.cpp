// DiffusionTerms: see diffusion_terms.h.
#include "sde/diffusion_terms.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>

namespace ssm {

DiffusionTerms::DiffusionTerms(const ssm_model& model, const ModelInfo& info) : model_(model) {
  if (!info.sde)
    throw Error(fmt::format("model '{}' has no SDE transition", info.name));
  if (!info.sde->why_not.empty())
    throw Error(fmt::format("no estimator of the transition density of {} applies: {}",
                            info.sde->relation, info.sde->why_not));
  if (!model.diffusion_terms)
    throw Error("the model table has no diffusion_terms kernel (a model compiled without the "
                "sde-estimators analysis)");
  if (info.sde->state < 0 || info.sde->state >= static_cast<int>(info.state.size()))
    throw Error(fmt::format("internal error: no state for the SDE {}", info.sde->relation));
  offset_ = info.state[info.sde->state].offset; // where the kernel reads the path's component
  dim_ = info.sde->dim;
  first_dt_ = dim_ + dim_ * dim_ + info.sde->coefficient_size;
  gradient_rows_ = info.sde->gradient_rows;
  if (gradient_rows_ % (dim_ + 1) != 0)
    throw Error(fmt::format("internal error: {} gradient rows for a {}-dimensional SDE (a "
                            "multiple of {} expected)",
                            gradient_rows_, dim_, dim_ + 1));
  coefficient_gradient_rows_ = info.sde->coefficient_gradient_rows;
  first_parametrix_ = first_dt_ + 5 + gradient_rows_ + coefficient_gradient_rows_;
  rows_ = first_parametrix_ + info.sde->parametrix_rows;
}

void DiffusionTerms::gamma(int64_t p, double* out) const {
  const int d = dim_, n = coefficient_size();
  std::fill_n(out, d * d, 0.0);
  for (int i = 0; i < d; ++i) {
    if (n == 1 || n == d) { // sigma I or diag(sigma)
      const double s = coefficient(p, n == 1 ? 0 : i);
      out[i * d + i] = s * s;
      continue;
    }
    for (int l = 0; l <= i; ++l) { // (sigma sigma^T)_il, sigma row-major
      double sum = 0;
      for (int k = 0; k < d; ++k)
        sum += coefficient(p, i * d + k) * coefficient(p, l * d + k);
      out[i * d + l] = out[l * d + i] = sum;
    }
  }
}

void DiffusionTerms::evaluate(const double* frame, int64_t t, const double* x, int64_t P) {
  P_ = P;
  out_.resize(static_cast<size_t>(rows_ * P));
  if (P == 0)
    return;
  if (offset_ > 0) { // the other components (states the terms do not read) stay 0
    points_.assign(static_cast<size_t>((offset_ + dim_) * P), 0.0);
    std::copy(x, x + dim_ * P, points_.begin() + offset_ * P);
    x = points_.data();
  }
  // x_prev, ancestors and y are never read: the terms read only the path.
  model_.diffusion_terms(frame, t, 0, P, P, nullptr, nullptr, x, nullptr, out_.data());
}

} // namespace ssm
