// The observed information, minus the Hessian of the log-likelihood, where the likelihood and its
// score are exact (rts, forward-backward): by central differences of the exact score (the
// compiler's score terms smoothed exactly), so its error is that of the differences, about 1e-9
// relative, not a Monte Carlo error. At a maximum, its inverse gives the estimate's standard
// errors.
#pragma once

#include "core/method_registry.h"
#include "learning/parameter_space.h"

#include <Eigen/Core>

#include <cstdint>
#include <vector>

namespace ssm {

// -d^2 log p(y | theta) / d theta_i d theta_j over the theta components `components`, at the
// parameters in run.fixed, with `smoother` (an exact smoother of the score model: score.h) on
// run's data. Symmetrised.
Eigen::MatrixXd observed_information(const Method& smoother, const MethodRun& run,
                                     const std::vector<int64_t>& components);

// The standard errors of the learned parameters' components at run.fixed (a maximum of the
// log-likelihood, plus the log prior density when `map`): the inverse of the observed
// information on the unconstrained scale, mapped to each component by the delta method (n_theta
// values, NaN for the components not learned). Empty when the information is not positive
// definite there (not a maximum, or a flat direction).
std::vector<double> standard_errors(const Method& smoother, const MethodRun& run,
                                    const ParameterSpace& space, bool map);

} // namespace ssm
