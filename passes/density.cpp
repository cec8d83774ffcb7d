// density: for each transition relation, whether its log-density is tractable and an upper bound of
// its density over the target given everything it reads (the density at the mode), as an IR
// expression. Rejection-based backward sampling (smoothing) needs such a bound: proposals from the
// filter are accepted with probability p(x[t] | x[t-1]) / bound, so the report also says whether
// the bound is constant in the state (one global bound) or depends on x[t-1] (a bound per
// particle).
//
// Every relation the language has today is a distribution with a density; DensityKind::SampleOnly
// is there for deterministic transforms of noise and simulators, which have none. Independent
// components of a vector target multiply their bounds. Discrete distributions are bounded by 1.
#include "affine.h"
#include "passes.h"

#include "ir/printer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <numbers>

namespace ssm::passes {

namespace {

// One component's bound, or why there is none.
struct ComponentBound {
  int node = -1;
  bool exact = true;
  std::string condition;
  std::string unbounded;
};

class Bounds {
public:
  Bounds(const ir::Model& model, TransitionDensity& result)
      : model_(model), arena_(result.arena), b_(result.arena) {}

  RelationDensity analyse(const ir::Relation& rel) {
    const ir::Block& block = model_.transition;
    RelationDensity out;
    out.relation = ir::print_relation_target(model_, block, rel);
    out.dist = std::string(ir::dist_info(rel.dist).name);
    out.loc = rel.loc;
    out.kind = DensityKind::Tractable;
    if (rel.dist == ir::Dist::Dirac) {
      out.kind = DensityKind::SampleOnly;
      const auto lagged = ir::parse_lagged_state_name(model_.states.at(rel.var).name);
      out.sample_only_reason =
          lagged ? fmt::format("the model reads {0}[t-{1}], which the state carries as a copy of "
                               "{0}[t-{2}]; a copy has no density",
                               lagged->first, lagged->second + 1, lagged->second)
                 : "a deterministic relation has no density";
      out.no_bound_reason = out.sample_only_reason;
      if (lagged) // what the hidden component holds
        out.relation = fmt::format("{}[t-{}]", lagged->first, lagged->second);
      return out;
    }

    std::vector<int> args;
    for (int a : rel.args)
      args.push_back(b_.import(block, a));
    int k = model_.var_shape(rel.kind, rel.var).size();
    ComponentBound total;
    if (rel.dist == ir::Dist::MvNormal) {
      total = mvnormal(args[1], k);
    } else if (rel.dist == ir::Dist::MvNormalChol) {
      total = mvnormal_chol(args[1], k);
    } else if (rel.dist == ir::Dist::Multinomial) {
      total = {b_.constant(1), false, {}, {}}; // a probability
    } else if (rel.dist == ir::Dist::Dirichlet) {
      total = dirichlet(args[0], k);
    } else {
      std::vector<int> factors;
      for (int i = 0; i < k; ++i) {
        std::vector<int> elems;
        for (int a : args)
          elems.push_back(b_.element(a, b_[a].shape.is_scalar() ? 0 : i));
        ComponentBound c = component(rel.dist, elems);
        if (!c.unbounded.empty()) {
          total = c;
          break;
        }
        factors.push_back(c.node);
        total.exact = total.exact && c.exact;
        if (!c.condition.empty() && total.condition.find(c.condition) == std::string::npos)
          total.condition += (total.condition.empty() ? "" : " and ") + c.condition;
      }
      if (total.unbounded.empty())
        total.node = product(factors);
    }
    if (!total.unbounded.empty()) {
      out.no_bound_reason = total.unbounded;
      return out;
    }
    out.bound = describe(total.node, total.exact, total.condition);
    return out;
  }

  DensityBound describe(int node, bool exact, std::string condition) {
    DensityBound bound;
    bound.node = node;
    bound.text = ir::print_expr(model_, arena_, node);
    bound.exact = exact;
    bound.condition = std::move(condition);
    states_read(node, bound);
    return bound;
  }

  // The product of the factors, equal ones as powers: b^3 for three components of one scale.
  int product(const std::vector<int>& factors) {
    std::vector<std::pair<int, int>> counts; // factor, multiplicity, in order of appearance
    for (int f : factors) {
      auto it = std::find_if(counts.begin(), counts.end(), [f](auto& c) { return c.first == f; });
      if (it == counts.end())
        counts.push_back({f, 1});
      else
        ++it->second;
    }
    int out = -1;
    for (auto [f, n] : counts) {
      int factor = n == 1 ? f : b_.pow(f, b_.constant(n));
      out = out < 0 ? factor : b_.mul(out, factor);
    }
    return out;
  }

private:
  const ir::Model& model_;
  const ir::Block& arena_;
  ExprBuilder b_;

