// density: for each transition relation, whether its log-density is tractable and an upper bound of
// its density over the target given everything it reads (the density at the mode), as an IR
// expression. Rejection-based backward sampling (smoothing) needs such a bound: proposals from the
// filter are accepted with probability p(x[t] | x[t-1]) / bound, so the report also says whether
// the bound is constant in the state (one global bound) or depends on x[t-1] (a bound per
// particle).
//
// DensityKind::SampleOnly: deterministic relations (dirac) and SDE transitions (diffusion), which
// have no density the kernels can evaluate. Independent
// components of a vector target multiply their bounds. Discrete distributions are bounded by 1.
#include "affine.h"
#include "distribution_formulas.h"
#include "passes.h"

#include "ir/printer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace ssm::passes {

namespace {

class Bounds {
public:
  Bounds(const ir::Model& model, TransitionDensity& result)
      : model_(model), arena_(result.arena), b_(result.arena), terms_(b_, model, result.arena) {}

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

    if (rel.dist == ir::Dist::Diffusion) {
      out.kind = DensityKind::SampleOnly;
      out.sample_only_reason = fmt::format(
          "an SDE's transition density has no closed form (simulated by Euler-Maruyama in {} "
          "substeps)",
          block.nodes[rel.args[4]].values.at(0));
      out.no_bound_reason = out.sample_only_reason;
      return out;
    }
    std::vector<int> args;
    for (int a : rel.args)
      args.push_back(b_.import(block, a));
    int k = model_.var_shape(rel.kind, rel.var).size();
    ComponentBound total;
    const DistFormulas formulas = distribution_formulas(rel.dist);
    if (formulas.whole_target) {
      total = formulas.bound(terms_, args, k);
    } else {
      std::vector<int> factors;
      for (int i = 0; i < k; ++i) {
        std::vector<int> elems;
        for (int a : args)
          elems.push_back(b_.element(a, b_[a].shape.is_scalar() ? 0 : i));
        ComponentBound c = component(formulas, elems, k);
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
  BoundTerms terms_; // what the distributions' bound formulas build with (over b_)

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

  // A componentwise distribution's bound on one component, from the arguments' elements.
  ComponentBound component(const DistFormulas& formulas, const std::vector<int>& elems, int k) {
    if (!formulas.bound)
      return {-1, true, {}, "no bound is known for this distribution"};
    return formulas.bound(terms_, elems, k);
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
