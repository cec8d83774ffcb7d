// dependency-graph: an example pass plugin (docs/passes.md, examples/plugins/README.md). An
// analysis that prints the model's dependency graph in Graphviz DOT: one cluster per block, an
// edge from each variable a relation reads (through its block's expression DAG) to the variable
// the relation samples. It writes to standard output, or to the file $SSMC_DEPENDENCY_GRAPH names.
//
//   ssmc check model.ssm --load-pass=libdependency-graph.so --passes=dependency-graph
//   SSMC_DEPENDENCY_GRAPH=g.dot ssmc build model.ssm --load-pass=libdependency-graph.so
//       --passes=constant-fold,cse,dependency-graph && dot -Tsvg g.dot > g.svg
#include "ir/ir.h"
#include "ir/printer.h"
#include "passes/plugin.h"

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace {

using namespace ssm;

// A variable a relation reads: (op, var, lag); Op::Time for t. Ordered for a stable output.
using Read = std::tuple<ir::Op, int, int>;

// The leaves of the expression DAG that the relation's arguments reach (ir::reached_from).
std::set<Read> reads_of(const ir::Block& block, const ir::Relation& rel) {
  const std::vector<bool> reached = ir::reached_from(block, rel.args);
  std::set<Read> reads;
  for (size_t i = 0; i < block.nodes.size(); ++i) {
    const ir::Node& node = block.nodes[i];
    if (reached[i] && (node.op == ir::Op::Param || node.op == ir::Op::State ||
                       node.op == ir::Op::Obs || node.op == ir::Op::Time))
      reads.insert({node.op, node.var, node.lag});
  }
  return reads;
}

std::string time_index(ir::BlockKind block, int lag) {
  if (block == ir::BlockKind::Initial)
    return "[0]";
  return lag == 0 ? "[t]" : "[t-" + std::to_string(lag) + "]";
}

// The node statement of a variable: parameters are boxes, observed variables are shaded (the
// graphical-model convention), t is plain text.
std::string node_attributes(ir::Op op) {
  switch (op) {
  case ir::Op::Param:
    return "shape=box";
  case ir::Op::Obs:
    return "style=filled, fillcolor=gray85";
  case ir::Op::Time:
    return "shape=plaintext";
  default:
    return "shape=ellipse";
  }
}

// "t", "mu", "x[t-1]": how the model's source writes the variable.
std::string label(const ir::Model& model, ir::BlockKind block, ir::Op op, int var, int lag) {
  switch (op) {
  case ir::Op::Time:
    return "t";
  case ir::Op::Param:
    return model.params.at(var).name;
  case ir::Op::State:
    return model.states.at(var).name + time_index(block, lag);
  default:
    return model.obs.at(var).name + time_index(block, lag);
  }
}

class DependencyGraph : public passes::Pass {
public:
  std::string_view name() const override { return "dependency-graph"; }
  std::string_view description() const override {
    return "print the variables each relation reads as a Graphviz graph (example plugin)";
  }
  // It prints: `ssmc build` must run it rather than serve the result from its cache.
  bool writes_output() const override { return true; }

  void run(ir::Model& model, passes::PassContext&) override {
    std::string dot = "digraph \"" + model.name + "\" {\n  rankdir=LR;\n";
    model.for_each_block([&](const ir::Block& block) {
      if (!block.relations.empty())
        dot += cluster(model, block);
    });
    dot += "}\n";
    if (const char* path = std::getenv("SSMC_DEPENDENCY_GRAPH"); path && *path) {
      std::ofstream out(path);
      out << dot;
      if (!out)
        throw std::runtime_error("dependency-graph: cannot write '" + std::string(path) + "'");
    } else {
      std::cout << dot << std::flush;
    }
  }

private:
  static std::string cluster(const ir::Model& model, const ir::Block& block) {
    std::string kind(ir::block_name(block.kind));
    std::string nodes, edges;
    std::set<std::string> declared;
    // Node ids are qualified by the block, so each block is a cluster of its own.
    auto declare = [&](const std::string& text, ir::Op op) {
      std::string id = "\"" + kind + ":" + text + "\"";
      if (declared.insert(id).second)
        nodes += "    " + id + " [label=\"" + text + "\", " + node_attributes(op) + "];\n";
      return id;
    };
    for (const ir::Relation& rel : block.relations) {
      ir::Op target_op = rel.kind == ir::VarKind::Param ? ir::Op::Param
                         : rel.kind == ir::VarKind::Obs ? ir::Op::Obs
                                                        : ir::Op::State;
      std::string target = declare(ir::print_relation_target(model, block, rel), target_op);
      for (auto [op, var, lag] : reads_of(block, rel)) {
        edges +=
            "    " + declare(label(model, block.kind, op, var, lag), op) + " -> " + target + ";\n";
      }
    }
    return "  subgraph \"cluster_" + kind + "\" {\n    label=\"" + kind + "\";\n" + nodes + edges +
           "  }\n";
  }
};

} // namespace

SSMC_PASS_PLUGIN() {
  passes::register_pass("dependency-graph", [] { return std::make_unique<DependencyGraph>(); });
}