  void states_read(int node, DensityBound& bound) {
    const ir::Node& n = arena_.nodes[node];
    if (n.op == ir::Op::State) {
      std::string name = ir::print_expr(model_, arena_, node);
      if (std::find(bound.depends_on.begin(), bound.depends_on.end(), name) ==
          bound.depends_on.end())
        bound.depends_on.push_back(name);
      bound.reads_next_state = bound.reads_next_state || n.lag == 0;
    }
    for (int a : n.args)
      states_read(a, bound);
  }

  // Beta(a, b): x^(a-1) (1-x)^(b-1) / B(a, b) at the mode (a - 1) / (a + b - 2) when a, b >= 1
  // (a shape of exactly 1 puts the mode at an end: b at 0 for a = 1); a shape below 1 makes the
  // density unbounded at that end.
  ComponentBound beta(int a, int b) {
    const std::optional<double> ca = constant(b_, a), cb = constant(b_, b);
    if ((ca && *ca < 1) || (cb && *cb < 1))
      return {-1,
              true,
              {},
              fmt::format("the {} shape {} is below 1, which makes the density unbounded at {}",
                          ca && *ca < 1 ? "first" : "second", ca && *ca < 1 ? *ca : *cb,
                          ca && *ca < 1 ? "0" : "1")};
    if (ca && cb) {
      if (*ca == 1 || *cb == 1)
        return {b_.constant(std::max(*ca, *cb)), true, {}, {}};
      const double m = (*ca - 1) / (*ca + *cb - 2);
      const double log_f = (*ca - 1) * std::log(m) + (*cb - 1) * std::log1p(-m) +
                           std::lgamma(*ca + *cb) - std::lgamma(*ca) - std::lgamma(*cb);
      return {b_.constant(std::exp(log_f)), true, {}, {}};
    }
    std::vector<int> conditions;
    std::vector<std::string> texts;
    for (int s : {a, b})
      if (!constant(b_, s)) {
        conditions.push_back(at_least_one(s));
        texts.push_back(text(s) + " >= 1");
      }
    const int total = b_.materialize(b_.sub(b_.add(a, b), b_.constant(2)));
    const int log_f =
        b_.materialize(b_.sub(b_.sub(b_.add(b_.add(shape_term(a, total), shape_term(b, total)),
                                            b_.call("lgamma", {b_.add(a, b)})),
                                     b_.call("lgamma", {a})),
                              b_.call("lgamma", {b})));
    return {where(conditions, b_.call("exp", {log_f})),
            true,
            fmt::format("{}", fmt::join(texts, " and ")),
            {}};
  }

  // sqrt(2 * pi) and the like, kept symbolic so the bound reads as a formula.
  int pi_times(double c) {
    ir::Node mul;
    mul.op = ir::Op::Mul;
    mul.args = {b_.constant(c), b_.constant(std::numbers::pi)};
    return b_.raw(std::move(mul));
  }
  int sqrt_raw(int x) {
    ir::Node n;
    n.op = ir::Op::Call;
    n.fn = "sqrt";
    n.args = {x};
    return b_.raw(std::move(n));
  }
  int sqrt_2pi() { return sqrt_raw(pi_times(2)); }

  std::string text(int node) const { return ir::print_expr(model_, arena_, node); }

  static std::optional<double> constant(const ExprBuilder& b, int id) {
    if (b[id].op == ir::Op::Const && b[id].shape.is_scalar())
      return b[id].values[0];
    return std::nullopt;
  }

  ComponentBound mvnormal(int sigma, int d) {
    // (2 pi)^(-d/2) det(Sigma)^(-1/2)
    ir::Node p;
    p.op = ir::Op::Pow;
    p.args = {pi_times(2), b_.constant(-d / 2.0)};
    int scale = b_.raw(std::move(p));
    int det = b_.pow(b_.call("det", {sigma}), b_.constant(-0.5));
    return {b_.mul(scale, det), true, {}, {}};
  }

  ComponentBound mvnormal_chol(int factor, int d) {
    // (2 pi)^(-d/2) / |L[0, 0] ... L[d-1, d-1]|: det(L L')^(-1/2) from the factor's diagonal
    ir::Node p;
    p.op = ir::Op::Pow;
    p.args = {pi_times(2), b_.constant(-d / 2.0)};
    int diagonal = -1;
    for (int i = 0; i < d; ++i) {
      const int l = b_.element(factor, i * d + i);
      diagonal = diagonal < 0 ? l : b_.mul(diagonal, l);
    }
    return {b_.div(b_.raw(std::move(p)), b_.call("abs", {diagonal})), true, {}, {}};
  }

