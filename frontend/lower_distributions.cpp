// Checks of distribution calls, apart from IR emission: the distribution's name, the number and
// shapes of its arguments, constant arguments outside their domain, integer targets.
#include "lowering.h"
#include "messages.h"

#include <Eigen/Cholesky>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <optional>

namespace ssm::frontend::lowering {

namespace {

// Why the constant square matrix `v` (row-major) is not a covariance matrix (cholesky: not a
// lower-triangular factor with a positive diagonal), or nullopt.
std::optional<std::string> not_a_factor(const std::vector<double>& v, bool cholesky,
                                        std::string_view name) {
  const int n = static_cast<int>(std::lround(std::sqrt(static_cast<double>(v.size()))));
  if (n * n != static_cast<int>(v.size()))
    return std::nullopt; // not square: the shape check says so
  Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> m(
      v.data(), n, n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      if (cholesky && j > i && m(i, j) != 0)
        return fmt::format("{}[{}, {}] = {} is above the diagonal", name, i, j, m(i, j));
      if (cholesky && i == j && !(m(i, i) > 0))
        return fmt::format("{}[{}, {}] = {} is not positive", name, i, i, m(i, i));
      // The tolerance of the runtime's check of a cov_matrix value (core/params.cpp).
      if (!cholesky && j > i &&
          std::fabs(m(i, j) - m(j, i)) > 1e-12 * std::max(1.0, m.cwiseAbs().maxCoeff()))
        return fmt::format("it is not symmetric: {0}[{1}, {2}] = {3}, {0}[{2}, {1}] = {4}", name, i,
                           j, m(i, j), m(j, i));
    }
  if (!cholesky && Eigen::LLT<Eigen::MatrixXd>(m).info() != Eigen::Success)
    return std::string("it is not positive definite");
  return std::nullopt;
}

std::string signature(const ir::DistInfo& info) {
  return fmt::format("{}({})", info.name, fmt::join(info.arg_names, ", "));
}

} // namespace

// Checks a distribution call against its target; arguments that failed to lower are nullopt.
bool Lowering::refuse_guide_only(const ast::DistCall& d, const std::string& target_name) {
  const ir::DistInfo* info = ir::find_dist(d.name.name);
  if (!info || !info->guide_only)
    return false;
  error(d.name.range, fmt::format(msg::guide_only_family, info->name, info->name,
                                  fmt::format("the distribution of {}", target_name)));
  return true;
}

std::optional<ir::Dist> Lowering::check_dist(const ast::DistCall& d,
                                             const std::vector<std::optional<ir::Shape>>& args,
                                             const ir::Shape& target,
                                             const std::string& target_name, Range target_range) {
  const ir::DistInfo* info = ir::find_dist(d.name.name);
  if (info && info->internal)
    info = nullptr;
  if (const Symbol* net = info ? nullptr : density_net(d.name.name)) {
    const ir::NetDecl& decl = model_.nets[net->index];
    error(d.name.range,
          decl.density()
              ? fmt::format(msg::density_net_not_latent, decl.name, decl.kind, target_name)
              : fmt::format(msg::sequence_net_misplaced, decl.name, decl.kind, target_name));
    return std::nullopt;
  }
  if (!info) {
    std::vector<std::string> names;
    for (const ir::DistInfo& known : ir::all_dists())
      if (!known.internal)
        names.emplace_back(known.name);
    std::string message = fmt::format(msg::unknown_distribution, d.name.name);
    if (auto guess = closest_name(d.name.name, names))
      message += fmt::format(msg::did_you_mean, *guess);
    error(d.name.range, message);
    return std::nullopt;
  }
  if (d.unresolved) // its named arguments were reported wrong
    return std::nullopt;
  if (refuse_guide_only(d, target_name)) // lower_guides.cpp lowers a guide's own family first
    return std::nullopt;
  if (info->dist == ir::Dist::Diffusion) { // in a prior, or a plate or simulator declaration
    error(d.name.range, fmt::format(msg::diffusion_not_transition,
                                    fmt::format("the distribution of {}", target_name)));
    return std::nullopt;
  }
  if (args.size() != info->arg_names.size()) {
    error(d.range, fmt::format(msg::dist_argument_count, signature(*info),
                               plural(info->arg_names.size(), "argument"),
                               args.size() == 1 ? "1 was" : fmt::format("{} were", args.size())));
    return std::nullopt;
  }
  if (std::any_of(args.begin(), args.end(), [](const auto& a) { return !a.has_value(); }))
    return std::nullopt;
  bool ok = true;
  if (info->dist == ir::Dist::Categorical) {
    if (!target.is_scalar()) {
      error(target_range,
            fmt::format(msg::categorical_target_not_scalar, target_name, target.str()));
      return std::nullopt;
    }
    if (args[0]->rank() != 1) {
      error(d.args[0]->range, fmt::format(msg::categorical_weights_not_vector, args[0]->str()));
      return std::nullopt;
    }
    return info->dist;
  }
  if (info->dist == ir::Dist::Dirichlet || info->dist == ir::Dist::Multinomial) {
    if (target.rank() != 1) {
      error(target_range,
            fmt::format(msg::vector_target_needed, info->name, target_name, target.str()));
      return std::nullopt;
    }
    bool dirichlet = info->dist == ir::Dist::Dirichlet;
    const std::optional<ir::Shape>& weights = args[dirichlet ? 0 : 1];
    if (!(*weights == target) && !(dirichlet && weights->is_scalar())) {
      error(d.args[dirichlet ? 0 : 1]->range,
            fmt::format(msg::weights_shape_mismatch, info->arg_names[dirichlet ? 0 : 1], info->name,
                        target.str(), dirichlet ? " or real" : "", target_name, weights->str()));
      ok = false;
    }
    if (!dirichlet && !args[0]->is_scalar()) {
      error(d.args[0]->range, fmt::format(msg::multinomial_n_not_real, args[0]->str()));
      ok = false;
    }
    return ok ? std::optional(info->dist) : std::nullopt;
  }
  if (info->dist == ir::Dist::MvNormal || info->dist == ir::Dist::MvNormalChol) {
    std::string_view matrix = info->dist == ir::Dist::MvNormal ? "Sigma" : "L";
    if (target.rank() != 1) {
      error(target_range,
            fmt::format(msg::vector_target_needed, info->name, target_name, target.str()));
      return std::nullopt;
    }
    ir::Shape cov = ir::Shape::matrix(target.dims[0], target.dims[0]);
    if (!(*args[0] == target)) {
      error(d.args[0]->range, fmt::format(msg::mvnormal_mean_shape_mismatch, info->name,
                                          target.str(), target_name, args[0]->str()));
      ok = false;
    }
    if (!(*args[1] == cov)) {
      error(d.args[1]->range, fmt::format(msg::mvnormal_matrix_shape_mismatch, matrix, info->name,
                                          cov.str(), target.str(), args[1]->str()));
      ok = false;
    }
  } else {
    for (std::size_t k = 0; k < args.size(); ++k) {
      if (args[k]->is_scalar() || *args[k] == target)
        continue;
      std::string allowed = target.is_scalar() ? "real" : "real or " + target.str();
      error(d.args[k]->range, fmt::format(msg::dist_argument_shape_mismatch, info->arg_names[k],
                                          info->name, allowed, target_name, args[k]->str()));
      ok = false;
    }
  }
  return ok ? std::optional(info->dist) : std::nullopt;
}

// Constant arguments must lie in the distribution's parameter domain: a zero scale or a
// probability of 2 would only show at run time, as NaN densities and draws.
void Lowering::check_argument_domain(
    ir::Dist dist, const ast::DistCall& call,
    const std::vector<std::optional<std::vector<double>>>& values) {
  using enum ir::ArgDomain;
  const ir::DistInfo& info = ir::dist_info(dist);
  const std::vector<ir::ArgDomain>& rules = info.domains;
  for (size_t k = 0; k < rules.size() && k < values.size(); ++k) {
    if (!values[k] || rules[k] == Any)
      continue;
    const std::vector<double>& v = *values[k];
    if (rules[k] == Covariance || rules[k] == Cholesky) {
      if (std::optional<std::string> why = not_a_factor(v, rules[k] == Cholesky, info.arg_names[k]))
        error(call.args[k]->range,
              fmt::format(msg::dist_matrix_argument, info.arg_names[k], info.name,
                          rules[k] == Cholesky ? "a Cholesky factor (lower-triangular with a "
                                                 "positive diagonal)"
                                               : "a covariance matrix (symmetric positive "
                                                 "definite)",
                          *why));
      continue;
    }
    auto fail = [&](std::string_view must, size_t i) {
      error(call.args[k]->range,
            fmt::format(msg::dist_argument_outside_domain, info.arg_names[k], info.name, must,
                        v.size() == 1 ? "it is" : fmt::format(msg::its_component_is, i), v[i]));
    };
    double total = 0;
    bool failed = false;
    for (size_t i = 0; i < v.size() && !failed; ++i) {
      const double x = v[i];
      failed = true;
      if (rules[k] == Positive && !(x > 0))
        fail("positive", i);
      else if ((rules[k] == NonNegative || rules[k] == Weights) && !(x >= 0))
        fail(rules[k] == Weights ? "a vector of non-negative weights" : "at least 0", i);
      else if (rules[k] == Probability && !(x >= 0 && x <= 1))
        fail("a probability (between 0 and 1)", i);
      else if (rules[k] == Count && !(x >= 0 && x == std::floor(x)))
        fail("a whole number of trials (0, 1, 2, ...)", i);
      else
        failed = false;
      total += x;
    }
    if (!failed && rules[k] == Weights && !(total > 0))
      error(call.args[k]->range,
            fmt::format(msg::dist_weights_all_zero, info.arg_names[k], info.name));
  }
  // lo < hi for uniform(lo, hi) and truncated_normal(mu, sigma, lo, hi).
  const size_t lo = static_cast<size_t>(info.support_from);
  if (info.support_from >= 0 && values.size() > lo + 1 && values[lo] && values[lo + 1] &&
      values[lo]->size() == 1 && values[lo + 1]->size() == 1 &&
      !((*values[lo])[0] < (*values[lo + 1])[0]))
    error(call.range,
          fmt::format(msg::dist_interval_empty, info.name, (*values[lo])[0], (*values[lo + 1])[0]));
}

void Lowering::check_argument_domain(ir::Dist dist, const ast::DistCall& call,
                                     const ir::Block& block,
                                     const std::vector<std::optional<int>>& args) {
  std::vector<std::optional<std::vector<double>>> values;
  for (const std::optional<int>& a : args)
    values.push_back(a ? constant_value(block, *a) : std::nullopt);
  check_argument_domain(dist, call, values);
}

// An integer variable needs a discrete distribution.
bool Lowering::check_integer_target(const ir::VarDecl& decl, ir::Dist dist, const std::string& name,
                                    const ast::DistCall& call) {
  if (!decl.integer || ir::dist_info(dist).discrete)
    return true;
  std::vector<std::string> discrete;
  for (const ir::DistInfo& info : ir::all_dists())
    if (info.discrete && !(info.dist == ir::Dist::Multinomial && decl.shape.is_scalar()))
      discrete.emplace_back(info.name); // multinomial draws a vector
  error(call.name.range, fmt::format(msg::continuous_dist_for_integer, name,
                                     ir::dist_info(dist).name, fmt::join(discrete, ", ")));
  return false;
}

// An int[lo..hi] target whose distribution can take values outside lo..hi: an error when no
// value of the distribution is inside, else a warning that says what happens to the others.
bool Lowering::check_integer_range(const ir::VarDecl& decl, const ir::Block& block,
                                   const ir::Relation& rel, const ast::Relation& r,
                                   const std::string& target) {
  if (!decl.integer || !decl.bounded())
    return true;
  std::optional<std::pair<double, double>> support = ir::discrete_support(block, rel);
  if (!support)
    return true;
  auto [lo, hi] = *support;
  if (lo >= decl.lower && hi <= decl.upper)
    return true;
  const std::string values = hi == INFINITY ? fmt::format(msg::support_from, lo)
                             : lo == hi     ? fmt::format(msg::support_one_value, lo)
                             : hi == lo + 1 ? fmt::format(msg::support_two_values, lo, hi)
                                            : fmt::format(msg::support_range, lo, hi);
  const std::string what = fmt::format("{}{} ~ {}(...) {}", r.proposal() ? "proposal " : "", target,
                                       ir::dist_info(rel.dist).name, values);
  const std::string type = ir::type_str(decl);
  if (hi < decl.lower || lo > decl.upper) {
    error(r.range, fmt::format(msg::support_outside_int_range, what, decl.name, type));
    return false;
  }
  const std::string range = fmt::format("{}..{}", decl.lower, decl.upper);
  std::string consequence;
  if (r.proposal())
    consequence = fmt::format(msg::int_range_consequence_proposal, range);
  else if (rel.kind == ir::VarKind::Obs)
    consequence = fmt::format(msg::int_range_consequence_obs, range);
  else
    consequence = fmt::format(msg::int_range_consequence_state, range);
  diags_.warning(loc(r.range), fmt::format(msg::support_reaches_outside_int_range, what, decl.name,
                                           type, consequence));
  return true;
}

// The checks of a relation `target ~ dist(args)` of a state-space model that need its lowered
// arguments, apart from the relation's emission: an integer target needs a discrete distribution
// and a proposal for a continuous target a continuous one, constant arguments must lie in the
// distribution's domain, and the values of an int[lo..hi] target must fall in its range.
bool Lowering::check_relation(const ast::Relation& r, const ir::VarDecl& decl,
                              const ir::Block& block, ir::VarKind target_kind, ir::Dist dist,
                              const std::vector<std::optional<int>>& args,
                              const std::string& target) {
  const std::string& name = decl.name;
  bool ok = check_integer_target(decl, dist, name, r.dist);
  if (ok)
    check_argument_domain(dist, r.dist, block, args);
  if (ok && r.proposal() && !decl.integer && ir::dist_info(dist).discrete) {
    error(r.dist.name.range,
          fmt::format(msg::discrete_proposal_for_continuous, name, ir::dist_info(dist).name));
    ok = false;
  }
  if (ok) {
    ir::Relation rel;
    rel.kind = target_kind;
    rel.dist = dist;
    for (const auto& a : args)
      rel.args.push_back(*a);
    ok = check_integer_range(decl, block, rel, r, target);
  }
  return ok;
}

} // namespace ssm::frontend::lowering
