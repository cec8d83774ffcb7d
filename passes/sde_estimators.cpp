// sde-estimators: what the unbiased estimators of an SDE transition's density need, and which of
// them apply (structure.h, SdeEstimators). The drift, its Jacobian in the path (the
// differentiation pass), the diffusion coefficient and dt become expressions of the path's value
// in an arena, which codegen compiles into ssm_diffusion_terms for the runtime's estimators
// (runtime/sde/). The General Poisson estimator's condition, psi bounded below, is checked by
// interval arithmetic over the real line, parameters within their declared bounds.
#include "derivatives.h"
#include "passes.h"

#include "ir/builtins.h"
#include "ir/printer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

namespace ssm::passes {

namespace {

// An interval [lo, hi] of a scalar as arena expressions of what is known at run time (parameters,
// data, inputs, t); nullopt on a side that is unbounded, or whose bound the rules below do not
// find. `positive`: a point known not to be negative (a positive constant, a parameter declared
// real(0, ...), a square): a divisor that is 0 at run time makes the bound infinite or NaN, and
// the estimator refuses it (runtime/sde), as it refuses a zero diffusion coefficient.
struct Interval {
  std::optional<int> lo, hi;
  bool positive = false;
  bool point() const { return lo && hi && *lo == *hi; }
};

// Bounds of a scalar arena node over every value of the path (a state at lag 0), as expressions
// of the run-time constants: the General Poisson estimator's bounds of psi, which the runtime
// evaluates at the parameters it runs with.
class SymbolicBounds {
public:
  SymbolicBounds(const ir::Model& model, ExprBuilder& b) : model_(model), b_(b) {}

  Interval of(int id) {
    if (auto it = memo_.find(id); it != memo_.end())
      return it->second;
    return memo_[id] = compute(id, b_[id]);
  }

private:
  Interval point(int id, bool positive = false) { return {id, id, positive}; }

  Interval compute(int id, const ir::Node n) {
    if (!n.shape.is_scalar())
      return {};
    switch (n.op) {
    case ir::Op::Const:
      return point(id, n.values[0] > 0);
    case ir::Op::Param:
      return point(id, model_.params[n.var].lower >= 0);
    case ir::Op::Time:
    case ir::Op::Data:
    case ir::Op::Input:
    case ir::Op::Obs:
      return point(id);
    case ir::Op::Neg: {
      const Interval a = of(n.args[0]);
      return {neg(a.hi), neg(a.lo)};
    }
    case ir::Op::Add: {
      const Interval a = of(n.args[0]), c = of(n.args[1]);
      return {both(a.lo, c.lo, [&](int x, int y) { return b_.add(x, y); }),
              both(a.hi, c.hi, [&](int x, int y) { return b_.add(x, y); })};
    }
    case ir::Op::Sub: {
      const Interval a = of(n.args[0]), c = of(n.args[1]);
      return {both(a.lo, c.hi, [&](int x, int y) { return b_.sub(x, y); }),
              both(a.hi, c.lo, [&](int x, int y) { return b_.sub(x, y); })};
    }
    case ir::Op::Mul:
      return n.args[0] == n.args[1] ? square(of(n.args[0])) : mul(of(n.args[0]), of(n.args[1]));
    case ir::Op::Div: {
      const Interval c = of(n.args[1]);
      if (!c.point() || !c.positive)
        return {};
      return mul(of(n.args[0]), point(b_.div(b_.constant(1), *c.lo), true));
    }
    case ir::Op::Pow: {
      const ir::Node& e = b_[n.args[1]];
      if (e.op == ir::Op::Const && e.values[0] == 2)
        return square(of(n.args[0]));
      return {};
    }
    case ir::Op::Call:
      return call(n);
    default:
      return {};
    }
  }