  // `bound` where every condition holds, NaN elsewhere: the runtime then draws exactly at that
  // step.
  int where(const std::vector<int>& conditions, int bound) {
    if (conditions.empty())
      return bound;
    int all = -1;
    for (int c : conditions)
      all = all < 0 ? c : b_.call("and", {all, c});
    return b_.select(all, bound, b_.constant(NAN));
  }
  int at_least_one(int a) { return b_.call("ge", {a, b_.constant(1)}); }
  // (s - 1) log((s - 1) / total), 0 for a shape s of 1 (x^0 = 1 at x = 0 on a face).
  int shape_term(int s, int total) {
    const int sm1 = b_.materialize(b_.sub(s, b_.constant(1)));
    return b_.select(b_.call("eq", {sm1, b_.constant(0)}), b_.constant(0),
                     b_.mul(sm1, b_.call("log", {b_.div(sm1, total)})));
  }

  // Gamma(sum a) / prod Gamma(a_i) prod x_i^(a_i - 1) at the mode x_i = (a_i - 1) / (sum a - K),
  // when every a_i >= 1 (a shape below 1 makes the density unbounded at a face of the simplex). A
  // shape of exactly 1 puts the mode on a face: its factor x_i^0 is 1.
  ComponentBound dirichlet(int alpha, int K) {
    std::vector<int> a;
    std::vector<double> values;
    for (int i = 0; i < K; ++i) {
      a.push_back(b_.element(alpha, i));
      if (auto v = constant(b_, a.back()))
        values.push_back(*v);
    }
    for (double v : values)
      if (v < 1)
        return {-1,
                true,
                {},
                fmt::format("a concentration below 1 ({}) makes the density unbounded", v)};
    if (static_cast<int>(values.size()) == K) {
      double sum = 0, log_f = 0;
      for (double v : values) {
        sum += v;
        log_f -= std::lgamma(v);
      }
      log_f += std::lgamma(sum);
      for (double v : values)
        if (v > 1)
          log_f += (v - 1) * std::log((v - 1) / (sum - K));
      return {b_.constant(std::exp(log_f)), true, {}, {}};
    }
    int sum = -1, log_f = -1;
    std::vector<int> conditions;
    for (int ai : a)
      sum = b_.add(sum, ai);
    const int excess = b_.materialize(b_.sub(sum, b_.constant(K)));
    for (int ai : a) {
      log_f = b_.sub(b_.add(log_f, shape_term(ai, excess)), b_.call("lgamma", {ai}));
      if (!constant(b_, ai))
        conditions.push_back(at_least_one(ai));
    }
    log_f = b_.add(log_f, b_.call("lgamma", {sum}));
    return {where(conditions, b_.call("exp", {b_.materialize(log_f)})),
            true,
            fmt::format("every component of {} >= 1", text(alpha)),
            {}};
  }

