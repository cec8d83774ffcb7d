// additive-functionals: for each `functional` of the model, what the smoothers can do with it. A
// `sum_t` functional whose term reads at most x[t-1], x[t], y[t], inputs, parameters and t is
// additive: the online smoothers (online, paris, bis) carry it forward in O(N) memory, and every
// offline smoother sums its smoothed terms. A per-t functional is a smoothing marginal: the
// offline smoothers estimate it at each t; online ones cannot, since they only keep sums. When the
// density analysis (run before) finds the transition density intractable, only the smoothers
// that never evaluate it remain (genealogy, fixed-lag).
#include "passes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

namespace ssm::passes {

namespace {

const std::vector<std::string> online_methods = {"online", "paris", "bis"};
const std::vector<std::string> offline_methods = {"ffbsm", "ffbsi", "genealogy", "fixed-lag"};

FunctionalStructure analyse(const ir::Model& model, size_t i) {
  const ir::FunctionalDecl& decl = model.functionals[i];
  const ir::Block& block = model.functional;
  FunctionalStructure f;
  f.name = decl.name;
  f.declared_sum = decl.additive;
  f.loc = decl.loc;
  const std::vector<bool> reached = ir::reached_from(block, {block.outputs[i]});
  std::set<std::string> reads;
  for (size_t n = 0; n < block.nodes.size(); ++n) {
    if (!reached[n])
      continue;
    const ir::Node& node = block.nodes[n];
    if (node.op == ir::Op::State) {
      // x@lagK[t-l] (a hidden copy, lag augmentation) is x[t-K-l] to the user
      const auto lagged = ir::parse_lagged_state_name(model.states[node.var].name);
      const std::string& name = lagged ? lagged->first : model.states[node.var].name;
      const int lag = node.lag + (lagged ? lagged->second : 0);
      reads.insert(lag == 0 ? name + "[t]" : fmt::format("{}[t-{}]", name, lag));
      f.max_state_lag = std::max(f.max_state_lag, node.lag);
    } else if (node.op == ir::Op::Obs) {
      reads.insert(model.obs[node.var].name + "[t]");
    } else if (node.op == ir::Op::Input) {
      reads.insert(model.inputs[node.var].name + "[t]");
    }
  }
  f.reads.assign(reads.begin(), reads.end());
  if (!decl.additive) {
    f.why_not = "it is a quantity at each t (no sum_t): its smoothing distribution at each t is "
                "estimated, not a sum over time";
    f.methods = offline_methods;
    f.methods_note = "online, paris and bis estimate it too with --marginals, at O(T) memory per "
                     "particle";
  } else if (f.max_state_lag > 1) {
    f.why_not = fmt::format("its term reads a state {} steps back; it becomes additive once the "
                            "lags are augmented into the state",
                            f.max_state_lag);
    f.methods = {"genealogy"};
  } else {
    f.additive = true;
    f.methods = online_methods;
    f.methods.insert(f.methods.end(), offline_methods.begin(), offline_methods.end());
  }
  return f;
}

class AdditiveFunctionalsAnalysis : public Pass {
public:
  std::string_view name() const override { return "additive-functionals"; }
  std::string_view description() const override {
    return "which functionals are additive over time, and the smoothers that can estimate each";
  }

  void run(ir::Model& model, PassContext& context) override {
    if (!model.is_state_space())
      return; // a state-space analysis: its result stays empty (null in the report)
    AdditiveFunctionals result;
    const bool sample_only = context.density && !context.density->tractable;
    for (size_t i = 0; i < model.functionals.size(); ++i) {
      FunctionalStructure f = analyse(model, i);
      if (sample_only) {
        std::erase_if(f.methods,
                      [](const std::string& m) { return m != "genealogy" && m != "fixed-lag"; });
        f.methods_note = "the transition density is not tractable, and the backward and online "
                         "smoothers evaluate it";
      }
      result.functionals.push_back(std::move(f));
    }
    context.functionals = std::move(result);
  }
};

} // namespace

std::string AdditiveFunctionals::summary() const {
  if (functionals.empty())
    return "functionals: none";
  std::vector<std::string> parts;
  for (const FunctionalStructure& f : functionals)
    parts.push_back(fmt::format("{} ({})", f.name, f.additive ? "additive" : "not additive"));
  return fmt::format("functionals: {}", fmt::join(parts, ", "));
}

std::string AdditiveFunctionals::report() const {
  std::string out = summary() + "\n";
  for (const FunctionalStructure& f : functionals) {
    out += fmt::format(
        "  {}{}: {}; reads {}\n", f.name,
        f.loc.line > 0 ? fmt::format(" at {}:{}", f.loc.line, f.loc.col) : "",
        f.additive ? (f.max_state_lag == 1 ? "additive in (x[t-1], x[t])" : "additive in x[t]")
                   : "not additive: " + f.why_not,
        f.reads.empty() ? "no state" : fmt::format("{}", fmt::join(f.reads, ", ")));
    out += fmt::format("    smoothers: {}{}\n", fmt::join(f.methods, ", "),
                       f.methods_note.empty() ? "" : " (" + f.methods_note + ")");
  }
  return out;
}

std::unique_ptr<Pass> create_additive_functionals() {
  return std::make_unique<AdditiveFunctionalsAnalysis>();
}

} // namespace ssm::passes
