// Shapes and Model accessors of the IR.
#include "ir.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <set>
#include <stdexcept>

namespace ssm::ir {

int Shape::size() const {
  int n = 1;
  for (int d : dims)
    n *= d;
  return n;
}

int index_offset(const Shape& base, const std::vector<int>& index) {
  int offset = 0;
  for (size_t k = 0; k < index.size(); ++k) {
    int block = 1;
    for (size_t j = k + 1; j < base.dims.size(); ++j)
      block *= base.dims[j];
    offset += index[k] * block;
  }
  return offset;
}

std::string Shape::str() const {
  switch (rank()) {
  case 0:
    return "real";
  case 1:
    return fmt::format("vector[{}]", dims[0]);
  default:
    return fmt::format("matrix[{}, {}]", dims[0], dims[1]);
  }
}

std::string_view op_name(Op op) {
  switch (op) {
  case Op::Const:
    return "const";
  case Op::Param:
    return "param";
  case Op::State:
    return "state";
  case Op::Obs:
    return "obs";
  case Op::Time:
    return "time";
  case Op::Neg:
    return "neg";
  case Op::Add:
    return "add";
  case Op::Sub:
    return "sub";
  case Op::Mul:
    return "mul";
  case Op::Div:
    return "div";
  case Op::Pow:
    return "pow";
  case Op::MatMul:
    return "matmul";
  case Op::Call:
    return "call";
  case Op::Build:
    return "build";
  case Op::Index:
    return "index";
  case Op::DynIndex:
    return "dynindex";
  case Op::Select:
    return "select";
  case Op::Data:
    return "data";
  case Op::Input:
    return "input";
  case Op::Latent:
    return "latent";
  case Op::Net:
    return "net";
  case Op::Ode:
    return "ode";
  case Op::OdeTime:
    return "ode_time";
  case Op::OdeState:
    return "ode_state";
  }
  return "?";
}

std::optional<std::pair<double, double>> continuous_support(const Block& block,
                                                            const Relation& rel) {
  const DistInfo& info = dist_info(rel.dist);
  if (info.discrete || rel.dist == Dist::Dirac)
    return std::nullopt;
  if (info.support_from < 0)
    return info.lower > -INFINITY || info.upper < INFINITY
               ? std::optional(std::pair(info.lower, info.upper))
               : std::nullopt;
  double bound[2];
  for (int k = 0; k < 2; ++k) {
    const size_t a = static_cast<size_t>(info.support_from + k);
    if (a >= rel.args.size() || rel.args[a] < 0 ||
        rel.args[a] >= static_cast<int>(block.nodes.size()))
      return std::nullopt;
    const Node& n = block.nodes[rel.args[a]];
    if (n.op != Op::Const || !n.shape.is_scalar())
      return std::nullopt;
    bound[k] = n.values[0];
  }
  return bound[0] < bound[1] ? std::optional(std::pair(bound[0], bound[1])) : std::nullopt;
}

std::optional<std::pair<double, double>> discrete_support(const Block& block, const Relation& rel) {
  auto constant = [&](size_t k) -> const Node* {
    if (k >= rel.args.size() || rel.args[k] < 0 ||
        rel.args[k] >= static_cast<int>(block.nodes.size()))
      return nullptr;
    const Node& n = block.nodes[rel.args[k]];
    return n.op == Op::Const ? &n : nullptr;
  };
  const DistInfo& info = dist_info(rel.dist);
  if (info.discrete && !info.joint) {
    if (info.count_arg < 0)
      return std::pair(info.lower, info.upper);
    const Node* n = constant(static_cast<size_t>(info.count_arg)); // 0..n
    if (!n || !n->shape.is_scalar() || !(n->values[0] >= 0) || !std::isfinite(n->values[0]))
      return std::nullopt;
    return std::pair(info.lower, std::floor(n->values[0]));
  }
  switch (rel.dist) {
  case Dist::Categorical: {
    if (rel.args.empty() || rel.args[0] < 0 || rel.args[0] >= static_cast<int>(block.nodes.size()))
      return std::nullopt;
    const Node& w = block.nodes[rel.args[0]];
    if (w.shape.rank() != 1 || w.shape.dims[0] < 1)
      return std::nullopt;
    // A weight known to be 0: a constant, or a constant element of a vector literal.
    auto zero = [&](int k) {
      if (w.op == Op::Const)
        return w.values[k] == 0;
      if (w.op != Op::Build || w.args[k] < 0 || w.args[k] >= static_cast<int>(block.nodes.size()))
        return false;
      const Node& e = block.nodes[w.args[k]];
      return e.op == Op::Const && e.values.size() == 1 && e.values[0] == 0;
    };
    int lo = 0, hi = w.shape.dims[0] - 1;
    while (lo < hi && zero(lo))
      ++lo;
    while (hi > lo && zero(hi))
      --hi;
    return std::pair(static_cast<double>(lo), static_cast<double>(hi));
  }
  default:
    return std::nullopt;
  }
}

std::vector<bool> reached_from(const Block& block, const std::vector<int>& roots) {
  std::vector<bool> reached(block.nodes.size(), false);
  for (int r : roots)
    reached[r] = true;
  for (int i = static_cast<int>(block.nodes.size()) - 1; i >= 0; --i)
    if (reached[i])
      for (int a : block.nodes[i].args)
        reached[a] = true;
  return reached;
}

std::vector<bool> ode_rate_nodes(const Block& block) {
  std::vector<bool> rate(block.nodes.size(), false);
  for (size_t i = 0; i < block.nodes.size(); ++i) {
    const Node& n = block.nodes[i];
    bool r = n.op == Op::OdeTime || n.op == Op::OdeState;
    for (int a : n.args)
      r = r || (n.op != Op::Ode && a >= 0 && a < static_cast<int>(i) && rate[a]);
    rate[i] = r;
  }
  return rate;
}

NodeKey node_key(const Node& node) {
  std::vector<uint64_t> bits;
  for (double v : node.values)
    bits.push_back(std::bit_cast<uint64_t>(v));
  return {static_cast<int>(node.op),
          node.shape.dims,
          node.args,
          std::move(bits),
          node.fn,
          node.index,
          node.var,
          node.lag};
}

std::string lagged_state_name(const std::string& state, int lag) {
  return fmt::format("{}@lag{}", state, lag);
}

std::optional<std::pair<std::string, int>> parse_lagged_state_name(const std::string& name) {
  const size_t at = name.find("@lag");
  if (at == std::string::npos || at + 4 >= name.size())
    return std::nullopt;
  int lag = 0;
  for (size_t i = at + 4; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9')
      return std::nullopt;
    lag = lag * 10 + (name[i] - '0');
  }
  return std::pair(name.substr(0, at), lag);
}

std::string shown_state_name(const std::string& name) {
  const auto lagged = parse_lagged_state_name(name);
  return lagged ? fmt::format("{}[t-{}]", lagged->first, lagged->second) : name;
}

std::string_view block_name(BlockKind kind) {
  switch (kind) {
  case BlockKind::Prior:
    return "prior";
  case BlockKind::Initial:
    return "initial";
  case BlockKind::Transition:
    return "transition";
  case BlockKind::Observation:
    return "observation";
  case BlockKind::Functional:
    return "functional";
  case BlockKind::Proposal:
    return "proposal";
  case BlockKind::Lookahead:
    return "lookahead";
  case BlockKind::Plate:
    return "plate";
  case BlockKind::Simulator:
    return "simulator";
  case BlockKind::Guide:
    return "guide";
  }
  return "?";
}

std::string_view param_type_name(ParamType type) {
  switch (type) {
  case ParamType::Real:
    return "real";
  case ParamType::Vector:
    return "vector";
  case ParamType::Matrix:
    return "matrix";
  case ParamType::CovMatrix:
    return "cov_matrix";
  case ParamType::Simplex:
    return "simplex";
  }
  return "?";
}

std::string type_str(const VarDecl& v) {
  if (v.constraint == Constraint::Sequence)
    return fmt::format("sequence[{}]", v.upper + 1);
  if (v.integer)
    return v.bounded() ? fmt::format("int[{}..{}]", v.lower, v.upper) : "int";
  if (v.constraint == Constraint::CovMatrix)
    return fmt::format("cov_matrix[{}]", v.shape.dims.at(0));
  if (v.constraint == Constraint::Simplex)
    return fmt::format("simplex[{}]", v.shape.dims.at(0));
  std::string type = v.shape.str();
  if (v.bounded())
    type += fmt::format("({}, {})", v.lower, v.upper);
  return type;
}

std::string_view type_name(const VarDecl& v) {
  if (v.constraint == Constraint::Sequence)
    return "sequence";
  if (v.integer)
    return "int";
  if (v.constraint == Constraint::CovMatrix)
    return "cov_matrix";
  if (v.constraint == Constraint::Simplex)
    return "simplex";
  return v.shape.rank() == 0 ? "real" : v.shape.rank() == 1 ? "vector" : "matrix";
}

const NetCall* Model::net_call_of(int state) const {
  for (const NetCall& c : net_calls)
    if (c.state == state)
      return &c;
  return nullptr;
}

BlockKind indexing_kind(const Model& model, BlockKind kind) {
  return kind == BlockKind::Guide && model.is_state_space() && !model.items ? BlockKind::Transition
                                                                            : kind;
}

std::vector<int> Model::guide_input_states() const {
  std::set<int> read;
  for (const Node& node : guide.nodes)
    if (node.op == Op::State)
      read.insert(node.var);
  return {read.begin(), read.end()};
}

bool Model::guide_only_state(int s) const {
  if (!net_call_of(s))
    return false;
  bool elsewhere = false;
  for_each_block([&](const Block& block) {
    if (&block != &guide)
      for (const Node& n : block.nodes)
        elsewhere = elsewhere || (n.op == Op::State && n.var == s);
  });
  return !elsewhere;
}

Block& Model::block(BlockKind kind) {
  return const_cast<Block&>(static_cast<const Model*>(this)->block(kind));
}

const Block& Model::block(BlockKind kind) const {
  switch (kind) {
  case BlockKind::Prior:
    return prior;
  case BlockKind::Initial:
    return initial;
  case BlockKind::Transition:
    return transition;
  case BlockKind::Observation:
    return observation;
  case BlockKind::Functional:
    return functional;
  case BlockKind::Proposal:
    return proposal;
  case BlockKind::Lookahead:
    return lookahead;
  case BlockKind::Plate:
    return plate;
  case BlockKind::Simulator:
    return simulator;
  case BlockKind::Guide:
    return guide;
  }
  throw std::logic_error("unknown block kind");
}

const std::string& Model::var_name(VarKind kind, int var) const {
  switch (kind) {
  case VarKind::Param:
    return params.at(var).name;
  case VarKind::State:
    return states.at(var).name;
  case VarKind::Obs:
    return obs.at(var).name;
  case VarKind::Latent:
    return latents.at(var).name;
  }
  throw std::logic_error("unknown variable kind");
}

const Shape& Model::var_shape(VarKind kind, int var) const {
  switch (kind) {
  case VarKind::Param:
    return params.at(var).shape;
  case VarKind::State:
    return states.at(var).shape;
  case VarKind::Obs:
    return obs.at(var).shape;
  case VarKind::Latent:
    return latents.at(var).shape;
  }
  throw std::logic_error("unknown variable kind");
}

namespace {
template <class Decls> int offset_of(const Decls& decls, int index) {
  int offset = 0;
  for (int i = 0; i < index; ++i)
    offset += decls.at(i).shape.size();
  return offset;
}
} // namespace

int Model::state_size() const {
  return offset_of(states, static_cast<int>(states.size()));
}
int Model::obs_size() const {
  return offset_of(obs, static_cast<int>(obs.size()));
}
int Model::theta_size() const {
  return offset_of(params, static_cast<int>(params.size()));
}
int Model::param_offset(int param) const {
  return offset_of(params, param);
}
int Model::state_offset(int state) const {
  return offset_of(states, state);
}
int Model::obs_offset(int o) const {
  return offset_of(obs, o);
}
int Model::data_offset(int d) const {
  return theta_size() + offset_of(data, d);
}
int Model::input_offset(int u) const {
  return data_offset(static_cast<int>(data.size())) + offset_of(inputs, u);
}
int Model::previous_obs_offset(int o) const {
  return input_offset(static_cast<int>(inputs.size())) + obs_offset(o);
}
int Model::frame_size() const {
  return previous_obs_offset(static_cast<int>(obs.size()));
}

} // namespace ssm::ir
