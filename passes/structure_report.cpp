// The structure report as text and JSON: see structure_report.h.
#include "structure_report.h"

#include "passes.h"

#include "ir/printer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace ssm::passes {

using nlohmann::json;

std::string StructureReason::str() const {
  std::string out = fmt::format("{} {} {}: {}", ir::block_name(block), relation,
                                dist == "dirac" ? "(deterministic)" : "~ " + dist, message);
  if (loc.line > 0)
    out += fmt::format(" at {}:{}", loc.line, loc.col);
  return out;
}

void run_missing_structure_analyses(ir::Model& model, PassContext& context) {
  if (!context.markov)
    create_markov_structure()->run(model, context);
  if (!context.linear_gaussian)
    create_linear_gaussian()->run(model, context);
  if (!context.finite_state)
    create_finite_state()->run(model, context);
  if (!context.density)
    create_density()->run(model, context);
  if (!context.functionals)
    create_additive_functionals()->run(model, context);
  if (!context.sde) // stays empty for a model without an SDE: cheap to run again
    create_sde_estimators()->run(model, context);
  if (!context.em_steps) // after sde-estimators: it reads whether an SDE's estimates apply
    create_em_m_steps()->run(model, context);
}

std::string structure_summary(const PassContext& context) {
  std::string out;
  if (context.markov)
    out += context.markov->report();
  if (context.linear_gaussian)
    out += context.linear_gaussian->summary() + "\n";
  if (context.finite_state)
    out += context.finite_state->summary() + "\n";
  if (context.density)
    out += context.density->summary() + "\n";
  if (context.sde)
    out += context.sde->summary() + "\n";
  if (context.functionals && !context.functionals->functionals.empty())
    out += context.functionals->summary() + "\n";
  if (context.em_steps && !context.em_steps->params.empty())
    out += context.em_steps->summary() + "\n";
  return out;
}

