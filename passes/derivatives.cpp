// Forward-mode differentiation of IR expressions and log-densities: see derivatives.h.
#include "derivatives.h"
#include "distribution_formulas.h"
#include "ir/builtins.h"
#include "ir/printer.h"
#include "pass_manager.h"
#include "passes.h"

#include <fmt/format.h>

namespace ssm::passes {

std::string Wrt::str(const ir::Model& model) const {
  if (op == ir::Op::Param) {
    const ir::Shape& s = model.params[var].shape;
    return s.is_scalar() ? model.params[var].name
                         : fmt::format("{}[{}]", model.params[var].name, component);
  }
  const bool state = op == ir::Op::State;
  const std::string& name = state ? model.states[var].name : model.obs[var].name;
  const ir::Shape& s = state ? model.states[var].shape : model.obs[var].shape;
  std::string out = fmt::format("{}[{}]", name, lag == 0 ? "t" : fmt::format("t-{}", lag));
  return s.is_scalar() ? out : fmt::format("{}[{}]", out, component);
}

int Differentiator::value(int node, int pos) {
  const int id = &from_ == &b_.arena() ? node : b_.import(from_, node);
  return b_.element(id, pos);
}

int Differentiator::operand(const ir::Node& n, int k, size_t i) {
  const bool scalar = from_.nodes[n.args[k]].shape.size() == 1;
  return value(n.args[k], scalar ? 0 : static_cast<int>(i));
}

std::vector<int> Differentiator::derivative(int node, const Wrt& wrt) {
  const auto key = std::tuple(node, static_cast<int>(wrt.op), wrt.var, wrt.lag, wrt.component);
  if (auto it = memo_.find(key); it != memo_.end())
    return it->second;
  const ir::Node n = from_.nodes.at(node); // a copy: the builder may grow from_ (its own arena)
  work_ += n.shape.size();
  std::vector<int> d = compute(n, node, wrt);
  memo_[key] = d;
  return d;
}

namespace {

bool all_zero(const std::vector<int>& d) {
  for (int v : d)
    if (v >= 0)
      return false;
  return true;
}

int at(const std::vector<int>& d, size_t i) {
  return d.size() == 1 ? d[0] : d[i];
}

// The table's derivative rules build their nodes through the simplifying builder.
class BuilderOps final : public ir::ExprOps {
public:
  explicit BuilderOps(ExprBuilder& b) : b_(b) {}
  int constant(double v) override { return b_.constant(v); }
  int materialize(int id) override { return b_.materialize(id); }
  int neg(int a) override { return b_.neg(a); }
  int add(int a, int b) override { return b_.add(a, b); }
  int sub(int a, int b) override { return b_.sub(a, b); }
  int mul(int a, int b) override { return b_.mul(a, b); }
  int div(int a, int b) override { return b_.div(a, b); }
  int call(ir::Fn fn, std::vector<int> args) override {
    return b_.call(std::string(ir::builtin(fn).name), std::move(args));
  }
  int select(int cond, int a, int b) override { return b_.select(cond, a, b); }

private:
  ExprBuilder& b_;
};

} // namespace

std::vector<int> Differentiator::compute(const ir::Node& n, int node, const Wrt& wrt) {
  const size_t size = static_cast<size_t>(n.shape.size());
  std::vector<int> d(size, -1);
  auto v = [&](int k, size_t i) { return operand(n, k, i); };
  auto select = [&](int cond, int a, int b) { return a < 0 && b < 0 ? -1 : b_.select(cond, a, b); };
  switch (n.op) {
  case ir::Op::Const:
  case ir::Op::Time:
  case ir::Op::Data:
  case ir::Op::Input:
    return d;
  case ir::Op::Param:
  case ir::Op::State:
  case ir::Op::Obs:
  case ir::Op::Latent:
    if (n.op == wrt.op && n.var == wrt.var && (n.op == ir::Op::Param || n.lag == wrt.lag) &&
        wrt.component < static_cast<int>(size))
      d[wrt.component] = b_.constant(1);
    return d;
  case ir::Op::Neg: {
    const std::vector<int> da = derivative(n.args[0], wrt);
    for (size_t i = 0; i < size; ++i)
      d[i] = b_.neg(da[i]);
    return d;
  }
  case ir::Op::Add:
  case ir::Op::Sub: {
    const std::vector<int> da = derivative(n.args[0], wrt), db = derivative(n.args[1], wrt);
    for (size_t i = 0; i < size; ++i)
      d[i] = n.op == ir::Op::Add ? b_.add(at(da, i), at(db, i)) : b_.sub(at(da, i), at(db, i));
    return d;
  }
  case ir::Op::Mul:
  case ir::Op::Div: {
    const std::vector<int> da = derivative(n.args[0], wrt), db = derivative(n.args[1], wrt);
    for (size_t i = 0; i < size; ++i) {
      const int a = v(0, i), b = v(1, i);
      if (n.op == ir::Op::Mul)
        d[i] = b_.add(b_.mul(at(da, i), b), b_.mul(a, at(db, i)));
      else // (a' b - a b') / b^2
        d[i] = b_.sub(b_.div(at(da, i), b), b_.div(b_.mul(a, at(db, i)), b_.mul(b, b)));
    }
    return d;
  }
  case ir::Op::Pow: {
    const std::vector<int> da = derivative(n.args[0], wrt), db = derivative(n.args[1], wrt);
    for (size_t i = 0; i < size; ++i) {
      const int a = v(0, i), c = v(1, i);
      int r = b_.mul(b_.mul(c, b_.pow(a, b_.sub(c, b_.constant(1)))), at(da, i));
      if (at(db, i) >= 0) // a^c log(a) c'
        r = b_.add(
            r, b_.mul(b_.mul(value(node, static_cast<int>(i)), b_.call("log", {a})), at(db, i)));
      d[i] = r;
    }
    return d;
  }
  case ir::Op::MatMul:
    return matmul(n, wrt);
  case ir::Op::Build:
    for (size_t i = 0; i < size; ++i)
      d[i] = derivative(n.args[i], wrt)[0];
    return d;
  case ir::Op::Index: {
    const std::vector<int> da = derivative(n.args[0], wrt);
    const size_t offset = ir::index_offset(from_.nodes[n.args[0]].shape, n.index);
    for (size_t i = 0; i < size; ++i)
      d[i] = da[offset + i];
    return d;
  }
  case ir::Op::DynIndex: // (a[i])' = a'[i]: the derivative of the base, indexed the same way
    return dyn_index(n, wrt);
  case ir::Op::Select: {
    const std::vector<int> da = derivative(n.args[1], wrt), db = derivative(n.args[2], wrt);
    for (size_t i = 0; i < size; ++i)
      d[i] = select(v(0, i), at(da, i), at(db, i));
    return d;
  }
  case ir::Op::Call:
    return call(n, node, wrt);
  case ir::Op::OdeTime: // the integration's own variables: its Ode node answers for them
    return d;
  case ir::Op::OdeState: // a variable of the rate's Jacobian (ode_sensitivity)
    if (wrt.op == ir::Op::OdeState && wrt.component < static_cast<int>(size))
      d[wrt.component] = b_.constant(1);
    return d;
  case ir::Op::Ode: // an ode inside another's rate (an extra argument) never reads its state
    return wrt.op == ir::Op::OdeState ? d : ode_sensitivity(n, wrt);
  case ir::Op::Net: // passes/net_outputs.cpp makes every call a state first
    throw PassError("differentiation: a network call (the runtime differentiates networks)");
  }
  return d;
}

// d y(t_i) / dw of y' = f(t, y), y(t0) = y0, by forward sensitivity: s = dy/dw solves
// s' = J_y f s + df/dw, s(t0) = dy0/dw, integrated with y as one system [y, s] by the same
// Runge-Kutta steps, so that s is exactly the derivative of the computed solution (differentiating
// the steps and integrating the sensitivities commute for Runge-Kutta methods). The new system's
// rate is built from f's copies in the arena with its current value z = [y, s] in place of y.
std::vector<int> Differentiator::ode_sensitivity(const ir::Node& n, const Wrt& wrt) {
  const int dim = from_.nodes[n.args[0]].shape.dims.at(0);
  const int rows = n.shape.dims.at(0);
  std::vector<int> d(static_cast<size_t>(rows) * dim, -1);
  const std::vector<int> dy0 = derivative(n.args[0], wrt);
  const std::vector<int> df = derivative(n.args[1], wrt); // y held fixed
  if (all_zero(dy0) && all_zero(df))
    return d;
  // J[i][j] = d f_i / d y_j.
  std::vector<std::vector<int>> jacobian(static_cast<size_t>(dim));
  for (int j = 0; j < dim; ++j) {
    const std::vector<int> column = derivative(n.args[1], {ir::Op::OdeState, 0, 0, j});
    for (int i = 0; i < dim; ++i)
      jacobian[static_cast<size_t>(i)].push_back(at(column, static_cast<size_t>(i)));
  }
  // The augmented system's current value z = [y, s] replaces the rate's y in every copy.
  ir::Node z_node;
  z_node.op = ir::Op::OdeState;
  z_node.shape = ir::Shape::vector(2 * dim);
  const int z = b_.raw(std::move(z_node));
  std::vector<int> y_elems, s_elems;
  for (int i = 0; i < dim; ++i) {
    y_elems.push_back(b_.element(z, i));
    s_elems.push_back(b_.element(z, dim + i));
  }
  const int y = b_.build(y_elems, ir::Shape::vector(dim));
  std::map<int, int> copied;
  auto on_z = [&](int id) { return id < 0 ? -1 : substitute_ode_state(id, dim, y, copied); };
  std::vector<int> rate, start;
  for (int i = 0; i < dim; ++i)
    rate.push_back(on_z(value(n.args[1], i)));
  for (int i = 0; i < dim; ++i) {
    int ds = on_z(at(df, static_cast<size_t>(i)));
    for (int j = 0; j < dim; ++j)
      if (const int jij = jacobian[static_cast<size_t>(i)][static_cast<size_t>(j)]; jij >= 0)
        ds = b_.add(ds, b_.mul(on_z(jij), s_elems[static_cast<size_t>(j)]));
    rate.push_back(b_.materialize(ds));
  }
  for (int i = 0; i < dim; ++i)
    start.push_back(value(n.args[0], i));
  for (int i = 0; i < dim; ++i)
    start.push_back(b_.materialize(at(dy0, static_cast<size_t>(i))));
  ir::Node augmented = n;
  augmented.args = {b_.build(start, ir::Shape::vector(2 * dim)),
                    b_.build(rate, ir::Shape::vector(2 * dim))};
  augmented.shape = ir::Shape::matrix(rows, 2 * dim);
  const int solution = b_.raw(std::move(augmented));
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < dim; ++i)
      d[static_cast<size_t>(r) * dim + i] = b_.element(solution, r * 2 * dim + dim + i);
  return d;
}