  template <class F>
  static std::optional<int> both(std::optional<int> x, std::optional<int> y, F f) {
    if (!x || !y)
      return std::nullopt;
    return f(*x, *y);
  }
  std::optional<int> neg(std::optional<int> x) {
    return x ? std::optional(b_.neg(*x)) : std::nullopt;
  }
  int min(int x, int y) { return b_.call("min", {x, y}); }
  int max(int x, int y) { return b_.call("max", {x, y}); }

  // A product: exact when both sides are bounded (the extremes of the corners), or when one side
  // is a point of known sign; otherwise unbounded.
  Interval mul(Interval a, Interval c) {
    if (a.point() && a.positive)
      return {both(a.lo, c.lo, [&](int x, int y) { return b_.mul(x, y); }),
              both(a.hi, c.hi, [&](int x, int y) { return b_.mul(x, y); }), c.positive};
    if (c.point() && c.positive)
      return mul(c, a);
    if (!(a.lo && a.hi && c.lo && c.hi))
      return {};
    const int p[] = {b_.mul(*a.lo, *c.lo), b_.mul(*a.lo, *c.hi), b_.mul(*a.hi, *c.lo),
                     b_.mul(*a.hi, *c.hi)};
    return {min(min(p[0], p[1]), min(p[2], p[3])), max(max(p[0], p[1]), max(p[2], p[3]))};
  }

  // a^2: at least max(0, a.lo, -a.hi)^2 (0 when the interval holds 0); at most the larger end's.
  Interval square(Interval a) {
    if (a.point()) // a point's square is one too; taken as positive (a divisor of 0 fails anyway)
      return point(b_.mul(*a.lo, *a.lo), true);
    const int zero = b_.constant(0);
    int below = zero;
    if (a.lo)
      below = max(below, *a.lo);
    if (a.hi)
      below = max(below, b_.neg(*a.hi));
    Interval out{b_.mul(below, below), std::nullopt};
    if (a.lo && a.hi)
      out.hi = max(b_.mul(*a.lo, *a.lo), b_.mul(*a.hi, *a.hi));
    return out;
  }

  Interval call(const ir::Node& n) {
    const ir::Builtin* f = ir::find_builtin(n.fn);
    if (!f || n.args.empty())
      return {};
    auto constant = [&](double lo, double hi) {
      return Interval{b_.constant(lo), b_.constant(hi)};
    };
    const Interval a = of(n.args[0]);
    switch (f->fn) {
    case ir::Fn::Sin:
    case ir::Fn::Cos:
    case ir::Fn::Tanh:
    case ir::Fn::Erf:
      return constant(-1, 1);
    case ir::Fn::Logistic:
    case ir::Fn::Phi:
      return constant(0, 1);
    case ir::Fn::Atan:
      return constant(-M_PI / 2, M_PI / 2);
    case ir::Fn::Exp:
      return {a.lo ? b_.call("exp", {*a.lo}) : b_.constant(0),
              a.hi ? std::optional(b_.call("exp", {*a.hi})) : std::nullopt};
    default:
      return {};
    }
  }

  const ir::Model& model_;
  ExprBuilder& b_;
  std::map<int, Interval> memo_;
};

// The first state or observation the node reads other than the path itself (x[t] of `state`), as
// a reason; empty when it reads none. (The estimators evaluate their terms at the path's points
// alone: no particle's past is at hand.)
std::string other_state(const ir::Model& model, const ir::Block& block, int node, int state) {
  const std::vector<bool> reached = ir::reached_from(block, {node});
  for (size_t i = 0; i < block.nodes.size(); ++i) {
    const ir::Node& n = block.nodes[i];
    const bool other =
        (n.op == ir::Op::State && !(n.var == state && n.lag == 0)) || n.op == ir::Op::Obs;
    if (reached[i] && other)
      return fmt::format("{}[{}]",
                         n.op == ir::Op::Obs ? model.obs[n.var].name
                                             : ir::shown_state_name(model.states[n.var].name),
                         n.lag == 0 ? "t" : fmt::format("t-{}", n.lag));
  }
  return {};
}

class SdeEstimatorsAnalysis : public Pass {
public:
  std::string_view name() const override { return "sde-estimators"; }
  std::string_view description() const override {
    return "for an SDE transition: the terms its density estimators evaluate; which apply";
  }

