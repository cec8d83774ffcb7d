// The frame: the array that generated kernels read as `theta` (docs/abi.md). It holds the
// parameters and the data items, fixed for a run, then the inputs at the current time step and the
// observation at the previous one, which the runtime writes before each step.
#pragma once

#include "core/metadata.h"

#include <vector>

namespace ssm {

class Frame {
public:
  // `fixed` is theta followed by the data values (n_theta + n_data numbers).
  Frame(const ModelInfo& info, const std::vector<double>& fixed);

  // The frame for a step: `inputs` holds the inputs at t (n_inputs numbers; may be null when the
  // model has none) and `y_prev` the observation at t-1 (null at t = 0: NaN).
  const double* step(const double* inputs, const double* y_prev);
  // Replaces the parameters (n_theta numbers) for the steps that follow: recursive maximum
  // likelihood moves them between steps.
  void set_parameters(const double* theta);
  // The parameters and data values (the constructor's `fixed`, as set_parameters left them).
  std::vector<double> fixed() const;
  // Takes `other`'s values (inputs and previous observation too): a copy of a filter's state.
  void copy_values(const Frame& other) { values_ = other.values_; }
  const double* values() const { return values_.data(); }

private:
  const ModelInfo& info_;
  std::vector<double> values_;
};

} // namespace ssm
