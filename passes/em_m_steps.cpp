// em-m-steps: which parameters EM's M-step can update in closed form, and the pieces of the model
// it updates them from. A piece is a relation whose log-density, as a function of its
// parameters, is a conjugate exponential-family term: its maximiser given the E-step's weighted
// points is a ratio of expected counts or a least-squares solution (Cappe, Moulines & Ryden,
// ch. 10-11). Recognised: categorical rows (`z[t] ~ categorical(P[z[t-1]])`), Poisson rates and
// Bernoulli probabilities (`y[t] ~ poisson(rate[z[t]])`), Gaussian means linear in their
// coefficients with a sd, a variance or a covariance parameter (`x[t] ~ normal(a * x[t-1], q)`,
// `y[t] ~ mvnormal(B * x[t], R)`). A parameter is closed-form when every relation that reads it
// is such a piece in one role, and every other parameter those pieces read is closed-form too:
// then the expected log joint separates, and the numerical M-step over the other parameters is
// the same problem without them.
#include "passes.h"

#include "conjugate_forms.h"

#include "ir/printer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

namespace ssm::passes {

namespace {

using namespace conjugate;

// The piece a relation is, or nullopt with `why`.
std::optional<ConjugatePiece> recognise(const ir::Model& model, const ir::Block& block,
                                        const ir::Relation& rel, PieceReader& r, std::string& why) {
  ConjugatePiece piece;
  piece.block = block.kind;
  piece.loc = rel.loc;
  piece.relation =
      ir::relation_summary(ir::print_relation_target(model, block, rel), rel.dist) + where(rel.loc);
  const int size = model.var_shape(rel.kind, rel.var).size();
  const int first =
      rel.kind == ir::VarKind::State ? model.state_offset(rel.var) : model.obs_offset(rel.var);
  for (int k = 0; k < size; ++k)
    piece.target.push_back({rel.kind == ir::VarKind::Obs, first + k, 0});
  auto done = [&](bool ok) -> std::optional<ConjugatePiece> {
    if (!ok) {
      why = r.why.empty() ? "its arguments are not of a recognised form" : r.why;
      return std::nullopt;
    }
    piece.group = r.group;
    piece.groups = r.groups;
    for (const auto& [param, role] : r.roles)
      piece.params.push_back(param);
    return piece;
  };
  switch (rel.dist) {
  case ir::Dist::Categorical: {
    auto rows = r.rows(rel.args[0]);
    piece.family = Family::Categorical;
    if (rows)
      piece.probabilities = *rows;
    return done(rows.has_value());
  }
  case ir::Dist::Poisson:
  case ir::Dist::Bernoulli: {
    piece.family = rel.dist == ir::Dist::Poisson ? Family::Poisson : Family::Bernoulli;
    auto f = r.form(rel.args[0], Role::Rate);
    if (f && (f->terms.size() != 1 || !constant_only(f->offset) || f->offset.constant != 0)) {
      r.fail("its rate is not a parameter times a linear expression of the states and "
             "observations");
      return done(false);
    }
    if (f && piece.family == Family::Bernoulli &&
        (!constant_only(f->terms[0].feature) || f->terms[0].feature.constant != 1)) {
      r.fail("its probability is not a parameter");
      return done(false);
    }
    if (f) {
      piece.rate = f->terms[0].theta;
      piece.exposure = f->terms[0].feature;
    }
    return done(f.has_value());
  }
  case ir::Dist::Normal: {
    piece.family = Family::Normal;
    if (size != 1) {
      why = "a normal over a vector's components has no closed-form update yet (mvnormal has)";
      return std::nullopt;
    }
    auto f = r.form(rel.args[0]);
    if (!f || !r.noise(rel.args[1], piece))
      return done(false);
    piece.offset = {f->offset};
    piece.coefficients = f->terms;
    if (piece.noise_theta.size() > 1)
      for (const auto& c : piece.coefficients)
        if (c.theta.size() != piece.noise_theta.size()) {
          r.fail("its sd depends on a state that a coefficient of its mean does not: "
                 "the coefficients' update would depend on the sd");
          return done(false);
        }
    return done(true);
  }
  case ir::Dist::MvNormal: {
    piece.family = Family::MvNormal;
    const ir::Node& cov = block.nodes[rel.args[1]];
    piece.offset.assign(size, ReadSum{});
    piece.matrix.assign(size, ThetaSlots{});
    if (!r.vector_form(rel.args[0], 1.0, piece)) {
      r.fail("its mean is not a sum of matrix parameters times vectors of states or "
             "observations, vector parameters, and such vectors");
      return done(false);
    }
    if (cov.op == ir::Op::Param && model.params[cov.var].type == ir::ParamType::CovMatrix) {
      if (auto [it, inserted] = r.roles.emplace(cov.var, Role::Noise);
          !inserted && it->second != Role::Noise) {
        r.fail("its mean and covariance share a parameter");
        return done(false);
      }
      piece.noise = Noise::Cov;
      piece.noise_theta = {model.param_offset(cov.var)};
    } else if (cov.op != ir::Op::Const) {
      {
        r.fail("its covariance is not a cov_matrix parameter or a constant");
        return done(false);
      }
    }
    return done(true);
  }
  default:
    why = fmt::format("{} has no closed-form update here", ir::dist_info(rel.dist).name);
    return std::nullopt;
  }
}

// Whether the declared support of `p` holds every value the closed form of `role` can give.
std::string support_problem(const ir::ParamDecl& p, Role role, Family family, Noise noise) {
  const bool positive = p.lower <= 0 && p.upper == INFINITY;
  const bool free = p.lower == -INFINITY && p.upper == INFINITY;
  // A simplex or a cov_matrix is updated whole, only in the role of its structure.
  const bool plain = p.type == ir::ParamType::Real || p.type == ir::ParamType::Vector ||
                     p.type == ir::ParamType::Matrix;
  switch (role) {
  case Role::Probabilities:
    return p.type == ir::ParamType::Simplex || (plain && p.lower <= 0 && p.upper >= 1)
               ? ""
               : "its declared bounds exclude some probabilities";
  case Role::Rate:
    if (!plain)
      return fmt::format("a component of a {} cannot be updated alone",
                         ir::param_type_name(p.type));
    if (family == Family::Bernoulli)
      return p.lower <= 0 && p.upper >= 1 ? "" : "its declared bounds exclude some probabilities";
    return positive ? "" : "its declared bounds exclude some rates";
  case Role::Coefficient:
  case Role::Matrix:
    return free && plain ? "" : "it is bounded, and least squares is not";
  case Role::Noise:
    if (noise == Noise::Cov)
      return p.type == ir::ParamType::CovMatrix ? "" : "its covariance is not a cov_matrix";
    if (!plain)
      return fmt::format("a component of a {} cannot be updated alone",
                         ir::param_type_name(p.type));
    return positive ? "" : "its declared bounds exclude some scales";
  }
  return "";
}

class EmMStepsAnalysis : public Pass {
public:
  std::string_view name() const override { return "em-m-steps"; }
  std::string_view description() const override {
    return "which parameters EM's M-step updates in closed form (conjugate pieces)";
  }