  void run(ir::Model& model, PassContext& context) override {
    if (!model.is_state_space())
      return;
    const ir::Block& block = model.transition;
    const auto sde =
        std::find_if(block.relations.begin(), block.relations.end(),
                     [](const ir::Relation& r) { return r.dist == ir::Dist::Diffusion; });
    if (sde == block.relations.end())
      return;
    const ir::Relation& rel = *sde;
    SdeEstimators out;
    out.state = rel.var;
    out.relation = fmt::format("{}[t]", model.states[rel.var].name);
    out.loc = rel.loc;
    out.dim = model.states[rel.var].shape.size();
    out.steps = static_cast<int>(block.nodes[rel.args[4]].values.at(0));
    const int drift = rel.args[1], sigma = rel.args[2], dt = rel.args[3];
    const ir::Shape& sigma_shape = block.nodes[sigma].shape;
    out.coefficient = sigma_shape.rank() == 2   ? SdeCoefficient::Matrix
                      : sigma_shape.rank() == 1 ? SdeCoefficient::Vector
                                                : SdeCoefficient::Scalar;
    const std::vector<bool> path_nodes = ir::reached_from(block, {sigma});
    out.coefficient_constant = true;
    for (size_t i = 0; i < block.nodes.size(); ++i)
      if (path_nodes[i] && block.nodes[i].op == ir::Op::State)
        out.coefficient_constant = false;

    out.why_not = scope_problem(model, rel);
    if (!out.why_not.empty()) {
      out.gpe_why_not = out.gradient_why_not = out.parametrix_why_not = out.why_not;
      context.sde = std::move(out);
      return;
    }

    ExprBuilder b(out.arena);
    Differentiator d(block, b);
    const int d_drift = b.import(block, drift);
    std::vector<int> alpha, jacobian(out.dim * out.dim, -1);
    for (int i = 0; i < out.dim; ++i)
      alpha.push_back(b.element(d_drift, block.nodes[drift].shape.is_scalar() ? 0 : i));
    for (int j = 0; j < out.dim; ++j) {
      const std::vector<int> col = d.derivative(drift, {ir::Op::State, rel.var, 0, j});
      for (int i = 0; i < out.dim; ++i)
        jacobian[i * out.dim + j] = b.materialize(col.size() == 1 ? col[0] : col[i]);
    }
    const int s = b.import(block, sigma);
    std::vector<int> coefficient;
    for (int i = 0; i < sigma_shape.size(); ++i)
      coefficient.push_back(b.element(s, i));
    out.outputs = alpha;
    out.outputs.insert(out.outputs.end(), jacobian.begin(), jacobian.end());
    out.outputs.insert(out.outputs.end(), coefficient.begin(), coefficient.end());
    out.outputs.push_back(b.element(b.import(block, dt), 0));
    const int unbounded_below = b.constant(-INFINITY), unbounded_above = b.constant(INFINITY);
    out.psi_lower = out.drift_lower = unbounded_below;
    out.psi_upper = out.drift_upper = unbounded_above;

    // The model's bounds of psi (psi_lower, psi_upper): constants -inf and inf when not given.
    const std::optional<int> given_lower = given_bound(b, block, rel.args[5], -INFINITY);
    const std::optional<int> given_upper = given_bound(b, block, rel.args[6], INFINITY);
    out.psi_lower_given = given_lower.has_value();
    out.psi_upper_given = given_upper.has_value();
    out.gpe_why_not = gpe_problem(out);
    if (out.gpe_why_not.empty() && !out.coefficient_constant) {
      // psi in Lamperti's coordinate, (b^2 + b') / 2 with b = drift / |s| - |s|' / 2, is not
      // within the reach of the intervals below (quotients by the path): the model's bounds.
      if (!given_lower)
        out.gpe_why_not = "the diffusion coefficient reads the path, and psi in Lamperti's "
                          "coordinate, (b^2 + b') / 2 with b = drift / |diffusion| - "
                          "|diffusion|' / 2, has no lower bound from the model (psi_lower = ... "
                          "in diffusion(...) gives one)";
      out.psi_lower = given_lower ? *given_lower : b.constant(-INFINITY);
      out.psi_upper = given_upper ? *given_upper : b.constant(INFINITY);
      out.psi_lower_text = ir::print_expr(model, out.arena, out.psi_lower);
      out.psi_upper_text = ir::print_expr(model, out.arena, out.psi_upper);
    } else if (out.gpe_why_not.empty()) {
      // psi over the real line: (alpha^2 / sigma^2 + alpha') / 2 at x = sigma u.
      const int a = alpha[0], sg = coefficient[0];
      const int psi = b.div(b.add(b.div(b.mul(a, a), b.mul(sg, sg)), jacobian[0]), b.constant(2));
      SymbolicBounds bounds(model, b);
      Interval i = bounds.of(psi);
      // The model's bounds and the compiler's hold together: the tighter of each pair.
      i.lo = both_or_either(i.lo, given_lower, [&](int x, int y) { return b.call("max", {x, y}); });
      i.hi = both_or_either(i.hi, given_upper, [&](int x, int y) { return b.call("min", {x, y}); });
      if (!i.lo)
        out.gpe_why_not = "psi = (drift^2 / diffusion^2 + drift') / 2 is not bounded below as far "
                          "as the compiler can tell (psi_lower = ... in diffusion(...) gives a "
                          "bound)";
      out.psi_lower = i.lo ? *i.lo : b.constant(-INFINITY);
      out.psi_upper = i.hi ? *i.hi : b.constant(INFINITY);
      out.psi_lower_text = ir::print_expr(model, out.arena, out.psi_lower);
      out.psi_upper_text = ir::print_expr(model, out.arena, out.psi_upper);
      // The drift's bounds: with psi's, they bound the estimates (rejection sampling).
      const Interval drift_range = bounds.of(alpha[0]);
      if (drift_range.lo && drift_range.hi) {
        out.drift_lower = *drift_range.lo;
        out.drift_upper = *drift_range.hi;
      }
    }
    out.outputs.push_back(out.psi_lower);
    out.outputs.push_back(out.psi_upper);
    out.outputs.push_back(out.drift_lower);
    out.outputs.push_back(out.drift_upper);
    out.gradient_why_not = gradient_problem(model, block, rel, out);
    if (out.gradient_why_not.empty()) {
      // d alpha_i / d theta_k from the block (row i K + k); d (div alpha) / d theta_k from the
      // Jacobian's trace in the arena.
      Differentiator in_arena(out.arena, b);
      const std::vector<Wrt> wrt = parameters(model);
      const auto K = static_cast<int>(wrt.size());
      std::vector<int> drift_theta(out.dim * K), divergence_theta;
      int divergence = jacobian[0];
      for (int i = 1; i < out.dim; ++i)
        divergence = b.add(divergence, jacobian[i * out.dim + i]);
      for (int k = 0; k < K; ++k) {
        const std::vector<int> by_component = d.derivative(drift, wrt[k]);
        for (int i = 0; i < out.dim; ++i)
          drift_theta[i * K + k] =
              b.materialize(by_component.size() == 1 ? by_component[0] : by_component[i]);
        divergence_theta.push_back(b.materialize(in_arena.derivative(divergence, wrt[k])[0]));
      }
      out.outputs.insert(out.outputs.end(), drift_theta.begin(), drift_theta.end());
      out.outputs.insert(out.outputs.end(), divergence_theta.begin(), divergence_theta.end());
      out.gradient_rows = static_cast<int>(drift_theta.size() + divergence_theta.size());
      if (parameter_read(block, sigma) >= 0) {
        // A scalar coefficient s(theta), constant in the path: d s / d theta_k, then drift''
        // (psi's derivative along the bridge, whose points x = s w move with s).
        for (int k = 0; k < K; ++k)
          out.outputs.push_back(b.materialize(d.derivative(sigma, wrt[k])[0]));
        out.outputs.push_back(
            b.materialize(in_arena.derivative(jacobian[0], {ir::Op::State, rel.var, 0, 0})[0]));
        out.coefficient_gradient_rows = K + 1;
      }
    }
    // The parametrix estimator applies to every SDE in scope: its rows are the divergences of
    // gamma = sigma sigma^T that the Kolmogorov forward operator reads.
    const std::vector<int> divergences = gamma_divergences(rel, b, out, coefficient);
    out.outputs.insert(out.outputs.end(), divergences.begin(), divergences.end());
    out.parametrix_rows = static_cast<int>(divergences.size());
    admit_estimating_smoothers(context, out);
    context.sde = std::move(out);
  }

private:
  // A bound of psi the model gives, in the arena; nullopt for the constant that stands for none
  // (-inf below, inf above: `none`).
  static std::optional<int> given_bound(ExprBuilder& b, const ir::Block& block, int node,
                                        double none) {
    const ir::Node& n = block.nodes[node];
    if (n.op == ir::Op::Const && n.values[0] == none)
      return std::nullopt;
    return b.element(b.import(block, node), 0);
  }