namespace {

// A relation of a plate or simulator block (or of a plate model's guide) and what it reads, in
// the block's own names.
struct StaticRelation {
  std::string kind; // "latent", "observation", "guide"
  std::string target;
  std::string dist; // "deterministic" for obs x = e
  std::vector<std::string> reads, params;
  ir::SourceLoc loc;
};

StaticRelation static_relation(const ir::Model& model, const ir::Block& block,
                               const ir::Relation& rel) {
  StaticRelation r;
  r.kind = block.kind == ir::BlockKind::Guide ? "guide"
           : rel.kind == ir::VarKind::Latent  ? "latent"
                                              : "observation";
  r.target = ir::print_relation_target(model, block, rel);
  r.dist =
      rel.dist == ir::Dist::Dirac ? "deterministic" : std::string(ir::dist_info(rel.dist).name);
  r.loc = rel.loc;
  // A learned density (a dif of a latent, an rnn_lm of a sequence): shown by its network, whose
  // call reads the target itself; the relation reads the call's other arguments.
  int density_net = -1;
  if (rel.dist == ir::Dist::Density && rel.args.size() == 1 && rel.args[0] >= 0 &&
      block.nodes.at(rel.args[0]).op == ir::Op::Net) {
    density_net = block.nodes[rel.args[0]].var;
    std::string kinds = model.nets.at(density_net).kind; // a cascade: "dif over dif over maf"
    for (int k = model.nets[density_net].base; k >= 0; k = model.nets.at(k).base)
      kinds += " over " + model.nets[k].kind;
    r.dist = fmt::format("{} ({})", model.nets.at(density_net).name, kinds);
  }
  const std::vector<bool> reached = ir::reached_from(block, rel.args);
  // (0 latent | 1 obs | 2 network | 3 input, index): declaration order
  std::set<std::pair<int, int>> vars;
  std::set<int> params;
  for (size_t i = 0; i < block.nodes.size(); ++i) {
    if (!reached[i])
      continue;
    const ir::Node& node = block.nodes[i];
    if (node.op == ir::Op::Latent || node.op == ir::Op::Obs || node.op == ir::Op::Net ||
        node.op == ir::Op::Input)
      vars.insert({node.op == ir::Op::Latent ? 0
                   : node.op == ir::Op::Obs  ? 1
                   : node.op == ir::Op::Net  ? 2
                                             : 3,
                   node.var});
    else if (node.op == ir::Op::Param)
      params.insert(node.var);
  }
  std::string item = model.kind == ir::ModelKind::Plate ? "[n]" : "";
  if (density_net >= 0) {
    vars.erase({2, density_net});
    vars.erase({rel.kind == ir::VarKind::Latent ? 0 : 1, rel.var});
  }
  for (const auto& [kind, var] : vars)
    r.reads.push_back(
        kind == 2 ? "network " + model.nets[var].name
        : kind == 3
            ? "input " + model.inputs[var].name + item
            : model.var_name(kind == 0 ? ir::VarKind::Latent : ir::VarKind::Obs, var) + item);
  for (int p : params)
    r.params.push_back(model.params[p].name);
  return r;
}

std::vector<StaticRelation> static_relations(const ir::Model& model) {
  std::vector<StaticRelation> out;
  const ir::Block& own = model.kind == ir::ModelKind::Plate ? model.plate : model.simulator;
  for (const ir::Block* block : {&own, &model.guide})
    for (const ir::Relation& rel : block->relations)
      out.push_back(static_relation(model, *block, rel));
  return out;
}

// Why p(x | params) of a simulator has no closed form (latent variables to integrate over, a
// deterministic observation), or "" when its observation kernel's log-density is the likelihood.
// Before simulator-draws or after it (its latents are then the states after the parameters).
std::string no_likelihood_reason(const ir::Model& model) {
  std::vector<std::string> latents;
  const ir::Block* own = &model.simulator;
  if (model.simulation) {
    own = &model.observation;
    for (size_t s = model.simulation_params; s < model.states.size(); ++s)
      latents.push_back(model.states[s].name);
  } else {
    for (const ir::VarDecl& z : model.latents)
      latents.push_back(z.name);
  }
  if (!latents.empty())
    return fmt::format("it integrates over the latent variable(s) {}", fmt::join(latents, ", "));
  for (const ir::Relation& rel : own->relations)
    if (rel.kind == ir::VarKind::Obs && rel.dist == ir::Dist::Dirac)
      return fmt::format("observation {} is deterministic", model.obs.at(rel.var).name);
  return "";
}

std::string likelihood_line(const ir::Model& model) {
  const std::string why = no_likelihood_reason(model);
  return why.empty() ? "likelihood p(x | parameters): exact (the observation's log-density), so "
                       "posterior --ratio exact applies\n"
                     : fmt::format("likelihood p(x | parameters): intractable: {}\n", why);
}

} // namespace

std::string static_model_report(const ir::Model& model) {
  if (model.is_state_space())
    return "";
  const bool plate = model.kind == ir::ModelKind::Plate;
  std::string out =
      plate ? "static latent-variable model over the i.i.d. plate n: the relations below hold "
              "for each item n independently\n"
            : "simulator: sample-only: each simulation draws its parameters from their priors, "
              "then its latent variables and observations (likelihood-free inference)\n";
  out += plate ? "relations of an item, in sampling order:\n" : "relations, in sampling order:\n";
  const std::vector<StaticRelation> relations = static_relations(model);
  std::size_t width = 10;
  for (const StaticRelation& r : relations)
    width = std::max(width, r.target.size());
  for (const StaticRelation& r : relations) {
    std::string line = fmt::format("  {:<12} {:<{}} {} {:<13}", r.kind, r.target, width,
                                   r.dist == "deterministic" ? "=" : "~", r.dist);
    std::vector<std::string> parts;
    if (!r.reads.empty())
      parts.push_back(fmt::format("{}", fmt::join(r.reads, ", ")));
    if (!r.params.empty())
      parts.push_back(fmt::format("params {}", fmt::join(r.params, ", ")));
    if (!parts.empty())
      line += fmt::format(" reads {}", fmt::join(parts, "; "));
    while (!line.empty() && line.back() == ' ')
      line.pop_back();
    out += line + "\n";
  }
  if (!plate)
    out += "state-space analyses (Markov structure, linear-Gaussian, finite state space, "
           "transition density, functionals): do not apply, the model has no time\n" +
           likelihood_line(model) +
           "inference: likelihood-free: simulate, nre (ratio estimation), posterior\n";
  return out;
}

