// Neural ratio estimation on LibTorch: a classifier d(theta, x) = sigmoid(f(theta, x)), an MLP on
// the standardised pair, whose logit f estimates log p(x | theta) / p(x) (NRE-A; up to a function
// of x for NRE-B). Training with Adam on minibatches, a validation split and early stopping at the
// best validation loss; the classifier's file is LibTorch's archive with the network, the
// columns and the range of the simulations it saw.
#pragma once

#include "lfi/ratio_loader.h"

#include <memory>
#include <string>

namespace ssm::lfi {

inline constexpr int64_t kRatioFormatVersion = 1;

RatioTrainingReport train_ratio(const RatioTrainingData& data, const RatioTrainingOptions& options);

// The ratio in `bytes` (a file `source` holds). Throws ssm::Error naming the file when the bytes
// are not a ratio of this format.
std::unique_ptr<LoadedRatio> open_ratio(const std::string& bytes, const std::string& source);

} // namespace ssm::lfi