// The arena expression `id` with every OdeState of length `dim` replaced by the node `y`.
int Differentiator::substitute_ode_state(int id, int dim, int y, std::map<int, int>& copied) {
  if (auto it = copied.find(id); it != copied.end())
    return it->second;
  ir::Node node = b_.arena().nodes.at(id); // a copy: the builder grows the arena
  int result = id;
  if (node.op == ir::Op::OdeState && node.shape == ir::Shape::vector(dim)) {
    result = y;
  } else if (!node.args.empty() && node.op != ir::Op::Ode) { // another ode reads its own state
    bool changed = false;
    for (int& a : node.args) {
      const int replaced = substitute_ode_state(a, dim, y, copied);
      changed = changed || replaced != a;
      a = replaced;
    }
    if (changed)
      result = b_.raw(std::move(node));
  }
  copied[id] = result;
  return result;
}

// The product rule, element by element: (A B)' = A' B + A B'.
std::vector<int> Differentiator::matmul(const ir::Node& n, const Wrt& wrt) {
  std::vector<int> d(static_cast<size_t>(n.shape.size()), -1);
  const std::vector<int> da = derivative(n.args[0], wrt), db = derivative(n.args[1], wrt);
  const ir::Shape& lhs = from_.nodes[n.args[0]].shape;
  const int rows = lhs.dims[0], inner = lhs.dims[1];
  const int cols = n.shape.rank() == 2 ? n.shape.dims[1] : 1;
  work_ += int64_t{rows} * inner * cols;
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      int s = -1;
      for (int k = 0; k < inner; ++k) {
        s = b_.add(s, b_.mul(da[i * inner + k], value(n.args[1], k * cols + j)));
        s = b_.add(s, b_.mul(value(n.args[0], i * inner + k), db[k * cols + j]));
      }
      d[i * cols + j] = s;
    }
  return d;
}

