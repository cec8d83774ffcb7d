// Lamperti's coordinate of a scalar SDE dX = a(X) dt + s(X) dW whose coefficient reads the path:
// u = eta(x), eta' = 1 / |s|, in which the SDE has unit diffusion and drift
// b = a / |s| - |s|' / 2, b' = a' - a |s|' / |s| - |s| |s|'' / 2 (|s|' and |s| |s|'' from the
// parametrix rows' derivatives of s^2). The General Poisson estimator works there, and the
// random-weight filter and bis's Euler proposal step there; points go back to x by integrating
// dx / dw = |s(x)| with RK4 in steps of at most kLampertiStep (an error O(step^4): for s = x,
// a few 1e-6 relative over three units).
#pragma once

#include "sde/diffusion_terms.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace ssm {

// Whether the run's density estimator works in Lamperti's coordinate: the General Poisson one on
// a scalar SDE whose coefficient reads the path. Then a Gaussian step in x is a poor law of the
// transition (lighter tails, reaching where the path cannot): the random-weight filter proposes
// in u instead, and bis's Euler proposal is the step in u (sde/euler_step.h).
bool in_lamperti_coordinate(const ModelInfo& info);

// The RK4 step, in Lamperti units, that takes a point back to the path's coordinate.
inline constexpr double kLampertiStep = 0.125;

struct UnitDrift {
  double b, db; // the drift in Lamperti's coordinate and its derivative there
};
// At point p of the terms' last evaluation (a coefficient that reads the path, not 0 there).
UnitDrift lamperti_drift(const DiffusionTerms& terms, int64_t p);

// |s| at a point x of start's group `group`, checked: returns it or throws.
using CoefficientCheck = std::function<double(int64_t group, double x, double s)>;

// eta^-1(eta(start[group[j]]) + w[j]) into out[j] for the n targets j: a walker per group and
// direction steps outward through its targets, every walker's RK4 stage batched into one
// evaluation of the terms (which it leaves at an arbitrary batch).
void lamperti_inverse(DiffusionTerms& terms, const double* frame, int64_t t,
                      const std::vector<double>& start, const std::vector<int64_t>& group,
                      const double* w, int64_t n, double* out, const CoefficientCheck& check);

} // namespace ssm
