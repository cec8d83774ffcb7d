// augment-lags: makes the state first-order. A model that reads x[t-K] with K >= 2 gets hidden
// states x@lag1 .. x@lag(K-1), where x@lagk holds x[t-k]: x@lag1[t] is a copy (a dirac relation) of
// x[t-1] and x@lagk[t] of x@lag(k-1)[t-1]; every read of x[t-K] becomes x@lag(K-1)[t-1]. An
// observation, which sees the state at t only, reads x[t-k] (k >= 1) as x@lagk[t]. The kernels
// and the runtime's filters then only ever see x[t-1] in transitions and x[t] in observations. At
// the start the copies take x[0], so x[t-K] reads x[0] while t < K. The runtime does not show
// hidden states.
#include "passes.h"

#include <algorithm>

namespace ssm::passes {

namespace {

class AugmentLags : public Pass {
public:
  std::string_view name() const override { return "augment-lags"; }
  std::string_view description() const override {
    return "carry x[t-k], k >= 2, in hidden states: a first-order state";
  }
  void run(ir::Model& model, PassContext&) override { augment_lags(model); }
};

// The blocks that may read states at lags beyond 1 (the initial block reads t = 0 only).
std::vector<ir::Block*> lagged_blocks(ir::Model& model) {
  return {&model.transition, &model.proposal, &model.lookahead, &model.functional};
}

// target[t] ~ dirac(source[t-lag]), appended to the block.
void add_copy(const ir::Model& model, ir::Block& block, int target, int source, int lag) {
  ir::Node read;
  read.op = ir::Op::State;
  read.var = source;
  read.lag = lag;
  read.shape = model.states[source].shape;
  read.loc = model.states[source].loc;
  ir::Relation rel;
  rel.kind = ir::VarKind::State;
  rel.var = target;
  rel.dist = ir::Dist::Dirac;
  rel.args = {block.add(std::move(read))};
  rel.loc = model.states[target].loc;
  block.relations.push_back(std::move(rel));
}

} // namespace

void augment_lags(ir::Model& model) {
  const size_t own = model.states.size();
  std::vector<int> depth(own, 1); // 1 + the number of hidden copies each state needs
  for (ir::Block* block : lagged_blocks(model))
    for (const ir::Node& n : block->nodes)
      if (n.op == ir::Op::State && n.lag > 1)
        depth.at(n.var) = std::max(depth.at(n.var), n.lag);
  for (const ir::Node& n : model.observation.nodes)
    if (n.op == ir::Op::State && n.lag > 0)
      depth.at(n.var) = std::max(depth.at(n.var), n.lag + 1);
  if (std::all_of(depth.begin(), depth.end(), [](int d) { return d <= 1; }))
    return;
  // hidden[x][k - 1]: the state holding x[t-k]
  std::vector<std::vector<int>> hidden(own);
  for (size_t x = 0; x < own; ++x)
    for (int k = 1; k < depth[x]; ++k) {
      ir::VarDecl h = model.states[x];
      h.name = ir::lagged_state_name(model.states[x].name, k);
      hidden[x].push_back(static_cast<int>(model.states.size()));
      model.states.push_back(std::move(h));
    }
  for (ir::Block* block : lagged_blocks(model))
    for (ir::Node& n : block->nodes)
      if (n.op == ir::Op::State && n.lag > 1) {
        n.var = hidden[n.var][n.lag - 2];
        n.lag = 1;
      }
  for (ir::Node& n : model.observation.nodes)
    if (n.op == ir::Op::State && n.lag > 0) {
      n.var = hidden[n.var][n.lag - 1];
      n.lag = 0;
    }
  const bool proposal = !model.proposal.relations.empty();
  const bool lookahead = !model.lookahead.outputs.empty();
  for (size_t x = 0; x < own; ++x)
    for (size_t k = 1; k <= hidden[x].size(); ++k) {
      const int h = hidden[x][k - 1], previous = k == 1 ? static_cast<int>(x) : hidden[x][k - 2];
      add_copy(model, model.initial, h, static_cast<int>(x), 0);
      add_copy(model, model.transition, h, previous, 1);
      if (proposal)
        add_copy(model, model.proposal, h, previous, 1);
      if (lookahead) { // the copy's prediction is exact
        ir::Node read;
        read.op = ir::Op::State;
        read.var = previous;
        read.lag = 1;
        read.shape = model.states[previous].shape;
        model.lookahead.outputs.push_back(model.lookahead.add(std::move(read)));
      }
    }
}

std::unique_ptr<Pass> create_augment_lags() {
  return std::make_unique<AugmentLags>();
}

} // namespace ssm::passes
