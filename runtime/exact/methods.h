// The exact methods' registration: the Kalman filters (kalman, ekf, ukf), the forward algorithm
// and the decoders (Viterbi, posterior). (Their smoothers, rts and forward-backward, are registered
// with the other smoothers by smoothing/methods.cpp, which owns the smoothing dispatch.)
#pragma once

#include "core/method_registry.h"

namespace ssm {

// The exact methods' names as registered (rts and forward-backward by smoothing/methods.cpp);
// the methods name themselves in their messages too.
inline constexpr const char* kKalmanName = "kalman";
inline constexpr const char* kForwardName = "forward";
inline constexpr const char* kExtendedKalmanName = "ekf";
inline constexpr const char* kUnscentedKalmanName = "ukf";
inline constexpr const char* kRtsName = "rts";
inline constexpr const char* kForwardBackwardName = "forward-backward";
inline constexpr const char* kViterbiName = "viterbi";
inline constexpr const char* kPosteriorDecodingName = "posterior";

void register_exact_filters(MethodRegistry& registry);
void register_exact_decoders(MethodRegistry& registry);

} // namespace ssm
