// The kernels' frame: see core/frame.h.
#include "core/frame.h"
#include "core/error.h"

#include <algorithm>
#include <cmath>

namespace ssm {

Frame::Frame(const ModelInfo& info, const std::vector<double>& fixed)
    : info_(info), values_(info.n_frame, NAN) {
  if (static_cast<int64_t>(fixed.size()) != info.n_theta + info.n_data)
    throw Error("internal error: the parameters and data do not match the model's frame layout");
  std::copy(fixed.begin(), fixed.end(), values_.begin());
}

const double* Frame::step(const double* inputs, const double* y_prev) {
  if (info_.n_inputs > 0 && inputs)
    std::copy(inputs, inputs + info_.n_inputs, values_.begin() + info_.input_offset);
  double* prev = values_.data() + info_.previous_obs_offset;
  if (y_prev)
    std::copy(y_prev, y_prev + info_.n_obs, prev);
  else
    std::fill(prev, prev + info_.n_obs, NAN);
  return values_.data();
}

std::vector<double> Frame::fixed() const {
  return {values_.begin(), values_.begin() + info_.n_theta + info_.n_data};
}

void Frame::set_parameters(const double* theta) {
  std::copy(theta, theta + info_.n_theta, values_.begin());
}

} // namespace ssm
