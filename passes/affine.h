// Symbolic tools of the structure analyses: an expression builder that writes simplified IR
// expressions into an arena block outside the model, and the affine decomposition of IR values
// in a basis of random variables (linear-gaussian uses it with the previous state and the noise
// of each relation as the basis). Working on IR nodes rather than on a separate algebra keeps one
// definition of each operation: ir::evaluate evaluates the results and ir::print_expr prints them.
#pragma once

#include "ir/ir.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <variant>
#include <vector>

namespace ssm::passes {

// Builds expressions in an arena, folding constants, merging equal nodes, and dropping identities
// (x + 0, 1 * x, sqrt(q)^2, A * eye(n), ...). In the scalar arithmetic (neg, add, sub, mul, div),
// -1 stands for a zero, so sparse coefficient grids need no nodes for their zeros; materialize()
// turns it into a constant where a node is needed.
class ExprBuilder {
public:
  explicit ExprBuilder(ir::Block& arena) : arena_(&arena) {}
  const ir::Block& arena() const { return *arena_; }
  const ir::Node& operator[](int id) const { return arena_->nodes.at(id); }

  int constant(double v);
  int constant(std::vector<double> values, ir::Shape shape);
  int materialize(int id); // -1 -> constant 0
  // The expression of node `id` of a model block, copied (once) into the arena.
  int import(const ir::Block& from, int id);
  // The scalar at row-major position `pos` of node `id` (`A[1, 2]`, an element of a literal).
  int element(int id, int pos);

  int neg(int a);
  int add(int a, int b);
  int sub(int a, int b);
  int mul(int a, int b);
  int div(int a, int b);
  int pow(int a, int b);
  int call(std::string fn, std::vector<int> args);
  int matmul(int a, int b);
  // A vector or matrix from its row-major scalar elements (-1 for zero); the node the elements
  // come from when they are exactly its elements in order (`A` rather than `[[A[0, 0], ...]]`).
  int build(const std::vector<int>& elems, ir::Shape shape);
  // `node` as it is: no folding, no simplification (`sqrt(2 * pi)` stays readable).
  int raw(ir::Node node);
  // `a` where the scalar `cond` is not 0, else `b` (-1 is 0), as a raw Select node.
  int select(int cond, int a, int b);

  bool is_const(int id, double v) const; // a scalar constant equal to v (-1 is 0)

private:
  using Key = ir::NodeKey;
  struct KeyHash {
    size_t operator()(const Key& key) const;
  };
  ir::Block* arena_;
  std::unordered_map<Key, int, KeyHash> nodes_;
  std::map<std::pair<const ir::Block*, int>, int> imported_;
  // Fast paths of the two most frequent requests (a big matrix has one element node per entry).
  std::map<uint64_t, int> scalars_;
  std::map<std::pair<int, int>, int> elements_;

  int make(ir::Node node); // fold if every operand is constant, then raw()
  int element_of(const ir::Node& n, int id, int pos);
  int binary(ir::Op op, int a, int b);
};

// value[i] = sum_j coef[i][j] z[j] + offset[i] for each scalar component i (row-major) of a value,
// where z is the basis; -1 entries are zero. A form of one row broadcasts like a scalar.
struct AffineForm {
  int rows = 0, basis = 0;
  std::vector<int> coef;   // rows * basis
  std::vector<int> offset; // rows

  AffineForm() = default;
  AffineForm(int rows, int basis)
      : rows(rows), basis(basis), coef(static_cast<size_t>(rows) * basis, -1), offset(rows, -1) {}
  // Writes address the grid exactly; reads (get, off) broadcast a one-row form (a scalar) to any
  // row. Distinct names, so a read through a non-const form cannot silently skip the broadcast.
  int& at(int i, int j) { return coef[static_cast<size_t>(i) * basis + j]; }
  int get(int i, int j) const { return coef[static_cast<size_t>(rows == 1 ? 0 : i) * basis + j]; }
  int off(int i) const { return offset[rows == 1 ? 0 : i]; }
};

// Why a value is not affine: `node` (of the model block) does something non-affine to `leaf`, the
// random variable it depends on (-1 when the failure is a leaf the caller cannot handle).
struct NotAffine {
  int node = -1;
  int leaf = -1;
  std::string why; // "applies exp to", "divides by a function of", ...
};

// How the decomposition treats a State or Obs node of the block.
struct Leaf {
  enum Kind {
    Random,      // a random vector with the affine form `form`
    Data,        // known given the past (a past observation): like a parameter
    Unsupported, // not handled; `message` says why
  };
  Kind kind = Data;
  AffineForm form;
  std::string message;
};

class AffineDecomposition {
public:
  using LeafFn = std::function<Leaf(const ir::Node&)>;
  AffineDecomposition(const ir::Block& block, ExprBuilder& builder, int basis, LeafFn leaf);

  // The affine form of node `id`, or why it has none. Handles neg, add, sub, mul and div by values
  // that do not depend on the basis, matmul and dot with such a matrix or vector, index and build;
  // any other op on a random value (including ops added to the IR later) is not affine.
  std::variant<AffineForm, NotAffine> decompose(int id);
  // Whether node `id` depends on a Random or Unsupported leaf.
  bool random(int id);
  int first_random_leaf(int id); // the first such leaf in node order, -1 if none

private:
  const ir::Block& block_;
  ExprBuilder& b_;
  int basis_;
  LeafFn leaf_fn_;
  std::vector<std::optional<Leaf>> leaves_;
  std::vector<int> random_; // -1 unknown, 0, 1
  std::vector<std::optional<std::variant<AffineForm, NotAffine>>> forms_;

  const Leaf& leaf(int id);
  std::variant<AffineForm, NotAffine> compute(int id);
  std::optional<NotAffine> own_failure(int id); // why the node itself is not affine, if it is not
  AffineForm combine(int id, const std::vector<AffineForm>& ops); // from the operands' forms
  AffineForm matmul_form(int id, const AffineForm& f, bool left_random, AffineForm out);
  AffineForm constant_form(int id);
};

} // namespace ssm::passes
