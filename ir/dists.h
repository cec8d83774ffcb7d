// The table of distributions: one row per distribution (make_table, below its enumerator) says
// what the compiler knows about it (name, arguments and their domains, support, which argument is
// its location), so the frontend's checks, codegen and the analyses read one definition.
// docs/distributions.md has the recipe for adding a distribution.
#pragma once

#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ssm::ir {

enum class Dist {
  Normal,           // (mu, sigma)
  LogNormal,        // (mu, sigma)
  StudentT,         // (nu, mu, sigma)
  HalfNormal,       // (sigma)
  Uniform,          // (lo, hi)
  Gamma,            // (alpha, beta) with beta a rate
  Exponential,      // (beta) a rate
  Poisson,          // (lambda)
  Bernoulli,        // (p)
  MvNormal,         // (mu : vector[d], Sigma : matrix[d, d])
  Categorical,      // (p : vector[K]) -> 0..K-1, p normalised by its sum
  Beta,             // (a, b)
  InverseGamma,     // (alpha, beta) with beta a scale
  Laplace,          // (mu, b) with b a scale
  Cauchy,           // (mu, sigma)
  TruncatedNormal,  // (mu, sigma, lo, hi)
  Binomial,         // (n, p)
  NegativeBinomial, // (mu, phi): mean mu, variance mu + mu^2 / phi
  Weibull,          // (k, lambda): shape k, scale lambda
  Gumbel,           // (mu, beta): location mu, scale beta (the maximum's extreme-value law)
  MvNormalChol,     // (mu : vector[d], L : matrix[d, d]) with L the lower Cholesky factor
  Dirichlet,        // (alpha : vector[K] or real) over the simplex
  Multinomial,      // (n, p : vector[K]): counts of n draws, p normalised by its sum
  BernoulliLogit,   // (alpha): P(1) = logistic(alpha), exact for large |alpha| (Stan's)
  Dirac,            // (value): the target equals value; internal (lag augmentation), no density
  // (from, drift, diffusion, dt, steps, psi_lower, psi_upper): X at dt of dX = drift(X) dt +
  // diffusion(X) dW started at `from`, simulated by Euler-Maruyama in `steps` substeps. drift and
  // diffusion read the target at lag 0 as the path's current value. Written diffusion(drift,
  // diffusion, dt[, steps]) for x[t], optionally with psi_lower and psi_upper, the model's bounds
  // of the General Poisson estimator's psi (constants -inf / inf when not given): the frontend adds
  // from = x[t-1]. No density: a transition that is sample-only.
  Diffusion,
  // (context, components, width, layers): a Discretely Indexed Flow over a continuous latent,
  // conditional on `context` (Argouarc'h 2024, 4.3.11): K location-scale maps whose weights and
  // offsets are networks of `width` units, each map after `layers` MAF layers that read the
  // component (4.3.8; 0: location-scale only). A guide family only (`vi`, runtime/vi/guide.h): no
  // kernel evaluates or draws it.
  Dif,
  // (encoder): the backward-factorised Gaussian family of a state-space model's state (Chagneux
  // 2023, ch. 4; runtime/vsmooth), q(x_{0:T-1}) = q_{T-1} prod q_{t-1|t}, its marginals a
  // Kalman-like recursion through a learned linear-Gaussian transition whose observations enter
  // by an encoder: a network's output on the observations at t (natural mean and precision per
  // state component) or an observation itself (a learned linear emission). Written
  // `guide x[t] ~ backward(NET(y[t]))` or `backward(y[t])`; a guide family only (smooth --method
  // variational): no kernel evaluates or draws it.
  Backward,
  // (log_density): a learned density of the target, a `net` of a density kind (dif, maf,
  // realnvp) applied to the target and its context, whose output is log p(target | context):
  // written `z[n] ~ NET(context...)` (frontend/lower_nets.cpp). Its log-density is that argument,
  // which vi's LibTorch code computes (passes/net_outputs.cpp makes the call a hidden state); its
  // sampler draws the flows' base N(0, I), which only a guide's start reads.
  Density,
};

