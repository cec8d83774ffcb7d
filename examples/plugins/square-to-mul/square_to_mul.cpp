// square-to-mul: an example pass plugin (docs/passes.md, examples/plugins/README.md). A transform
// that rewrites `x ^ 2` as `x * x`: a multiplication instead of a call to pow in every particle's
// kernel. It shows how a transform edits a block: change nodes in place, then let
// ir::compact drop the nodes nothing reads any more (here the constant 2).
//
//   ssmc build examples/gordon.ssm --load-pass=libsquare-to-mul.so
//       --passes=constant-fold,square-to-mul,cse,markov-structure
#include "ir/ir.h"
#include "ir/rewrite.h"
#include "passes/plugin.h"

namespace {

using namespace ssm;

class SquareToMul : public passes::Pass {
public:
  std::string_view name() const override { return "square-to-mul"; }
  std::string_view description() const override { return "rewrite x^2 as x*x (example plugin)"; }

  void run(ir::Model& model, passes::PassContext&) override {
    model.for_each_block([](ir::Block& block) {
      bool changed = false;
      for (ir::Node& node : block.nodes) {
        if (node.op != ir::Op::Pow)
          continue;
        int base = node.args[0];
        const ir::Node& exponent = block.nodes[node.args[1]];
        // Only scalars: `mul` takes at least one scalar operand (see ir::result_shape), so a
        // vector squared elementwise stays a pow.
        bool square = exponent.op == ir::Op::Const && exponent.shape.is_scalar() &&
                      exponent.values[0] == 2 && block.nodes[base].shape.is_scalar();
        if (square) {
          node.op = ir::Op::Mul;
          node.args = {base, base};
          changed = true;
        }
      }
      if (changed)
        ir::compact(block);
    });
  }
};

} // namespace

SSMC_PASS_PLUGIN() {
  passes::register_pass("square-to-mul", [] { return std::make_unique<SquareToMul>(); });
}
