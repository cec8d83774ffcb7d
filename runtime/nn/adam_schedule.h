// The step-size schedules of LibTorch's Adam that the training loops share (vi's guides, vi's
// parameter families): each parameter group's rate scaled from its starting value.
#pragma once

#include <torch/torch.h>

#include <cmath>
#include <numbers>
#include <vector>

namespace ssm::nn {

// Scales each group's learning rate to `factor` times its starting value base[k].
inline void set_learning_rate(torch::optim::Adam& adam, const std::vector<double>& base,
                              double factor) {
  for (size_t k = 0; k < adam.param_groups().size(); ++k)
    static_cast<torch::optim::AdamOptions&>(adam.param_groups()[k].options()).lr(base[k] * factor);
}

// The cosine schedule's factor after `done` of `total` steps: from 1 down to 0.
inline double cosine_factor(int64_t done, int64_t total) {
  return 0.5 *
         (1 + std::cos(std::numbers::pi * static_cast<double>(done) / static_cast<double>(total)));
}

} // namespace ssm::nn