// dif(context[, components, width, layers]): the defaults, and the largest values accepted.
inline constexpr int kDefaultDifComponents = 8;
inline constexpr int kDefaultDifWidth = 32;
inline constexpr int kDefaultDifLayers = 0;
inline constexpr int kMaxDifComponents = 64; // its density costs components^2 per point
inline constexpr int kMaxDifWidth = 4096;
inline constexpr int kMaxDifLayers = 16;

// diffusion(drift, diffusion, dt[, steps, psi_lower, psi_upper]): the substeps when none are
// given, and at most.
inline constexpr int kDefaultDiffusionSteps = 20;
inline constexpr int kMaxDiffusionSteps = 1000000;
// For a state of `dim` components: the substeps' normal draws k * dim + i have 32-bit indices.
inline constexpr long max_diffusion_steps(long dim) {
  const long fit = 2147483647L / (dim > 0 ? dim : 1);
  return fit < kMaxDiffusionSteps ? fit : kMaxDiffusionSteps;
}

// What a constant argument must be; the frontend rejects a constant outside it.
enum class ArgDomain {
  Any,
  Positive,
  NonNegative,
  Probability, // in [0, 1]
  Count,       // a whole number >= 0 (of trials)
  Weights,     // non-negative components, not all 0
  Covariance,  // a symmetric positive-definite matrix
  Cholesky,    // a lower-triangular matrix with a positive diagonal
};

struct DistInfo {
  Dist dist;
  std::string_view name;
  std::vector<std::string_view> arg_names;
  std::vector<ArgDomain> domains; // one per argument
  bool discrete = false;
  bool joint = false; // components are jointly distributed (not a product of scalar densities)
  double lower = 0;   // support, before any argument is known (-inf / +inf when unbounded)
  double upper = 0;
  // The argument the target moves with (the mean of a normal, the location of a student_t):
  // the derivatives analysis reports its Jacobian. -1: none.
  int location = -1;
  // The arguments (lo, hi) = (support_from, support_from + 1) that bound the support, lo < hi
  // (uniform, truncated_normal); -1: the support is [lower, upper].
  int support_from = -1;
  // A discrete distribution whose values are 0..n for its argument n (binomial, multinomial).
  int count_arg = -1;
  bool internal = false;   // made by the compiler, not written in models (dirac)
  bool guide_only = false; // a variational family of `guide` statements (dif), not a model's
  // The leading arguments the frontend supplies, not written in models (diffusion's `from`).
  int implicit_args = 0;
  // The last defaults.size() arguments may be left out of a model's call: their values then.
  std::vector<double> defaults;
};

