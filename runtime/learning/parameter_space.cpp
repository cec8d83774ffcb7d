// The learned parameters of a model and their unconstrained vector: selection (defaults and
// priors, minus --fix), layout, and the maps over the whole theta.
#include "learning/parameter_space.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>

namespace ssm {
namespace {

// `sigma (real), Q (cov_matrix[2])`: the model's parameters, for the message of an unknown name.
std::string param_list(const ModelInfo& info) {
  std::vector<std::string> names;
  for (const ParamInfo& p : info.params)
    names.push_back(fmt::format("{} ({})", p.name, type_string(p)));
  return names.empty() ? std::string("(none)") : fmt::format("{}", fmt::join(names, ", "));
}

// Sizes are the caller's contract, not the user's input: a mismatch is a bug, said plainly.
void check_size(const char* what, size_t got, int64_t want) {
  if (static_cast<int64_t>(got) != want)
    throw Error(fmt::format("ParameterSpace: {} has {} values, expected {}", what, got, want));
}

} // namespace

ParameterSpace::ParameterSpace(const ModelInfo& info, const std::vector<std::string>& fixed)
    : n_theta_(info.n_theta) {
  for (const std::string& name : fixed)
    if (!info.find_param(name))
      throw Error(fmt::format("cannot fix '{}': the model has no parameter of that name; its "
                              "parameters are: {}",
                              name, param_list(info)));
  for (size_t i = 0; i < info.params.size(); ++i) {
    const ParamInfo& p = info.params[i];
    const bool is_fixed = std::find(fixed.begin(), fixed.end(), p.name) != fixed.end();
    if (is_fixed || (!p.default_value && p.prior.empty())) {
      (is_fixed ? fixed_ : held_).push_back(p.name);
      continue;
    }
    learned_.push_back({i, dimension_, ParamTransform(p)});
    dimension_ += learned_.back().transform.size();
    if (learned_.back().transform.size() == 0)
      without_coordinates_.push_back(p.name);
  }
}

void ParameterSpace::require_some(std::string_view who, std::string_view verb) const {
  if (dimension_ > 0)
    return;
  // "a", "a and b", "a, b and c"
  auto names = [](const std::vector<std::string>& v) {
    if (v.size() == 1)
      return v[0];
    return fmt::format("{} and {}", fmt::join(v.begin(), v.end() - 1, ", "), v.back());
  };
  std::vector<std::string> why;
  const bool one = held_.size() == 1;
  if (!held_.empty()) // a Bayesian method needs a prior; the others learn from a default too
    why.push_back(fmt::format(
        "{} {} neither a default nor a prior in the model, so {} at the value{} given by --param "
        "or --params ({})",
        names(held_), one ? "has" : "have", one ? "it stays" : "they stay", one ? "" : "s",
        verb == "infer"
            ? fmt::format("a prior, `param {} : TYPE ~ ...;`, makes a parameter inferred", held_[0])
            : fmt::format("a default, `param {} : TYPE = VALUE;`, or a prior makes a parameter "
                          "learned",
                          held_[0])));
  if (!fixed_.empty())
    why.push_back(fmt::format("--fix keeps {}", names(fixed_)));
  if (!without_coordinates_.empty())
    why.push_back(fmt::format("{} {} no free coordinate", names(without_coordinates_),
                              without_coordinates_.size() == 1 ? "has" : "have"));
  if (why.empty())
    why.push_back("the model has no parameters");
  throw Error(fmt::format("{}: no parameter to {}: {}", who, verb, fmt::join(why, "; ")));
}

const LearnedParam* ParameterSpace::find(std::string_view name) const {
  for (const LearnedParam& l : learned_)
    if (l.transform.param().name == name)
      return &l;
  return nullptr;
}

std::vector<std::string> ParameterSpace::coordinate_names() const {
  std::vector<std::string> names;
  for (const LearnedParam& l : learned_) {
    std::vector<std::string> own = l.transform.coordinate_names();
    names.insert(names.end(), own.begin(), own.end());
  }
  return names;
}

void ParameterSpace::constrain(std::span<const double> u, std::span<double> theta) const {
  check_size("the unconstrained point", u.size(), dimension_);
  check_size("theta", theta.size(), n_theta_);
  for (const LearnedParam& l : learned_)
    l.transform.constrain(u.subspan(l.offset, l.transform.size()),
                          theta.subspan(l.transform.param().offset, l.transform.param().size));
}

std::vector<double> ParameterSpace::unconstrain(std::span<const double> theta) const {
  check_size("theta", theta.size(), n_theta_);
  std::vector<double> u(dimension_);
  for (const LearnedParam& l : learned_)
    l.transform.unconstrain(theta.subspan(l.transform.param().offset, l.transform.param().size),
                            std::span<double>(u).subspan(l.offset, l.transform.size()));
  return u;
}

double ParameterSpace::log_jacobian(std::span<const double> u) const {
  check_size("the unconstrained point", u.size(), dimension_);
  double lj = 0;
  for (const LearnedParam& l : learned_)
    lj += l.transform.log_jacobian(u.subspan(l.offset, l.transform.size()));
  return lj;
}

std::vector<double> ParameterSpace::gradient(std::span<const double> u,
                                             std::span<const double> grad_theta,
                                             bool with_log_jacobian) const {
  check_size("the unconstrained point", u.size(), dimension_);
  check_size("the gradient in theta", grad_theta.size(), n_theta_);
  std::vector<double> grad_u(dimension_);
  for (const LearnedParam& l : learned_)
    l.transform.gradient(u.subspan(l.offset, l.transform.size()),
                         grad_theta.subspan(l.transform.param().offset, l.transform.param().size),
                         std::span<double>(grad_u).subspan(l.offset, l.transform.size()),
                         with_log_jacobian);
  return grad_u;
}

} // namespace ssm