std::string structure_report(const ir::Model& model, const PassContext& context) {
  if (!model.is_state_space())
    return static_model_report(model);
  if (model.simulation) {
    std::vector<std::string> params, latents, obs;
    for (size_t s = 0; s < model.states.size(); ++s)
      (static_cast<int>(s) < model.simulation_params ? params : latents)
          .push_back(model.states[s].name);
    for (const ir::VarDecl& x : model.obs)
      obs.push_back(x.name);
    const std::string middle =
        latents.empty() ? ""
                        : fmt::format(", then the latent variables ({})", fmt::join(latents, ", "));
    return fmt::format("simulator: each simulation draws the parameters ({}) from their priors{}, "
                       "then the observations ({})\n{}",
                       fmt::join(params, ", "), middle, fmt::join(obs, ", "),
                       likelihood_line(model));
  }
  std::vector<std::string> sections;
  if (context.markov)
    sections.push_back(context.markov->report());
  if (context.linear_gaussian)
    sections.push_back(context.linear_gaussian->report());
  if (context.finite_state)
    sections.push_back(context.finite_state->report());
  if (context.density)
    sections.push_back(context.density->report());
  if (context.sde)
    sections.push_back(context.sde->report());
  if (context.functionals && !context.functionals->functionals.empty())
    sections.push_back(context.functionals->report());
  if (context.em_steps && !context.em_steps->params.empty())
    sections.push_back(context.em_steps->report());
  std::string out;
  for (size_t i = 0; i < sections.size(); ++i)
    out += (i > 0 ? "\n" : "") + sections[i];
  return out;
}