std::vector<int> Differentiator::dyn_index(const ir::Node& n, const Wrt& wrt) {
  const size_t size = static_cast<size_t>(n.shape.size());
  std::vector<int> d(size, -1);
  const std::vector<int> da = derivative(n.args[0], wrt);
  if (all_zero(da))
    return d;
  std::vector<int> elems(da.size());
  for (size_t k = 0; k < da.size(); ++k)
    elems[k] = b_.materialize(da[k]);
  ir::Node base;
  base.op = ir::Op::Build;
  base.args = elems;
  base.shape = from_.nodes[n.args[0]].shape;
  ir::Node dyn;
  dyn.op = ir::Op::DynIndex;
  dyn.args = {b_.raw(std::move(base)), value(n.args[1], 0)};
  dyn.shape = n.shape;
  const int id = b_.raw(std::move(dyn));
  for (size_t i = 0; i < size; ++i)
    d[i] = b_.element(id, static_cast<int>(i));
  return d;
}

// Op::Call: the function's rule in the table of built-ins.
std::vector<int> Differentiator::call(const ir::Node& n, int node, const Wrt& wrt) {
  const size_t size = static_cast<size_t>(n.shape.size());
  std::vector<int> d(size, -1);
  auto v = [&](int k, size_t i) { return operand(n, k, i); };
  const ir::Builtin* f = ir::find_builtin(n.fn);
  if (!f)
    throw PassError(fmt::format("differentiation: unknown function {}()", n.fn));
  const std::vector<int> da = derivative(n.args[0], wrt);
  const std::vector<int> db = n.args.size() > 1 ? derivative(n.args[1], wrt) : std::vector<int>{-1};
  if (f->piecewise_constant || (all_zero(da) && all_zero(db)))
    return d; // piecewise constant: zero almost everywhere
  if (!f->derivative)
    throw PassError(fmt::format("differentiation: no derivative for {}() yet", n.fn));
  BuilderOps ops(b_);
  if (f->shape != ir::FnShape::Elementwise) {
    ir::CallElements e;
    e.a = [&](size_t k) { return value(n.args[0], static_cast<int>(k)); };
    e.c = [&](size_t k) { return value(n.args[1], static_cast<int>(k)); };
    e.self = [&](size_t k) { return value(node, static_cast<int>(k)); };
    e.da = da;
    e.dc = db;
    return f->derivative(ops, e);
  }
  for (size_t i = 0; i < size; ++i) {
    const int a = v(0, i), self = value(node, static_cast<int>(i));
    ir::CallElements e;
    e.a = [a](size_t) { return a; };
    e.self = [self](size_t) { return self; };
    e.c = [&, i](size_t) { return v(1, i); };
    e.da = {at(da, i)};
    e.dc = {at(db, i)};
    d[i] = f->derivative(ops, e).at(0);
  }
  return d;
}

