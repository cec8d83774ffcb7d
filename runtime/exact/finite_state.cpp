// Finite-state models by enumeration (exact/finite_state.h). Probabilities are kept normalised at
// every step (the scale factors sum to the log-likelihood), and emissions are exponentiated after
// subtracting their maximum, so long series and very informative observations do not underflow.
#include "exact/finite_state.h"
#include "core/error.h"
#include "core/results.h"
#include "exact/methods.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

namespace ssm {

StateSpace enumerate_states(const ModelInfo& info) {
  StateSpace space;
  space.n_state = info.n_state;
  std::vector<double> lo, hi; // per component
  double size = 1;
  for (const VarInfo& v : info.state) {
    if (info.guide_only(v)) { // not in the model's state space: left at 0
      lo.insert(lo.end(), v.size, 0.0);
      hi.insert(hi.end(), v.size, 0.0);
      continue;
    }
    if (!v.integer || !std::isfinite(v.lower) || !std::isfinite(v.upper))
      throw Error(fmt::format("the state is not finite: '{}' is {}; exact finite-state methods "
                              "need every state declared int[lo..hi]",
                              v.name, v.integer ? "an integer without finite bounds" : "real"));
    for (int64_t c = 0; c < v.size; ++c) {
      lo.push_back(v.lower);
      hi.push_back(v.upper);
      size *= v.upper - v.lower + 1;
    }
  }
  if (size > static_cast<double>(kMaxFiniteStates))
    throw Error(fmt::format("the state space has {} joint values, more than the {} that exact "
                            "finite-state methods enumerate (each step costs its square); use a "
                            "particle method",
                            size, kMaxFiniteStates));
  const int64_t K = static_cast<int64_t>(size), ns = info.n_state;
  space.size = K;
  space.values.resize(ns * K);
  for (int64_t k = 0; k < K; ++k) { // mixed radix, the last component fastest
    int64_t rest = k;
    for (int64_t c = ns - 1; c >= 0; --c) {
      const auto radix = static_cast<int64_t>(hi[c] - lo[c] + 1);
      space.values[c * K + k] = lo[c] + static_cast<double>(rest % radix);
      rest /= radix;
    }
  }
  return space;
}

bool enumerable(const ModelInfo& info) {
  double size = 1;
  for (const VarInfo& v : info.state) {
    if (info.guide_only(v))
      continue;
    if (!v.integer || !std::isfinite(v.lower) || !std::isfinite(v.upper))
      return false;
    size *= std::pow(v.upper - v.lower + 1, static_cast<double>(v.size));
  }
  return info.finite_state && size <= static_cast<double>(kMaxFiniteStates);
}

namespace {

// The kernels on the enumerated space: states, all (previous, current) pairs, and the frames.
class Enumeration {
public:
  Enumeration(const ssm_model& model, const ModelInfo& info, const std::vector<double>& fixed,
              const ObsData& data)
      : model_(model), info_(info), data_(data), space_(enumerate_states(info)),
        frames_(all_frames(info, fixed, data)) {
    if (!model.init_logpdf || !model.transition_logpdf || !model.obs_logpdf)
      throw Error("the model table lacks a density kernel needed by the finite-state methods");
    const int64_t K = space_.size, ns = info.n_state;
    prev_.resize(ns * K * K);
    cur_.resize(ns * K * K);
    for (int64_t c = 0; c < ns; ++c)
      for (int64_t i = 0; i < K; ++i)
        for (int64_t j = 0; j < K; ++j) {
          prev_[c * K * K + i * K + j] = space_.values[c * K + i];
          cur_[c * K * K + i * K + j] = space_.values[c * K + j];
        }
  }
  int64_t K() const { return space_.size; }
  int64_t T() const { return data_.T; }
  const StateSpace& space() const { return space_; }
  const double* frame(int64_t t) const { return frames_.data() + t * info_.n_frame; }

