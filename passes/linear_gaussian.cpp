// linear-gaussian: recognises a linear-Gaussian state-space model
//
//   x[0] ~ N(m0, P0),  x[t] = F x[t-1] + c + N(0, Q),  y[t] = H x[t] + d + N(0, R)
//
// and extracts m0, P0, F, c, Q, H, d, R as IR expressions of the parameters (and t). For such a
// model the Kalman filter and smoother are exact, so the runtime can use them instead of particles;
// when the model is not linear-Gaussian the first reason is reported in the user's terms.
//
// Each block is decomposed relation by relation, in sampling order, as an affine function of a
// basis: the state the block conditions on (x[t-1] in the transition, x[t] in the observation)
// followed by one standard noise component per sampled scalar. A relation that reads another
// variable of the same time step (`level[t] ~ normal(level[t-1] + slope[t], ..)`) uses that
// variable's affine form, so such models are recognised too, with correlated noise: the noise
// covariance is then N Q0 N' for the noise loadings N and the relations' own covariances Q0.
// Scalar `normal(mu, sigma)` has variance sigma^2; independent components of a vector target give
// a diagonal covariance. An observation whose mean reads no state is affine with zero rows of H,
// so it does not make the model non-linear-Gaussian (a note says so).
#include "affine.h"
#include "passes.h"

#include "ir/printer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ssm::passes {

namespace {

class Analysis {
public:
  Analysis(const ir::Model& model, LinearGaussian& result)
      : model_(model), result_(result), n_(model.state_size()), m_(model.obs_size()) {}

  void run() {
    for (const auto& s : model_.states) // a hidden copy (augment-lags) by what it holds
      result_.state_names.push_back(ir::shown_state_name(s.name));
    for (const auto& o : model_.obs)
      result_.obs_names.push_back(o.name);
    if (reads_networks())
      return;
    auto initial = analyse(model_.initial, result_.initial);
    auto transition = analyse(model_.transition, result_.transition);
    auto observation = analyse(model_.observation, result_.observation);
    result_.is_linear_gaussian = result_.reasons.empty();
    if (!result_.is_linear_gaussian)
      return;
    add("m0", result_.initial, initial->offset);
    add("P0", result_.initial, initial->cov);
    add("F", result_.transition, transition->coef);
    add("c", result_.transition, transition->offset);
    add("Q", result_.transition, transition->cov);
    add("H", result_.observation, observation->coef);
    add("d", result_.observation, observation->offset);
    add("R", result_.observation, observation->cov);
    notes(observation->coef_grid);
  }

private:
  // Records, for each relation that reads a network's output (passes/net_outputs.cpp), that it is
  // not linear-Gaussian: the output is a state the runtime computes, with no relation to analyse.
  bool reads_networks() {
    for (const ir::Block* block : {&model_.initial, &model_.transition, &model_.observation})
      for (const ir::Relation& rel : block->relations) {
        const std::vector<bool> reached = ir::reached_from(*block, rel.args);
        for (size_t i = 0; i < block->nodes.size(); ++i)
          if (const ir::Node& n = block->nodes[i]; reached[i] && n.op == ir::Op::State) {
            if (const ir::NetCall* call = model_.net_call_of(n.var)) {
              result_.reasons.push_back(
                  {block->kind, ir::print_relation_target(model_, *block, rel),
                   std::string(ir::dist_info(rel.dist).name), model_.var_name(rel.kind, rel.var), 0,
                   fmt::format("it reads the output of network '{}'", model_.nets[call->net].name),
                   n.loc.line > 0 ? n.loc : rel.loc});
              break;
            }
          }
      }
    return !result_.reasons.empty();
  }

  // A block's result: node ids in its arena.
  struct Matrices {
    int coef = -1, offset = -1, cov = -1;
    std::vector<int> coef_grid; // rows x state part, -1 = zero
  };