namespace {

// The op of a relation's target as a leaf of an expression (State, Obs or Param).
ir::Op target_op(const ir::Relation& rel) {
  return rel.kind == ir::VarKind::Obs     ? ir::Op::Obs
         : rel.kind == ir::VarKind::Param ? ir::Op::Param
                                          : ir::Op::State;
}

// What a relation's log-density formula builds from: its arguments imported into the arena and
// its target at lag 0. The builder merges equal nodes, so building these twice gives one set.
LogDensityTerms density_terms(const ir::Model& model, const ir::Block& block,
                              const ir::Relation& rel, ExprBuilder& b) {
  const ir::Shape& shape = model.var_shape(rel.kind, rel.var);
  ir::Node target;
  target.op = target_op(rel);
  target.var = rel.var;
  target.shape = shape;
  const int x_node = b.raw(std::move(target));
  std::vector<int> args;
  for (int a : rel.args)
    args.push_back(b.import(block, a));
  return LogDensityTerms{b, std::move(args), x_node, shape};
}

} // namespace

std::optional<int> log_density(const ir::Model& model, const ir::Block& block,
                               const ir::Relation& rel, ExprBuilder& b, std::string& why) {
  LogDensityTerms f = density_terms(model, block, rel, b);
  const ir::Shape& shape = f.shape;
  const DistFormulas formulas = distribution_formulas(rel.dist);
  if (formulas.whole_target)
    return formulas.log_density(f, -1, -1);
  int total = -1;
  for (int i = 0; i < shape.size(); ++i) {
    const int x = b.element(f.x_node, i);
    if (!formulas.log_density) {
      why = formulas.none;
      return std::nullopt;
    }
    int lp = formulas.log_density(f, x, i);
    if (lp < 0) {
      why = fmt::format("no log-density formula for {} yet", ir::dist_info(rel.dist).name);
      return std::nullopt;
    }
    // A missing component of a vector observation adds nothing, as in the density kernels (a
    // whole missing observation is add_to_score's); its derivatives then are 0, not NaN.
    if (rel.kind == ir::VarKind::Obs && shape.size() > 1)
      lp = b.select(b.call("ne", {x, x}), -1, lp);
    total = b.add(total, lp);
  }
  return b.materialize(total);
}

