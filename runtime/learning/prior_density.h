// A prior given as a density over the learned parameters' unconstrained coordinates u, in place
// of the model's priors: `--prior FILE.pt` of sample, optimize --map and vi, a density that
// `vi --save-guide` or `ssmc density fit` saved (yesterday's posterior as today's prior). The
// learning room reads it through this interface; the vi module, which holds LibTorch,
// implements it (vi/loader.h), so that executables that never read one do not load LibTorch.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ssm {

class PriorDensity {
public:
  virtual ~PriorDensity() = default;
  // log π(u), u in the order of the parameter space's coordinates; its gradient in u into
  // `gradient` (as many values) when not null. -inf where the density is 0. Thread-safe.
  virtual double log_density(std::span<const double> u, double* gradient) const = 0;
  // n independent draws of u (n rows, row-major), reproducible from `seed`. Thread-safe. On a
  // failure, empty with the reason in `error` (no exception crosses the module's boundary).
  virtual std::vector<double> sample(int64_t n, uint64_t seed, std::string& error) const = 0;
  // The file it was read from, for messages.
  virtual const std::string& path() const = 0;
};

} // namespace ssm
