// The pass interface. A pass is a named function from IR to IR (a transform) or from IR to a result
// kept in the PassContext (an analysis). Passes are registered by name, so the driver's
// `--passes=` and plugins (`--load-pass=`) address them the same way.
#pragma once

#include "ir/ir.h"
#include "structure.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ssm::passes {

// For each relation, what it reads: the lags of states and observations, parameters, time.
struct RelationReads {
  ir::BlockKind block;
  std::string target; // "x[t]"
  std::string dist;
  std::vector<std::string> lagged; // "x[t-1]", "y[t]"
  std::vector<std::string> params;
  bool reads_time = false;
  int max_state_lag = 0;
  ir::SourceLoc loc;
};

struct MarkovStructure {
  int order = 0;                   // the largest lag of a state read by a transition
  bool states_independent = false; // no transition reads a previous state
  std::vector<RelationReads> relations;
  // The past values the state carries in hidden copies (augment-lags), "x[t-1]": those a
  // transition reads beyond t-1, and those only a functional reads (then order is still 1).
  std::vector<std::string> carried;
  std::string report() const; // human-readable
};

// Results of analyses, filled in by the passes that compute them.
struct PassContext {
  std::optional<MarkovStructure> markov;
  std::optional<LinearGaussian> linear_gaussian;
  std::optional<FiniteState> finite_state;
  std::optional<TransitionDensity> density;
  std::optional<AdditiveFunctionals> functionals;
  std::optional<Derivatives> derivatives;
  std::optional<EmSteps> em_steps;
  std::optional<SdeEstimators> sde; // only for a model with an SDE transition
};

class Pass {
public:
  virtual ~Pass() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view description() const = 0;
  virtual void run(ir::Model& model, PassContext& context) = 0;
  // True for a pass whose effect is outside the IR (it prints, or writes a file): `ssmc build`
  // does not serve a pipeline with such a pass from its compile cache, which would skip it.
  virtual bool writes_output() const { return false; }
};

using PassFactory = std::function<std::unique_ptr<Pass>()>;

// The global registry of passes by name. Built-in passes are registered on first use; a plugin's
// `ssmc_register_passes` function calls register_pass (see plugin.h). register_pass throws
// PassError (pass_manager.h) if the name is taken or is not a valid pipeline element.
void register_pass(std::string name, PassFactory factory);
std::unique_ptr<Pass> create_pass(std::string_view name); // nullptr if unknown
std::vector<std::string> registered_passes();

} // namespace ssm::passes
