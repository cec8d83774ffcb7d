// The space the learning methods move in: which of a model's parameters are learned and the
// unconstrained vector they map to (each by its ParamTransform, laid end to end), with the maps
// between that vector and the whole theta the kernels read.
#pragma once

#include "core/metadata.h"
#include "learning/param_transform.h"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ssm {

// A learned parameter: ModelInfo::params[index], components [offset, offset + transform.size())
// of the unconstrained vector.
struct LearnedParam {
  size_t index = 0;
  int64_t offset = 0;
  ParamTransform transform;
};

class ParameterSpace {
public:
  // Every parameter with a default value or a prior is learned, except those named in `fixed`
  // (`--fix NAME`), which keep the value theta gives them. Throws ssm::Error for a name the model
  // does not have (listing its parameters) or a learned parameter of a type with no transform.
  explicit ParameterSpace(const ModelInfo& info, const std::vector<std::string>& fixed = {});

  int64_t dimension() const { return dimension_; } // of the unconstrained vector
  // Throws ssm::Error when no parameter is learned, saying why for each parameter: `who: no
  // parameter to VERB: ...` (those with neither a default nor a prior in the model stay at the
  // values --param or --params gives them; --fix keeps the others).
  void require_some(std::string_view who, std::string_view verb = "learn") const;
  int64_t n_theta() const { return n_theta_; }
  const std::vector<LearnedParam>& learned() const { return learned_; }
  const LearnedParam* find(std::string_view name) const; // nullptr: not learned
  // Names of the unconstrained coordinates, in order (`sigma`, `Q[1,0]`, `w[2]`).
  std::vector<std::string> coordinate_names() const;

  // Writes the learned parameters' components of `theta` (n_theta values) from `u`; the others
  // keep theirs. Throws ssm::Error as ParamTransform::constrain.
  void constrain(std::span<const double> u, std::span<double> theta) const;
  // The unconstrained point of `theta`. Throws ssm::Error naming the parameter and component
  // outside its support.
  std::vector<double> unconstrain(std::span<const double> theta) const;
  // log |det| of the Jacobian of constrain at u: the sum over learned parameters.
  double log_jacobian(std::span<const double> u) const;
  // d(log p)/du from grad_theta = d(log p)/d(theta) (n_theta values; those of fixed parameters,
  // data and inputs are not read), plus d(log_jacobian)/du when with_log_jacobian.
  std::vector<double> gradient(std::span<const double> u, std::span<const double> grad_theta,
                               bool with_log_jacobian) const;

private:
  std::vector<LearnedParam> learned_;
  std::vector<std::string> fixed_, held_;        // by --fix; with neither a default nor a prior
  std::vector<std::string> without_coordinates_; // learned, of size 0 (a simplex[1])
  int64_t dimension_ = 0, n_theta_ = 0;
};

} // namespace ssm