  // log p(x_0 = k).
  void initial(std::vector<double>& out) const {
    out.resize(K());
    model_.init_logpdf(frame(0), 0, K(), K(), space_.values.data(), out.data());
  }
  // log p(y_t | x_t = k).
  void emission(int64_t t, std::vector<double>& out) const {
    require_previous_obs(info_, data_, t);
    out.resize(K());
    model_.obs_logpdf(frame(t), t, 0, K(), K(), space_.values.data(), data_.at(t), out.data());
  }
  // log p(x_t = j | x_{t-1} = i) at [i * K + j]; a row must carry probability.
  void transition(int64_t t, std::vector<double>& out) const {
    const int64_t P = K() * K();
    out.resize(P);
    model_.transition_logpdf(frame(t), t, 0, P, P, prev_.data(), nullptr, cur_.data(), out.data());
  }
  // The functionals' terms of every pair at t (t > 0), or of every state at t = 0 (x_prev NaN):
  // component f of pair p at [f * P + p].
  void terms(int64_t t, std::vector<double>& out) const {
    const int64_t P = t == 0 ? K() : K() * K(), ns = info_.n_state;
    out.resize(std::max<int64_t>(info_.n_functional, 1) * P);
    if (t == 0) {
      const std::vector<double> nan_prev(ns * K(), NAN);
      model_.functional_terms(frame(0), 0, 0, P, P, nan_prev.data(), nullptr, space_.values.data(),
                              data_.at(0), out.data());
    } else {
      model_.functional_terms(frame(t), t, 0, P, P, prev_.data(), nullptr, cur_.data(), data_.at(t),
                              out.data());
    }
  }

private:
  const ssm_model& model_;
  const ModelInfo& info_;
  const ObsData& data_;
  StateSpace space_;
  std::vector<double> frames_, prev_, cur_;
};

// exp(l - max l) over l, returning the max (-inf when every entry is -inf or NaN: impossible).
double exp_shifted(std::vector<double>& l) {
  double m = -std::numeric_limits<double>::infinity();
  for (double v : l)
    if (v > m)
      m = v;
  for (double& v : l)
    v = std::isfinite(m) && !std::isnan(v) ? std::exp(v - m) : 0.0;
  return m;
}

// The forward pass: normalised filtering probabilities alpha[t * K + k] and the log scale of
// each step (the log-likelihood increments).
struct ForwardPass {
  std::vector<double> alpha, increment;
};

// The exact methods enumerate the declared ranges of the states; the probability the model gives
// to values outside them would be lost. Past this much, they stop instead (a truncation of the
// support that loses less, such as int[0..50] for a poisson(2) state, is exact to rounding).
constexpr double kMaxProbabilityOutside = 1e-9;

// "z: int[0..1], w: int[0..2]": the ranges the exact methods enumerate.
std::string declared_ranges(const ModelInfo& info) {
  std::vector<std::string> out;
  for (const VarInfo& v : info.state)
    if (!v.hidden)
      out.push_back(fmt::format("{}: {}", v.name, integer_type(v)));
  return fmt::format("{}", fmt::join(out, ", "));
}

// "z = 1, w = 0": the (visible) state k of the enumeration.
std::string state_text(const ModelInfo& info, const StateSpace& s, int64_t k) {
  const std::vector<std::string> cols = state_columns(info);
  std::vector<std::string> out;
  for (size_t c = 0; c < cols.size(); ++c)
    out.push_back(fmt::format("{} = {}", cols[c], s.values[c * s.size + k]));
  return fmt::format("{}", fmt::join(out, ", "));
}

[[noreturn]] void probability_outside(const ModelInfo& info, double outside,
                                      const std::string& what) {
  throw Error(fmt::format(
      "the exact finite-state methods ({}, {}, {}, {}) enumerate the declared ranges of the "
      "states ({}), but {} gives probability {:.3g} to values outside them; declare ranges that "
      "hold the whole support of the distributions (or use distributions that stay within them)",
      kForwardName, kForwardBackwardName, kViterbiName, kPosteriorDecodingName,
      declared_ranges(info), what, outside));
}

ForwardPass run_forward(const Enumeration& e, const ModelInfo& info) {
  const int64_t K = e.K(), T = e.T();
  ForwardPass f;
  f.alpha.resize(T * K);
  f.increment.resize(T);
  std::vector<double> a, emit, prior(K);
  for (int64_t t = 0; t < T; ++t) {
    double prior_shift = 0; // log of the factor taken out of the initial probabilities
    if (t == 0) {
      e.initial(prior);
      prior_shift = exp_shifted(prior);
      double inside = 0;
      for (double p : prior)
        inside += p;
      inside *= std::exp(prior_shift);
      if (1 - inside > kMaxProbabilityOutside)
        probability_outside(info, 1 - inside, "the initial distribution");
    } else {
      e.transition(t, a);
      std::fill(prior.begin(), prior.end(), 0.0);
      const double* prev = &f.alpha[(t - 1) * K];
      for (int64_t i = 0; i < K; ++i)
        if (prev[i] > 0) {
          double inside = 0;
          for (int64_t j = 0; j < K; ++j)
            if (a[i * K + j] > -INFINITY) {
              const double p = std::exp(a[i * K + j]);
              prior[j] += prev[i] * p;
              inside += p;
            }
          if (1 - inside > kMaxProbabilityOutside)
            probability_outside(
                info, 1 - inside,
                fmt::format("at t={} the transition from {}", t, state_text(info, e.space(), i)));
        }
    }
    e.emission(t, emit);
    const double m = exp_shifted(emit);
    double total = 0;
    double* alpha = &f.alpha[t * K];
    for (int64_t k = 0; k < K; ++k) {
      alpha[k] = prior[k] * emit[k];
      total += alpha[k];
    }
    if (!(total > 0) || !std::isfinite(total))
      throw Error(fmt::format("{}: the observation at t={} has zero probability under every "
                              "state reachable from the past (check the data and the parameters)",
                              kForwardName, t));
    for (int64_t k = 0; k < K; ++k)
      alpha[k] /= total;
    f.increment[t] = std::log(total) + m + prior_shift;
  }
  return f;
}

// Per-t mean and variance of each state component under probabilities p over the states.
void state_moments(const StateSpace& s, const double* p, int64_t t, std::vector<double>& mean,
                   std::vector<double>& var) {
  const int64_t K = s.size, ns = s.n_state;
  for (int64_t c = 0; c < ns; ++c) {
    double m = 0, m2 = 0;
    for (int64_t k = 0; k < K; ++k) {
      const double v = s.values[c * K + k];
      m += p[k] * v;
      m2 += p[k] * v * v;
    }
    mean[t * ns + c] = m;
    var[t * ns + c] = std::max(0.0, m2 - m * m);
  }
}

// log p(x_{0:T} = path, y_{0:T}) for a path of state indices: -inf when it is impossible.
double path_log_joint(const Enumeration& e, const std::vector<int64_t>& path) {
  const int64_t K = e.K();
  std::vector<double> l;
  e.initial(l);
  double lj = l[path[0]];
  for (int64_t t = 0; t < e.T(); ++t) {
    if (t > 0) {
      e.transition(t, l);
      lj += l[path[t - 1] * K + path[t]];
    }
    e.emission(t, l);
    lj += l[path[t]];
  }
  return lj;
}

} // namespace

FilterResult forward_filter(const ssm_model& model, const ModelInfo& info,
                            const std::vector<double>& fixed, const ObsData& data) {
  const auto start = std::chrono::steady_clock::now();
  const Enumeration e(model, info, fixed, data);
  const ForwardPass f = run_forward(e, info);
  FilterResult r;
  r.T = data.T;
  r.n_state = info.n_state;
  r.mean.resize(r.T * r.n_state);
  r.var.resize(r.T * r.n_state);
  r.loglik_increment = f.increment;
  for (int64_t t = 0; t < r.T; ++t) {
    state_moments(e.space(), &f.alpha[t * e.K()], t, r.mean, r.var);
    r.log_likelihood += f.increment[t];
  }
  r.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

namespace {

// The backward pass: beta_t(i) = sum_j A_{t+1}(i, j) e_{t+1}(j) beta_{t+1}(j) / c_{t+1}, with e
// and c as the forward pass scaled them, so gamma_t = alpha_t beta_t sums to 1. Calls
// visit(t, gamma_t, xi_t) for t = T-1 down to 0, with the pairwise probabilities xi_t(i, j) =
// alpha_{t-1}(i) A(i, j) e(j) beta(j) / c_t at [i * K + j] (nullptr at t = 0).
template <class Visit> void run_backward(const Enumeration& e, const ForwardPass& f, Visit visit) {
  const int64_t K = e.K(), T = e.T();
  std::vector<double> beta(K, 1.0), beta_prev(K), gamma(K), xi(K * K), a, emit;
  for (int64_t t = T - 1; t >= 0; --t) {
    const double* alpha = &f.alpha[t * K];
    for (int64_t k = 0; k < K; ++k)
      gamma[k] = alpha[k] * beta[k];
    if (t == 0) {
      visit(t, gamma, nullptr);
      break;
    }
    e.transition(t, a);
    e.emission(t, emit);
    const double m = exp_shifted(emit);
    const double scale = std::exp(m - f.increment[t]);
    const double* alpha_prev = &f.alpha[(t - 1) * K];
    std::fill(beta_prev.begin(), beta_prev.end(), 0.0);
    for (int64_t i = 0; i < K; ++i)
      for (int64_t j = 0; j < K; ++j) {
        const double w =
            a[i * K + j] > -INFINITY ? std::exp(a[i * K + j]) * emit[j] * beta[j] * scale : 0.0;
        beta_prev[i] += w;
        xi[i * K + j] = alpha_prev[i] * w;
      }
    visit(t, gamma, xi.data());
    std::swap(beta, beta_prev);
  }
}

} // namespace

SmoothResult forward_backward(const ssm_model& model, const ModelInfo& info,
                              const std::vector<double>& fixed, const ObsData& data) {
  const auto start = std::chrono::steady_clock::now();
  const Enumeration e(model, info, fixed, data);
  const ForwardPass f = run_forward(e, info);
  const auto forward_done = std::chrono::steady_clock::now();
  const int64_t K = e.K(), T = e.T(), ns = info.n_state;
  SmoothResult r = make_result(info, SmoothMethod::ForwardBackward, T, 0, true);
  r.filter_s = std::chrono::duration<double>(forward_done - start).count();
  for (int64_t t = 0; t < T; ++t)
    r.log_likelihood += f.increment[t];
  const StatLayout lay(info, true);
  if (lay.nf > 0 && !model.functional_terms)
    throw Error("the model table has no functional_terms kernel");

  // The functionals' expectations: over pairs (xi) at t > 0, over states (gamma) at t = 0.
  std::vector<double> terms, sums(lay.nsum, 0.0), q(lay.per_step, 0.0);
  run_backward(e, f, [&](int64_t t, const std::vector<double>& gamma, const double* xi) {
    state_moments(e.space(), gamma.data(), t, r.mean, r.var);
    std::fill(q.begin(), q.end(), 0.0);
    if (lay.nf > 0) {
      const int64_t P = xi ? K * K : K;
      const double* p = xi ? xi : gamma.data();
      e.terms(t, terms);
      check_terms(terms.data(), lay.nf, P, p, 0, P, t, info);
      for (int64_t k = 0; k < lay.nsum; ++k)
        for (int64_t i = 0; i < P; ++i)
          if (p[i] > 0)
            sums[k] += p[i] * terms[lay.sum_comp[k] * P + i];
      for (size_t k = 0; k < lay.per_t_comp.size(); ++k)
        for (int64_t i = 0; i < P; ++i)
          if (p[i] > 0)
            q[2 * ns + k] += p[i] * terms[lay.per_t_comp[k] * P + i];
    }
    for (int64_t c = 0; c < ns; ++c) {
      q[c] = r.mean[t * ns + c];
      q[ns + c] = r.var[t * ns + c] + q[c] * q[c];
    }
    lay.store_estimates(t, q.data(), r, info);
  });
  lay.store_sums(sums.data(), r, info);
  r.details = {{"states", K}};
  r.smooth_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - forward_done).count();
  return r;
}

Decoding viterbi(const ssm_model& model, const ModelInfo& info, const std::vector<double>& fixed,
                 const ObsData& data) {
  const Enumeration e(model, info, fixed, data);
  const int64_t K = e.K(), T = e.T(), ns = info.n_state;
  Decoding d;
  d.states = K;
  if (T == 0)
    return d;
  std::vector<double> delta(K), next(K), a, emit;
  std::vector<int32_t> back(T * K, -1);
  e.initial(delta);
  e.emission(0, emit);
  for (int64_t k = 0; k < K; ++k)
    delta[k] += emit[k];
  for (int64_t t = 1; t < T; ++t) {
    e.transition(t, a);
    e.emission(t, emit);
    for (int64_t j = 0; j < K; ++j) {
      double best = -INFINITY;
      int32_t arg = -1;
      for (int64_t i = 0; i < K; ++i) {
        const double v = delta[i] + a[i * K + j];
        if (v > best) {
          best = v;
          arg = static_cast<int32_t>(i);
        }
      }
      next[j] = best + emit[j];
      back[t * K + j] = arg;
    }
    std::swap(delta, next);
  }
  int64_t k = std::max_element(delta.begin(), delta.end()) - delta.begin();
  d.log_joint = delta[k];
  if (!std::isfinite(d.log_joint))
    throw Error("decode: every state path has zero probability given the data (check the data "
                "and the parameters)");
  d.path.resize(T * ns);
  for (int64_t t = T - 1; t >= 0; --t) {
    for (int64_t c = 0; c < ns; ++c)
      d.path[t * ns + c] = e.space().values[c * K + k];
    if (t > 0)
      k = back[t * K + k];
  }
  const ForwardPass f = run_forward(e, info);
  for (double inc : f.increment)
    d.log_likelihood += inc;
  return d;
}

Decoding posterior_decoding(const ssm_model& model, const ModelInfo& info,
                            const std::vector<double>& fixed, const ObsData& data) {
  const Enumeration e(model, info, fixed, data);
  const int64_t K = e.K(), T = e.T(), ns = info.n_state;
  Decoding d;
  d.states = K;
  if (T == 0)
    return d;
  const ForwardPass f = run_forward(e, info);
  for (double inc : f.increment)
    d.log_likelihood += inc;
  std::vector<int64_t> best(T);
  d.probability.resize(T);
  run_backward(e, f, [&](int64_t t, const std::vector<double>& gamma, const double*) {
    best[t] = std::max_element(gamma.begin(), gamma.end()) - gamma.begin();
    d.probability[t] = gamma[best[t]];
  });
  d.path.resize(T * ns);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < ns; ++c)
      d.path[t * ns + c] = e.space().values[c * K + best[t]];
  d.log_joint = path_log_joint(e, best);
  return d;
}

