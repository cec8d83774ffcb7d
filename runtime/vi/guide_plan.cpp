// The plan of a plate model's default guide (guide.h): which latent component the guide treats
// how, and the gradient estimator of each latent variable, from --estimator and the model.
#include "vi/guide_plan.h"
#include "core/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace ssm {

namespace {

constexpr int64_t kMaxDiscreteValues = 10000;

const std::vector<std::string>& estimator_names() {
  static const std::vector<std::string> names = {kReparamName, kScoreName, kEnumerateName,
                                                 kGumbelName};
  return names;
}

// --estimator's values: a default (`auto` or an estimator) and NAME=ESTIMATOR overrides.
std::pair<std::string, std::map<std::string, std::string>>
parse_estimators(const ModelInfo& info, const std::vector<std::string>& values) {
  std::string all = "auto";
  std::map<std::string, std::string> one;
  auto check = [](const std::string& e) {
    if (e != "auto" &&
        std::find(estimator_names().begin(), estimator_names().end(), e) == estimator_names().end())
      throw Error(fmt::format("vi: unknown estimator '{}' (expected auto, {})", e,
                              fmt::join(estimator_names(), ", ")));
  };
  for (const std::string& v : values) {
    const size_t eq = v.find('=');
    if (eq == std::string::npos) {
      check(v);
      all = v;
      continue;
    }
    const std::string name = v.substr(0, eq), e = v.substr(eq + 1);
    check(e);
    bool known = false;
    std::vector<std::string> latents;
    for (const VarInfo& s : info.state)
      if (!s.hidden) {
        known = known || s.name == name;
        latents.push_back(s.name);
      }
    if (!known)
      throw Error(fmt::format("vi: --estimator {}: the model has no latent variable '{}' (its "
                              "latent variables: {})",
                              v, name, fmt::join(latents, ", ")));
    one[name] = e;
  }
  return {all, one};
}

// A discrete latent variable's estimator and why; `enumeration` grows by its values.
VariationalFit::Estimator discrete_estimator(const VarInfo& v, const std::string& asked,
                                             int64_t& enumeration) {
  const std::string type = integer_type(v);
  if (asked == kReparamName)
    throw Error(fmt::format("vi: the reparameterisation estimator cannot apply to '{}' ({}, "
                            "discrete): use {}, {} or {}",
                            v.name, type, kEnumerateName, kScoreName, kGumbelName));
  if (!std::isfinite(v.lower) || !std::isfinite(v.upper) ||
      v.upper - v.lower + 1 > kMaxDiscreteValues)
    throw Error(fmt::format("vi: the latent '{}' is {}: the guide's categorical needs a finite "
                            "range of at most {} values (declare it int[lo..hi])",
                            v.name, type, kMaxDiscreteValues));
  const int64_t values = static_cast<int64_t>(v.upper - v.lower) + 1;
  double joint = static_cast<double>(enumeration);
  for (int64_t k = 0; k < v.size; ++k)
    joint *= static_cast<double>(values);
  if (asked == kEnumerateName || asked == kGumbelName ||
      (asked == "auto" && joint <= kMaxEnumeration)) {
    if (joint > 1e6)
      throw Error(fmt::format("vi: {} '{}' would evaluate the model at {} joint values of the "
                              "discrete latents: use --estimator {}={}",
                              asked == kGumbelName ? "relaxing" : "enumerating", v.name, joint,
                              v.name, kScoreName));
    enumeration = static_cast<int64_t>(joint);
    if (asked == kGumbelName)
      return {v.name, kGumbelName,
              fmt::format("asked for: {} values, the model at each, weighted by a relaxed draw",
                          values)};
    return {v.name, kEnumerateName,
            asked == "auto" ? fmt::format("{}: {} values, summed over exactly", type, values)
                            : "asked for"};
  }
  return {v.name, kScoreName,
          asked == "auto"
              ? fmt::format("{}: enumerating it would make {} joint values (more than {})", type,
                            joint, kMaxEnumeration)
              : "asked for"};
}

VariationalFit::Estimator continuous_estimator(const ssm_model& model, const ModelInfo& info,
                                               const VarInfo& v, const std::string& asked) {
  if (asked == kEnumerateName)
    throw Error(fmt::format("vi: enumeration cannot apply to '{}' (continuous): use {} or {}",
                            v.name, kReparamName, kScoreName));
  if (asked == kScoreName)
    return {v.name, kScoreName, "asked for"};
  if (!model.state_gradient) {
    if (asked == kReparamName)
      throw Error(fmt::format("vi: the reparameterisation estimator needs the gradient of the "
                              "log joint density in '{}', which model '{}' lacks ({}): use {}",
                              v.name, info.name, info.no_state_gradient_reason, kScoreName));
    return {v.name, kScoreName,
            fmt::format("continuous, but the model has no state gradient ({})",
                        info.no_state_gradient_reason)};
  }
  const bool bounded = v.lower > -INFINITY || v.upper < INFINITY;
  return {v.name, kReparamName,
          asked == "auto"
              ? fmt::format("continuous: z = {}, the gradient through the model's compiled state "
                            "gradient",
                            bounded ? "mu + sd * eps mapped into its support" : "mu + sd * eps")
              : "asked for"};
}

} // namespace

