// A compiled simulator driven through its kernels: see simulator.h.
#include "lfi/simulator.h"
#include "core/csv.h"
#include "core/error.h"
#include "core/frame.h"
#include "core/thread_pool.h"
#include "kernel/rng.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <utility>

namespace ssm::lfi {

namespace {

constexpr int64_t kBlock = 1024; // draws per kernel call: fixed, so results ignore the threads
// The stream of the latent values log_prior draws: any values of positive density serve.
constexpr uint64_t kLatentSeed = 0x5eed1a7e47ULL;

} // namespace

Simulator::Simulator(const ssm_model& model, const ModelInfo& info, std::vector<double> fixed)
    : model_(model), info_(info) {
  if (!info.simulation)
    throw Error(fmt::format("model '{}' is not a simulator", info.name));
  if (!model.init_sample || !model.obs_sample)
    throw Error("the simulator's table lacks a sampling kernel");
  Frame frame(info, fixed);
  const double* values = frame.step(nullptr, nullptr);
  frame_.assign(values, values + info.n_frame);
  for (int p = 0; p < info.simulation->params && p < static_cast<int>(info.state.size()); ++p)
    n_params_ += info.state[p].size;
  const std::vector<std::string> states = state_columns(info);
  param_columns_.assign(states.begin(), states.begin() + n_params_);
  obs_columns_ = ssm::obs_columns(info);
}

void Simulator::simulate(uint64_t seed, int64_t n, double* theta, double* x,
                         ThreadPool* pool) const {
  const int64_t S = info_.n_state, D = info_.n_obs;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  auto block = [&](int64_t b) {
    // Draw i is draw i mod kBlock of block i / kBlock's stream: the kernels work in a scratch
    // block that stays in cache, and write only the rows asked for.
    const int64_t begin = b * kBlock, m = std::min(kBlock, n - begin);
    const uint64_t block_seed = mix_seed(seed ^ mix_seed(static_cast<uint64_t>(b)));
    std::vector<double> states(S * kBlock), obs(x ? D * kBlock : 0);
    model_.init_sample(frame_.data(), block_seed, 0, m, kBlock, states.data());
    if (x)
      model_.obs_sample(frame_.data(), block_seed, 0, 0, m, kBlock, states.data(), obs.data());
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t c = 0; c < n_params_; ++c)
        theta[(begin + i) * n_params_ + c] = states[c * kBlock + i];
      for (int64_t k = 0; x && k < D; ++k)
        x[(begin + i) * D + k] = obs[k * kBlock + i];
    }
  };
  if (pool)
    pool->parallel_for(blocks, block);
  else
    for (int64_t b = 0; b < blocks; ++b)
      block(b);
}

std::vector<double> Simulator::states_of(const double* theta, int64_t n) const {
  std::vector<double> states(info_.n_state * n, 0.0); // latents 0: drawn again where needed
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < n_params_; ++c)
      states[c * n + i] = theta[i * n_params_ + c];
  return states;
}

void Simulator::simulate_at(uint64_t seed, const double* theta, int64_t n, double* x,
                            ThreadPool* pool) const {
  if (n >= (int64_t{1} << 32))
    throw Error(fmt::format("{} simulations at once: at most 2^32 - 1", n));
  const int64_t D = info_.n_obs;
  const std::vector<double> given = states_of(theta, n);
  std::vector<double> states(given.size()), obs(D * n);
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  auto block = [&](int64_t b) {
    const int64_t begin = b * kBlock, end = std::min(n, begin + kBlock);
    // The transition keeps the parameters and draws the latent variables given them (t = 1: other
    // counters than simulate's).
    model_.transition_sample(frame_.data(), seed, 1, begin, end, n, given.data(), nullptr,
                             states.data());
    model_.obs_sample(frame_.data(), seed, 1, begin, end, n, states.data(), obs.data());
    for (int64_t i = begin; i < end; ++i)
      for (int64_t k = 0; k < D; ++k)
        x[i * D + k] = obs[k * n + i];
  };
  if (pool)
    pool->parallel_for(blocks, block);
  else
    for (int64_t b = 0; b < blocks; ++b)
      block(b);
}

void Simulator::log_prior(const double* theta, int64_t n, double* out) const {
  if (n == 0)
    return;
  std::vector<double> states = states_of(theta, n);
  if (info_.n_state == n_params_) { // nothing latent: the initial density is the prior's
    model_.init_logpdf(frame_.data(), 0, n, n, states.data(), out);
    return;
  }
  // log p(theta) = log p(theta, z) - log p(z | theta) at latent values z drawn given theta (the
  // transition keeps theta and draws z: passes/simulator_draws.cpp).
  const std::vector<double> given = states;
  model_.transition_sample(frame_.data(), kLatentSeed, 1, 0, n, n, given.data(), nullptr,
                           states.data());
  std::vector<double> conditional(n);
  model_.init_logpdf(frame_.data(), 0, n, n, states.data(), out);
  model_.transition_logpdf(frame_.data(), 1, 0, n, n, states.data(), nullptr, states.data(),
                           conditional.data());
  for (int64_t i = 0; i < n; ++i)
    out[i] = out[i] == -INFINITY ? -INFINITY : out[i] - conditional[i];
}