  const ir::Model& model_;
  LinearGaussian& result_;
  int n_, m_;

  bool samples_states(const ir::Block& block) const {
    return block.kind != ir::BlockKind::Observation;
  }
  int offset_of(const ir::Block& block, int var) const {
    return samples_states(block) ? model_.state_offset(var) : model_.obs_offset(var);
  }

  void add(std::string name, const ir::Block& arena, int node) {
    SymbolicValue v;
    v.name = std::move(name);
    v.block = arena.kind;
    v.node = node;
    v.shape = arena.nodes[node].shape;
    v.text = ir::print_expr(model_, arena, node);
    if (arena.nodes[node].op == ir::Op::Const)
      v.value = arena.nodes[node].values;
    const bool time = reads(arena, node, ir::Op::Time), data = reads(arena, node, ir::Op::Obs),
               input = reads(arena, node, ir::Op::Input);
    if (time || data || input) {
      result_.time_varying = true;
      std::vector<std::string> on;
      if (time)
        on.push_back("t");
      if (data)
        on.push_back("past observations");
      if (input)
        on.push_back("inputs");
      result_.notes.push_back(fmt::format("{} depends on {}", v.name, fmt::join(on, " and ")));
    }
    result_.matrices.push_back(std::move(v));
  }

  static bool reads(const ir::Block& arena, int node, ir::Op op) {
    const ir::Node& n = arena.nodes[node];
    if (n.op == op)
      return true;
    for (int a : n.args)
      if (reads(arena, a, op))
        return true;
    return false;
  }

  void notes(const std::vector<int>& h) {
    for (size_t o = 0; o < model_.obs.size(); ++o) {
      int begin = model_.obs_offset(static_cast<int>(o));
      int end = begin + model_.obs[o].shape.size();
      bool zero = true;
      for (int i = begin; i < end; ++i)
        for (int j = 0; j < n_; ++j)
          zero = zero && h[static_cast<size_t>(i) * n_ + j] < 0;
      if (zero)
        result_.notes.push_back(
            fmt::format("{}[t] reads no state (its rows of H are 0); the model is still "
                        "linear-Gaussian, and {} adds a factor to the likelihood that does not "
                        "depend on the state",
                        model_.obs[o].name, model_.obs[o].name));
    }
  }

  // The affine form of a state (or observation) the block reads as part of its basis.
  AffineForm identity(ExprBuilder& b, int var, int basis) const {
    int size = model_.states[var].shape.size();
    AffineForm f(size, basis);
    for (int i = 0; i < size; ++i)
      f.at(i, model_.state_offset(var) + i) = b.constant(1);
    return f;
  }

  // What the analysis of one block carries from relation to relation.
  struct BlockAnalysis {
    const ir::Block& block;
    ExprBuilder b;
    bool states; // the block samples states (initial, transition), not observations
    int rows;    // the sampled scalars
    int part;    // the size of the state the block conditions on (0 in the initial block)
    int basis;   // part + rows
    std::vector<std::optional<AffineForm>> targets; // each sampled variable's affine form
    std::vector<int> cov;                           // rows x rows, -1 = zero
    bool failed = false;
  };

  std::optional<Matrices> analyse(const ir::Block& block, ir::Block& arena) {
    bool states = samples_states(block);
    int rows = states ? n_ : m_;
    int part = block.kind == ir::BlockKind::Initial ? 0 : n_;
    BlockAnalysis ba{
        block,
        ExprBuilder(arena),
        states,
        rows,
        part,
        part + rows,
        std::vector<std::optional<AffineForm>>(states ? model_.states.size() : model_.obs.size()),
        std::vector<int>(static_cast<size_t>(rows) * rows, -1)};
    AffineDecomposition affine(block, ba.b, ba.basis,
                               [&](const ir::Node& node) { return leaf(ba, node); });
    for (const ir::Relation& rel : block.relations)
      add_relation(ba, affine, rel);
    if (ba.failed)
      return std::nullopt;
    return assemble(ba);
  }

