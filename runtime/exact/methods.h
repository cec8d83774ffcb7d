// The exact methods' registration: the Kalman filters (kalman, ekf, ukf), the forward algorithm
// and Viterbi decoding. (Their smoothers, rts and forward-backward, are registered with the
// other smoothers by smoothing/methods.cpp, which owns the smoothing dispatch.)
#pragma once

#include "core/method_registry.h"

namespace ssm {

// The exact filters' names as registered; the filters name themselves in their messages too.
inline constexpr const char* kKalmanName = "kalman";
inline constexpr const char* kExtendedKalmanName = "ekf";
inline constexpr const char* kUnscentedKalmanName = "ukf";

void register_exact_filters(MethodRegistry& registry);
void register_exact_decoders(MethodRegistry& registry);

} // namespace ssm
