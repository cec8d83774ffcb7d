// simulator-draws: a simulator becomes a one-step state-space model whose state is one draw of
// its parameters and latent variables. Likelihood-free inference simulates pairs (theta_i, x_i)
// with theta_i drawn from the prior, a different theta for every draw; the kernels take one
// parameter vector for a whole batch, so the parameters become states, drawn by the initial
// kernel from their priors before the latent variables that read them, and the observation
// kernel draws x given both. A batch of N particles is then N independent simulations, each
// keyed by its own Philox counter (seed, particle index), whatever the thread count; and where
// the observation has a density and there are no latent variables, the observation kernel's
// log-density is the exact likelihood p(x | theta), which the samplers' tests use; the transition
// keeps the parameters and draws the latent variables again (a simulation at given parameters).
// The model keeps
// `simulation` set and the number of parameters, which are its first states.
#include "passes.h"

#include "ir/rewrite.h"

#include <stdexcept>

namespace ssm::passes {

namespace {

// `block` with its parameter and latent reads made reads of the states they became.
ir::Block as_states(ir::Block block, int n_params) {
  for (ir::Node& node : block.nodes)
    if (node.op == ir::Op::Param || node.op == ir::Op::Latent) {
      node.var += node.op == ir::Op::Latent ? n_params : 0;
      node.op = ir::Op::State;
      node.lag = 0;
    }
  for (ir::Relation& rel : block.relations)
    if (rel.kind == ir::VarKind::Param || rel.kind == ir::VarKind::Latent) {
      rel.var += rel.kind == ir::VarKind::Latent ? n_params : 0;
      rel.kind = ir::VarKind::State;
    }
  return block;
}

// The prior's relations, then those of the simulator block whose target is of `keep`, as one
// block of `kind`: the simulator's nodes follow the prior's, so SSA order holds.
ir::Block draws_block(const ir::Block& prior, const ir::Block& simulator, ir::BlockKind kind,
                      ir::VarKind keep) {
  ir::Block block;
  block.kind = kind;
  const int shift = static_cast<int>(prior.nodes.size());
  block.nodes = prior.nodes;
  if (keep == ir::VarKind::State)
    block.relations = prior.relations;
  for (ir::Node node : simulator.nodes) {
    for (int& a : node.args)
      a += shift;
    block.nodes.push_back(std::move(node));
  }
  for (ir::Relation rel : simulator.relations)
    if (rel.kind == keep) {
      for (int& a : rel.args)
        a += shift;
      block.relations.push_back(std::move(rel));
    }
  ir::compact(block);
  return block;
}

// The transition, which a simulation (one step) does not run: the same parameters, copied, and
// the latent variables drawn again given them. transition_sample then simulates at given
// parameters (ABC's moves), and log p(theta) = init_logpdf(x) - transition_logpdf(x -> x) for any
// latent values of positive density (a real copy adds nothing to a log-density).
ir::Block redraw_at_same_parameters(const ir::Block& simulator,
                                    const std::vector<ir::VarDecl>& states, int n_params) {
  ir::Block copies;
  for (int p = 0; p < n_params; ++p) {
    ir::Node previous;
    previous.op = ir::Op::State;
    previous.var = p;
    previous.lag = 1;
    previous.shape = states[p].shape;
    ir::Relation keep;
    keep.kind = ir::VarKind::State;
    keep.var = p;
    keep.dist = ir::Dist::Dirac;
    keep.args = {copies.add(std::move(previous))};
    keep.loc = states[p].loc;
    copies.relations.push_back(std::move(keep));
  }
  return draws_block(copies, simulator, ir::BlockKind::Transition, ir::VarKind::State);
}

class SimulatorDraws : public Pass {
public:
  std::string_view name() const override { return "simulator-draws"; }
  std::string_view description() const override {
    return "a simulator as a one-step state-space model whose states are its parameters and "
           "latent variables";
  }
  void run(ir::Model& model, PassContext&) override { lower_simulator_draws(model); }
};

} // namespace

void lower_simulator_draws(ir::Model& model) {
  if (model.kind != ir::ModelKind::Simulator)
    return;
  const int n_params = static_cast<int>(model.params.size());
  std::vector<ir::VarDecl> states;
  for (const ir::ParamDecl& p : model.params) {
    if (p.shape.rank() > 1) // matrix states have no kernels
      throw std::invalid_argument("parameter '" + p.name +
                                  "' is a matrix: a simulator's parameters are reals and "
                                  "vectors");
    ir::VarDecl v;
    v.name = p.name;
    v.shape = p.shape;
    v.loc = p.loc;
    v.lower = p.lower;
    v.upper = p.upper;
    states.push_back(std::move(v));
  }
  for (ir::VarDecl& latent : model.latents)
    states.push_back(std::move(latent));
  const ir::Block prior = as_states(model.prior, n_params);
  const ir::Block simulator = as_states(model.simulator, n_params);
  model.initial = draws_block(prior, simulator, ir::BlockKind::Initial, ir::VarKind::State);
  model.transition = redraw_at_same_parameters(simulator, states, n_params);
  model.observation = draws_block(prior, simulator, ir::BlockKind::Observation, ir::VarKind::Obs);
  model.states = std::move(states);
  model.latents.clear();
  model.params.clear();
  model.prior = ir::Block{ir::BlockKind::Prior, {}, {}, {}};
  model.simulator = ir::Block{ir::BlockKind::Simulator, {}, {}, {}};
  model.kind = ir::ModelKind::StateSpace;
  model.simulation = true;
  model.simulation_params = n_params;
}

std::unique_ptr<Pass> create_simulator_draws() {
  return std::make_unique<SimulatorDraws>();
}

} // namespace ssm::passes