  // How the affine decomposition sees a state or observation that the block reads.
  Leaf leaf(BlockAnalysis& ba, const ir::Node& node) const {
    const ir::Block& block = ba.block;
    bool is_state = node.op == ir::Op::State;
    std::string name = fmt::format(
        "{}{}", model_.var_name(is_state ? ir::VarKind::State : ir::VarKind::Obs, node.var),
        block.kind == ir::BlockKind::Initial ? "[0]"
        : node.lag == 0                      ? "[t]"
                                             : fmt::format("[t-{}]", node.lag));
    auto unsupported = [](std::string message) {
      return Leaf{Leaf::Unsupported, {}, std::move(message)};
    };
    if (!is_state && node.lag > 0) // past observations are data, known like the parameters
      return Leaf{Leaf::Data, {}, {}};
    if (is_state == ba.states && node.lag == 0) {
      if (!ba.targets[node.var])
        return unsupported(fmt::format("reads {}, whose relation is not linear-Gaussian", name));
      return Leaf{Leaf::Random, *ba.targets[node.var], {}};
    }
    if (is_state && block.kind == ir::BlockKind::Transition && node.lag == 1)
      return Leaf{Leaf::Random, identity(ba.b, node.var, ba.basis), {}};
    if (is_state && block.kind == ir::BlockKind::Observation && node.lag == 0)
      return Leaf{Leaf::Random, identity(ba.b, node.var, ba.basis), {}};
    if (is_state && block.kind == ir::BlockKind::Transition)
      return unsupported(fmt::format(
          "reads {}: the state-space form needs a first-order state (lags beyond 1 must be "
          "augmented into the state first)",
          name));
    if (is_state)
      return unsupported(fmt::format(
          "reads the past state {}: an observation must depend on the current state only", name));
    return unsupported(fmt::format("reads the observation {}", name));
  }

  // Records why relation `rel` is not linear-Gaussian; `leaf_node` is the variable at fault.
  void fail(BlockAnalysis& ba, const ir::Relation& rel, std::string message, int node,
            int leaf_node) {
    const ir::Block& block = ba.block;
    ba.failed = true;
    if (rel.kind == ir::VarKind::State && model_.states[rel.var].hidden())
      return; // a copy of a state whose own relation says why
    StructureReason r{block.kind,
                      ir::print_relation_target(model_, block, rel),
                      std::string(ir::dist_info(rel.dist).name),
                      model_.var_name(rel.kind, rel.var),
                      0,
                      std::move(message),
                      rel.loc};
    if (leaf_node >= 0) {
      const ir::Node& l = block.nodes[leaf_node];
      r.variable =
          model_.var_name(l.op == ir::Op::State ? ir::VarKind::State : ir::VarKind::Obs, l.var);
      r.lag = block.kind == ir::BlockKind::Initial ? 0 : l.lag;
    }
    if (node >= 0 && block.nodes[node].loc.line > 0)
      r.loc = block.nodes[node].loc;
    result_.reasons.push_back(std::move(r));
  }

