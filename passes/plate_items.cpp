// plate-items: a model over the i.i.d. plate n becomes a state-space model whose steps are its
// items. The likelihood of items x_0 .. x_{N-1} is prod_n p(x_n) = prod_n sum_z p(z) p(x_n | z),
// which is the likelihood of a state-space model with one step per item, whose initial and
// transition densities are the latents' prior p(z) (the transition ignores the previous state:
// items are independent) and whose observation density is p(x_n | z). Every method of
// state-space models then applies to plate models through the same kernels, and exactly where
// the structure allows: the forward algorithm for finite latents (a mixture), Kalman for
// linear-Gaussian ones (factor analysis), the smoothers' marginals as each item's posterior,
// Viterbi as each item's most probable latent value, the score, optimize, EM and PMMH. The model
// keeps `items` set so that reports and the runtime speak of items n, not times t.
#include "passes.h"

#include "ir/rewrite.h"

namespace ssm::passes {

namespace {

// The plate block as a block of `kind` with the relations whose target is of `keep`, latents read
// as states at t; nodes that no kept relation reaches are dropped.
ir::Block items_block(const ir::Block& plate, ir::BlockKind kind, ir::VarKind keep) {
  ir::Block block = plate;
  block.kind = kind;
  for (ir::Node& node : block.nodes)
    if (node.op == ir::Op::Latent) {
      node.op = ir::Op::State;
      node.lag = 0;
    }
  block.relations.clear();
  for (ir::Relation rel : plate.relations)
    if (rel.kind == keep) {
      if (rel.kind == ir::VarKind::Latent)
        rel.kind = ir::VarKind::State;
      block.relations.push_back(rel);
    }
  block.outputs.clear();
  ir::compact(block);
  return block;
}

class PlateItems : public Pass {
public:
  std::string_view name() const override { return "plate-items"; }
  std::string_view description() const override {
    return "a plate model as a state-space model whose steps are its i.i.d. items";
  }
  void run(ir::Model& model, PassContext&) override { lower_plate_items(model); }
};

} // namespace

void lower_plate_items(ir::Model& model) {
  if (model.kind != ir::ModelKind::Plate)
    return;
  model.states = std::move(model.latents);
  model.latents.clear();
  model.initial = items_block(model.plate, ir::BlockKind::Initial, ir::VarKind::Latent);
  model.transition = items_block(model.plate, ir::BlockKind::Transition, ir::VarKind::Latent);
  model.observation = items_block(model.plate, ir::BlockKind::Observation, ir::VarKind::Obs);
  model.plate = ir::Block{ir::BlockKind::Plate, {}, {}, {}};
  for (ir::Relation& rel : model.guide.relations) // the guide now draws the latents' states
    rel.kind = ir::VarKind::State;
  model.kind = ir::ModelKind::StateSpace;
  model.items = true;
}

std::unique_ptr<Pass> create_plate_items() {
  return std::make_unique<PlateItems>();
}

} // namespace ssm::passes