int log_density_derivative(const ir::Model& model, const ir::Relation& rel,
                           const LogDensityAdjoints& adjoints, Differentiator& from_block,
                           ExprBuilder& b, const Wrt& wrt) {
  int sum = -1;
  auto add = [&](int adjoint, int d) {
    if (adjoint >= 0 && d >= 0)
      sum = b.add(sum, b.mul(adjoint, d));
  };
  if (adjoints.args.size() != rel.args.size())
    throw PassError(fmt::format("internal: {} adjoints for {} arguments of {}",
                                adjoints.args.size(), rel.args.size(),
                                ir::dist_info(rel.dist).name));
  for (size_t k = 0; k < rel.args.size(); ++k) {
    const std::vector<int>& adjoint = adjoints.args[k];
    const std::vector<int> d = from_block.derivative(rel.args[k], wrt);
    if (d.size() != 1 && d.size() != adjoint.size())
      throw PassError(fmt::format("internal: argument {} of {} has {} components, its adjoint {}",
                                  k, ir::dist_info(rel.dist).name, d.size(), adjoint.size()));
    for (size_t i = 0; i < adjoint.size(); ++i)
      add(adjoint[i], d.size() == 1 ? d[0] : d[i]);
  }
  const ir::Op target = target_op(rel);
  if (wrt.op == target && wrt.var == rel.var && (target == ir::Op::Param || wrt.lag == 0) &&
      wrt.component < model.var_shape(rel.kind, rel.var).size())
    add(adjoints.target.at(wrt.component), b.constant(1));
  return sum;
}

std::optional<LogDensityAdjoints> log_density_adjoints(const ir::Model& model,
                                                       const ir::Block& block,
                                                       const ir::Relation& rel, ExprBuilder& b) {
  const DistFormulas formulas = distribution_formulas(rel.dist);
  if (!formulas.adjoints)
    return std::nullopt;
  LogDensityTerms f = density_terms(model, block, rel, b);
  return formulas.adjoints(f);
}

int64_t Derivatives::score_size() const {
  return size(score_terms);
}

int64_t Derivatives::size(const std::vector<int>& outputs) const {
  std::vector<bool> seen(arena.nodes.size(), false);
  std::vector<int> pending;
  for (int id : outputs)
    if (id >= 0)
      pending.push_back(id);
  int64_t count = 0;
  while (!pending.empty()) {
    const int id = pending.back();
    pending.pop_back();
    if (seen[id])
      continue;
    seen[id] = true;
    ++count;
    for (int a : arena.nodes[id].args)
      pending.push_back(a);
  }
  return count;
}