  // One relation: its target's affine form and its own noise covariance, or why it has none.
  void add_relation(BlockAnalysis& ba, AffineDecomposition& affine, const ir::Relation& rel) {
    const ir::Block& block = ba.block;
    ExprBuilder& b = ba.b;
    std::string dist(ir::dist_info(rel.dist).name);
    const bool chol = rel.dist == ir::Dist::MvNormalChol; // covariance L L'
    const bool copy = rel.dist == ir::Dist::Dirac;        // lag augmentation: no noise
    if (rel.dist != ir::Dist::Normal && rel.dist != ir::Dist::MvNormal && !chol && !copy)
      return fail(ba, rel, fmt::format("{} is not a Gaussian distribution", dist), -1, -1);
    int scale = copy ? -1 : rel.args[1];
    if (!copy && affine.random(scale)) {
      int l = affine.first_random_leaf(scale);
      return fail(ba, rel,
                  fmt::format("the {} depends on {}: {}",
                              rel.dist == ir::Dist::Normal ? "standard deviation"
                              : chol                       ? "Cholesky factor"
                                                           : "covariance",
                              ir::print_expr(model_, block, l),
                              ir::print_expr(model_, block, scale)),
                  scale, l);
    }
    auto mean = affine.decompose(rel.args[0]);
    if (auto* bad = std::get_if<NotAffine>(&mean)) {
      if (bad->node == bad->leaf) // a leaf the analysis does not handle: its message says why
        return fail(ba, rel, std::string(copy ? "the value " : "the mean ") + bad->why, bad->node,
                    bad->leaf);
      std::string leaf_text = ir::print_expr(model_, block, bad->leaf);
      return fail(ba, rel,
                  fmt::format("the {} is not affine in {}: {} {} {}", copy ? "value" : "mean",
                              leaf_text, ir::print_expr(model_, block, bad->node), bad->why,
                              leaf_text),
                  bad->node, bad->leaf);
    }
    const AffineForm& mu = std::get<AffineForm>(mean);
    int k = model_.var_shape(rel.kind, rel.var).size();
    int off = offset_of(block, rel.var);
    AffineForm form(k, ba.basis);
    for (int i = 0; i < k; ++i) {
      for (int j = 0; j < ba.basis; ++j)
        form.at(i, j) = mu.get(i, j);
      form.offset[i] = mu.off(i);
      form.at(i, ba.part + off + i) = b.add(form.at(i, ba.part + off + i), b.constant(1));
    }
    ba.targets[rel.var] = form;
    if (copy)
      return;
    int s = b.import(block, scale);
    for (int i = 0; i < k; ++i)
      for (int j = 0; j < k; ++j) {
        int& c = ba.cov[static_cast<size_t>(off + i) * ba.rows + off + j];
        if (rel.dist == ir::Dist::MvNormal)
          c = b.element(s, i * k + j);
        else if (chol) // sum over m <= min(i, j) of L[i, m] L[j, m]
          for (int m = 0; m <= std::min(i, j); ++m)
            c = b.add(c, b.mul(b.element(s, i * k + m), b.element(s, j * k + m)));
        else if (i == j)
          c = b.pow(b.element(s, b[s].shape.is_scalar() ? 0 : i), b.constant(2));
      }
  }