  template <class F>
  static std::optional<int> both_or_either(std::optional<int> x, std::optional<int> y, F f) {
    if (x && y)
      return f(*x, *y);
    return x ? x : y;
  }

  // additive-functionals (which ran before) left only the genealogy smoothers for a transition
  // without a density; with an estimate of the SDE's density, bis (and paris where the
  // estimates are bounded) smooth an additive functional too, and, with --marginals, a quantity
  // at each t (named in the note only, as the online smoothers are for other models).
  static void admit_estimating_smoothers(PassContext& context, const SdeEstimators& e) {
    if (!context.functionals || !e.why_not.empty() ||
        !(e.gpe_why_not.empty() || e.parametrix_why_not.empty()))
      return;
    const std::string estimating =
        e.estimates_bounded() ? "paris and bis estimate" : "bis estimates";
    for (FunctionalStructure& f : context.functionals->functionals) {
      if (!f.additive) {
        if (!f.declared_sum) // a quantity at each t
          f.methods_note = fmt::format("the transition density is not tractable: the backward "
                                       "and online smoothers that evaluate it do not apply, but "
                                       "{} it too with --marginals, at O(T) memory per "
                                       "particle, weighing by estimates of the density",
                                       estimating);
        continue;
      }
      std::vector<std::string> methods = {"bis"};
      if (e.estimates_bounded())
        methods.insert(methods.begin(), "paris");
      std::erase_if(methods, [&](const std::string& m) {
        return std::find(f.methods.begin(), f.methods.end(), m) != f.methods.end();
      }); // a pipeline may run this pass twice
      f.methods.insert(f.methods.begin(), methods.begin(), methods.end());
      f.methods_note = "the transition density is not tractable: the backward and online "
                       "smoothers that evaluate it do not apply, but bis weighs by estimates of "
                       "it" +
                       std::string(e.estimates_bounded()
                                       ? ", and paris accepts draws with probability estimate / "
                                         "bound"
                                       : "");
    }
  }

