// A compiled simulator, driven through its kernels (passes/simulator_draws.cpp made it a
// one-step state-space model whose state is the parameters, then the latent variables): draws of
// (parameters, observation) pairs, draws of the prior, and, where the observation has a density
// and nothing is latent, the exact likelihood. Every draw is keyed by (seed, its index) through
// the kernels' Philox counters, so draws are the same whichever thread makes them.
#pragma once

#include "core/metadata.h"
#include "kernel/abi.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ssm {

class ThreadPool;

namespace lfi {

class Simulator {
public:
  // `fixed`: the frame's parameters and data values (a simulator's kernels read only data).
  // Throws ssm::Error when `info` is not a simulator's.
  Simulator(const ssm_model& model, const ModelInfo& info, std::vector<double> fixed);

  int64_t n_params() const { return n_params_; } // scalar components of the parameters
  int64_t n_obs() const { return info_.n_obs; }
  const std::vector<std::string>& param_columns() const { return param_columns_; }
  const std::vector<std::string>& obs_columns() const { return obs_columns_; }
  const ModelInfo& info() const { return info_; }
  // The data items' values (--data-file), flat.
  std::vector<double> data_values() const {
    return {frame_.begin() + info_.data_offset, frame_.begin() + info_.data_offset + info_.n_data};
  }
  // Whether log_likelihood is available, and why not.
  bool has_likelihood() const { return info_.simulation->likelihood; }
  const std::string& no_likelihood_reason() const { return info_.simulation->no_likelihood_reason; }

  // Draws 0 .. n - 1 of stream `seed`: parameters into theta (row-major, n x n_params()) and,
  // unless x is null, observations into x (n x n_obs()); on `pool` if given, in blocks of a size
  // that does not depend on it, each with a stream of its own.
  void simulate(uint64_t seed, int64_t n, double* theta, double* x,
                ThreadPool* pool = nullptr) const;
  // Simulations at given parameters (rows of theta, n x n_params()): the latent variables and
  // observations drawn given theta_i, keyed by (seed, i), into x (n x n_obs()).
  void simulate_at(uint64_t seed, const double* theta, int64_t n, double* x,
                   ThreadPool* pool = nullptr) const;
  // out[i] = log p(theta_i), the prior density (-inf outside its support).
  void log_prior(const double* theta, int64_t n, double* out) const;
  // out[i] = log p(x_obs | theta_i); requires has_likelihood().
  void log_likelihood(const double* theta, int64_t n, const double* x_obs, double* out) const;

private:
  // The kernels' component-major state block for parameter rows, latent variables zero.
  std::vector<double> states_of(const double* theta, int64_t n) const;

  const ssm_model& model_;
  const ModelInfo& info_;
  std::vector<double> frame_;
  int64_t n_params_ = 0;
  std::vector<std::string> param_columns_, obs_columns_;
};

// Throws a usage-like ssm::Error when the simulator has no parameters: `command` would have
// nothing to infer.
void require_parameters(const Simulator& sim, const char* command);

// Draws 0 .. n - 1 of a simulator, those with a non-finite observation dropped and counted
// (never passed on to training).
// A vector of doubles that resize() leaves uninitialised: simulations are written once, by the
// threads that make them, where a serial zeroing first would cost as much as simulating.
template <class T> struct UninitialisedAllocator : std::allocator<T> {
  template <class U> struct rebind { using other = UninitialisedAllocator<U>; };
  template <class U> void construct(U* p) noexcept { ::new (static_cast<void*>(p)) U; }
  template <class U, class... A> void construct(U* p, A&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(args)...);
  }
};
using Values = std::vector<double, UninitialisedAllocator<double>>;

struct SimulatedPairs {
  int64_t n = 0; // rows kept
  Values theta, x;
  // The first dropped draw: its index, or its file line for pairs read from a file.
  int64_t dropped = 0, first_dropped = -1;
};
SimulatedPairs simulate_pairs(const Simulator& sim, int64_t n, uint64_t seed, int threads);

// Pairs from a CSV file with (at least) the simulator's parameter and observation columns, by
// name, in any order. A missing or unreadable parameter value is an error naming the row and the
// column; a row whose observation is missing or not finite is dropped and counted, as simulate
// does.
SimulatedPairs read_pairs(const Simulator& sim, const std::string& path);

// CSV with the parameters' columns, then the observations': one row per kept draw.
std::string pairs_csv(const Simulator& sim, const SimulatedPairs& pairs);

} // namespace lfi
} // namespace ssm
