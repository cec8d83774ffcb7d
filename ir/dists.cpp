// The distribution table: see dists.h.
#include "dists.h"

#include <cmath>

namespace ssm::ir {

namespace {

constexpr double inf = INFINITY;
using enum ArgDomain;

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
  Row& internal() { return info.internal = true, *this; }
};

std::vector<DistInfo> make_table() {
  using D = Dist;
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
      Row(D::MvNormal, "mvnormal", {"mu", "Sigma"}, {Any, Any}, -inf, inf).joint().location(0),
      Row(D::Categorical, "categorical", {"p"}, {Weights}, 0, inf).discrete().joint(),
      Row(D::Beta, "beta", {"a", "b"}, {Positive, Positive}, 0, 1),
      Row(D::InverseGamma, "inverse_gamma", {"alpha", "beta"}, {Positive, Positive}, 0, inf),
      Row(D::Laplace, "laplace", {"mu", "b"}, {Any, Positive}, -inf, inf).location(0),
      Row(D::Cauchy, "cauchy", {"mu", "sigma"}, {Any, Positive}, -inf, inf).location(0),
      Row(D::TruncatedNormal, "truncated_normal", {"mu", "sigma", "lo", "hi"},
          {Any, Positive, Any, Any}, -inf, inf)
          .support_from(2),
      Row(D::Binomial, "binomial", {"n", "p"}, {Count, Probability}, 0, inf).discrete(),
      Row(D::NegativeBinomial, "negative_binomial", {"mu", "phi"}, {NonNegative, Positive}, 0, inf)
          .discrete(),
      Row(D::MvNormalChol, "mvnormal_chol", {"mu", "L"}, {Any, Any}, -inf, inf).joint().location(0),
      Row(D::Dirichlet, "dirichlet", {"alpha"}, {Positive}, 0, 1).joint(),
      Row(D::Multinomial, "multinomial", {"n", "p"}, {Count, Weights}, 0, inf).discrete().joint(),
      Row(D::Dirac, "dirac", {"value"}, {Any}, -inf, inf).location(0).internal(),
  };
  std::vector<DistInfo> table;
  for (Row& r : rows)
    table.push_back(std::move(r.info));
  return table;
}

} // namespace

const std::vector<DistInfo>& all_dists() {
  static const std::vector<DistInfo> table = make_table();
  return table;
}

const DistInfo& dist_info(Dist d) {
  return all_dists().at(static_cast<size_t>(d));
}

const DistInfo* find_dist(std::string_view name) {
  for (const DistInfo& info : all_dists())
    if (info.name == name)
      return &info;
  return nullptr;
}

} // namespace ssm::ir
