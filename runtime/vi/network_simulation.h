// `simulate` for a plate model whose relations call networks (`net` declarations): each item's
// latents drawn from their priors by the compiled kernels, the networks applied to them (LibTorch,
// the weights of vi --save-nets or their initialisation under the seed), the observations drawn
// by the kernels at the networks' outputs, and a sequence whose distribution is a language model
// (rnn_lm) drawn token by token. The vi module's (plugin.cpp); the types are in vi/loader.h.
#pragma once

#include "core/method_registry.h"
#include "vi/loader.h"

namespace ssm {

// Throws ssm::Error for a model it cannot simulate (a learned density as a latent's distribution),
// missing inputs, or a draw outside a declared integer range (naming the item).
NetworkSimulation simulate_networks(const MethodRun& run, const NetworkSimulationOptions& options);

} // namespace ssm