  // sum_i d gamma_il / dx_i for every l, then sum_il d^2 gamma_il / dx_i dx_l, gamma = sigma
  // sigma^T (sigma^2 I for a real coefficient, diag(sigma_i^2) for a vector), at the path's value:
  // with the drift, its Jacobian and gamma, they give the forward operator of the parametrix
  // estimator's weights (runtime/sde/parametrix_estimator.h). Constants 0 for a coefficient that
  // does not read the path.
  static std::vector<int> gamma_divergences(const ir::Relation& rel, ExprBuilder& b,
                                            const SdeEstimators& e, const std::vector<int>& sigma) {
    const int d = e.dim;
    if (e.coefficient_constant)
      return std::vector<int>(d + 1, b.constant(0));
    auto sigma_at = [&](int i, int k) { // sigma as a d x d matrix
      switch (e.coefficient) {
      case SdeCoefficient::Scalar:
        return i == k ? sigma[0] : -1;
      case SdeCoefficient::Vector:
        return i == k ? sigma[i] : -1;
      case SdeCoefficient::Matrix:
        return sigma[i * d + k];
      }
      return -1;
    };
    auto gamma = [&](int i, int l) {
      int sum = -1;
      for (int k = 0; k < d; ++k) {
        const int a = sigma_at(i, k), c = sigma_at(l, k);
        if (a < 0 || c < 0)
          continue;
        const int term = b.mul(a, c);
        sum = sum < 0 ? term : b.add(sum, term);
      }
      return sum;
    };
    Differentiator in_arena(b.arena(), b);
    auto dx = [&](int node, int i) { // d node / d x_i, -1 for 0
      if (node < 0)
        return -1;
      const std::vector<int> g = in_arena.derivative(node, {ir::Op::State, rel.var, 0, i});
      return g.empty() ? -1 : g[0];
    };
    auto plus = [&](int sum, int term) {
      return term < 0 ? sum : sum < 0 ? term : b.add(sum, term);
    };
    std::vector<int> out;
    int second = -1;
    for (int l = 0; l < d; ++l) {
      int first = -1;
      for (int i = 0; i < d; ++i)
        first = plus(first, dx(gamma(i, l), i));
      out.push_back(b.materialize(first));
      second = plus(second, dx(out.back(), l));
    }
    out.push_back(b.materialize(second));
    return out;
  }