  void run(ir::Model& model, PassContext& context) override {
    if (!model.is_state_space())
      return;
    EmSteps result;
    const size_t n = model.params.size();
    // Per parameter: its pieces and roles, and the first reason it cannot be closed-form.
    std::vector<std::vector<std::pair<int, Role>>> uses(n);
    std::vector<std::string> reason(n);
    std::vector<bool> read(n, false);
    for (const ir::Block* block : {&model.initial, &model.transition, &model.observation}) {
      // A plate model's items (plate-items): its transition copies the initial relations, which
      // hold at every item: one piece each, its block the plate.
      if (model.items && block == &model.transition)
        continue;
      for (const ir::Relation& rel : block->relations) {
        const std::vector<bool> reached = ir::reached_from(*block, rel.args);
        std::set<int> params;
        for (size_t i = 0; i < block->nodes.size(); ++i) {
          const ir::Node& node = block->nodes[i];
          if (reached[i] && node.op == ir::Op::Param)
            params.insert(node.var);
          if (reached[i] && node.op == ir::Op::Obs && node.lag == 0)
            for (int c = 0; c < node.shape.size(); ++c)
              result.observations_read.push_back(model.obs_offset(node.var) + c);
        }
        if (params.empty())
          continue;
        PieceReader reader(model, *block);
        std::string why;
        std::optional<ConjugatePiece> piece = recognise(model, *block, rel, reader, why);
        const std::string relation =
            ir::relation_summary(ir::print_relation_target(model, *block, rel), rel.dist) +
            where(rel.loc);
        for (int p : params) {
          read[p] = true;
          if (!piece) {
            if (reason[p].empty())
              reason[p] = fmt::format("{}: {}", relation, why);
            continue;
          }
          const auto it = reader.roles.find(p);
          if (it == reader.roles.end()) { // read where no role reads it (an index, say)
            if (reason[p].empty())
              reason[p] = fmt::format("{}: it is read outside the piece's forms", relation);
            continue;
          }
          const Role role = it->second;
          uses[p].push_back({static_cast<int>(result.pieces.size()), role});
          if (const std::string bad =
                  support_problem(model.params[p], role, piece->family, piece->noise);
              !bad.empty() && reason[p].empty())
            reason[p] = fmt::format("{}: {}", relation, bad);
        }
        if (piece) { // every parameter it reads, so that one without a role demotes the rest
          piece->params.assign(params.begin(), params.end());
          if (model.items && block == &model.initial)
            piece->block = ir::BlockKind::Plate;
          result.pieces.push_back(std::move(*piece));
        }
      }
    }
    // Roles across pieces: coefficients and matrices belong to one piece; the other roles may be
    // shared by pieces of one family (a mixture's weights in x[0] and x[t], a noise sd shared by
    // several observations) when no piece indexes them per group.
    for (size_t p = 0; p < n; ++p) {
      if (!read[p]) {
        reason[p] = "no relation of the model reads it";
        continue;
      }
      if (!reason[p].empty() || uses[p].size() < 2)
        continue;
      const auto [first, role] = uses[p][0];
      for (size_t u = 1; u < uses[p].size(); ++u) {
        const auto [piece, r] = uses[p][u];
        const ConjugatePiece& a = result.pieces[first];
        const ConjugatePiece& b = result.pieces[piece];
        std::string bad;
        if (r != role)
          bad = fmt::format("it is {} in {} and {} in {}", role_name(role), a.relation,
                            role_name(r), b.relation);
        else if (role == Role::Coefficient || role == Role::Matrix)
          bad =
              fmt::format("it is a {} in both {} and {}", role_name(role), a.relation, b.relation);
        else if (a.family != b.family)
          bad = fmt::format("{} and {} are of different families", a.relation, b.relation);
        else if (role == Role::Noise &&
                 (a.noise != b.noise || a.noise_theta.size() > 1 || b.noise_theta.size() > 1))
          bad = fmt::format("{} and {} use it differently", a.relation, b.relation);
        if (!bad.empty()) {
          reason[p] = bad;
          break;
        }
      }
    }
    // A piece is closed-form only with all its parameters: propagate to a fixed point.
    for (bool changed = true; changed;) {
      changed = false;
      for (const ConjugatePiece& piece : result.pieces) {
        const auto numeric = std::find_if(piece.params.begin(), piece.params.end(),
                                          [&](int p) { return !reason[p].empty(); });
        if (numeric == piece.params.end())
          continue;
        for (int p : piece.params)
          if (reason[p].empty()) {
            reason[p] = fmt::format("{} also reads {}, which has no closed-form update",
                                    piece.relation, model.params[*numeric].name);
            changed = true;
          }
      }
    }
    for (size_t p = 0; p < n; ++p) {
      EmSteps::Verdict v;
      v.param = model.params[p].name;
      v.closed_form = reason[p].empty();
      v.reason = reason[p];
      for (const auto& [piece, role] : uses[p])
        v.pieces.push_back(piece);
      for (const ir::Node& node : model.prior.nodes)
        v.read_by_prior =
            v.read_by_prior || (node.op == ir::Op::Param && node.var == static_cast<int>(p));
      result.params.push_back(std::move(v));
    }
    std::sort(result.observations_read.begin(), result.observations_read.end());
    result.observations_read.erase(
        std::unique(result.observations_read.begin(), result.observations_read.end()),
        result.observations_read.end());
    // (A linear-Gaussian or finite-state model's exact E-step reads no transition density: the
    // hidden copies of a lag-2 model are sample-only, and its EM runs.)
    const bool exact_e_step =
        (context.linear_gaussian && context.linear_gaussian->is_linear_gaussian) ||
        (context.finite_state && context.finite_state->is_finite);
    // An SDE's density is estimated instead (paris's or bis's draws; Q's term from averaged
    // estimates, climbed with the estimates' gradient): sde-estimators says whether they apply.
    if (context.density && !context.density->tractable && !exact_e_step)
      for (const RelationDensity& r : context.density->relations) {
        if (r.kind != DensityKind::SampleOnly)
          continue;
        if (r.dist == "diffusion" && !context.sde) // a pipeline that put em-m-steps first
          create_sde_estimators()->run(model, context);
        if (r.dist == "diffusion" && context.sde) {
          const SdeEstimators& sde = *context.sde;
          const std::string& why = sde.why_not.empty() ? sde.gradient_why_not : sde.why_not;
          if (why.empty())
            result.sde_relation = r.relation;
          else if (result.unavailable.empty())
            result.unavailable = fmt::format("the M-step climbs Q with the gradient of the SDE "
                                             "{}'s log density, which the estimators do not "
                                             "give: {}",
                                             r.relation, why);
        } else if (result.unavailable.empty()) {
          result.unavailable = fmt::format("its E-step evaluates the transition density, and "
                                           "{} is sample-only ({})",
                                           r.relation, r.sample_only_reason);
        }
      }
    context.em_steps = std::move(result);
  }
};

} // namespace

std::string EmSteps::summary() const {
  std::vector<std::string> closed, numeric;
  for (const Verdict& v : params)
    (v.closed_form ? closed : numeric).push_back(v.param);
  if (!unavailable.empty())
    return "EM: does not apply: " + unavailable;
  if (params.empty())
    return "EM M-steps: no parameters";
  if (numeric.empty())
    return fmt::format("EM M-steps: closed form for every parameter ({})", fmt::join(closed, ", "));
  const std::string sde =
      sde_relation.empty()
          ? ""
          : fmt::format(" (the SDE {}'s term of Q from averaged estimates of its density)",
                        sde_relation);
  if (closed.empty())
    return "EM M-steps: numerical for every parameter (no conjugate piece)" + sde;
  return fmt::format("EM M-steps: closed form for {}; numerical for {}{}", fmt::join(closed, ", "),
                     fmt::join(numeric, ", "), sde);
}

std::string EmSteps::report() const {
  std::string out = summary() + "\n";
  if (!unavailable.empty())
    return out;
  for (const Verdict& v : params) {
    if (v.closed_form) {
      std::vector<std::string> from;
      for (int p : v.pieces)
        from.push_back(pieces[p].relation);
      out += fmt::format("  {}: closed form, from {}\n", v.param, fmt::join(from, "; "));
    } else {
      out += fmt::format("  {}: numerical: {}\n", v.param, v.reason);
    }
  }
  return out;
}

std::unique_ptr<Pass> create_em_m_steps() {
  return std::make_unique<EmMStepsAnalysis>();
}

} // namespace ssm::passes
