// Model metadata: see model_metadata.h; the format is documented in docs/abi.md.
#include "model_metadata.h"

#include "ir/printer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>

namespace ssm::codegen {

namespace {

using nlohmann::json;

json bound(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}

// Offsets are into the state or observation vector, or (data, inputs) into the frame. Data items
// carry their declared type, which the runtime checks their values against.
json variables(const std::vector<ir::VarDecl>& decls, int offset, const ir::Block* block,
               bool data = false) {
  json out = json::array();
  for (size_t i = 0; i < decls.size(); ++i) {
    json v = {{"name", decls[i].name},
              {"shape", decls[i].shape.dims},
              {"offset", offset},
              {"size", decls[i].shape.size()}};
    if (data)
      v["type"] = ir::type_name(decls[i]);
    if (decls[i].constraint == ir::Constraint::Sequence) // its slot holds its length
      v["sequence"] = true;
    if (decls[i].integer) {
      v["integer"] = {bound(decls[i].lower), bound(decls[i].upper)};
    } else if (decls[i].bounded()) { // real(lo, hi) data
      v["lower"] = bound(decls[i].lower);
      v["upper"] = bound(decls[i].upper);
    }
    if (block && block->kind == ir::BlockKind::Observation) {
      bool joint = false;
      for (const ir::Relation& rel : block->relations)
        if (rel.var == static_cast<int>(i))
          joint = ir::dist_info(rel.dist).joint;
      v["joint"] = joint;
    }
    out.push_back(v);
    offset += decls[i].shape.size();
  }
  return out;
}

// A plate model's latents (the states of its items) carry the support of their distribution
// when it is bounded, so that a variational guide can respect it (runtime/vi/guide.h).
json states(const ir::Model& model) {
  json out = variables(model.states, 0, nullptr, false);
  if (!model.items)
    return out;
  for (const ir::Relation& rel : model.initial.relations)
    if (rel.kind == ir::VarKind::State && rel.var >= 0 && !model.states[rel.var].integer)
      if (const auto support = ir::continuous_support(model.initial, rel)) {
        out[rel.var]["lower"] = bound(support->first);
        out[rel.var]["upper"] = bound(support->second);
      }
  return out;
}

std::string const_str(const ir::Node& node) {
  return node.values.size() == 1 ? fmt::format("{}", node.values[0])
                                 : fmt::format("[{}]", fmt::join(node.values, ", "));
}

// The networks and their calls (passes/net_outputs.cpp): what the runtime applies, to what, and
// where the output goes. An argument's offset is into the state for a state, into the frame for a
// parameter or a data item, into the item's inputs for a covariate.
json nets(const ir::Model& model) {
  json out = json::array();
  for (const ir::NetDecl& n : model.nets) {
    json net = {{"name", n.name},       {"kind", n.kind},     {"inputs", n.inputs},
                {"outputs", n.outputs}, {"hidden", n.hidden}, {"activation", n.activation}};
    if (n.density()) // a density over vector[dim], given inputs - dim context values
      net.update(
          {{"dim", n.dim}, {"components", n.components}, {"layers", n.layers}, {"maps", n.maps}});
    if (n.base >= 0) // a cascade: the density it transports onto
      net["base"] = n.base;
    if (n.kind == "embedding") // a vector of `outputs` values per token 0..vocab-1
      net["vocab"] = n.vocab;
    if (n.over_sequences()) // reads a sequence (its first input), then inputs - 1 context values
      net.update(
          {{"vocab", n.vocab}, {"embedding", n.embedding}, {"layers", n.layers}, {"cell", n.cell}});
    out.push_back(std::move(net));
  }
  return out;
}

// A call's argument (a leaf: ir::NetCall): its kind, name and offset.
json net_argument(const ir::Model& model, const ir::Node& a) {
  json arg = {{"size", a.shape.size()}};
  if (a.op == ir::Op::State)
    arg.update({{"kind", "state"},
                {"name", model.states[a.var].name},
                {"offset", model.state_offset(a.var)}});
  else if (a.op == ir::Op::Param)
    arg.update({{"kind", "param"},
                {"name", model.params[a.var].name},
                {"offset", model.param_offset(a.var)}});
  else if (a.op == ir::Op::Obs) // a guide's network: the offset is into the item's observations
    arg.update(
        {{"kind", model.obs[a.var].constraint == ir::Constraint::Sequence ? "sequence" : "obs"},
         {"name", model.obs[a.var].name},
         {"offset", model.obs_offset(a.var)}});
  else if (a.op == ir::Op::Input) // a covariate: the offset is into the item's inputs
    arg.update({{"kind", "input"},
                {"name", model.inputs[a.var].name},
                {"offset", model.input_offset(a.var) - model.input_offset(0)}});
  else
    arg.update(
        {{"kind", "data"}, {"name", model.data[a.var].name}, {"offset", model.data_offset(a.var)}});
  return arg;
}

// The guide's relations, where their arguments are in the guide_args kernel's output (the
// Jacobian follows them), and the network outputs it reads (the Jacobian's columns).
json guide(const ir::Model& model) {
  json relations = json::array();
  int offset = 0;
  for (const ir::Relation& rel : model.guide.relations) {
    json args = json::array();
    for (int a : rel.args) {
      const int size = model.guide.nodes[a].shape.size();
      args.push_back({{"offset", offset}, {"size", size}});
      offset += size;
    }
    relations.push_back({{"latent", model.states[rel.var].name},
                         {"dist", ir::dist_info(rel.dist).name},
                         {"offset", model.state_offset(rel.var)},
                         {"size", model.states[rel.var].shape.size()},
                         {"arguments", args}});
    if (rel.dist == ir::Dist::Dif) // its sizes, constants (ir/verifier.cpp)
      for (size_t k = 1; k < rel.args.size(); ++k)
        relations.back()[std::string(ir::dist_info(rel.dist).arg_names[k])] =
            static_cast<int64_t>(model.guide.nodes[rel.args[k]].values.at(0));
  }
  json inputs = json::array();
  std::set<int> observations; // read directly or by the guide's networks
  for (int s : model.guide_input_states()) {
    inputs.push_back({{"state", model.states[s].name},
                      {"offset", model.state_offset(s)},
                      {"size", model.states[s].shape.size()}});
    for (const ir::Node& a : model.net_call_of(s)->args)
      if (a.op == ir::Op::Obs)
        observations.insert(a.var);
  }
  for (const ir::Node& n : model.guide.nodes)
    if (n.op == ir::Op::Obs)
      observations.insert(n.var);
  json reads = json::array();
  for (int o : observations)
    reads.push_back({{"name", model.obs[o].name},
                     {"offset", model.obs_offset(o)},
                     {"size", model.obs[o].shape.size()}});
  return {{"relations", relations},
          {"n_arguments", offset},
          {"inputs", inputs},
          {"observations", reads}};
}

// A state-space model's guide (`guide x[t] ~ backward(...)`): its state, its encoder (a network
// by index into "nets", or linear) and the observations the encoder reads, in order.
json backward_guide(const ir::Model& model) {
  const ir::Relation& rel = model.guide.relations.at(0);
  const ir::Node& enc = model.guide.nodes.at(rel.args.at(0));
  json reads = json::array();
  for (int a : enc.op == ir::Op::Net ? enc.args : std::vector<int>{rel.args[0]}) {
    const int o = model.guide.nodes.at(a).var;
    reads.push_back({{"name", model.obs[o].name},
                     {"offset", model.obs_offset(o)},
                     {"size", model.obs[o].shape.size()}});
  }
  json g = {{"state", model.states[rel.var].name},
            {"encoder", enc.op == ir::Op::Net ? "mlp" : "linear"},
            {"observations", reads},
            {"where", fmt::format("{}:{}:{}",
                                  rel.loc.file == 0 ? model.source_file
                                                    : model.imported_files.at(rel.loc.file - 1),
                                  rel.loc.line, rel.loc.col)}};
  if (enc.op == ir::Op::Net)
    g["net"] = enc.var;
  return g;
}

json net_calls(const ir::Model& model) {
  json out = json::array();
  for (const ir::NetCall& c : model.net_calls) {
    json args = json::array();
    for (const ir::Node& a : c.args)
      args.push_back(net_argument(model, a));
    out.push_back({{"net", c.net},
                   {"state", model.states[c.state].name},
                   {"offset", model.state_offset(c.state)},
                   {"size", model.states[c.state].shape.size()},
                   {"guide", model.guide_only_state(c.state)},
                   {"arguments", args}});
  }
  return out;
}

bool reads_previous_obs(const ir::Block& block) {
  return std::any_of(block.nodes.begin(), block.nodes.end(),
                     [](const ir::Node& n) { return n.op == ir::Op::Obs && n.lag == 1; });
}

} // namespace

std::string model_metadata_json(const ir::Model& model, const std::string& structure,
                                const std::string& runtime_dir) {
  json params = json::array();
  for (size_t i = 0; i < model.params.size(); ++i) {
    const ir::ParamDecl& p = model.params[i];
    json entry = {{"name", p.name},
                  {"type", ir::param_type_name(p.type)},
                  {"shape", p.shape.dims},
                  {"offset", model.param_offset(static_cast<int>(i))},
                  {"size", p.shape.size()},
                  {"default", p.default_value ? json(*p.default_value) : json(nullptr)},
                  {"lower", nullptr},
                  {"upper", nullptr},
                  {"prior", nullptr}};
    for (const ir::Relation& rel : model.prior.relations) {
      if (rel.var != static_cast<int>(i))
        continue;
      const ir::DistInfo& info = ir::dist_info(rel.dist);
      std::vector<std::string> args;
      for (int a : rel.args)
        args.push_back(model.prior.nodes[a].op == ir::Op::Const
                           ? const_str(model.prior.nodes[a])
                           : ir::print_expr(model, model.prior, a)); // reads parameters
      entry["prior"] = fmt::format("{}({})", info.name, fmt::join(args, ", "));
      double lower = info.lower, upper = info.upper;
      // Distributions whose support is given by arguments (lo, hi).
      bool bounded_by_args = info.support_from >= 0;
      size_t lo = static_cast<size_t>(info.support_from), hi = lo + 1;
      if (bounded_by_args && model.prior.nodes[rel.args[lo]].shape.is_scalar() &&
          model.prior.nodes[rel.args[hi]].shape.is_scalar()) {
        lower = model.prior.nodes[rel.args[lo]].values[0];
        upper = model.prior.nodes[rel.args[hi]].values[0];
      }
      entry["lower"] = bound(lower);
      entry["upper"] = bound(upper);
    }
    // Declared bounds, real(lo, hi), narrow the prior's support.
    if (p.lower > -INFINITY && (entry["lower"].is_null() || entry["lower"].get<double>() < p.lower))
      entry["lower"] = p.lower;
    if (p.upper < INFINITY && (entry["upper"].is_null() || entry["upper"].get<double>() > p.upper))
      entry["upper"] = p.upper;
    params.push_back(entry);
  }
  json functionals = json::array();
  int component = 0;
  for (size_t i = 0; i < model.functionals.size(); ++i) {
    const ir::Shape& shape = model.functional.nodes[model.functional.outputs[i]].shape;
    functionals.push_back({{"name", model.functionals[i].name},
                           {"additive", model.functionals[i].additive},
                           {"shape", shape.dims},
                           {"offset", component},
                           {"size", shape.size()}});
    component += shape.size();
  }
  json meta = {{"name", model.name},
               {"source", model.source_file},
               {"n_state", model.state_size()},
               {"n_obs", model.obs_size()},
               {"n_theta", model.theta_size()},
               {"n_frame", model.frame_size()},
               {"previous_obs_offset", model.previous_obs_offset(0)},
               {"state", states(model)},
               {"obs", variables(model.obs, 0, &model.observation, false)},
               {"data", variables(model.data, 0, nullptr, true)},
               {"data_offset", model.data_offset(0)},
               {"inputs", variables(model.inputs, 0, nullptr, false)},
               {"input_offset", model.input_offset(0)},
               {"functionals", functionals},
               {"reads_previous_obs",
                reads_previous_obs(model.transition) || reads_previous_obs(model.proposal)},
               {"params", params},
               {"structure", json::parse(structure)}};
  if (!model.nets.empty()) {
    meta["nets"] = nets(model);
    meta["net_calls"] = net_calls(model);
  }
  if (!model.guide.relations.empty() && !model.items)
    meta["backward_guide"] = backward_guide(model);
  else if (!model.guide.relations.empty())
    meta["guide"] = guide(model);
  if (!runtime_dir.empty())
    meta["runtime_dir"] = runtime_dir;
  return meta.dump();
}

} // namespace ssm::codegen
