// Forward simulation of a single trajectory through the model's sampling kernels.
#include "smc/simulate.h"
#include "core/csv.h"
#include "core/error.h"
#include "core/frame.h"

#include <fmt/format.h>

namespace ssm {

Simulation simulate(const ssm_model& model, const ModelInfo& info, const std::vector<double>& theta,
                    int64_t T, uint64_t seed, const ObsData* inputs) {
  if (T < 0)
    throw Error("simulate: the number of time steps must be non-negative");
  if (info.n_inputs > 0 && (!inputs || inputs->T < T))
    throw Error(inputs ? fmt::format("simulate: {} has inputs for {} time steps, fewer than --T {}",
                                     inputs->source, inputs->T, T)
                       : fmt::format("model '{}' has inputs: give their values for each time "
                                     "step with --inputs FILE.csv",
                                     info.name));
  Frame frame(info, theta);
  Simulation sim;
  sim.T = T;
  sim.n_state = info.n_state;
  sim.n_obs = info.n_obs;
  sim.x.assign(T * info.n_state, 0.0);
  sim.y.assign(T * info.n_obs, 0.0);
  sim.n_inputs = info.n_inputs;
  if (info.n_inputs > 0)
    sim.u.assign(inputs->u.begin(), inputs->u.begin() + T * info.n_inputs);
  // Values of int[lo..hi] states and observations outside their range stop the run.
  const std::vector<IntegerRange> state_ranges = integer_ranges(info.state),
                                  obs_ranges = integer_ranges(info.obs);
  auto check = [&](const std::vector<IntegerRange>& ranges, const double* v, int64_t t) {
    const int r = first_outside(ranges, v, 0, 1, 1).second;
    if (r >= 0)
      throw Error(out_of_range_message("simulate", ranges[r], v[ranges[r].component], t));
  };
  // A batch of one particle (index 0): stride 1, so state t is a contiguous slice of sim.x.
  for (int64_t t = 0; t < T; ++t) {
    double* x = sim.x.data() + t * info.n_state;
    double* y = sim.y.data() + t * info.n_obs;
    const double* th = frame.step(info.n_inputs ? inputs->inputs_at(t) : nullptr,
                                  t > 0 ? y - info.n_obs : nullptr);
    if (t == 0)
      model.init_sample(th, seed, 0, 1, 1, x);
    else
      model.transition_sample(th, seed, t, 0, 1, 1, x - info.n_state, nullptr, x);
    check(state_ranges, x, t);
    model.obs_sample(th, seed, t, 0, 1, 1, x, y);
    check(obs_ranges, y, t);
  }
  return sim;
}

std::string simulation_csv(const ModelInfo& info, const Simulation& sim) {
  fmt::memory_buffer out;
  fmt::format_to(std::back_inserter(out), "{}", info.step);
  const std::vector<std::string> cols = state_columns(info);
  const int64_t shown = static_cast<int64_t>(cols.size()); // not the hidden lag copies
  for (const auto& c : cols)
    fmt::format_to(std::back_inserter(out), ",{}", c);
  for (const auto& c : obs_columns(info))
    fmt::format_to(std::back_inserter(out), ",{}", c);
  for (const auto& c : input_columns(info))
    fmt::format_to(std::back_inserter(out), ",{}", c);
  out.push_back('\n');
  for (int64_t t = 0; t < sim.T; ++t) {
    fmt::format_to(std::back_inserter(out), "{}", t);
    for (int64_t c = 0; c < shown; ++c)
      fmt::format_to(std::back_inserter(out), ",{}", format_double(sim.x[t * sim.n_state + c]));
    for (int64_t k = 0; k < sim.n_obs; ++k)
      fmt::format_to(std::back_inserter(out), ",{}", format_double(sim.y[t * sim.n_obs + k]));
    for (int64_t k = 0; k < sim.n_inputs; ++k)
      fmt::format_to(std::back_inserter(out), ",{}", format_double(sim.u[t * sim.n_inputs + k]));
    out.push_back('\n');
  }
  return fmt::to_string(out);
}

std::string sequence_simulation_csv(const ModelInfo& info, const Simulation& sim,
                                    const std::vector<ObsData::Sequences>& sequences) {
  if (sequences.size() != 1)
    throw Error(fmt::format("simulate: model '{}' has {} observations that are sequences; the "
                            "long format holds one",
                            info.name, sequences.size()));
  const ObsData::Sequences& seq = sequences[0];
  fmt::memory_buffer out;
  fmt::format_to(std::back_inserter(out), "series,t");
  const std::vector<std::string> cols = state_columns(info), obs = obs_columns(info);
  for (const auto& c : cols)
    fmt::format_to(std::back_inserter(out), ",{}", c);
  int64_t token_column = -1;
  for (const VarInfo& v : info.obs)
    if (v.sequence && v.name == seq.name)
      token_column = v.offset;
  for (const auto& c : obs)
    fmt::format_to(std::back_inserter(out), ",{}", c);
  for (const auto& c : input_columns(info))
    fmt::format_to(std::back_inserter(out), ",{}", c);
  out.push_back('\n');
  for (int64_t n = 0; n < sim.T; ++n)
    for (int64_t p = seq.start[n]; p < seq.start[n + 1]; ++p) {
      fmt::format_to(std::back_inserter(out), "{},{}", n, p - seq.start[n]);
      for (size_t c = 0; c < cols.size(); ++c)
        fmt::format_to(std::back_inserter(out), ",{}", format_double(sim.x[n * sim.n_state + c]));
      for (int64_t k = 0; k < sim.n_obs; ++k)
        fmt::format_to(std::back_inserter(out), ",{}",
                       k == token_column ? fmt::format("{}", seq.tokens[p])
                                         : format_double(sim.y[n * sim.n_obs + k]));
      for (int64_t k = 0; k < sim.n_inputs; ++k)
        fmt::format_to(std::back_inserter(out), ",{}", format_double(sim.u[n * sim.n_inputs + k]));
      out.push_back('\n');
    }
  return fmt::to_string(out);
}

} // namespace ssm
