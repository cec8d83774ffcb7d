// The typed model IR.
//
// A Model is a state-space model (blocks prior, initial, transition, observation, and optional
// functional, proposal and lookahead blocks), a static latent-variable model over the i.i.d. plate
// n (prior and plate blocks) or a sample-only simulator (prior and simulator blocks). Each
// block is an expression DAG in SSA form, stored as a flat vector of Nodes where a node's arguments
// are the ids (indices) of earlier nodes of the same block, followed by the block's Relations
// (`target ~ dist(args)`), in the order they are sampled.
//
// Every shape is static: constants are inlined by the frontend, so each vector or matrix dimension
// is known when the IR is built. That is what lets codegen scalarise every expression and emit
// straight-line code per particle.
#pragma once

#include "dists.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace ssm::ir {

// A broken invariant of the compiler itself (invalid IR after a pass, a case an analysis should
// have excluded): never the model's fault. ssmc reports it as an internal compiler error.
class InternalError : public std::logic_error {
public:
  using std::logic_error::logic_error;
};

struct SourceLoc {
  int line = 0;    // 1-based; 0 = no location
  int col = 0;     // 1-based
  int end_col = 0; // one past the last column of the range, on the same line
  int file = 0;    // 0: the model's file; k > 0: its k-th imported file (frontend diagnostics)
};

// {} is a scalar, {n} a vector, {r, c} a row-major matrix.
struct Shape {
  std::vector<int> dims;

  static Shape scalar() { return {}; }
  static Shape vector(int n) { return {{n}}; }
  static Shape matrix(int r, int c) { return {{r, c}}; }
  int rank() const { return static_cast<int>(dims.size()); }
  bool is_scalar() const { return dims.empty(); }
  int size() const;
  std::string str() const; // "real", "vector[3]", "matrix[2, 3]"
  bool operator==(const Shape&) const = default;
};

// Row-major offset of the element (or row) that `index` selects in a value of shape `base`:
// index k skips whole blocks of the dimensions after k.
int index_offset(const Shape& base, const std::vector<int>& index);

enum class Op {
  Const,    // values, row-major
  Param,    // var = parameter index
  State,    // var = state index; lag 0 = x[t], 1 = x[t-1]
  Obs,      // var = observation index; lag 0 = y[t]
  Time,     // the time index t, as a real
  Neg,      // elementwise
  Add,      // elementwise, a scalar operand broadcasts
  Sub,      //
  Mul,      // elementwise, or scalar * anything (matrix products are MatMul)
  Div,      //
  Pow,      //
  MatMul,   // matrix * matrix, matrix * vector
  Call,     // fn: a built-in function, by name: see builtins.h
  Build,    // vector or matrix literal: args are its scalar elements, row-major
  Index,    // args = {base}; index = constant positions: v[i] -> scalar, A[i] -> row, A[i, j] ->
            // scalar
  DynIndex, // args = {base, i} with i a scalar read at run time: v[i] -> scalar, A[i] -> row.
            // An index outside the base (or not an integer) gives NaN.
  Select,   // args = {cond, a, b}: a where cond != 0, else b; elementwise, scalars broadcast
  Data,     // var = data index: a run-time constant (--data-file)
  Input,    // var = input index; lag 0 = u[t]: an exogenous covariate
  Latent,   // var = latent index: z[n] in a plate block, a in a simulator block
  Net,      // var = network index; args = its inputs (variables), concatenated: the network's
            // output vector. The frontend makes them; passes/net_outputs.cpp replaces each by a
            // hidden state whose value the runtime computes, so no analysis or kernel sees one.
  // ode_rk4: args = {y0, rate}, shape matrix[m, n]: row i is y(t_i) of dy/dt = rate(t, y), y(t0)
  // = y0 : vector[n], by classical Runge-Kutta with fixed steps. values = {t0, t_1, ..., t_m}
  // (constants, increasing), index = {k_1, ..., k_m}: the steps of each interval [t_{i-1}, t_i].
  // The rate is a node of the same block that reads OdeTime and OdeState, the integration's
  // current t and y: they have a value only while an Ode evaluates its rate (no Ode's rate reads
  // another Ode), and nothing else reads them (ir::ode_rate_nodes, the verifier).
  Ode,
  OdeTime,  // the current time inside an Ode's rate: real
  OdeState, // the current value inside an Ode's rate: vector[n]
};
inline constexpr Op kLastOp = Op::OdeState;

std::string_view op_name(Op op);