namespace {

json loc_json(const ir::SourceLoc& loc) {
  if (loc.line <= 0)
    return nullptr;
  return {{"line", loc.line}, {"col", loc.col}, {"end_col", loc.end_col}};
}

json string_or_null(const std::string& s) {
  return s.empty() ? json(nullptr) : json(s);
}

json reasons_json(const std::vector<StructureReason>& reasons) {
  json out = json::array();
  for (const StructureReason& r : reasons)
    out.push_back({{"block", ir::block_name(r.block)},
                   {"relation", r.relation},
                   {"dist", r.dist},
                   {"variable", string_or_null(r.variable)},
                   {"lag", r.lag >= 0 ? json(r.lag) : json(nullptr)},
                   {"message", r.message},
                   {"loc", loc_json(r.loc)}});
  return out;
}

json markov_json(const MarkovStructure& m) {
  json relations = json::array();
  for (const RelationReads& r : m.relations)
    relations.push_back({{"block", ir::block_name(r.block)},
                         {"target", r.target},
                         {"dist", r.dist},
                         {"reads", r.lagged},
                         {"params", r.params},
                         {"reads_time", r.reads_time},
                         {"max_state_lag", r.max_state_lag},
                         {"loc", loc_json(r.loc)}});
  return {
      {"order", m.order}, {"states_independent", m.states_independent}, {"relations", relations}};
}

json linear_gaussian_json(const LinearGaussian& lg) {
  json matrices = nullptr;
  if (lg.is_linear_gaussian) {
    matrices = json::object();
    for (const SymbolicValue& v : lg.matrices)
      matrices[v.name] = {{"expr", v.text},
                          {"shape", v.shape.dims},
                          {"value", v.value ? json(*v.value) : json(nullptr)}};
  }
  return {{"is_linear_gaussian", lg.is_linear_gaussian},
          {"time_varying", lg.time_varying},
          {"state", lg.state_names},
          {"obs", lg.obs_names},
          {"matrices", matrices},
          {"notes", lg.notes},
          {"reasons", reasons_json(lg.reasons)}};
}

json finite_state_json(const FiniteState& fs) {
  json states = json::array();
  for (const StateSupport& s : fs.states)
    states.push_back({{"name", ir::shown_state_name(s.name)},
                      {"components", s.components},
                      {"finite", s.finite},
                      {"lo", s.finite ? json(s.lo) : json(nullptr)},
                      {"hi", s.finite ? json(s.hi) : json(nullptr)},
                      {"reason", string_or_null(s.reason)},
                      {"leaves", string_or_null(s.leaves)}});
  return {{"is_finite", fs.is_finite},
          {"size", fs.is_finite ? json(fs.size) : json(nullptr)},
          {"states", states},
          {"reasons", reasons_json(fs.reasons)}};
}

json bound_json(const std::optional<DensityBound>& b) {
  if (!b)
    return nullptr;
  return {{"expr", b->text},
          {"exact", b->exact},
          {"condition", string_or_null(b->condition)},
          {"constant_in_state", b->constant_in_state()},
          {"depends_on", b->depends_on},
          {"reads_next_state", b->reads_next_state}};
}

json density_json(const TransitionDensity& d) {
  json relations = json::array();
  for (const RelationDensity& r : d.relations)
    relations.push_back({{"relation", r.relation},
                         {"dist", r.dist},
                         {"kind", r.kind == DensityKind::Tractable ? "tractable" : "sample_only"},
                         {"sample_only_reason", string_or_null(r.sample_only_reason)},
                         {"bound", bound_json(r.bound)},
                         {"no_bound_reason", string_or_null(r.no_bound_reason)},
                         {"loc", loc_json(r.loc)}});
  return {{"tractable", d.tractable},
          {"bound", bound_json(d.bound)},
          {"no_bound_reason", string_or_null(d.no_bound_reason)},
          {"relations", relations}};
}

json sde_json(const SdeEstimators& e) {
  const char* coefficient[] = {"scalar", "vector", "matrix"};
  return {{"relation", e.relation},
          {"state", e.state},
          {"dim", e.dim},
          {"steps", e.steps},
          {"coefficient", coefficient[static_cast<int>(e.coefficient)]},
          {"coefficient_constant", e.coefficient_constant},
          {"why_not", string_or_null(e.why_not)},
          {"gpe",
           {{"available", e.gpe_why_not.empty()},
            {"reason", string_or_null(e.gpe_why_not)},
            {"positive", e.psi_bounded_above()},
            {"bounded", e.estimates_bounded()},
            {"psi_lower", string_or_null(e.psi_lower_text)},
            {"psi_upper", string_or_null(e.psi_upper_text)},
            {"psi_lower_given", e.psi_lower_given},
            {"psi_upper_given", e.psi_upper_given},
            {"exact_bridges", e.exact_bridges()}}},
          {"parametrix",
           {{"available", e.parametrix_why_not.empty()},
            {"reason", string_or_null(e.parametrix_why_not)},
            {"rows", e.parametrix_rows}}},
          {"gradient",
           {{"available", e.gradient_why_not.empty()},
            {"reason", string_or_null(e.gradient_why_not)},
            {"rows", e.gradient_rows},
            {"coefficient_rows", e.coefficient_gradient_rows}}},
          {"loc", loc_json(e.loc)}};
}

json functionals_json(const AdditiveFunctionals& a) {
  json out = json::array();
  for (const FunctionalStructure& f : a.functionals)
    out.push_back({{"name", f.name},
                   {"declared_sum", f.declared_sum},
                   {"additive", f.additive},
                   {"max_state_lag", f.max_state_lag},
                   {"reads", f.reads},
                   {"why_not", string_or_null(f.why_not)},
                   {"methods", f.methods},
                   {"methods_note", string_or_null(f.methods_note)},
                   {"loc", loc_json(f.loc)}});
  return out;
}

json point_read_json(const PointRead& r) {
  return json::array({r.obs ? "obs" : r.input ? "input" : "state", r.offset, r.lag});
}

json read_sum_json(const ReadSum& r) {
  json terms = json::array();
  for (const auto& [coef, read] : r.terms)
    terms.push_back({coef,
                     read.obs     ? "obs"
                     : read.input ? "input"
                                  : "state",
                     read.offset, read.lag});
  return {{"constant", r.constant}, {"terms", terms}};
}

json em_steps_json(const EmSteps& e) {
  static constexpr const char* kFamilies[] = {"categorical", "poisson", "bernoulli", "normal",
                                              "mvnormal"};
  static constexpr const char* kNoises[] = {"constant", "sd", "variance", "cov"};
  json pieces = json::array();
  for (const ConjugatePiece& p : e.pieces) {
    json target = json::array(), offset = json::array(), features = json::array(),
         coefficients = json::array(), params = json::array();
    for (const PointRead& r : p.target)
      target.push_back(point_read_json(r));
    for (const ReadSum& r : p.offset)
      offset.push_back(read_sum_json(r));
    for (const ReadSum& r : p.features)
      features.push_back(read_sum_json(r));
    for (const auto& c : p.coefficients)
      coefficients.push_back({{"theta", c.theta}, {"feature", read_sum_json(c.feature)}});
    pieces.push_back({{"relation", p.relation},
                      {"block", ir::block_name(p.block)},
                      {"family", kFamilies[static_cast<int>(p.family)]},
                      {"loc", loc_json(p.loc)},
                      {"target", target},
                      {"group", p.group ? point_read_json(*p.group) : json(nullptr)},
                      {"groups", p.groups},
                      {"probabilities", p.probabilities},
                      {"rate", p.rate},
                      {"exposure", read_sum_json(p.exposure)},
                      {"offset", offset},
                      {"coefficients", coefficients},
                      {"matrix", p.matrix},
                      {"features", features},
                      {"noise", kNoises[static_cast<int>(p.noise)]},
                      {"noise_theta", p.noise_theta}});
    if (p.family == ConjugatePiece::Family::Normal && p.noise == ConjugatePiece::Noise::Constant)
      // its sd, for Gibbs's conditionals
      pieces.back()["noise_value"] = p.noise_value;
  }
  json params = json::array();
  for (const EmSteps::Verdict& v : e.params)
    params.push_back({{"name", v.param},
                      {"closed_form", v.closed_form},
                      {"pieces", v.pieces},
                      {"reason", string_or_null(v.reason)},
                      {"read_by_prior", v.read_by_prior}});
  return {{"pieces", pieces},
          {"params", params},
          {"observations_read", e.observations_read},
          {"unavailable", string_or_null(e.unavailable)},
          {"sde_relation", string_or_null(e.sde_relation)}};
}

template <class T, class F> json or_null(const std::optional<T>& result, F&& f) {
  return result ? f(*result) : json(nullptr);
}

} // namespace

