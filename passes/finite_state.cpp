// finite-state: whether every state takes finitely many values, and how many joint values the
// whole state has. Such a model admits exact filtering and smoothing by the forward-backward
// algorithm, which the runtime can choose instead of particles.
//
// A state declared int[lo..hi] takes the values lo..hi: the exact methods enumerate that range
// (runtime/exact/finite_state.cpp), so it is the support reported here. A relation that can take
// values outside it gets a note (the frontend warns about it too): the runtime's exact methods
// stop with an error when more than 1e-9 of the probability leaves the range, rather than
// dropping it. Other states take the support of their relations' distributions.
#include "passes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

namespace ssm::passes {

namespace {

std::string at(const ir::SourceLoc& loc) {
  return loc.line > 0 ? fmt::format(" at {}:{}", loc.line, loc.col) : "";
}

// The values one component of state `s` can take, from its initial and transition relations.
StateSupport state_support(const ir::Model& model, int s, std::vector<StructureReason>& reasons) {
  StateSupport support;
  support.name = model.states[s].name;
  support.components = model.states[s].shape.size();
  support.lo = INFINITY;
  support.hi = -INFINITY;
  if (model.guide_only_state(s)) { // a guide's network output: one value as far as p is concerned
    support.lo = support.hi = 0;
    support.finite = true;
    return support;
  }
  for (const ir::Block* block : {&model.initial, &model.transition})
    for (const ir::Relation& rel : block->relations) {
      if (rel.kind != ir::VarKind::State || rel.var != s)
        continue;
      const ir::DistInfo& info = ir::dist_info(rel.dist);
      const ir::VarDecl& decl = model.states[s];
      // The support: the declared range of an int[lo..hi] state, else the distribution's (a
      // categorical over K weights takes 0..K-1).
      double lower = info.lower, upper = info.upper;
      std::optional<std::pair<double, double>> values = ir::discrete_support(*block, rel);
      if (values)
        std::tie(lower, upper) = *values;
      else if (rel.dist == ir::Dist::Categorical)
        upper = block->nodes[rel.args[0]].shape.dims[0] - 1;
      if (decl.integer && std::isfinite(decl.lower) && std::isfinite(decl.upper)) {
        if (values && (values->first < decl.lower || values->second > decl.upper) &&
            support.leaves.empty())
          support.leaves =
              fmt::format("{}{} ~ {}{} can take values outside it", support.name,
                          block == &model.initial ? "[0]" : "[t]", info.name, at(rel.loc));
        lower = decl.lower;
        upper = decl.upper;
      }
      std::string why;
      const bool copy_of_int = rel.dist == ir::Dist::Dirac && decl.integer; // lag augmentation
      if (!info.discrete && !copy_of_int)
        why = "real-valued";
      else if (!decl.integer)
        // The exact methods enumerate the declared ranges of int[lo..hi] states.
        why = fmt::format("declared {}, not int[lo..hi], although its values are whole numbers",
                          ir::type_name(decl));
      else if (!std::isfinite(lower) || !std::isfinite(upper))
        why = "integer-valued with unbounded support";
      if (!why.empty()) {
        support.finite = false;
        support.reason =
            fmt::format("state {} is {} ({}{})", ir::shown_state_name(support.name), why,
                        rel.dist == ir::Dist::Dirac ? "deterministic" : info.name, at(rel.loc));
        support.loc = rel.loc;
        reasons.push_back(
            {block->kind,
             fmt::format("{}{}", support.name, block == &model.initial ? "[0]" : "[t]"),
             std::string(info.name), support.name, 0,
             fmt::format("state {} is {}", support.name, why), rel.loc});
        return support;
      }
      support.lo = std::min(support.lo, lower);
      support.hi = std::max(support.hi, upper);
    }
  support.finite = support.lo <= support.hi;
  return support;
}

class FiniteStateAnalysis : public Pass {
public:
  std::string_view name() const override { return "finite-state"; }
  std::string_view description() const override {
    return "whether every state is discrete with finite support; the state-space size";
  }

  void run(ir::Model& model, PassContext& context) override {
    if (!model.is_state_space())
      return; // a state-space analysis: its result stays empty (null in the report)
    FiniteState result;
    result.size = 1;
    for (size_t s = 0; s < model.states.size(); ++s) {
      result.states.push_back(state_support(model, static_cast<int>(s), result.reasons));
      const StateSupport& st = result.states.back();
      if (st.finite)
        result.size *= std::pow(st.hi - st.lo + 1, st.components);
    }
    result.is_finite =
        !result.states.empty() && std::all_of(result.states.begin(), result.states.end(),
                                              [](const StateSupport& st) { return st.finite; });
    if (!result.is_finite)
      result.size = 0;
    context.finite_state = std::move(result);
  }
};

} // namespace

std::string FiniteState::summary() const {
  if (!is_finite) {
    for (const StateSupport& s : states)
      if (!s.finite)
        return fmt::format("finite state space: no: {}", s.reason);
    return "finite state space: no (the model has no state)";
  }
  const bool leaves = std::any_of(states.begin(), states.end(),
                                  [](const StateSupport& s) { return !s.leaves.empty(); });
  return fmt::format("finite state space: yes, {} joint values (forward-backward is exact{})", size,
                     leaves ? " while the states stay within their declared ranges" : "");
}

std::string FiniteState::report() const {
  std::string out = summary() + "\n";
  for (const StateSupport& s : states) {
    if (ir::parse_lagged_state_name(s.name))
      continue; // a hidden copy (augment-lags): described with its state
    if (!s.finite) {
      out += fmt::format("  {}\n", s.reason);
      continue;
    }
    out += fmt::format("  state {}: {} component{}, each in {}..{}", s.name, s.components,
                       s.components == 1 ? "" : "s", s.lo, s.hi);
    // The past values the model reads beyond t-1, which the state carries as copies: they are
    // part of the joint values counted above.
    std::vector<std::string> copies;
    for (const StateSupport& c : states)
      if (auto lagged = ir::parse_lagged_state_name(c.name); lagged && lagged->first == s.name)
        copies.push_back(fmt::format("{}[t-{}]", s.name, lagged->second));
    if (!copies.empty())
      out += fmt::format(", with {} carried as part of the state", fmt::join(copies, ", "));
    if (!s.leaves.empty())
      out += fmt::format(" (declared; {}: the exact methods stop if more than 1e-9 of the "
                         "probability does)",
                         s.leaves);
    out += "\n";
  }
  return out;
}

std::unique_ptr<Pass> create_finite_state() {
  return std::make_unique<FiniteStateAnalysis>();
}

} // namespace ssm::passes