  // Why the model is outside what the estimators handle: one SDE for the whole transition,
  // whose coefficients read no state but the path.
  static std::string scope_problem(const ir::Model& model, const ir::Relation& rel) {
    const ir::Block& block = model.transition;
    for (const ir::Relation& other : block.relations)
      if (&other != &rel && !model.guide_only_state(other.var))
        return fmt::format("the transition of {} is not the SDE's: the estimators need the SDE "
                           "to be the whole transition",
                           ir::shown_state_name(model.states[other.var].name) + "[t]");
    const char* names[] = {"drift",    "diffusion coefficient", "dt", "steps", "psi_lower",
                           "psi_upper"};
    for (int k : {1, 2, 3, 5, 6})
      if (std::string s = other_state(model, block, rel.args[k], rel.var); !s.empty())
        return fmt::format("the {} reads {}; the estimators need it to read only the path",
                           names[k - 1], s);
    for (int k : {1, 2}) { // the estimators differentiate them
      const std::vector<bool> reached = ir::reached_from(block, {rel.args[k]});
      for (size_t i = 0; i < block.nodes.size(); ++i)
        if (reached[i] && block.nodes[i].op == ir::Op::Ode)
          return fmt::format("the {} solves an ODE (ode_rk4), whose derivatives the estimators "
                             "need and which are not computed yet",
                             names[k - 1]);
    }
    return {};
  }

  static std::vector<Wrt> parameters(const ir::Model& model) {
    std::vector<Wrt> out;
    for (size_t k = 0; k < model.params.size(); ++k)
      for (int c = 0; c < model.params[k].shape.size(); ++c)
        out.push_back({ir::Op::Param, static_cast<int>(k), 0, c});
    return out;
  }

  // The first parameter the node reads, -1 for none.
  static int parameter_read(const ir::Block& block, int node) {
    const std::vector<bool> reached = ir::reached_from(block, {node});
    for (size_t i = 0; i < block.nodes.size(); ++i)
      if (reached[i] && block.nodes[i].op == ir::Op::Param)
        return block.nodes[i].var;
    return -1;
  }