struct Node {
  Op op = Op::Const;
  Shape shape;
  std::vector<int> args;
  std::vector<double> values; // Const
  std::string fn;             // Call
  std::vector<int> index;     // Index
  int var = -1;               // Param, State, Obs
  int lag = 0;                // State, Obs
  SourceLoc loc;
};

// What a node computes, apart from where it came from: nodes with equal keys (and equal operands)
// compute the same value. Constants compare by bit pattern, so NaN matches only NaN.
using NodeKey = std::tuple<int, std::vector<int>, std::vector<int>, std::vector<uint64_t>,
                           std::string, std::vector<int>, int, int>;
NodeKey node_key(const Node& node);

enum class VarKind { Param, State, Obs, Latent };

struct Relation {
  VarKind kind = VarKind::State;
  int var = -1; // the target, at lag 0
  Dist dist = Dist::Normal;
  std::vector<int> args;
  SourceLoc loc;
};

// Functional: the terms of the model's functionals, evaluated at each t with x[t-1], x[t], y[t].
// Proposal: the guided filter's proposal q(x[t] | x[t-1], y[t]); empty when the model has none,
// else one relation per state (the user's `proposal` relations, and copies of the transition
// relations of the states without one).
// Lookahead: the auxiliary filter's prediction of x[t] from x[t-1]: no relations; empty, or one
// output per state, in declaration order.
// Plate: the relations of one item n of a plate model, latents z[n] and observations x[n].
// Simulator: a simulator's latents and observations; a deterministic `obs x = e` is x ~ dirac(e).
enum class BlockKind {
  Prior,
  Initial,
  Transition,
  Observation,
  Functional,
  Proposal,
  Lookahead,
  Plate,
  Simulator,
  Guide, // a plate model's `guide` relations: the variational family of its latent variables
};
std::string_view block_name(BlockKind kind);
struct Model;
// The block whose indexing a block's references follow in the IR's text: a state-space model's
// guide (not a plate model's items) reads by time, as its transition; any other block its own.
BlockKind indexing_kind(const Model& model, BlockKind kind);

struct Block {
  BlockKind kind = BlockKind::Initial;
  std::vector<Node> nodes;
  std::vector<Relation> relations;
  std::vector<int> outputs; // nodes read from outside the block, besides relation arguments

  int add(Node node) {
    nodes.push_back(std::move(node));
    return static_cast<int>(nodes.size()) - 1;
  }
};

// The nodes of `block` that `roots` read, directly or through other nodes, and the roots
// themselves: reached[i] for node i. SSA order makes this one backward pass.
std::vector<bool> reached_from(const Block& block, const std::vector<int>& roots);

// The nodes of `block` that read an Ode's current time or value (OdeTime, OdeState), directly or
// through other nodes: the parts of Ode rates that must be evaluated inside the integration.
std::vector<bool> ode_rate_nodes(const Block& block);

// The values a scalar discrete relation of `block` can give its target, [lower, upper], as far
// as its constant arguments show: the distribution's support in the table (bernoulli 0..1,
// poisson 0..inf), or 0..n for a count argument n (binomial) when n is a constant; categorical
// 0..K-1 over K weights (when the weights are constants, from the first positive one to the
// last). nullopt for any other relation, and for binomial with an n known only at run time.
std::optional<std::pair<double, double>> discrete_support(const Block& block, const Relation& rel);

// The support of a continuous relation's target, [lower, upper], when it is bounded and known at
// compile time: the distribution's support in the table (gamma 0..inf, beta 0..1), or the
// constant arguments that bound it (uniform, truncated_normal). nullopt when it is the whole line,
// depends on a value known only at run time, or the relation is discrete.
std::optional<std::pair<double, double>> continuous_support(const Block& block,
                                                            const Relation& rel);

enum class ParamType { Real, Vector, Matrix, CovMatrix, Simplex };
std::string_view param_type_name(ParamType type);

struct ParamDecl {
  std::string name;
  ParamType type = ParamType::Real;
  Shape shape;
  std::optional<std::vector<double>> default_value; // row-major
  SourceLoc loc;
  double lower = -INFINITY; // real(lo, hi): every component within [lower, upper]
  double upper = INFINITY;
};

// What a data item's value must be besides its shape: a simplex[n] is a vector[n] of non-negative
// components that sum to 1, a cov_matrix[n] a symmetric positive-definite matrix[n, n].
// Sequence: an observation of a plate model that is a sequence of tokens in [lower, upper] (its
// one slot holds the sequence's length; networks read the tokens: runtime/vi/model_networks.h).
enum class Constraint { None, Simplex, CovMatrix, Sequence };

