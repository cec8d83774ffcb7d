// Model metadata: see ModelMetadata.h; the format is documented in docs/abi.md.
#include "ModelMetadata.h"

#include "ir/Printer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <cmath>

namespace ssm::codegen {

namespace {

using nlohmann::json;

json bound(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}

json variables(const ir::Model& model, ir::VarKind kind, const std::vector<ir::VarDecl>& decls,
               const ir::Block& block) {
  json out = json::array();
  int offset = 0;
  for (size_t i = 0; i < decls.size(); ++i) {
    json v = {{"name", decls[i].name},
              {"shape", decls[i].shape.dims},
              {"offset", offset},
              {"size", decls[i].shape.size()}};
    if (kind == ir::VarKind::Obs) {
      bool joint = false;
      for (const ir::Relation& rel : block.relations)
        if (rel.var == static_cast<int>(i))
          joint = ir::dist_info(rel.dist).joint;
      v["joint"] = joint;
    }
    out.push_back(v);
    offset += decls[i].shape.size();
  }
  (void)model;
  return out;
}

std::string const_str(const ir::Node& node) {
  return node.values.size() == 1 ? fmt::format("{}", node.values[0])
                                 : fmt::format("[{}]", fmt::join(node.values, ", "));
}

} // namespace

std::string model_metadata_json(const ir::Model& model, const std::string& structure) {
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
        args.push_back(const_str(model.prior.nodes[a]));
      entry["prior"] = fmt::format("{}({})", info.name, fmt::join(args, ", "));
      double lower = info.lower, upper = info.upper;
      if (rel.dist == ir::Dist::Uniform && model.prior.nodes[rel.args[0]].shape.is_scalar() &&
          model.prior.nodes[rel.args[1]].shape.is_scalar()) {
        lower = model.prior.nodes[rel.args[0]].values[0];
        upper = model.prior.nodes[rel.args[1]].values[0];
      }
      entry["lower"] = bound(lower);
      entry["upper"] = bound(upper);
    }
    params.push_back(entry);
  }
  json meta = {{"name", model.name},
               {"source", model.source_file},
               {"n_state", model.state_size()},
               {"n_obs", model.obs_size()},
               {"n_theta", model.theta_size()},
               {"state", variables(model, ir::VarKind::State, model.states, model.transition)},
               {"obs", variables(model, ir::VarKind::Obs, model.obs, model.observation)},
               {"params", params},
               {"structure", json::parse(structure)}};
  return meta.dump();
}

} // namespace ssm::codegen