namespace {

// Whether a deterministic relation (a `dirac` copy, as augment-lags makes) reads a parameter: then
// the score is not the sum of log-density gradients.
bool reads_parameter(const ir::Relation& rel, Differentiator& d, const std::vector<Wrt>& params) {
  for (int arg : rel.args)
    for (const Wrt& w : params)
      for (int node : d.derivative(arg, w))
        if (node >= 0)
          return true;
  return false;
}

// Adds the relation's log-density gradient to the score terms of its block (0 where its
// observation is missing: every component of it, as the density kernels skip it).
void add_to_score(const ir::Model& model, const ir::Relation& rel, const std::vector<int>& grad,
                  ExprBuilder& b, std::vector<int>& terms) {
  int missing = -1;
  if (rel.kind == ir::VarKind::Obs) {
    ir::Node y;
    y.op = ir::Op::Obs;
    y.shape = model.var_shape(rel.kind, rel.var);
    y.var = rel.var;
    const int target = b.raw(y);
    for (int c = 0; c < y.shape.size(); ++c) {
      const int yc = b.element(target, c);
      const int nan = b.call("ne", {yc, yc});
      missing = missing < 0 ? nan : b.call("and", {missing, nan});
    }
  }
  for (size_t k = 0; k < grad.size(); ++k) {
    if (grad[k] < 0)
      continue;
    const int g = missing < 0 ? grad[k] : b.select(missing, -1, grad[k]);
    terms[k] = terms[k] < 0 ? g : b.add(terms[k], g);
  }
}

class DerivativesAnalysis : public Pass {
public:
  std::string_view name() const override { return "derivatives"; }
  std::string_view description() const override {
    return "Jacobians of relation locations, gradients of log-densities and the score terms, as "
           "IR";
  }
  void run(ir::Model& model, PassContext& context) override {
    if (!model.is_state_space())
      return; // a state-space analysis: its result stays empty (null in the report)
    Derivatives result;
    ExprBuilder b(result.arena);
    const int n = model.state_size(), n_theta = model.theta_size();
    std::vector<Wrt> params;
    for (size_t k = 0; k < model.params.size(); ++k)
      for (int c = 0; c < model.params[k].shape.size(); ++c)
        params.push_back({ir::Op::Param, static_cast<int>(k), 0, c});
    // Per block, the sum of its relations' parameter gradients: initial, transition, observation;
    // and of their gradients in x[t].
    std::map<ir::BlockKind, std::vector<int>> score, state_grad, prev_grad;
    std::vector<Wrt> current; // x[t]
    for (size_t s = 0; s < model.states.size(); ++s)
      for (int c = 0; c < model.states[s].shape.size(); ++c)
        current.push_back({ir::Op::State, static_cast<int>(s), 0, c});
    // A plate model's items have no x[t-1].
    const bool over_time = !model.items;
    int64_t params_work = 0; // the parameter gradients' derivation so far (kMaxScoreDerivationWork)
    int64_t argument_work = 0; // forward steps through the arguments: they count a tenth
    auto over_budget = [&] { return params_work + argument_work / 10 > kMaxScoreDerivationWork; };
    for (const ir::Block* block : {&model.initial, &model.transition, &model.observation}) {
      const int lag = block == &model.transition ? 1 : 0;
      Differentiator from_block(*block, b), in_arena(result.arena, b);
      std::vector<Wrt> states;
      for (size_t s = 0; s < model.states.size(); ++s)
        for (int c = 0; c < model.states[s].shape.size(); ++c)
          states.push_back({ir::Op::State, static_cast<int>(s), lag, c});
      std::vector<int>& terms = score[block->kind];
      terms.assign(n_theta, -1);
      std::vector<int>& state_terms = state_grad[block->kind];
      state_terms.assign(n, -1);
      std::vector<int>& prev_terms = prev_grad[block->kind];
      prev_terms.assign(n, -1);
      for (const ir::Relation& rel : block->relations) {
        RelationDerivatives r;
        r.block = block->kind;
        r.relation = ir::relation_summary(fmt::format("{}[{}]", model.var_name(rel.kind, rel.var),
                                                      block == &model.initial ? "0" : "t"),
                                          rel.dist);
        const int location = ir::dist_info(rel.dist).location;
        if (location >= 0) {
          const int rows = model.var_shape(rel.kind, rel.var).size();
          r.location_jacobian.assign(static_cast<size_t>(rows) * n, -1);
          for (size_t j = 0; j < states.size(); ++j) {
            const std::vector<int> dj = from_block.derivative(rel.args[location], states[j]);
            for (int i = 0; i < rows; ++i)
              r.location_jacobian[static_cast<size_t>(i) * n + j] = dj.size() == 1 ? dj[0] : dj[i];
          }
        }
        if (std::optional<int> lp = log_density(model, *block, rel, b, r.why_not)) {
          r.log_density = *lp;
          // Through the density's closed-form gradient where it has one (mvnormal), else
          // forward mode through its formula.
          const size_t nodes_before = result.arena.nodes.size();
          const std::optional<LogDensityAdjoints> adjoints =
              log_density_adjoints(model, *block, rel, b);
          params_work += static_cast<int64_t>(result.arena.nodes.size() - nodes_before);
          auto derivative = [&](const Wrt& w) {
            return adjoints ? log_density_derivative(model, rel, *adjoints, from_block, b, w)
                            : in_arena.derivative(*lp, w)[0];
          };
          for (const Wrt& w : states)
            r.grad_state.push_back(derivative(w));
          for (const Wrt& w : params) {
            if (over_budget())
              break;
            // A step of forward mode through the arguments mostly passes zeros along: the 10-D
            // linear-Gaussian example's 3 x 10^5 take 15 ms, where 10^6 steps through the
            // log-density took 500 ms. So they count a tenth, and the nodes built count whole.
            const int64_t steps = in_arena.work(), argument_steps = from_block.work();
            const size_t nodes = result.arena.nodes.size();
            r.grad_params.push_back(derivative(w));
            if (adjoints) {
              params_work += static_cast<int64_t>(result.arena.nodes.size() - nodes);
              argument_work += from_block.work() - argument_steps;
            } else {
              params_work += in_arena.work() - steps;
            }
          }
          if (over_budget() && result.score_why_not.empty())
            result.score_why_not = fmt::format(
                "its score terms are too large to derive element by element ({} parameter "
                "components; more than {} derivative steps), as a model with large matrix "
                "parameters",
                n_theta, kMaxScoreDerivationWork);
          r.grad_params.resize(n_theta, -1); // what was not derived is left out: no score
          add_to_score(model, rel, r.grad_params, b, terms);
          std::vector<int> at_t = r.grad_state; // x[t] is the block's own lag but in transitions
          if (lag == 1)
            for (size_t j = 0; j < current.size(); ++j)
              at_t[j] = derivative(current[j]);
          add_to_score(model, rel, at_t, b, state_terms);
          // In x[t-1], the transition's own lag: an observation that reads x[t-1] reads a hidden
          // copy at lag 0 (augment-lags), whose dirac leaves the model without a state gradient.
          if (over_time && lag == 1)
            add_to_score(model, rel, r.grad_state, b, prev_terms);
        } else if (rel.dist == ir::Dist::Diffusion) {
          result.score_lacks_sde_term = true; // estimated at run time, or no score (ssmc main)
        } else if (rel.dist != ir::Dist::Dirac || reads_parameter(rel, from_block, params)) {
          if (result.score_why_not.empty())
            result.score_why_not =
                fmt::format("{} ({}): {}", r.relation, ir::block_name(r.block),
                            rel.dist == ir::Dist::Dirac
                                ? "a deterministic relation that reads a parameter (the score "
                                  "would need the state's derivative in it, carried through "
                                  "time: not supported yet)"
                                : r.why_not);
        }
        if (r.log_density < 0 && result.state_gradient_why_not.empty())
          result.state_gradient_why_not =
              fmt::format("{} ({}): {}", r.relation, ir::block_name(r.block),
                          r.why_not.empty() ? "a deterministic relation has no density in its "
                                              "target"
                                            : r.why_not);
        result.relations.push_back(std::move(r));
      }
    }
    if (result.state_gradient_why_not.empty()) {
      result.state_gradient = step_terms(state_grad, n, b);
      if (over_time)
        result.prev_state_gradient = step_terms(prev_grad, n, b);
    }
    prior_terms(model, b, params, result);
    if (result.score_why_not.empty())
      result.score_terms = step_terms(score, n_theta, b);
    guide_terms(model, b, result);
    context.derivatives = std::move(result);
  }

private:
  // Per component, the step's sum: the initial block's term at t = 0, the transition's after,
  // plus the observation's; -1 where all are zero.
  static std::vector<int> step_terms(const std::map<ir::BlockKind, std::vector<int>>& per_block,
                                     int size, ExprBuilder& b) {
    const int first = b.call("eq", {b.raw(time_node()), b.constant(0.0)});
    const std::vector<int>&init = per_block.at(ir::BlockKind::Initial),
          &trans = per_block.at(ir::BlockKind::Transition),
          &obs = per_block.at(ir::BlockKind::Observation);
    std::vector<int> out;
    for (int k = 0; k < size; ++k) {
      int step = init[k] < 0 && trans[k] < 0 ? -1 : b.select(first, init[k], trans[k]);
      if (obs[k] >= 0)
        step = step < 0 ? obs[k] : b.add(step, obs[k]);
      out.push_back(step);
    }
    return out;
  }

