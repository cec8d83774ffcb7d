// `simulate` for a plate model whose relations call networks: see network_simulation.h.
#include "vi/network_simulation.h"
#include "core/error.h"
#include "core/frame.h"
#include "kernel/rng.h"
#include "vi/model_networks.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <iterator>

namespace ssm {

namespace {

// The streams of the language models' tokens: apart from every kernel's sites.
constexpr uint32_t kSiteTokens = 0x70c0u;

// The latents of items [0, N) from their priors, x[c * N + n], with the frame of each item's
// inputs (one batch when the model has none).
void draw_latents(const MethodRun& run, Frame& frame, const ObsData* inputs, int64_t N,
                  std::vector<double>& x) {
  if (run.info.n_inputs == 0) {
    run.model.init_sample(frame.step(nullptr, nullptr), run.seed, 0, N, N, x.data());
    return;
  }
  for (int64_t n = 0; n < N; ++n)
    run.model.init_sample(frame.step(inputs->inputs_at(n), nullptr), run.seed, n, n + 1, N,
                          x.data());
}

} // namespace

NetworkSimulation simulate_networks(const MethodRun& run, const NetworkSimulationOptions& o) {
  const ModelInfo& info = run.info;
  const int64_t N = o.items, D = info.n_state, n_obs = info.n_obs;
  if (info.n_inputs > 0 && (!o.inputs || o.inputs->T < N))
    throw Error(o.inputs ? fmt::format("simulate: {} has inputs for {} items, fewer than --T {}",
                                       o.inputs->source, o.inputs->T, N)
                         : fmt::format("model '{}' has inputs: give their values for each item "
                                       "with --inputs FILE.csv",
                                       info.name));
  for (const NetCallInfo& call : info.net_calls) {
    const NetInfo& net = info.nets[call.net];
    if (net.density())
      throw Error(fmt::format("simulate: the network '{}' is the distribution of a latent ({}); "
                              "drawing from a learned density in simulate is not served yet "
                              "(`ssmc density sample` draws from one saved by vi --save-density)",
                              net.name, net.kind));
    if (!call.for_guide() && net.kind == "rnn") // sequences are drawn after the other values
      throw Error(fmt::format("simulate: the network '{}' reads the sequence {}[n] in the "
                              "model's relations; simulate draws sequences last, after the "
                              "observations that would read it: not served yet",
                              net.name, call.arguments[0].name));
  }
  for (const NetInfo& net : info.nets)
    if (net.kind == "rnn_lm" && o.end >= net.vocab)
      throw Error(fmt::format("simulate --end {}: not a token of the language model '{}' "
                              "(0..{})",
                              o.end, net.name, net.vocab - 1));
  torch::NoGradGuard no_grad;
  torch::set_num_threads(std::max(1, run.threads));
  nn::ModelNetworks nets(info, run.seed, o.load_nets);
  const std::vector<double>& fixed = *run.fixed;
  const torch::Tensor theta = torch::tensor(
      std::vector<double>(fixed.begin(), fixed.begin() + info.n_theta), torch::kFloat64);
  torch::Tensor covariates;
  if (info.n_inputs > 0)
    covariates = torch::tensor(std::vector<double>(o.inputs->u.begin(),
                                                   o.inputs->u.begin() + N * info.n_inputs),
                               torch::kFloat64)
                     .view({N, info.n_inputs});
  Frame frame(info, fixed);

  // The latents and the networks' outputs, in passes: a pass draws every latent from its prior
  // at the outputs the last one computed, then computes the outputs at those draws. The kernels'
  // draws depend on (seed, item, site) alone, so a latent whose prior reads no output is the same
  // in every pass, and after one pass more than the depth of the calls' chain every draw reads
  // the outputs of the draws it depends on.
  // A pass before the last may draw a latent that reads an output not computed yet (0) out of
  // its support: it is moved into it, only for the networks to read, and drawn again.
  std::vector<double> x(static_cast<size_t>(D * N), 0.0); // x[c * N + n]
  torch::Tensor states;                                   // [N, D]
  const int64_t calls = std::count_if(info.net_calls.begin(), info.net_calls.end(),
                                      [](const NetCallInfo& c) { return !c.for_guide(); });
  const std::vector<IntegerRange> state_ranges = integer_ranges(info.state);
  for (int64_t pass = 0; pass <= calls; ++pass) {
    draw_latents(run, frame, o.inputs, N, x);
    if (pass == calls) {
      if (const auto [n, r] = first_outside(state_ranges, x.data(), 0, N, N); r >= 0)
        throw Error(out_of_range_message("simulate", state_ranges[r],
                                         x[state_ranges[r].component * N + n], n, "", info.step));
    } else {
      for (double& v : x)
        if (!std::isfinite(v))
          v = 0;
      for (const IntegerRange& range : state_ranges)
        for (int64_t n = 0; n < N; ++n) {
          double& v = x[range.component * N + n];
          v = std::clamp(v, range.lower, range.upper);
        }
    }
    states = nets.apply_in_place(x, N, theta, fixed, covariates);
  }
  // A sequence's slot holds its length, not a token: its tokens are drawn in range.
  std::vector<VarInfo> checked_obs;
  std::copy_if(info.obs.begin(), info.obs.end(), std::back_inserter(checked_obs),
               [](const VarInfo& v) { return !v.sequence; });
  const std::vector<IntegerRange> obs_ranges = integer_ranges(checked_obs);

  // The observations: the kernels' draws, then the language models' sequences.
  std::vector<double> y(static_cast<size_t>(n_obs * N), 0.0); // y[k * N + n]
  if (info.n_inputs == 0)
    run.model.obs_sample(frame.step(nullptr, nullptr), run.seed, 0, 0, N, N, x.data(), y.data());
  else
    for (int64_t n = 0; n < N; ++n)
      run.model.obs_sample(frame.step(o.inputs->inputs_at(n), nullptr), run.seed, 0, n, n + 1, N,
                           x.data(), y.data());
  NetworkSimulation out;
  const nn::SequenceBatch drawn = nets.sample_sequences(
      states, theta, fixed, covariates, o.max_length, o.end, [&](int64_t k, int64_t r, int64_t t) {
        return philox_u01(run.seed, static_cast<uint32_t>(r), static_cast<uint32_t>(t),
                          kSiteTokens + static_cast<uint32_t>(k), 0);
      });
  for (size_t k = 0; k < drawn.names.size(); ++k) {
    ObsData::Sequences s;
    s.name = drawn.names[k];
    const int64_t L = drawn.tokens[k].size(1);
    const int64_t* tok = drawn.tokens[k].data_ptr<int64_t>();
    const int64_t* len = drawn.lengths[k].data_ptr<int64_t>();
    const VarInfo* var = nullptr;
    for (const VarInfo& v : info.obs)
      if (v.name == s.name)
        var = &v;
    for (int64_t n = 0; n < N; ++n) {
      s.start.push_back(static_cast<int64_t>(s.tokens.size()));
      s.tokens.insert(s.tokens.end(), tok + n * L, tok + n * L + len[n]);
      if (var) // the sequence's slot holds its length
        y[var->offset * N + n] = static_cast<double>(len[n]);
    }
    s.start.push_back(static_cast<int64_t>(s.tokens.size()));
    out.sequences.push_back(std::move(s));
  }
  if (const auto [n, r] = first_outside(obs_ranges, y.data(), 0, N, N); r >= 0)
    throw Error(out_of_range_message("simulate", obs_ranges[r], y[obs_ranges[r].component * N + n],
                                     n, "", info.step));

  // Items as rows, as the time-series simulation's are.
  Simulation& sim = out.simulation;
  sim.T = N;
  sim.n_state = D;
  sim.n_obs = n_obs;
  sim.n_inputs = info.n_inputs;
  sim.x.resize(static_cast<size_t>(N * D));
  sim.y.resize(static_cast<size_t>(N * n_obs));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < D; ++c)
      sim.x[n * D + c] = x[c * N + n];
    for (int64_t k = 0; k < n_obs; ++k)
      sim.y[n * n_obs + k] = y[k * N + n];
  }
  if (info.n_inputs > 0)
    sim.u.assign(o.inputs->u.begin(), o.inputs->u.begin() + N * info.n_inputs);
  return out;
}

} // namespace ssm
