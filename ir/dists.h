// The table of distributions: one row per distribution says what the compiler knows about it
// (name, arguments and their domains, support, which argument is its location), so the
// frontend's checks, codegen and the analyses read one definition. docs/distributions.md has the
// recipe for adding a distribution.
#pragma once

#include <string_view>
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
  MvNormalChol,     // (mu : vector[d], L : matrix[d, d]) with L the lower Cholesky factor
  Dirichlet,        // (alpha : vector[K] or real) over the simplex
  Multinomial,      // (n, p : vector[K]): counts of n draws, p normalised by its sum
  Dirac,            // (value): the target equals value; internal (lag augmentation), no density
};

// What a constant argument must be; the frontend rejects a constant outside it.
enum class ArgDomain {
  Any,
  Positive,
  NonNegative,
  Probability, // in [0, 1]
  Count,       // a whole number >= 0 (of trials)
  Weights,     // non-negative components, not all 0
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
  bool internal = false; // made by the compiler, not written in models (dirac)
};

const DistInfo& dist_info(Dist d);
const std::vector<DistInfo>& all_dists();
const DistInfo* find_dist(std::string_view name); // nullptr if unknown

} // namespace ssm::ir