  // The log prior density of the parameters with a prior and its gradient in every theta
  // component, or the reason there is none.
  static void prior_terms(const ir::Model& model, ExprBuilder& b, const std::vector<Wrt>& params,
                          Derivatives& result) {
    int lp = -1;
    for (const ir::Relation& rel : model.prior.relations) {
      std::string why;
      const std::optional<int> term = log_density(model, model.prior, rel, b, why);
      if (!term) {
        result.prior_why_not = fmt::format("the prior of {} ({}): {}", model.params[rel.var].name,
                                           ir::dist_info(rel.dist).name, why);
        return;
      }
      lp = lp < 0 ? *term : b.add(lp, *term);
    }
    Differentiator in_arena(result.arena, b);
    result.prior_terms.push_back(b.materialize(lp));
    for (const Wrt& w : params)
      result.prior_terms.push_back(lp < 0 ? -1 : in_arena.derivative(lp, w)[0]);
  }

  // The guide's arguments and their Jacobian in the network outputs it reads (structure.h).
  static void guide_terms(const ir::Model& model, ExprBuilder& b, Derivatives& result) {
    const ir::Block& guide = model.guide;
    if (guide.relations.empty() || !model.items) // a state-space model's is the runtime's
      return;
    for (int var : model.guide_input_states())
      for (int c = 0; c < model.states[var].shape.size(); ++c)
        result.guide_inputs.emplace_back(var, c);
    Differentiator from_guide(guide, b);
    std::vector<int> jacobian;
    int row = 0;
    for (const ir::Relation& rel : guide.relations)
      for (int arg : rel.args)
        for (int pos = 0; pos < guide.nodes[arg].shape.size(); ++pos, ++row) {
          result.guide_arguments.push_back(b.materialize(from_guide.value(arg, pos)));
          for (size_t col = 0; col < result.guide_inputs.size(); ++col) {
            const auto [state, component] = result.guide_inputs[col];
            const std::vector<int> d =
                from_guide.derivative(arg, {ir::Op::State, state, 0, component});
            if (const int entry = d.size() == 1 ? d[0] : d[pos]; entry >= 0) {
              jacobian.push_back(entry);
              result.guide_jacobian.emplace_back(row, static_cast<int>(col));
            }
          }
        }
    result.guide_arguments.insert(result.guide_arguments.end(), jacobian.begin(), jacobian.end());
  }

  static ir::Node time_node() {
    ir::Node t;
    t.op = ir::Op::Time;
    t.shape = ir::Shape{};
    return t;
  }
};

} // namespace

std::unique_ptr<Pass> create_derivatives() {
  return std::make_unique<DerivativesAnalysis>();
}

} // namespace ssm::passes