// Pairs stored by the E-step: past this, EM over the enumeration would hold more than 800 MB.
constexpr double kMaxStoredPairs = 1e8;

PairMarginals pair_marginals(const ssm_model& model, const ModelInfo& info,
                             const std::vector<double>& fixed, const ObsData& data) {
  const Enumeration e(model, info, fixed, data);
  const int64_t K = e.K(), T = e.T();
  if (static_cast<double>(T) * static_cast<double>(K * K) > kMaxStoredPairs)
    throw Error(fmt::format("EM keeps the smoothing probabilities of every pair of states at every "
                            "step: {} steps of {} pairs are more than the {:g} it holds",
                            T, K * K, kMaxStoredPairs));
  PairMarginals m;
  m.K = K;
  m.T = T;
  if (T == 0)
    return m;
  const ForwardPass f = run_forward(e, info);
  for (double inc : f.increment)
    m.log_likelihood += inc;
  m.pairs.resize((T - 1) * K * K);
  run_backward(e, f, [&](int64_t t, const std::vector<double>& gamma, const double* xi) {
    if (xi)
      std::copy(xi, xi + K * K, m.pairs.begin() + (t - 1) * K * K);
    else
      m.initial = gamma;
  });
  return m;
}

std::vector<StepPoints> pair_points(const ModelInfo& info, const PairMarginals& m) {
  const StateSpace space = enumerate_states(info);
  const int64_t K = space.size, ns = info.n_state;
  if (K != m.K)
    throw Error("internal error: EM's marginals do not match the model's enumeration");
  // Each point holds both states and its weight: bounded as the pairs are (kMaxStoredPairs).
  if (static_cast<double>(m.T) * static_cast<double>(K * K) * static_cast<double>(2 * ns + 1) >
      3 * kMaxStoredPairs)
    throw Error(fmt::format("EM keeps the smoothing probabilities of every pair of states at every "
                            "step with both states: {} steps of {} pairs of {} components are "
                            "more than it holds",
                            m.T, K * K, ns));
  std::vector<StepPoints> out(m.T);
  for (int64_t t = 0; t < m.T; ++t) {
    const double* w = t == 0 ? m.initial.data() : &m.pairs[(t - 1) * K * K];
    const int64_t P = t == 0 ? K : K * K;
    std::vector<int64_t> kept;      // a pair without probability adds nothing, even where the
    for (int64_t p = 0; p < P; ++p) // density is -inf
      if (w[p] > 0)
        kept.push_back(p);
    StepPoints& s = out[t];
    s.count = static_cast<int64_t>(kept.size());
    s.prev.assign(ns * s.count, NAN);
    s.cur.resize(ns * s.count);
    s.weight.resize(s.count);
    for (int64_t q = 0; q < s.count; ++q) {
      const int64_t p = kept[q], i = t == 0 ? -1 : p / K, j = t == 0 ? p : p % K;
      s.weight[q] = w[p];
      for (int64_t c = 0; c < ns; ++c) {
        if (i >= 0)
          s.prev[c * s.count + q] = space.values[c * K + i];
        s.cur[c * s.count + q] = space.values[c * K + j];
      }
    }
  }
  return out;
}