  // Why no estimator of the gradient of log q applies: dt must not move with the parameters
  // (the estimates' draws are held fixed in time), nor the coefficient, except a scalar one
  // that does not read the path under the General Poisson estimator, whose estimate's
  // derivative follows the bridge's points x = s w as s moves.
  static std::string gradient_problem(const ir::Model& model, const ir::Block& block,
                                      const ir::Relation& rel, const SdeEstimators& e) {
    if (model.theta_size() == 0)
      return "the model has no parameters";
    if (const int k = parameter_read(block, rel.args[3]); k >= 0)
      return fmt::format("dt reads the parameter {} (the estimators need it fixed)",
                         model.params[k].name);
    if (const int k = parameter_read(block, rel.args[2]); k >= 0) {
      if (e.dim == 1 && e.coefficient_constant && e.gpe_why_not.empty())
        return {};
      return fmt::format(
          "the diffusion coefficient reads the parameter {} (the General Poisson estimator's "
          "derivative allows it for a scalar SDE whose coefficient does not read the path{})",
          model.params[k].name,
          e.dim == 1 && e.coefficient_constant ? ", where that estimator applies" : "");
    }
    return {};
  }

  static std::string gpe_problem(const SdeEstimators& e) {
    if (e.dim != 1)
      return "the General Poisson estimator is implemented for scalar SDEs (the drift of a vector "
             "one must be a gradient)";
    return {};
  }
};

} // namespace

std::string settle_sde_score(Derivatives& derivatives, const std::optional<SdeEstimators>& sde) {
  if (!derivatives.score_lacks_sde_term || (sde && sde->gradient_why_not.empty()))
    return {};
  derivatives.score_terms.clear();
  return fmt::format("{} ~ diffusion (transition): an SDE's transition density has no closed "
                     "form, and the estimator of its gradient does not apply: {}",
                     sde ? sde->relation : "the state",
                     sde ? sde->gradient_why_not : "no sde-estimators analysis");
}

bool SdeEstimators::psi_bounded_above() const {
  if (!gpe_why_not.empty() || psi_upper < 0)
    return false;
  const ir::Node& n = arena.nodes[psi_upper];
  return !(n.op == ir::Op::Const && std::isinf(n.values[0]));
}

bool SdeEstimators::exact_bridges() const {
  return psi_bounded_above() && !psi_lower_given && !psi_upper_given && coefficient_constant &&
         coefficient_gradient_rows == 0;
}

bool SdeEstimators::estimates_bounded() const {
  const auto finite = [&](int node) {
    return node >= 0 &&
           !(arena.nodes[node].op == ir::Op::Const && std::isinf(arena.nodes[node].values[0]));
  };
  return psi_bounded_above() && finite(drift_lower) && finite(drift_upper);
}

std::string SdeEstimators::psi_given_note() const {
  if (!psi_lower_given && !psi_upper_given)
    return {};
  return fmt::format(" ({} from the model, checked at every point the estimates visit)",
                     psi_lower_given && psi_upper_given ? "both bounds"
                     : psi_lower_given                  ? "the lower bound"
                                                        : "the upper bound");
}

std::string SdeEstimators::summary() const {
  std::string out = fmt::format("SDE {}: simulated by Euler-Maruyama in {} substeps; transition "
                                "density estimators: ",
                                relation, steps);
  if (!why_not.empty())
    return out + "none (" + why_not + ")";
  std::vector<std::string> available;
  if (gpe_why_not.empty())
    available.push_back("gpe");
  if (parametrix_why_not.empty())
    available.push_back("parametrix");
  return out + (available.empty() ? "none" : fmt::format("{}", fmt::join(available, ", ")));
}

std::string SdeEstimators::report() const {
  std::string out = summary() + "\n";
  if (!why_not.empty())
    return out;
  if (gpe_why_not.empty()) {
    out += fmt::format(
        "  gpe: psi in [{}, {}]{}: {}\n", psi_lower_text, psi_upper_text, psi_given_note(),
        psi_bounded_above() ? "positive estimates"
                            : "estimates made positive by Wald's identity where one is not");
    if (!coefficient_constant)
      out += "    the diffusion coefficient reads the path: in Lamperti's coordinate, eta(x) = "
             "int dx / |diffusion|, by quadrature, and bridge points taken back by RK4\n";
  } else {
    out += fmt::format("  gpe: no: {}{}\n", gpe_why_not,
                       psi_lower_given || psi_upper_given
                           ? " (the model's psi_lower and psi_upper are not used)"
                           : "");
  }
  out += parametrix_why_not.empty()
             ? "  parametrix: signed estimates (Euler skeletons at renewal times), made positive "
               "by Wald's identity: unbiased up to one factor per set of pairs weighed together\n"
             : fmt::format("  parametrix: no: {}\n", parametrix_why_not);
  if (parametrix_why_not.empty() && !coefficient_constant)
    out += fmt::format("    the diffusion coefficient reads the path: the estimates are "
                       "heavy-tailed and Wald's loop may not end; {}\n",
                       gpe_why_not.empty() ? "the General Poisson estimator (auto's choice) "
                                             "avoids it"
                       : dim == 1 ? "the General Poisson estimator, which psi_lower = ... in "
                                    "diffusion(...) makes apply, avoids it"
                                  : "an SDE written where its coefficient is constant (a "
                                    "Lamperti transform: log coordinates for a coefficient "
                                    "diag(x) G) avoids it");
  if (!gradient_why_not.empty())
    out += fmt::format("  gradient of log q: no: {}\n", gradient_why_not);
  else if (exact_bridges())
    out += "  gradient of log q (the score, by bis or paris): estimated without bias (exact "
           "bridges)\n";
  else
    out += fmt::format("  gradient of log q (the score, by bis): the {} estimate's own "
                       "derivative, weighed by the estimates (unbiased for the density's "
                       "derivative)\n",
                       gpe_why_not.empty() ? "General Poisson" : "parametrix");
  if (gradient_why_not.empty() && gpe_why_not.empty() && psi_bounded_above() && !exact_bridges())
    out += coefficient_gradient_rows > 0
               ? "    not by exact bridges: they hold the coefficient fixed, and it reads the "
                 "parameters (the estimate's derivative follows its bridge points as it moves)\n"
           : coefficient_constant
               ? "    not by exact bridges: their rejection step needs psi within its bounds along "
                 "the whole path, which the runtime can check only where it evaluates psi, so it "
                 "does not rely on the model's bounds\n"
               : "    not by exact bridges: they are drawn for a constant coefficient only\n";
  if (gpe_why_not.empty() && psi_bounded_above())
    out += "  filter --method random-weight (auto's choice) weighs draws from a proposal by the "
           "estimates: no discretisation error; so does bis after it\n";
  else if (gpe_why_not.empty() || parametrix_why_not.empty())
    out += "  filter --method random-weight weighs draws from a proposal by the estimates, made "
           "positive by Wald's identity over each step: no discretisation error, but a biased "
           "likelihood (auto keeps the bootstrap filter)\n";
  if (!psi_bounded_above() && (gpe_why_not.empty() || parametrix_why_not.empty()))
    out += fmt::format("  smooth --method bis weighs the particles of the Euler-Maruyama filter "
                       "({} substeps) by estimates of the exact density: the scheme's error, "
                       "O(dt / {}), remains (not after --filter random-weight)\n",
                       steps, steps);
  return out;
}

std::unique_ptr<Pass> create_sde_estimators() {
  return std::make_unique<SdeEstimatorsAnalysis>();
}

} // namespace ssm::passes