json static_model_json(const ir::Model& model) {
  const bool plate = model.kind == ir::ModelKind::Plate;
  json latents = json::array(), relations = json::array();
  for (const ir::VarDecl& z : model.latents)
    latents.push_back(z.name);
  for (const StaticRelation& r : static_relations(model))
    relations.push_back({{"kind", r.kind},
                         {"target", r.target},
                         {"dist", r.dist},
                         {"reads", r.reads},
                         {"params", r.params},
                         {"loc", loc_json(r.loc)}});
  return {{"plate", plate ? json("n") : json(nullptr)},
          {"n_latent", model.latents.size()},
          {"latents", latents},
          {"relations", relations},
          {"inference_available", true}};
}

json structure_json(const ir::Model& model, const PassContext& context) {
  json out = {{"model", model.name},
              {"source", model.source_file},
              {"n_state", model.state_size()},
              {"n_obs", model.obs_size()},
              {"n_theta", model.theta_size()}};
  out["markov"] = or_null(context.markov, markov_json);
  out["linear_gaussian"] = or_null(context.linear_gaussian, linear_gaussian_json);
  out["finite_state"] = or_null(context.finite_state, finite_state_json);
  out["density"] = or_null(context.density, density_json);
  out["sde"] = or_null(context.sde, sde_json);
  out["functionals"] = or_null(context.functionals, functionals_json);
  out["em_steps"] = or_null(context.em_steps, em_steps_json);
  out["guide"] = state_guide_json(model);
  if (model.items)
    out["items"] = "n";
  if (model.simulation) { // its one step is how it runs, not a time series to analyse
    for (const char* analysis :
         {"markov", "linear_gaussian", "finite_state", "density", "functionals", "em_steps"})
      out[analysis] = nullptr;
    out["simulation"] = {{"params", model.simulation_params},
                         {"likelihood", no_likelihood_reason(model).empty()},
                         {"no_likelihood_reason", no_likelihood_reason(model)}};
  }
  if (!model.is_state_space()) {
    out["model_kind"] = model.kind == ir::ModelKind::Plate ? "plate" : "simulator";
    out["static_model"] = static_model_json(model);
  }
  return out;
}