  ComponentBound component(ir::Dist dist, const std::vector<int>& a) {
    auto one_over = [&](int x) { return b_.div(b_.constant(1), x); };
    switch (dist) {
    case ir::Dist::Normal: // 1 / (sigma sqrt(2 pi)) at the mean
      return {one_over(b_.mul(a[1], sqrt_2pi())), true, {}, {}};
    case ir::Dist::LogNormal: { // at the mode exp(mu - sigma^2): exp(sigma^2 / 2 - mu) / (...)
      int s2 = b_.pow(a[1], b_.constant(2));
      int e = b_.call("exp", {b_.materialize(b_.sub(b_.div(s2, b_.constant(2)), a[0]))});
      return {b_.div(e, b_.mul(a[1], sqrt_2pi())), true, {}, {}};
    }
    case ir::Dist::StudentT: { // Gamma((nu+1)/2) / (Gamma(nu/2) sqrt(nu pi) sigma) at mu
      if (auto nu = constant(b_, a[0])) {
        double k = std::exp(std::lgamma((*nu + 1) / 2) - std::lgamma(*nu / 2)) /
                   std::sqrt(*nu * std::numbers::pi);
        return {b_.div(b_.constant(k), a[2]), true, {}, {}};
      }
      int half = b_.constant(2);
      int ratio = b_.call(
          "exp",
          {b_.materialize(b_.sub(b_.call("lgamma", {b_.div(b_.add(a[0], b_.constant(1)), half)}),
                                 b_.call("lgamma", {b_.div(a[0], half)})))});
      return {b_.div(ratio,
                     b_.mul(b_.call("sqrt", {b_.mul(a[0], b_.constant(std::numbers::pi))}), a[2])),
              true,
              {},
              {}};
    }
    case ir::Dist::HalfNormal: { // sqrt(2 / pi) / sigma at 0
      ir::Node over;
      over.op = ir::Op::Div;
      over.args = {b_.constant(2), b_.constant(std::numbers::pi)};
      return {b_.div(sqrt_raw(b_.raw(std::move(over))), a[0]), true, {}, {}};
    }
    case ir::Dist::Uniform:
      return {one_over(b_.materialize(b_.sub(a[1], a[0]))), true, {}, {}};
    case ir::Dist::Gamma: { // at the mode (alpha - 1) / beta when alpha >= 1
      if (auto alpha = constant(b_, a[0])) {
        if (*alpha < 1)
          return {-1,
                  true,
                  {},
                  fmt::format("the shape alpha = {} < 1 makes the density unbounded at 0", *alpha)};
        if (*alpha == 1)
          return {a[1], true, {}, {}};
        double am1 = *alpha - 1;
        double k = std::exp(am1 * std::log(am1) - am1 - std::lgamma(*alpha));
        return {b_.mul(b_.constant(k), a[1]), true, {}, {}};
      }
      int am1 = b_.materialize(b_.sub(a[0], b_.constant(1)));
      int e = b_.call("exp", {b_.materialize(b_.sub(b_.neg(am1), b_.call("lgamma", {a[0]})))});
      return {
          b_.mul(a[1], b_.mul(b_.pow(am1, am1), e)), true, fmt::format("{} >= 1", text(a[0])), {}};
    }
    case ir::Dist::Exponential: // beta at 0
      return {a[0], true, {}, {}};
    case ir::Dist::Laplace: // 1 / (2 b) at mu
      return {one_over(b_.mul(b_.constant(2), a[1])), true, {}, {}};
    case ir::Dist::Cauchy: // 1 / (pi sigma) at mu
      return {one_over(b_.mul(b_.constant(std::numbers::pi), a[1])), true, {}, {}};
    case ir::Dist::Poisson:
    case ir::Dist::Bernoulli:
    case ir::Dist::Categorical:
    case ir::Dist::Binomial:
    case ir::Dist::NegativeBinomial: // a probability
      return {b_.constant(1), false, {}, {}};
    case ir::Dist::Beta: // at the mode (a - 1) / (a + b - 2) when a, b >= 1
      return beta(a[0], a[1]);
    case ir::Dist::InverseGamma: { // at the mode beta / (alpha + 1):
      // (alpha + 1)^(alpha + 1) exp(-(alpha + 1)) / (Gamma(alpha) beta)
      const int ap1 = b_.materialize(b_.add(a[0], b_.constant(1)));
      const int log_k = b_.materialize(
          b_.sub(b_.sub(b_.mul(ap1, b_.call("log", {ap1})), ap1), b_.call("lgamma", {a[0]})));
      return {b_.div(b_.call("exp", {log_k}), a[1]), true, {}, {}};
    }
    case ir::Dist::Weibull: { // at the mode lambda q^(1/k), q = (k - 1) / k, when k >= 1:
                              // k q^q e^(-q) / lambda (q = 0, 1 / lambda, for k = 1)
      if (auto k = constant(b_, a[0])) {
        if (*k < 1)
          return {-1,
                  true,
                  {},
                  fmt::format("the shape k = {} < 1 makes the density unbounded at 0", *k)};
        const double q = (*k - 1) / *k;
        const double c = *k * std::exp(q == 0 ? 0.0 : q * std::log(q) - q);
        return {b_.div(b_.constant(c), a[1]), true, {}, {}};
      }
      const int q = b_.materialize(b_.div(b_.sub(a[0], b_.constant(1)), a[0]));
      const int c = b_.mul(a[0], b_.mul(b_.pow(q, q), b_.call("exp", {b_.materialize(b_.neg(q))})));
      return {b_.div(c, a[1]), true, fmt::format("{} >= 1", text(a[0])), {}};
    }
    case ir::Dist::TruncatedNormal: { // the normal's density at the point of [lo, hi] nearest
                                      // mu, over the interval's mass
      const int mu = a[0], s = a[1];
      const int mode = b_.call("min", {b_.call("max", {mu, a[2]}), a[3]});
      const int z = b_.div(b_.sub(mode, mu), s);
      const int lo = b_.materialize(b_.div(b_.sub(a[2], mu), s));
      const int hi = b_.materialize(b_.div(b_.sub(a[3], mu), s));
      const int log_f = b_.materialize(b_.sub(b_.neg(b_.div(b_.mul(z, z), b_.constant(2))),
                                              b_.call("log_normal_mass", {lo, hi})));
      return {b_.div(b_.call("exp", {log_f}), b_.mul(s, sqrt_2pi())), true, {}, {}};
    }
    case ir::Dist::MvNormal:
    case ir::Dist::MvNormalChol:
    case ir::Dist::Dirichlet:
    case ir::Dist::Multinomial: // joint densities (analysed before)
    case ir::Dist::Dirac:       // no density (analysed before)
      break;
    }
    return {-1, true, {}, "no bound is known for this distribution"};
  }
};

class DensityAnalysis : public Pass {
public:
  std::string_view name() const override { return "density"; }
  std::string_view description() const override {
    return "per transition: tractable log-density; upper bound of the density";
  }

