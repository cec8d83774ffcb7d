// Exact inference for finite-state models (every state an integer with finite support) by
// enumerating the joint state space: the forward algorithm (filtering, likelihood), forward-
// backward smoothing with the model's functionals, Viterbi and posterior decoding, and draws of
// the state path by backward sampling. Only the model's ordinary kernels are used, evaluated on
// all states and all pairs of states at each step, so transitions and emissions may depend on t,
// inputs and y[t-1].
#pragma once

#include "core/csv.h"
#include "core/metadata.h"
#include "core/results.h"
#include "exact/weighted_points.h"
#include "kernel/abi.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace ssm {

// The largest joint state space enumerated: each step costs K^2 transition evaluations.
inline constexpr int64_t kMaxFiniteStates = 1024;

// Every joint value of the state: component c of state k at values[c * size + k]. Throws
// ssm::Error when a state is not an integer with finite bounds, or the space has more than
// kMaxFiniteStates values.
struct StateSpace {
  int64_t size = 0, n_state = 0;
  std::vector<double> values;
};
StateSpace enumerate_states(const ModelInfo& info);
// Whether enumerate_states succeeds (what `--method auto` asks).
bool enumerable(const ModelInfo& info);

// The forward algorithm: exact log-likelihood, its increments and the filtering means and
// variances (ess empty, particles 0). `fixed` is the parameters followed by the data values.
FilterResult forward_filter(const ssm_model& model, const ModelInfo& info,
                            const std::vector<double>& fixed, const ObsData& data);

// Forward-backward: exact smoothing means and variances and the functionals' expectations
// (sum_t ones from the pairwise smoothing probabilities).
SmoothResult forward_backward(const ssm_model& model, const ModelInfo& info,
                              const std::vector<double>& fixed, const ObsData& data);

// Viterbi: the most probable state path given all the data (Decoding, core/results.h).
Decoding viterbi(const ssm_model& model, const ModelInfo& info, const std::vector<double>& fixed,
                 const ObsData& data);

// Posterior decoding: at each t the most probable state given all the data (the maximiser of the
// expected number of correctly decoded steps), with its smoothing probability. The path may be
// impossible as a whole (log_joint -inf) where Viterbi's never is.
Decoding posterior_decoding(const ssm_model& model, const ModelInfo& info,
                            const std::vector<double>& fixed, const ObsData& data);

// The E-step of EM on the enumerated space: the smoothing probabilities of each state at t = 0
// and of each pair (x_{t-1}, x_t) at t >= 1, and the log-likelihood, at the parameters in `fixed`.
struct PairMarginals {
  int64_t K = 0, T = 0;
  std::vector<double> initial; // gamma_0(k)
  std::vector<double> pairs;   // xi_t(i, j) at [(t - 1) * K * K + i * K + j], t >= 1
  double log_likelihood = 0;
};
PairMarginals pair_marginals(const ssm_model& model, const ModelInfo& info,
                             const std::vector<double>& fixed, const ObsData& data);

// The marginals as the E-step's weighted points of each step (exact/weighted_points.h): the
// states with probability at t = 0, the pairs with probability after.
std::vector<StepPoints> pair_points(const ModelInfo& info, const PairMarginals& m);

// One draw of the whole state path from the exact smoothing distribution, by forward filtering
// and backward sampling (the forward algorithm, then x_t | x_{t+1} proportional to alpha_t
// times the transition): x_t's component c at [t * n_state + c], `uniform(t)` giving the draw
// at t (the caller's random streams); the log-likelihood in `log_likelihood`.
std::vector<double> finite_path_draw(const ssm_model& model, const ModelInfo& info,
                                     const std::vector<double>& fixed, const ObsData& data,
                                     const std::function<double(int64_t)>& uniform,
                                     double& log_likelihood);

} // namespace ssm
