// markov-structure: for each relation, which variables it reads and at which lags (transitively
// through the expression DAG); the Markov order of the state process. `ssmc check` prints it, and
// it is embedded in the compiled model's metadata so `info` can show it.
#include "passes.h"

#include "ir/printer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>
#include <stdexcept>

namespace ssm::passes {

namespace {

std::string lagged_name(const ir::Model& model, ir::BlockKind block, ir::VarKind kind, int var,
                        int lag) {
  const std::string& name = model.var_name(kind, var);
  if (block == ir::BlockKind::Initial)
    return name + "[0]";
  return lag == 0 ? name + "[t]" : fmt::format("{}[t-{}]", name, lag);
}

int state_index(const ir::Model& model, const std::string& name) {
  for (size_t i = 0; i < model.states.size(); ++i)
    if (model.states[i].name == name)
      return static_cast<int>(i);
  throw std::logic_error(fmt::format("internal error: no state '{}'", name));
}

RelationReads analyse(const ir::Model& model, const ir::Block& block, const ir::Relation& rel) {
  RelationReads reads;
  reads.block = block.kind;
  reads.target = ir::print_relation_target(model, block, rel);
  reads.dist =
      rel.dist == ir::Dist::Dirac ? "deterministic" : std::string(ir::dist_info(rel.dist).name);
  reads.loc = rel.loc;

  const std::vector<bool> reached = ir::reached_from(block, rel.args);
  std::set<std::tuple<int, int, int>> vars; // (kind, var, lag), ordered for a stable report
  std::set<int> params;
  for (size_t i = 0; i < block.nodes.size(); ++i) {
    if (!reached[i])
      continue;
    const ir::Node& node = block.nodes[i];
    switch (node.op) {
    case ir::Op::Param:
      params.insert(node.var);
      break;
    case ir::Op::State: // x@lagK[t-l] (lag augmentation) is x[t-K-l]
      if (auto lagged = ir::parse_lagged_state_name(model.states[node.var].name))
        vars.insert({1, state_index(model, lagged->first), node.lag + lagged->second});
      else
        vars.insert({1, node.var, node.lag});
      break;
    case ir::Op::Obs:
      vars.insert({2, node.var, node.lag});
      break;
    case ir::Op::Time:
      reads.reads_time = true;
      break;
    default:
      break;
    }
  }
  if (rel.dist == ir::Dist::Diffusion) // its own x[t] in the drift is the path, not a read
    vars.erase({1, rel.var, 0});
  for (auto [kind, var, lag] : vars) {
    auto vk = kind == 1 ? ir::VarKind::State : ir::VarKind::Obs;
    reads.lagged.push_back(lagged_name(model, block.kind, vk, var, lag));
    if (vk == ir::VarKind::State)
      reads.max_state_lag = std::max(reads.max_state_lag, lag);
  }
  for (int p : params)
    reads.params.push_back(model.params[p].name);
  return reads;
}

class MarkovStructureAnalysis : public Pass {
public:
  std::string_view name() const override { return "markov-structure"; }
  std::string_view description() const override {
    return "lags each relation reads; Markov order of the states";
  }

  void run(ir::Model& model, PassContext& context) override {
    if (!model.is_state_space())
      return; // a state-space analysis: its result stays empty (null in the report)
    MarkovStructure result;
    for (const ir::Block* block :
         {&model.initial, &model.transition, &model.observation, &model.proposal})
      for (const ir::Relation& rel : block->relations)
        if (rel.kind != ir::VarKind::State || !model.states[rel.var].hidden())
          result.relations.push_back(analyse(model, *block, rel));
    for (size_t k = 0; k < model.states.size(); ++k) // lag copies; not a network's output
      if (model.states[k].hidden() && !model.net_call_of(static_cast<int>(k)))
        result.carried.push_back(ir::shown_state_name(model.states[k].name));
    result.states_independent = true;
    for (const RelationReads& r : result.relations)
      if (r.block == ir::BlockKind::Transition) {
        result.order = std::max(result.order, r.max_state_lag);
        if (r.max_state_lag > 0)
          result.states_independent = false;
      }
    context.markov = std::move(result);
  }
};

} // namespace

std::string MarkovStructure::report() const {
  std::string out = fmt::format("Markov order of the states: {}{}\n", order,
                                states_independent ? " (states are independent over time)" : "");
  if (order > 1)
    out += "  (the state carries the values beyond t-1 in hidden copies: first-order for the "
           "kernels)\n";
  else if (!carried.empty())
    out += fmt::format("  (a functional reads values beyond t-1: the state carries {} in hidden "
                       "copies, a transition without a density, so only the smoothers that do "
                       "not evaluate it apply: genealogy, fixed-lag)\n",
                       fmt::join(carried, ", "));
  out += "relations and the lags they read:\n";
  for (const RelationReads& r : relations) {
    std::vector<std::string> parts;
    if (!r.lagged.empty())
      parts.push_back(fmt::format("{}", fmt::join(r.lagged, ", ")));
    if (!r.params.empty())
      parts.push_back(fmt::format("params {}", fmt::join(r.params, ", ")));
    if (r.reads_time)
      parts.push_back("t");
    out +=
        fmt::format("  {:<12} {:<10} {} {:<12} reads {}\n", ir::block_name(r.block), r.target,
                    r.dist == "deterministic" ? "=" : "~", r.dist,
                    parts.empty() ? "constants only" : fmt::format("{}", fmt::join(parts, "; ")));
  }
  return out;
}

std::unique_ptr<Pass> create_markov_structure() {
  return std::make_unique<MarkovStructureAnalysis>();
}

} // namespace ssm::passes
