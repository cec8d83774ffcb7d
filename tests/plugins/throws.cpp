// A plugin whose pass breaks an invariant (std::out_of_range, as a bad vector::at would): ssmc must
// report a bug of this plugin, naming it, the pass and what ssmc was doing, with exit status 70,
// never the model's error or ssmc's.
#include "passes/plugin.h"

#include <stdexcept>

namespace {
class Throws : public ssm::passes::Pass {
public:
  std::string_view name() const override { return "throws"; }
  std::string_view description() const override { return "throws std::out_of_range"; }
  void run(ssm::ir::Model&, ssm::passes::PassContext&) override {
    throw std::out_of_range(
        "vector::_M_range_check: __n (which is 7) >= this->size() (which is 3)");
  }
};
} // namespace

SSMC_PASS_PLUGIN() {
  ssm::passes::register_pass("throws", [] { return std::make_unique<Throws>(); });
}