GuidePlan plan_guide(const ssm_model& model, const ModelInfo& info,
                     const VariationalOptions& options) {
  const auto [all, one] = parse_estimators(info, options.estimators);
  GuidePlan plan;
  for (const VarInfo& v : info.state) {
    if (v.hidden)
      continue;
    const auto it = one.find(v.name);
    const std::string asked = it == one.end() ? all : it->second;
    const std::vector<std::string> cols = column_names(v.name, v.shape);
    const auto rel = std::find_if(info.guide.relations.begin(), info.guide.relations.end(),
                                  [&](const GuideInfo::Relation& r) { return r.latent == v.name; });
    const bool declared = rel != info.guide.relations.end();
    if (declared && options.family == kFullRankName && !v.integer)
      throw Error(fmt::format("vi: --method {} covers every continuous latent with one Gaussian, "
                              "but '{}' has a guide of its own: use --method {}",
                              kFullRankName, v.name, kMeanFieldName));
    if (v.integer) {
      plan.estimators.push_back(discrete_estimator(v, asked, plan.enumeration));
      if (declared)
        plan.estimators.back().why +=
            fmt::format("; its family: the model's guide ({})", rel->dist);
      const std::string& chosen = plan.estimators.back().estimator;
      const bool gumbel = chosen == kGumbelName, enumerate = gumbel || chosen == kEnumerateName;
      for (int64_t k = 0; k < v.size; ++k)
        plan.discrete.push_back({v.offset + k, cols[k], static_cast<int64_t>(v.lower),
                                 static_cast<int64_t>(v.upper - v.lower) + 1, enumerate, gumbel,
                                 declared});
    } else {
      plan.estimators.push_back(continuous_estimator(model, info, v, asked));
      if (declared)
        plan.estimators.back().why +=
            fmt::format("; its family: the model's guide ({})", rel->dist);
      const bool dif = declared && rel->dist == "dif";
      if (dif)
        plan_dif(plan, v, *rel, options);
      for (int64_t k = 0; k < v.size; ++k) {
        plan.continuous_dif.push_back(dif ? static_cast<int>(plan.difs.size()) - 1 : -1);
        if (dif)
          plan.difs.back().columns.push_back(static_cast<int64_t>(plan.continuous.size()));
        plan.continuous_declared.push_back(declared);
        plan.continuous.push_back(v.offset + k);
        plan.continuous_columns.push_back(cols[k]);
        plan.continuous_score.push_back(plan.estimators.back().estimator == kScoreName);
        plan.continuous_lower.push_back(v.lower);
        plan.continuous_upper.push_back(v.upper);
      }
    }
  }
  // Without latents, the model's networks are what vi trains (a language model: by maximum
  // likelihood, the ELBO being log p itself).
  if (plan.estimators.empty() && info.nets.empty())
    throw Error(fmt::format("vi: model '{}' has no latent variables to infer", info.name));
  place_difs(plan, options);
  plan.dense = options.family == kFullRankName ||
               std::any_of(info.guide.relations.begin(), info.guide.relations.end(),
                           [](const GuideInfo::Relation& r) { return r.dist == "mvnormal_chol"; });
  if (plan.dense && !plan.difs.empty())
    throw Error(fmt::format("vi: a guide's mvnormal_chol makes the continuous latents one "
                            "Gaussian, which cannot hold the dif guide of '{}'",
                            plan.difs.front().latent));
  if (plan.dense && !plan.continuous.empty() &&
      std::adjacent_find(plan.continuous_score.begin(), plan.continuous_score.end(),
                         std::not_equal_to<>()) != plan.continuous_score.end())
    throw Error(options.family == kFullRankName
                    ? "vi: the full-rank guide needs one estimator for all continuous latents"
                    : "vi: a guide's mvnormal_chol makes the continuous latents one Gaussian, "
                      "which needs one estimator for all of them");
  const bool gumbel = std::any_of(plan.discrete.begin(), plan.discrete.end(),
                                  [](const GuidePlan::Discrete& g) { return g.gumbel; });
  if (gumbel && options.objective != "elbo")
    throw Error(fmt::format("vi: the {} estimator serves the ELBO (the IWAE bound sums over the "
                            "values of a latent it evaluates at each, which is {})",
                            kGumbelName, kEnumerateName));
  return plan;
}

} // namespace ssm