void Simulator::log_likelihood(const double* theta, int64_t n, const double* x_obs,
                               double* out) const {
  if (!has_likelihood())
    throw Error(fmt::format("simulator '{}' has no exact likelihood: {}", info_.name,
                            no_likelihood_reason()));
  if (n == 0)
    return;
  const std::vector<double> states = states_of(theta, n);
  model_.obs_logpdf(frame_.data(), 0, 0, n, n, states.data(), x_obs, out);
}

void require_parameters(const Simulator& sim, const char* command) {
  if (sim.n_params() == 0)
    throw Error(fmt::format("{}: simulator '{}' has no parameters, so there is nothing to infer",
                            command, sim.info().name));
}

SimulatedPairs simulate_pairs(const Simulator& sim, int64_t n, uint64_t seed, int threads) {
  const int64_t P = sim.n_params(), D = sim.n_obs();
  SimulatedPairs out;
  out.theta.resize(n * P);
  out.x.resize(n * D);
  ThreadPool pool(threads);
  sim.simulate(seed, n, out.theta.data(), out.x.data(), &pool);
  // Rows with a non-finite observation are dropped in place, the others moved up.
  for (int64_t i = 0; i < n; ++i) {
    bool finite = true;
    for (int64_t k = 0; k < D; ++k)
      finite = finite && std::isfinite(out.x[i * D + k]);
    if (!finite) {
      if (out.dropped++ == 0)
        out.first_dropped = i;
      continue;
    }
    if (out.n != i) {
      std::copy_n(out.theta.begin() + i * P, P, out.theta.begin() + out.n * P);
      std::copy_n(out.x.begin() + i * D, D, out.x.begin() + out.n * D);
    }
    ++out.n;
  }
  out.theta.resize(out.n * P);
  out.x.resize(out.n * D);
  return out;
}

SimulatedPairs read_pairs(const Simulator& sim, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(fmt::format("cannot read the pairs file '{}': {}", path, std::strerror(errno)));
  CsvReader reader(in, path);
  std::vector<std::string> wanted = sim.param_columns();
  wanted.insert(wanted.end(), sim.obs_columns().begin(), sim.obs_columns().end());
  std::vector<size_t> where;
  for (const std::string& name : wanted) {
    const auto& header = reader.header();
    const auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end())
      throw Error(fmt::format("{}: no column '{}' (simulator '{}' has parameters {} and "
                              "observations {}); `simulate --n N --out FILE` writes them",
                              path, name, sim.info().name, fmt::join(sim.param_columns(), ", "),
                              fmt::join(sim.obs_columns(), ", ")));
    where.push_back(static_cast<size_t>(it - header.begin()));
  }
  const int64_t P = sim.n_params(), D = sim.n_obs();
  SimulatedPairs out;
  std::vector<std::string> fields;
  std::vector<double> row(P + D);
  int64_t line = 0;
  while (reader.next(fields, line)) {
    bool finite = true;
    for (int64_t c = 0; c < P + D; ++c) {
      const bool present = parse_cell(fields[where[c]], row[c], path, line, wanted[c]);
      if (c < P && (!present || !std::isfinite(row[c])))
        throw Error(fmt::format("{}:{}: column '{}': a parameter needs a finite value", path, line,
                                wanted[c]));
      finite = finite && present && std::isfinite(row[c]);
    }
    if (!finite) {
      if (out.dropped++ == 0)
        out.first_dropped = line;
      continue;
    }
    out.theta.insert(out.theta.end(), row.begin(), row.begin() + P);
    out.x.insert(out.x.end(), row.begin() + P, row.end());
    ++out.n;
  }
  return out;
}

std::string pairs_csv(const Simulator& sim, const SimulatedPairs& pairs) {
  fmt::memory_buffer out;
  auto put = [&](const std::string& s, bool first) {
    if (!first)
      out.push_back(',');
    out.append(s);
  };
  bool first = true;
  for (const std::string& c : sim.param_columns())
    put(c, std::exchange(first, false));
  for (const std::string& c : sim.obs_columns())
    put(c, std::exchange(first, false));
  out.push_back('\n');
  const int64_t P = sim.n_params(), D = sim.n_obs();
  for (int64_t i = 0; i < pairs.n; ++i) {
    for (int64_t c = 0; c < P; ++c)
      put(format_double(pairs.theta[i * P + c]), c == 0);
    for (int64_t k = 0; k < D; ++k)
      put(format_double(pairs.x[i * D + k]), P == 0 && k == 0);
    out.push_back('\n');
  }
  return fmt::to_string(out);
}

} // namespace ssm::lfi