std::vector<double> finite_path_draw(const ssm_model& model, const ModelInfo& info,
                                     const std::vector<double>& fixed, const ObsData& data,
                                     const std::function<double(int64_t)>& uniform,
                                     double& log_likelihood) {
  const Enumeration e(model, info, fixed, data);
  const ForwardPass f = run_forward(e, info);
  const int64_t K = e.K(), T = e.T(), n = info.n_state;
  log_likelihood = 0;
  for (double v : f.increment)
    log_likelihood += v;
  std::vector<double> path(static_cast<size_t>(T * n)), w(K), a;
  int64_t next = 0;
  for (int64_t t = T - 1; t >= 0; --t) {
    // x_t | x_{t+1}, y_{0:t} is proportional to alpha_t(i) p(x_{t+1} | x_t = i).
    const double* alpha = &f.alpha[t * K];
    if (t + 1 < T)
      e.transition(t + 1, a);
    double total = 0;
    for (int64_t i = 0; i < K; ++i) {
      w[i] = alpha[i];
      if (t + 1 < T)
        w[i] *= a[i * K + next] > -INFINITY ? std::exp(a[i * K + next]) : 0.0;
      total += w[i];
    }
    if (!(total > 0))
      throw Error(fmt::format("{}: no state at t={} leads to the state drawn at t={}", kForwardName,
                              t, t + 1));
    const double u = uniform(t) * total;
    int64_t pick = K - 1;
    double acc = 0;
    for (int64_t i = 0; i < K; ++i)
      if ((acc += w[i]) > u) {
        pick = i;
        break;
      }
    while (w[pick] <= 0) // rounding at the end of the sums: the last state with probability
      --pick;
    for (int64_t c = 0; c < n; ++c)
      path[t * n + c] = e.space().values[c * K + pick];
    next = pick;
  }
  return path;
}

} // namespace ssm