  void run(ir::Model& model, PassContext& context) override {
    if (!model.is_state_space())
      return; // a state-space analysis: its result stays empty (null in the report)
    TransitionDensity result;
    Bounds bounds(model, result);
    for (const ir::Relation& rel : model.transition.relations)
      result.relations.push_back(bounds.analyse(rel));

    std::vector<int> factors;
    bool exact = true;
    std::string condition;
    for (const RelationDensity& r : result.relations) {
      std::string name = fmt::format("{} ~ {}", r.relation, r.dist);
      if (r.kind == DensityKind::SampleOnly) {
        result.tractable = false;
        if (result.no_bound_reason.empty())
          result.no_bound_reason = r.sample_only_reason.empty()
                                       ? fmt::format("{} has no density", name)
                                       : r.sample_only_reason;
        continue;
      }
      if (!r.bound) {
        if (result.no_bound_reason.empty())
          result.no_bound_reason = fmt::format("{}: {}", name, r.no_bound_reason);
        continue;
      }
      if (r.bound->reads_next_state && result.no_bound_reason.empty())
        result.no_bound_reason =
            fmt::format("the bound of {} depends on {}, part of the next state", name,
                        fmt::join(r.bound->depends_on, ", "));
      factors.push_back(r.bound->node);
      exact = exact && r.bound->exact;
      if (!r.bound->condition.empty())
        condition += (condition.empty() ? "" : " and ") + r.bound->condition;
    }
    if (result.relations.empty())
      result.no_bound_reason = "the model has no transition";
    if (result.no_bound_reason.empty())
      result.bound = bounds.describe(bounds.product(factors), exact, condition);
    context.density = std::move(result);
  }
};

std::string bound_text(const DensityBound& b) {
  std::string out = b.text;
  if (!b.condition.empty())
    out += fmt::format(" when {}", b.condition);
  return out;
}

std::string scope(const DensityBound& b) {
  if (b.constant_in_state())
    return "constant in the state";
  return fmt::format("per particle (depends on {})", fmt::join(b.depends_on, ", "));
}

} // namespace

std::string TransitionDensity::summary() const {
  std::string out =
      fmt::format("transition density: {}", tractable ? "tractable" : "not tractable");
  if (bound)
    return out + fmt::format("; bounded by {}, {}", bound_text(*bound), scope(*bound));
  return out + fmt::format("; no bound: {}", no_bound_reason);
}

std::string TransitionDensity::report() const {
  std::string out = summary() + "\n";
  for (const RelationDensity& r : relations) {
    std::string line =
        fmt::format("  {} ~ {}{}: ", r.relation, r.dist,
                    r.loc.line > 0 ? fmt::format(" at {}:{}", r.loc.line, r.loc.col) : "");
    if (r.kind == DensityKind::SampleOnly)
      line += fmt::format("sample only ({})", r.sample_only_reason);
    else if (!r.bound)
      line += fmt::format("log-density tractable; no bound: {}", r.no_bound_reason);
    else
      line += fmt::format("log-density tractable; bound {} ({}), {}", bound_text(*r.bound),
                          r.bound->exact ? "the density at the mode" : "an upper bound",
                          scope(*r.bound));
    out += line + "\n";
  }
  return out;
}

std::unique_ptr<Pass> create_density() {
  return std::make_unique<DensityAnalysis>();
}

} // namespace ssm::passes
