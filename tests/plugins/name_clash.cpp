// A plugin that registers a pass under a built-in pass's name: ssmc must refuse it.
#include "passes/plugin.h"

namespace {
class Impostor : public ssm::passes::Pass {
public:
  std::string_view name() const override { return "cse"; }
  std::string_view description() const override { return "not the real cse"; }
  void run(ssm::ir::Model&, ssm::passes::PassContext&) override {}
};
} // namespace

SSMC_PASS_PLUGIN() {
  ssm::passes::register_pass("cse", [] { return std::make_unique<Impostor>(); });
}