// A state, observation, data item or input. `integer` values are whole numbers in [lower, upper]
// (int[lo..hi]); a finite range makes a discrete state's support finite. A data item may also be
// declared real(lo, hi) (a scalar in [lower, upper], not integer), simplex[n] or cov_matrix[n]
// (`constraint`); the runtime checks its value against that type when it reads the data file.
struct VarDecl {
  // A hidden state made by the augment-lags transform is named `x@lagK`: it holds x[t-K].
  std::string name;
  Shape shape;
  SourceLoc loc;
  bool integer = false;
  double lower = -INFINITY;
  double upper = INFINITY;
  Constraint constraint = Constraint::None; // data (a sequence: a plate model's obs)

  bool bounded() const { return lower > -INFINITY || upper < INFINITY; }

  bool hidden() const { return name.find('@') != std::string::npos; }
};

// The declared type as the IR prints it: "real", "vector[3]", "int", "int[0..5]", "real(0, inf)",
// "simplex[3]", "cov_matrix[2]".
std::string type_str(const VarDecl& v);
// The name of its kind of type: real, vector, matrix, int, simplex or cov_matrix.
std::string_view type_name(const VarDecl& v);

// The hidden state holding x[t-lag] (the augment-lags transform), and back.
std::string lagged_state_name(const std::string& state, int lag);
// {x, K} for `x@lagK`; nullopt for a model's own state.
std::optional<std::pair<std::string, int>> parse_lagged_state_name(const std::string& name);
// How reports show a state: a hidden copy by the value it holds (`x[t-1]`), others by name.
std::string shown_state_name(const std::string& name);

struct ConstDecl {
  std::string name;
  Shape shape;
  std::vector<double> values;
  SourceLoc loc;
};

// `functional NAME = sum_t EXPR;` (additive: the sum over t of the term) or `= EXPR;` (a
// quantity at each t, whose smoothing marginals are wanted). Functional i's term is the node
// `functional.outputs[i]` of the model's functional block.
struct FunctionalDecl {
  std::string name;
  bool additive = false;
  SourceLoc loc;
};

// `net NAME : mlp(...)`: a multilayer perceptron from `inputs` to `outputs` reals, with hidden
// layers of the given widths and activation; its weights are trained by the runtime (LibTorch).
// `net NAME : dif(...)` (maf, realnvp): a density over vector[dim] given `inputs - dim` context
// values, whose one output is log p(target | context) (a relation's Dist::Density): a dif's
// `components` maps, a flow's `layers`, networks of the `hidden` widths.
struct NetDecl {
  std::string name;
  std::string kind = "mlp";
  int inputs = 0, outputs = 0;
  std::vector<int> hidden;
  std::string activation = "tanh";
  int dim = 0, components = 0, layers = 0; // densities only (and an rnn's layers)
  std::string maps = "affine";             // a dif's maps: affine, or maf or realnvp layers
  // A cascade (Argouarc'h 2024, 4.3.10): the density this one transports onto (`base = NET`, an
  // index into Model::nets) instead of N(0, I), and the one whose base this is (then it is part
  // of that one: never a distribution itself). -1: none.
  int base = -1, base_of = -1;
  // Networks over sequences of tokens 0..vocab-1 (an observation's `sequence[vocab]`): `rnn`
  // reads one (its first argument) and gives `outputs` values; `rnn_lm` is a density over them,
  // log p(sequence | context), an observation's distribution. `embedding` wide token vectors,
  // `layers` recurrent layers of `hidden[0]` units, of a `cell` (gru or lstm); `inputs` counts the
  // context values.
  int vocab = 0, embedding = 0;
  std::string cell = "lstm";
  SourceLoc loc;
  // A density over vector[dim] of the flows room (the distribution of a latent).
  bool density() const { return kind == "dif" || kind == "maf" || kind == "realnvp"; }
  bool over_sequences() const { return kind == "rnn" || kind == "rnn_lm"; }
  // `embedding`: a learned vector of `outputs` values per token 0..vocab-1, its one input.
  // Written as a relation's distribution, not called: a density over vectors or sequences.
  bool distribution() const { return density() || kind == "rnn_lm"; }
};

