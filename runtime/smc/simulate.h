// Forward simulation of one trajectory (particle index 0, a batch of one) of states and
// observations.
#pragma once

#include "core/csv.h"
#include "core/metadata.h"
#include "kernel/abi.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ssm {

struct Simulation {
  int64_t T = 0, n_state = 0, n_obs = 0, n_inputs = 0;
  std::vector<double> x; // x[t * n_state + c]
  std::vector<double> y; // y[t * n_obs + k]
  std::vector<double> u; // the inputs it read, u[t * n_inputs + k]
};

// `theta` is the parameters followed by the data values; `inputs` gives the model's inputs for
// at least T steps (may be null for a model without inputs).
Simulation simulate(const ssm_model& model, const ModelInfo& info, const std::vector<double>& theta,
                    int64_t T, uint64_t seed, const ObsData* inputs = nullptr);

// CSV `t,<state columns>,<obs columns>,<input columns>`, one row per time step: a data file for
// the methods as it stands.
std::string simulation_csv(const ModelInfo& info, const Simulation& sim);

// A plate model's simulated items (the rows of `sim`) whose observation is a sequence, in the
// long format its data is read in (core/sequence_items.h): `series` the item, `t` the token's
// position, one row per token with the item's other columns repeated. One sequence observation.
std::string sequence_simulation_csv(const ModelInfo& info, const Simulation& sim,
                                    const std::vector<ObsData::Sequences>& sequences);

} // namespace ssm