namespace {

// The relation of `guide x[t] ~ backward(...)`, if the model is a state-space model with one.
const ir::Relation* state_guide(const ir::Model& model) {
  if (!model.is_state_space() || model.simulation)
    return nullptr;
  for (const ir::Relation& rel : model.guide.relations)
    if (rel.dist == ir::Dist::Backward && rel.args.size() == 1 && rel.args[0] >= 0)
      return &rel;
  return nullptr;
}

// The observations the encoder reads, "y[t]", in order.
std::vector<std::string> state_guide_reads(const ir::Model& model, const ir::Node& encoder) {
  std::vector<std::string> reads;
  if (encoder.op == ir::Op::Obs)
    reads.push_back(model.obs.at(encoder.var).name + "[t]");
  else
    for (int a : encoder.args)
      reads.push_back(model.obs.at(model.guide.nodes.at(a).var).name + "[t]");
  return reads;
}

} // namespace

std::string state_guide_report(const ir::Model& model) {
  const ir::Relation* rel = state_guide(model);
  if (!rel)
    return "";
  const ir::Node& encoder = model.guide.nodes.at(rel->args[0]);
  const std::vector<std::string> reads = state_guide_reads(model, encoder);
  const std::string target = ir::print_relation_target(model, model.guide, *rel);
  std::string out;
  if (encoder.op == ir::Op::Net) {
    const ir::NetDecl& net = model.nets.at(encoder.var);
    out = fmt::format("guide {} ~ backward({}({})) (smooth --method variational): a backward "
                      "Gaussian whose q_t takes in {} through network {} ({}, {} -> {})",
                      target, net.name, fmt::join(reads, ", "), fmt::join(reads, ", "), net.name,
                      net.kind, net.inputs, net.outputs);
  } else {
    out = fmt::format("guide {} ~ backward({}) (smooth --method variational): a backward Gaussian "
                      "whose q_t takes in {} by a learned linear-Gaussian update",
                      target, fmt::join(reads, ", "), fmt::join(reads, ", "));
  }
  if (rel->loc.line > 0)
    out += fmt::format(" at {}:{}", rel->loc.line, rel->loc.col);
  return out + "\n";
}

json state_guide_json(const ir::Model& model) {
  const ir::Relation* rel = state_guide(model);
  if (!rel)
    return nullptr;
  const ir::Node& encoder = model.guide.nodes.at(rel->args[0]);
  const bool mlp = encoder.op == ir::Op::Net;
  return {{"state", model.states.at(rel->var).name},
          {"encoder", mlp ? "mlp" : "linear"},
          {"network", mlp ? json(model.nets.at(encoder.var).name) : json(nullptr)},
          {"reads", state_guide_reads(model, encoder)},
          {"loc", loc_json(rel->loc)}};
}

std::string declared_inputs_report(const ir::Model& model) {
  auto list = [](const std::vector<ir::VarDecl>& vars) {
    std::vector<std::string> items;
    for (const ir::VarDecl& v : vars)
      items.push_back(fmt::format("{} : {}", v.name, ir::type_str(v)));
    return fmt::format("{}", fmt::join(items, ", "));
  };
  std::string out;
  const bool per_item = model.items || model.kind == ir::ModelKind::Plate;
  if (!model.inputs.empty() && per_item)
    out += fmt::format("covariates per item (columns of --data; simulate: --inputs FILE.csv): {}\n",
                       list(model.inputs));
  else if (!model.inputs.empty())
    out += fmt::format("inputs (--inputs FILE.csv): {}\n", list(model.inputs));
  if (!model.data.empty())
    out += fmt::format("data items (--data-file FILE.json): {}\n", list(model.data));
  return out;
}

} // namespace ssm::passes