// A network's output as the model's kernels see it (passes/net_outputs.cpp): the hidden state
// `state` (named `NET@net`, `NET@net2`, ...) whose value at each step is network `net` applied to
// `args`, leaf nodes (Param, Data, or State at lag 0) read at the same step. It has no relation:
// the runtime computes it before it calls a kernel that reads it.
struct NetCall {
  int net = -1;
  int state = -1;
  std::vector<Node> args;
};

// What a model describes, and so which blocks it has and which analyses apply.
enum class ModelKind {
  StateSpace, // states over time t: initial, transition, observation
  Plate,      // static latent-variable model: i.i.d. items n, latents z[n] and observations x[n]
  Simulator,  // sample-only: latents and observations drawn once, no tractable likelihood
};

struct Model {
  ModelKind kind = ModelKind::StateSpace;
  // A state-space model made from a plate model (passes/plate_items.cpp): its steps are the i.i.d.
  // items n, its states their latents. Printed `items n`.
  bool items = false;
  // A state-space model made from a simulator (passes/simulator_draws.cpp): one step, whose states
  // are the simulator's parameters (the first `simulation_params` states, drawn from their priors)
  // and then its latent variables. Printed `simulation P`.
  bool simulation = false;
  int simulation_params = 0;
  std::string name;
  std::string source_file;
  std::vector<std::string> imported_files; // the modules it imports, as found
  std::vector<ConstDecl> consts;           // already inlined into the blocks; kept for reports
  std::vector<ParamDecl> params;
  std::vector<VarDecl> states;
  std::vector<VarDecl> obs;
  std::vector<VarDecl> data;    // run-time constants
  std::vector<VarDecl> inputs;  // exogenous covariates, one value per t
  std::vector<VarDecl> latents; // plate models (one per item) and simulators
  std::vector<FunctionalDecl> functionals;
  std::vector<NetDecl> nets;
  std::vector<NetCall> net_calls;            // after passes/net_outputs.cpp
  Block prior{BlockKind::Prior, {}, {}, {}}; // relations target parameters; arguments are constants
  Block initial{BlockKind::Initial, {}, {}, {}};
  Block transition{BlockKind::Transition, {}, {}, {}};
  Block observation{BlockKind::Observation, {}, {}, {}};
  Block functional{BlockKind::Functional, {}, {}, {}}; // no relations; outputs = the terms
  Block proposal{BlockKind::Proposal, {}, {}, {}};
  Block lookahead{BlockKind::Lookahead, {}, {}, {}};
  Block plate{BlockKind::Plate, {}, {}, {}};
  Block simulator{BlockKind::Simulator, {}, {}, {}};
  // Relations target latents (states once passes/plate_items.cpp has run); their arguments read
  // observations at lag 0, data and constants, and networks' outputs (hidden states).
  Block guide{BlockKind::Guide, {}, {}, {}};

  bool is_state_space() const { return kind == ModelKind::StateSpace; }
  // The net call whose output state is `state`, or null.
  const NetCall* net_call_of(int state) const;
  // The hidden states (network outputs) the guide block reads, in order: the inputs of the
  // Jacobian of its arguments (passes/derivatives.cpp), component by component.
  std::vector<int> guide_input_states() const;
  // Whether state `s` is the output of a network call that only the guide reads: the model's
  // density never reads it, so the state-space analyses leave it out.
  bool guide_only_state(int s) const;
  Block& block(BlockKind kind);
  const Block& block(BlockKind kind) const;
  template <class F> void for_each_block(F&& f) {
    f(prior), f(initial), f(transition), f(observation), f(functional), f(proposal), f(lookahead),
        f(plate), f(simulator), f(guide);
  }
  template <class F> void for_each_block(F&& f) const {
    f(prior), f(initial), f(transition), f(observation), f(functional), f(proposal), f(lookahead),
        f(plate), f(simulator), f(guide);
  }

  const std::string& var_name(VarKind kind, int var) const;
  const Shape& var_shape(VarKind kind, int var) const;
  int state_size() const; // scalar components over all states
  int obs_size() const;
  int theta_size() const;
  int param_offset(int param) const; // into the flat parameter vector
  int state_offset(int state) const;
  int obs_offset(int obs) const;

  // Kernels read parameters, data, inputs at t and the observations at t-1 from one array, the
  // frame: [params | data | inputs(t) | y(t-1)], which the runtime fills before each step.
  int data_offset(int data) const;
  int input_offset(int input) const;
  int previous_obs_offset(int obs) const;
  int frame_size() const;
};

} // namespace ssm::ir
