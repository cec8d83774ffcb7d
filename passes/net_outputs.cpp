// net-outputs: each call of a network becomes a hidden state, `NET@net` (`NET@net2`, ... for
// further calls with other arguments), that the relations read at lag 0 in its place. The state
// has no relation: the runtime applies the network to the call's arguments (latents at the same
// step, parameters, data) before it runs a kernel, and writes the output into the state's slot.
// The kernels, the analyses and the derivatives then see a model without networks, and the
// state_gradient kernel's derivative in that slot is where the model's density meets the
// network's own gradient (LibTorch's autograd; runtime/nn/compiled_density.h). A state-space
// model's guide keeps its encoder's call (runtime/vsmooth applies it).
#include "passes.h"

#include <fmt/format.h>

#include <map>
#include <tuple>

namespace ssm::passes {

namespace {

class NetOutputs : public Pass {
public:
  std::string_view name() const override { return "net-outputs"; }
  std::string_view description() const override {
    return "each network call as a hidden state that the runtime computes";
  }
  void run(ir::Model& model, PassContext&) override { hoist_net_calls(model); }
};

} // namespace

void hoist_net_calls(ir::Model& model) {
  if (!model.is_state_space())
    return; // a plate model's calls wait for plate-items, which makes its latents states
  using Leaf = std::tuple<int, int, int>;                  // op, var, lag
  std::map<std::pair<int, std::vector<Leaf>>, int> states; // (net, arguments) -> state
  std::vector<int> calls_per_net(model.nets.size(), 0);
  model.for_each_block([&](ir::Block& block) {
    // A state-space model's guide (backward): its encoder is the runtime's (runtime/vsmooth), on
    // the observations' columns; no kernel reads it, so it stays a call in the guide.
    if (&block == &model.guide && !model.items)
      return;
    for (ir::Node& node : block.nodes) {
      if (node.op != ir::Op::Net)
        continue;
      std::vector<Leaf> key;
      std::vector<ir::Node> args;
      for (int a : node.args) {
        ir::Node leaf = block.nodes[a];
        leaf.args.clear();
        key.emplace_back(static_cast<int>(leaf.op), leaf.var, leaf.lag);
        args.push_back(std::move(leaf));
      }
      auto [it, added] = states.try_emplace({node.var, key}, -1);
      if (added) {
        const ir::NetDecl& net = model.nets.at(node.var);
        const int k = ++calls_per_net[node.var];
        ir::VarDecl state;
        state.name = k == 1 ? net.name + "@net" : fmt::format("{}@net{}", net.name, k);
        state.shape = node.shape;
        state.loc = node.loc;
        it->second = static_cast<int>(model.states.size());
        model.states.push_back(std::move(state));
        model.net_calls.push_back({node.var, it->second, std::move(args)});
      }
      node.op = ir::Op::State;
      node.var = it->second;
      node.lag = 0;
      node.args.clear();
    }
  });
}

std::unique_ptr<Pass> create_net_outputs() {
  return std::make_unique<NetOutputs>();
}

} // namespace ssm::passes