  // The block's matrices from its relations' forms: the coefficients of the conditioning state,
  // the offset, and the noise covariance (N Q0 N' when a relation reads another's noise).
  Matrices assemble(BlockAnalysis& ba) {
    ExprBuilder& b = ba.b;
    int rows = ba.rows, part = ba.part;
    Matrices out;
    std::vector<int> offset(rows, -1), loading(static_cast<size_t>(rows) * rows, -1);
    out.coef_grid.assign(static_cast<size_t>(rows) * part, -1);
    bool independent = true; // the loadings are the identity: no relation reads another's noise
    for (size_t v = 0; v < ba.targets.size(); ++v) {
      // A state without a relation holds a guide's network output, which the model never reads
      // (ir::Model::guide_only_state): a component that stays 0, its rows zero.
      if (!ba.targets[v])
        continue;
      const AffineForm& f = *ba.targets[v];
      int off = offset_of(ba.block, static_cast<int>(v));
      for (int i = 0; i < f.rows; ++i) {
        int row = off + i;
        for (int j = 0; j < part; ++j)
          out.coef_grid[static_cast<size_t>(row) * part + j] = f.get(i, j);
        offset[row] = f.offset[i];
        for (int j = 0; j < rows; ++j) {
          int l = f.get(i, part + j);
          loading[static_cast<size_t>(row) * rows + j] = l;
          independent = independent && (j == row ? b.is_const(l, 1) : l < 0);
        }
      }
    }
    std::vector<int>& cov = ba.cov;
    if (!independent) { // N Q0 N'
      std::vector<int> full(static_cast<size_t>(rows) * rows, -1);
      auto at = [rows](std::vector<int>& g, int i, int j) -> int& {
        return g[static_cast<size_t>(i) * rows + j];
      };
      for (int i = 0; i < rows; ++i)
        for (int k = 0; k < rows; ++k) {
          if (at(loading, i, k) < 0)
            continue;
          for (int l = 0; l < rows; ++l) {
            if (at(cov, k, l) < 0)
              continue;
            int left = b.mul(at(loading, i, k), at(cov, k, l));
            for (int j = 0; j < rows; ++j)
              at(full, i, j) = b.add(at(full, i, j), b.mul(left, at(loading, j, l)));
          }
        }
      cov = std::move(full);
    }
    if (part > 0)
      out.coef = b.build(out.coef_grid, ir::Shape::matrix(rows, part));
    out.offset = b.build(offset, ir::Shape::vector(rows));
    out.cov = b.build(cov, ir::Shape::matrix(rows, rows));
    return out;
  }
};

class LinearGaussianAnalysis : public Pass {
public:
  std::string_view name() const override { return "linear-gaussian"; }
  std::string_view description() const override {
    return "recognise a linear-Gaussian model; its matrices, symbolically";
  }
  void run(ir::Model& model, PassContext& context) override {
    if (!model.is_state_space())
      return; // a state-space analysis: its result stays empty (null in the report)
    LinearGaussian result;
    Analysis(model, result).run();
    context.linear_gaussian = std::move(result);
  }
};

} // namespace

const ir::Block& LinearGaussian::arena(ir::BlockKind kind) const {
  return kind == ir::BlockKind::Initial      ? initial
         : kind == ir::BlockKind::Transition ? transition
                                             : observation;
}

const SymbolicValue* LinearGaussian::find(std::string_view name) const {
  for (const SymbolicValue& v : matrices)
    if (v.name == name)
      return &v;
  return nullptr;
}

std::string LinearGaussian::summary() const {
  if (!is_linear_gaussian)
    return fmt::format("linear-Gaussian: no: {}", reasons.at(0).str());
  return fmt::format("linear-Gaussian: yes{} (the Kalman filter is exact)",
                     time_varying ? ", time-varying" : "");
}

std::string LinearGaussian::report() const {
  std::string out = summary() + "\n";
  if (!is_linear_gaussian) {
    for (size_t i = 1; i < reasons.size(); ++i)
      out += fmt::format("  also: {}\n", reasons[i].str());
    return out;
  }
  auto size = [](size_t n) { return fmt::format("{} component{}", n, n == 1 ? "" : "s"); };
  const SymbolicValue& P0 = *find("P0");
  const SymbolicValue& H = *find("H");
  out += fmt::format("  state vector x = ({}), {}; observation vector y = ({}), {}\n",
                     fmt::join(state_names, ", "), size(P0.shape.dims[0]),
                     fmt::join(obs_names, ", "), size(H.shape.dims[0]));
  auto section = [&](std::string_view title, std::initializer_list<std::string_view> names) {
    out += fmt::format("  {}\n", title);
    for (std::string_view name : names)
      out += fmt::format("    {:<2} = {}\n", name, find(name)->text);
  };
  section("x[0] ~ N(m0, P0)", {"m0", "P0"});
  section("x[t] = F x[t-1] + c + N(0, Q)", {"F", "c", "Q"});
  section("y[t] = H x[t] + d + N(0, R)", {"H", "d", "R"});
  for (const std::string& note : notes)
    out += fmt::format("  note: {}\n", note);
  return out;
}

std::unique_ptr<Pass> create_linear_gaussian() {
  return std::make_unique<LinearGaussianAnalysis>();
}

} // namespace ssm::passes