namespace dists_detail {

inline constexpr double inf = INFINITY;

// A row: the table below reads as name, arguments, support.
struct Row {
  DistInfo info;
  Row(Dist d, std::string_view name, std::vector<std::string_view> args,
      std::vector<ArgDomain> domains, double lower, double upper) {
    info.dist = d;
    info.name = name;
    info.arg_names = std::move(args);
    info.domains = std::move(domains);
    info.lower = lower;
    info.upper = upper;
  }
  Row& discrete() { return info.discrete = true, *this; }
  Row& joint() { return info.joint = true, *this; }
  Row& location(int k) { return info.location = k, *this; }
  Row& support_from(int k) { return info.support_from = k, *this; }
  Row& count_arg(int k) { return info.count_arg = k, *this; }
  Row& internal() { return info.internal = true, *this; }
  Row& guide_only() { return info.guide_only = true, *this; }
  Row& implicit_args(int k) { return info.implicit_args = k, *this; }
  Row& defaults(std::vector<double> values) { return info.defaults = std::move(values), *this; }
};

inline std::vector<DistInfo> make_table() {
  using D = Dist;
  using enum ArgDomain;
  // In the order of Dist: dist_info indexes the table by it.
  Row rows[] = {
      Row(D::Normal, "normal", {"mu", "sigma"}, {Any, Positive}, -inf, inf).location(0),
      Row(D::LogNormal, "lognormal", {"mu", "sigma"}, {Any, Positive}, 0, inf).location(0),
      Row(D::StudentT, "student_t", {"nu", "mu", "sigma"}, {Positive, Any, Positive}, -inf, inf)
          .location(1),
      Row(D::HalfNormal, "half_normal", {"sigma"}, {Positive}, 0, inf),
      Row(D::Uniform, "uniform", {"lo", "hi"}, {Any, Any}, -inf, inf).support_from(0),
      Row(D::Gamma, "gamma", {"alpha", "beta"}, {Positive, Positive}, 0, inf),
      Row(D::Exponential, "exponential", {"beta"}, {Positive}, 0, inf),
      Row(D::Poisson, "poisson", {"lambda"}, {NonNegative}, 0, inf).discrete(),
      Row(D::Bernoulli, "bernoulli", {"p"}, {Probability}, 0, 1).discrete(),
      Row(D::MvNormal, "mvnormal", {"mu", "Sigma"}, {Any, Covariance}, -inf, inf)
          .joint()
          .location(0),
      Row(D::Categorical, "categorical", {"p"}, {Weights}, 0, inf).discrete().joint(),
      Row(D::Beta, "beta", {"a", "b"}, {Positive, Positive}, 0, 1),
      Row(D::InverseGamma, "inverse_gamma", {"alpha", "beta"}, {Positive, Positive}, 0, inf),
      Row(D::Laplace, "laplace", {"mu", "b"}, {Any, Positive}, -inf, inf).location(0),
      Row(D::Cauchy, "cauchy", {"mu", "sigma"}, {Any, Positive}, -inf, inf).location(0),
      Row(D::TruncatedNormal, "truncated_normal", {"mu", "sigma", "lo", "hi"},
          {Any, Positive, Any, Any}, -inf, inf)
          .support_from(2),
      Row(D::Binomial, "binomial", {"n", "p"}, {Count, Probability}, 0, inf)
          .discrete()
          .count_arg(0),
      Row(D::NegativeBinomial, "negative_binomial", {"mu", "phi"}, {NonNegative, Positive}, 0, inf)
          .discrete(),
      Row(D::Weibull, "weibull", {"k", "lambda"}, {Positive, Positive}, 0, inf),
      Row(D::Gumbel, "gumbel", {"mu", "beta"}, {Any, Positive}, -inf, inf).location(0),
      Row(D::MvNormalChol, "mvnormal_chol", {"mu", "L"}, {Any, Cholesky}, -inf, inf)
          .joint()
          .location(0),
      Row(D::Dirichlet, "dirichlet", {"alpha"}, {Positive}, 0, 1).joint(),
      Row(D::Multinomial, "multinomial", {"n", "p"}, {Count, Weights}, 0, inf)
          .discrete()
          .joint()
          .count_arg(0),
      Row(D::BernoulliLogit, "bernoulli_logit", {"alpha"}, {Any}, 0, 1).discrete(),
      Row(D::Dirac, "dirac", {"value"}, {Any}, -inf, inf).location(0).internal(),
      Row(D::Diffusion, "diffusion",
          {"from", "drift", "diffusion", "dt", "steps", "psi_lower", "psi_upper"},
          {Any, Any, Any, Positive, Count, Any, Any}, -inf, inf)
          .implicit_args(1)
          .defaults({kDefaultDiffusionSteps, -inf, inf}),
      Row(D::Dif, "dif", {"context", "components", "width", "layers"}, {Any, Count, Count, Count},
          -inf, inf)
          .joint()
          .guide_only()
          .defaults({kDefaultDifComponents, kDefaultDifWidth, kDefaultDifLayers}),
      Row(D::Backward, "backward", {"encoder"}, {Any}, -inf, inf).joint().guide_only(),
      Row(D::Density, "density", {"log_density"}, {Any}, -inf, inf).joint().internal(),
  };
  std::vector<DistInfo> table;
  for (Row& r : rows)
    table.push_back(std::move(r.info));
  return table;
}

} // namespace dists_detail

// The table, in the order of Dist (made once from the rows above).
const std::vector<DistInfo>& all_dists();
const DistInfo& dist_info(Dist d);
// For messages: "target ~ name", or "target (deterministic)" for a dirac (`x[t] = value;`, or a
// copy the compiler made).
std::string relation_summary(const std::string& target, Dist d);
const DistInfo* find_dist(std::string_view name); // nullptr if unknown

} // namespace ssm::ir
