// The compiler's limits on the size of what a model asks for (docs/cli.md lists them with the
// runtime's): past one, a located error in well under a second, never an exhausted machine.
#pragma once

#include <cstddef>

namespace ssm::frontend {

// Levels of brackets and operators in one expression (the parser recurses on them).
inline constexpr int kMaxNesting = 500;
// Steps back a time index may read (x[t-k]): each lag is a hidden copy of the state that every
// particle carries.
inline constexpr long kMaxLag = 1000;
// IR operations in one block: function calls are inlined, so calls of calls multiply.
inline constexpr std::size_t kMaxBlockOperations = 100000;
// Runge-Kutta steps of one ode_rk4 (each evaluates the rate 4 times, per draw).
inline constexpr long kMaxOdeSteps = 10000000;

} // namespace ssm::frontend
