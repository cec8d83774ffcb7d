// Shared by the learning room's tests: a ParamInfo built by hand, and central finite differences
// (the Jacobian of a vector map, the gradient of a scalar one, log |det| of a square matrix) to
// check analytic derivatives against.
#pragma once

#include "core/metadata.h"

#include <Eigen/Core>
#include <Eigen/LU>

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace learning_test {

using Vector = std::vector<double>;

// A parameter as the metadata describes it, its size from its shape.
inline ssm::ParamInfo make_param(const std::string& name, const std::string& type,
                                 std::vector<int64_t> shape, std::optional<double> lower = {},
                                 std::optional<double> upper = {}, const std::string& prior = "") {
  ssm::ParamInfo p;
  p.name = name;
  p.type = type;
  p.shape = std::move(shape);
  p.size = 1;
  for (int64_t n : p.shape)
    p.size *= n;
  p.lower = lower;
  p.upper = upper;
  p.prior = prior;
  return p;
}

// J(i, k) = d f_i / d u_k by central differences of step h.
inline Eigen::MatrixXd fd_jacobian(const std::function<Vector(const Vector&)>& f, const Vector& u,
                                   double h = 1e-5) {
  const int64_t m = static_cast<int64_t>(f(u).size()), n = static_cast<int64_t>(u.size());
  Eigen::MatrixXd J(m, n);
  for (int64_t k = 0; k < n; ++k) {
    Vector up = u, down = u;
    up[k] += h;
    down[k] -= h;
    const Vector fu = f(up), fd = f(down);
    for (int64_t i = 0; i < m; ++i)
      J(i, k) = (fu[i] - fd[i]) / (2 * h);
  }
  return J;
}

inline Vector fd_gradient(const std::function<double(const Vector&)>& f, const Vector& u,
                          double h = 1e-5) {
  const Eigen::MatrixXd J = fd_jacobian([&](const Vector& v) { return Vector{f(v)}; }, u, h);
  return Vector(J.data(), J.data() + J.size());
}

inline double log_abs_det(const Eigen::MatrixXd& J) {
  const Eigen::PartialPivLU<Eigen::MatrixXd> lu(J);
  return lu.matrixLU().diagonal().array().abs().log().sum();
}

} // namespace learning_test
