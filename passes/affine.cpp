// Expression builder and affine decomposition: see affine.h.
#include "affine.h"

#include "ir/builtins.h"
#include "ir/evaluate.h"
#include "ir/verifier.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace ssm::passes {

namespace {

ir::Node make_node(ir::Op op, std::vector<int> args) {
  ir::Node n;
  n.op = op;
  n.args = std::move(args);
  return n;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// ExprBuilder

size_t ExprBuilder::KeyHash::operator()(const Key& key) const {
  size_t h = std::hash<std::string>()(std::get<4>(key));
  auto mix = [&h](uint64_t v) {
    h ^= std::hash<uint64_t>()(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  };
  mix(static_cast<uint64_t>(std::get<0>(key)));
  for (int d : std::get<1>(key))
    mix(static_cast<uint64_t>(d));
  for (int a : std::get<2>(key))
    mix(static_cast<uint64_t>(a));
  for (uint64_t v : std::get<3>(key))
    mix(v);
  for (int i : std::get<5>(key))
    mix(static_cast<uint64_t>(i));
  mix(static_cast<uint64_t>(std::get<6>(key)));
  mix(static_cast<uint64_t>(std::get<7>(key)));
  return h;
}

int ExprBuilder::raw(ir::Node node) {
  Key key = ir::node_key(node);
  auto it = nodes_.find(key);
  if (it != nodes_.end())
    return it->second;
  node.loc = {};
  int id = arena_->add(std::move(node));
  nodes_.emplace(std::move(key), id);
  return id;
}

int ExprBuilder::select(int cond, int a, int b) {
  ir::Node s;
  s.op = ir::Op::Select;
  s.args = {cond, materialize(a), materialize(b)};
  s.shape = (*this)[s.args[1]].shape;
  return raw(std::move(s));
}

int ExprBuilder::make(ir::Node node) {
  std::vector<ir::Shape> shapes;
  for (int a : node.args)
    shapes.push_back((*this)[a].shape);
  if (node.op == ir::Op::Call) { // analyses also use the internal functions (det, digamma, ...)
    const ir::Builtin* f = ir::find_builtin(node.fn);
    auto shape = f ? ir::builtin_result_shape(*f, shapes) : std::nullopt;
    if (!shape)
      throw std::logic_error(fmt::format("structure analysis: ill-shaped call to {}", node.fn));
    node.shape = *shape;
  } else if (node.op != ir::Op::Const && node.op != ir::Op::Param && node.op != ir::Op::State &&
             node.op != ir::Op::Obs && node.op != ir::Op::Time) {
    auto shape = ir::result_shape(node, shapes);
    if (!shape)
      throw std::logic_error(
          fmt::format("structure analysis: ill-shaped {} node", ir::op_name(node.op)));
    node.shape = *shape;
  }
  bool foldable = !node.args.empty() && std::all_of(node.args.begin(), node.args.end(), [&](int a) {
    return (*this)[a].op == ir::Op::Const;
  });
  if (foldable) {
    std::vector<std::vector<double>> values;
    for (int a : node.args)
      values.push_back((*this)[a].values);
    return constant(ir::evaluate(node, values, shapes), node.shape);
  }
  return raw(std::move(node));
}

int ExprBuilder::constant(double v) {
  auto [it, inserted] = scalars_.try_emplace(std::bit_cast<uint64_t>(v), -1);
  if (inserted)
    it->second = constant({v}, ir::Shape::scalar());
  return it->second;
}

int ExprBuilder::constant(std::vector<double> values, ir::Shape shape) {
  ir::Node n;
  n.op = ir::Op::Const;
  n.shape = std::move(shape);
  n.values = std::move(values);
  return raw(std::move(n));
}

int ExprBuilder::materialize(int id) {
  return id < 0 ? constant(0) : id;
}

bool ExprBuilder::is_const(int id, double v) const {
  if (id < 0)
    return v == 0;
  const ir::Node& n = (*this)[id];
  return n.op == ir::Op::Const && n.shape.is_scalar() && n.values[0] == v;
}

int ExprBuilder::import(const ir::Block& from, int id) {
  auto it = imported_.find({&from, id});
  if (it != imported_.end())
    return it->second;
  ir::Node n = from.nodes.at(id);
  for (int& a : n.args)
    a = import(from, a);
  int result = make(std::move(n));
  imported_[{&from, id}] = result;
  return result;
}

int ExprBuilder::element(int id, int pos) {
  if (id < 0)
    return -1;
  const ir::Node& n = (*this)[id];
  if (n.shape.is_scalar())
    return id;
  auto cached = elements_.find({id, pos});
  if (cached != elements_.end())
    return cached->second;
  int e = element_of(n, id, pos);
  elements_[{id, pos}] = e;
  return e;
}

int ExprBuilder::element_of(const ir::Node& n, int id, int pos) {
  if (n.op == ir::Op::Const)
    return constant(n.values.at(pos));
  if (n.op == ir::Op::Build)
    return n.args.at(pos);
  if (n.op == ir::Op::Index) // A[i][j] is A[i, j]
    return element(n.args[0], ir::index_offset((*this)[n.args[0]].shape, n.index) + pos);
  ir::Node e = make_node(ir::Op::Index, {id});
  if (n.shape.rank() == 1)
    e.index = {pos};
  else
    e.index = {pos / n.shape.dims[1], pos % n.shape.dims[1]};
  return make(std::move(e));
}

int ExprBuilder::binary(ir::Op op, int a, int b) {
  return make(make_node(op, {materialize(a), materialize(b)}));
}

// A scalar zero from the scalar arithmetic is -1 again, so grids stay sparse.
namespace {
int zero_to_none(const ExprBuilder& b, int id) {
  return b.is_const(id, 0) ? -1 : id;
}
} // namespace

int ExprBuilder::neg(int a) {
  if (a < 0)
    return -1;
  if ((*this)[a].op == ir::Op::Neg)
    return (*this)[a].args[0];
  return zero_to_none(*this, make(make_node(ir::Op::Neg, {a})));
}

// A zero or a one is a scalar, so the other operand of x + 0 or 1 * x has the result's shape.
int ExprBuilder::add(int a, int b) {
  if (a < 0 || is_const(a, 0))
    return b;
  if (b < 0 || is_const(b, 0))
    return a;
  if ((*this)[b].op == ir::Op::Neg)
    return sub(a, (*this)[b].args[0]);
  return zero_to_none(*this, binary(ir::Op::Add, a, b));
}

int ExprBuilder::sub(int a, int b) {
  if (b < 0 || is_const(b, 0))
    return a;
  if (a < 0 || is_const(a, 0))
    return neg(b);
  if (a == b && (*this)[a].shape.is_scalar())
    return -1;
  if ((*this)[b].op == ir::Op::Neg)
    return add(a, (*this)[b].args[0]);
  return zero_to_none(*this, binary(ir::Op::Sub, a, b));
}

int ExprBuilder::mul(int a, int b) {
  auto scalar = [&](int x) { return x < 0 || (*this)[x].shape.is_scalar(); };
  if (((a < 0 || is_const(a, 0)) && scalar(b)) || ((b < 0 || is_const(b, 0)) && scalar(a)))
    return -1;
  if (is_const(a, 1))
    return b;
  if (is_const(b, 1))
    return a;
  if (is_const(a, -1))
    return neg(b);
  if (is_const(b, -1))
    return neg(a);
  // Constants go first and merge: 2 * (3 * x) is 6 * x, x * 2 is 2 * x.
  auto scalar_const = [&](int x) {
    return (*this)[x].op == ir::Op::Const && (*this)[x].shape.is_scalar();
  };
  if (scalar_const(b) && !scalar_const(a))
    return mul(b, a);
  if (scalar_const(a) && (*this)[b].op == ir::Op::Mul && scalar_const((*this)[b].args[0]))
    return mul(mul(a, (*this)[b].args[0]), (*this)[b].args[1]);
  // x * (1 / y) is x / y.
  auto reciprocal = [&](int x) {
    return (*this)[x].op == ir::Op::Div && is_const((*this)[x].args[0], 1);
  };
  if (reciprocal(b))
    return div(a, (*this)[b].args[1]);
  if (reciprocal(a))
    return div(b, (*this)[a].args[1]);
  return zero_to_none(*this, binary(ir::Op::Mul, a, b));
}

int ExprBuilder::div(int a, int b) {
  if (b < 0) // a zero denominator (a scale that underflowed, 1e-300^2): x / 0 as arithmetic has it
    b = materialize(b);
  if (a < 0 && (*this)[b].shape.is_scalar())
    return -1;
  if (is_const(b, 1))
    return a;
  return zero_to_none(*this, binary(ir::Op::Div, a, b));
}

int ExprBuilder::pow(int a, int b) {
  if (is_const(b, 1))
    return materialize(a);
  if (is_const(b, 2) && a >= 0) { // sqrt(q)^2 = q: gordon's normal(.., sqrt(q)) has variance q
    const ir::Node& n = (*this)[a];
    if (ir::is_call(n, ir::Fn::Sqrt))
      return n.args[0];
  }
  return binary(ir::Op::Pow, a, b);
}

int ExprBuilder::call(std::string fn, std::vector<int> args) {
  ir::Node n = make_node(ir::Op::Call, std::move(args));
  for (int& a : n.args)
    a = materialize(a);
  n.fn = std::move(fn);
  return make(std::move(n));
}

namespace {
bool is_identity(const ir::Node& n) {
  if (n.op != ir::Op::Const || n.shape.rank() != 2 || n.shape.dims[0] != n.shape.dims[1])
    return false;
  int d = n.shape.dims[0];
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < d; ++j)
      if (n.values[i * d + j] != (i == j ? 1.0 : 0.0))
        return false;
  return true;
}
} // namespace

int ExprBuilder::matmul(int a, int b) {
  if (is_identity((*this)[a]))
    return b;
  if ((*this)[b].shape.rank() == 2 && is_identity((*this)[b]))
    return a;
  return binary(ir::Op::MatMul, a, b);
}

int ExprBuilder::build(const std::vector<int>& elems, ir::Shape shape) {
  // Exactly the elements of one node of this shape, in order: that node.
  int base = -1;
  for (size_t k = 0; k < elems.size(); ++k) {
    if (elems[k] < 0 || (*this)[elems[k]].op != ir::Op::Index) {
      base = -1;
      break;
    }
    const ir::Node& e = (*this)[elems[k]];
    const ir::Node& from = (*this)[e.args[0]];
    if ((k > 0 && e.args[0] != base) || !(from.shape == shape) ||
        ir::index_offset(from.shape, e.index) != static_cast<int>(k) ||
        static_cast<int>(e.index.size()) != from.shape.rank()) {
      base = -1;
      break;
    }
    base = e.args[0];
  }
  if (base >= 0)
    return base;
  ir::Node n = make_node(ir::Op::Build, {});
  for (int e : elems)
    n.args.push_back(materialize(e));
  n.shape = shape;
  return make(std::move(n));
}

// ---------------------------------------------------------------------------------------------
// AffineDecomposition

AffineDecomposition::AffineDecomposition(const ir::Block& block, ExprBuilder& builder, int basis,
                                         LeafFn leaf)
    : block_(block), b_(builder), basis_(basis), leaf_fn_(std::move(leaf)),
      leaves_(block.nodes.size()), random_(block.nodes.size(), -1), forms_(block.nodes.size()) {}

const Leaf& AffineDecomposition::leaf(int id) {
  if (!leaves_[id])
    leaves_[id] = leaf_fn_(block_.nodes[id]);
  return *leaves_[id];
}

bool AffineDecomposition::random(int id) {
  if (random_[id] < 0) {
    const ir::Node& n = block_.nodes[id];
    bool r = false;
    if (n.op == ir::Op::State || n.op == ir::Op::Obs)
      r = leaf(id).kind != Leaf::Data;
    for (int a : n.args)
      r = r || random(a);
    random_[id] = r;
  }
  return random_[id] == 1;
}

int AffineDecomposition::first_random_leaf(int id) {
  if (!random(id))
    return -1;
  const ir::Node& n = block_.nodes[id];
  if (n.args.empty())
    return id;
  int first = -1;
  for (int a : n.args) {
    int l = first_random_leaf(a);
    if (l >= 0 && (first < 0 || l < first))
      first = l;
  }
  return first;
}

AffineForm AffineDecomposition::constant_form(int id) {
  int value = b_.import(block_, id);
  int rows = block_.nodes[id].shape.size();
  AffineForm f(rows, basis_);
  for (int i = 0; i < rows; ++i)
    f.offset[i] = b_.element(value, i);
  return f;
}

std::variant<AffineForm, NotAffine> AffineDecomposition::decompose(int id) {
  if (!forms_[id])
    forms_[id] = compute(id);
  return *forms_[id];
}

std::variant<AffineForm, NotAffine> AffineDecomposition::compute(int id) {
  if (!random(id))
    return constant_form(id);
  // This node's own failure first, so the report names the outermost non-affine operation
  // (`x / (1 + x^2)` divides by a function of x) rather than something inside it.
  if (auto bad = own_failure(id))
    return *bad;
  const ir::Node& n = block_.nodes[id];
  if (n.op == ir::Op::State || n.op == ir::Op::Obs) {
    const Leaf& l = leaf(id);
    if (l.kind == Leaf::Unsupported)
      return NotAffine{id, id, l.message};
    if (l.form.rows != static_cast<int>(n.shape.size()) || l.form.basis != basis_)
      throw std::logic_error("structure analysis: a leaf's form has the wrong size");
    return l.form;
  }
  // The forms of the operands, or the first failure among them. The products use a fixed operand
  // as it is, so they skip its form (a big parameter matrix would need one node per element).
  bool product =
      n.op == ir::Op::Mul || n.op == ir::Op::Div || n.op == ir::Op::MatMul || n.op == ir::Op::Call;
  std::vector<AffineForm> ops;
  for (int a : n.args) {
    if (product && !random(a)) {
      ops.emplace_back();
      continue;
    }
    auto f = decompose(a);
    if (auto* bad = std::get_if<NotAffine>(&f))
      return *bad;
    ops.push_back(std::get<AffineForm>(f));
  }
  return combine(id, ops);
}

std::optional<NotAffine> AffineDecomposition::own_failure(int id) {
  const ir::Node& n = block_.nodes[id];
  auto not_affine = [&](std::string why, int at_leaf = -2) {
    return NotAffine{id, at_leaf == -2 ? first_random_leaf(id) : at_leaf, std::move(why)};
  };
  bool r0 = !n.args.empty() && random(n.args[0]);
  bool r1 = n.args.size() > 1 && random(n.args[1]);
  switch (n.op) {
  case ir::Op::State:
  case ir::Op::Obs:
  case ir::Op::Neg:
  case ir::Op::Add:
  case ir::Op::Sub:
  case ir::Op::Build:
  case ir::Op::Index:
    return std::nullopt;
  case ir::Op::Mul:
  case ir::Op::MatMul:
    if (r0 && r1)
      return not_affine("multiplies two functions of");
    return std::nullopt;
  case ir::Op::Div:
    if (r1)
      return not_affine("divides by a function of", first_random_leaf(n.args[1]));
    return std::nullopt;
  case ir::Op::Pow:
    return not_affine(r0 ? "is a power of a function of"
                         : "raises a value to a power that is a function of");
  case ir::Op::Call:
    if (!ir::is_call(n, ir::Fn::Dot))
      return not_affine(fmt::format("applies {} to a function of", n.fn));
    if (r0 && r1)
      return not_affine("multiplies two functions of");
    return std::nullopt;
  default:
    return not_affine(
        fmt::format("applies the operation '{}' (not handled by this analysis) to a function of",
                    ir::op_name(n.op)));
  }
}

AffineForm AffineDecomposition::combine(int id, const std::vector<AffineForm>& ops) {
  const ir::Node& n = block_.nodes[id];
  int rows = n.shape.size();
  bool r0 = !n.args.empty() && random(n.args[0]);
  AffineForm out(rows, basis_);
  // Scales operand `k`'s form row by row by the other operand (its scalar elements), with `op`.
  auto scale = [&](int k, auto&& op) {
    int other = b_.import(block_, n.args[1 - k]);
    bool scalar = b_[other].shape.is_scalar();
    for (int i = 0; i < rows; ++i) {
      int factor = b_.element(other, scalar ? 0 : i);
      for (int j = 0; j < basis_; ++j)
        out.at(i, j) = op(ops[k].get(i, j), factor);
      out.offset[i] = op(ops[k].off(i), factor);
    }
    return out;
  };
  // Row i of the result is row `source(i)` of operand 0's form, transformed by `op`.
  auto map_rows = [&](auto&& source, auto&& op) {
    for (int i = 0; i < rows; ++i) {
      for (int j = 0; j < basis_; ++j)
        out.at(i, j) = op(source(i), j);
      out.offset[i] = op(source(i), -1);
    }
    return out;
  };
  auto element = [](const AffineForm& f, int row, int j) {
    return j < 0 ? f.off(row) : f.get(row, j);
  };

  switch (n.op) {
  case ir::Op::Neg:
    return map_rows([](int i) { return i; },
                    [&](int row, int j) { return b_.neg(element(ops[0], row, j)); });
  case ir::Op::Add:
  case ir::Op::Sub:
    return map_rows([](int i) { return i; },
                    [&](int row, int j) {
                      int x = element(ops[0], row, j), y = element(ops[1], row, j);
                      return n.op == ir::Op::Add ? b_.add(x, y) : b_.sub(x, y);
                    });
  case ir::Op::Mul:
    return scale(r0 ? 0 : 1, [&](int x, int f) { return b_.mul(f, x); });
  case ir::Op::Div:
    return scale(0, [&](int x, int f) { return b_.div(x, f); });
  case ir::Op::MatMul:
    return matmul_form(id, ops[r0 ? 0 : 1], r0, std::move(out));
  case ir::Op::Call: { // dot: the other calls were rejected by own_failure
    int fixed = b_.import(block_, n.args[r0 ? 1 : 0]);
    const AffineForm& f = ops[r0 ? 0 : 1];
    for (int l = 0; l < f.rows; ++l) {
      int factor = b_.element(fixed, l);
      for (int j = 0; j < basis_; ++j)
        if (f.get(l, j) >= 0)
          out.at(0, j) = b_.add(out.at(0, j), b_.mul(factor, f.get(l, j)));
      out.offset[0] = b_.add(out.offset[0], b_.mul(factor, f.off(l)));
    }
    return out;
  }
  case ir::Op::Build:
    return map_rows([](int i) { return i; }, [&](int i, int j) { return element(ops[i], 0, j); });
  case ir::Op::Index: {
    int start = ir::index_offset(block_.nodes[n.args[0]].shape, n.index);
    return map_rows([&](int i) { return start + i; },
                    [&](int row, int j) { return element(ops[0], row, j); });
  }
  default:
    throw std::logic_error("structure analysis: an op was neither rejected nor decomposed");
  }
}

// A matrix product with one fixed operand: (i, l) of the left times (l, jc) of the right.
AffineForm AffineDecomposition::matmul_form(int id, const AffineForm& f, bool left_random,
                                            AffineForm out) {
  const ir::Node& n = block_.nodes[id];
  const ir::Shape& as = block_.nodes[n.args[0]].shape;
  const ir::Shape& bs = block_.nodes[n.args[1]].shape;
  int r = as.dims[0], k = as.dims[1], c = bs.rank() == 2 ? bs.dims[1] : 1;
  int fixed = b_.import(block_, n.args[left_random ? 1 : 0]);
  for (int i = 0; i < r; ++i)
    for (int jc = 0; jc < c; ++jc) {
      int row = i * c + jc;
      for (int l = 0; l < k; ++l) {
        int factor = left_random ? b_.element(fixed, l * c + jc) : b_.element(fixed, i * k + l);
        int frow = left_random ? i * k + l : l * c + jc;
        for (int j = 0; j < basis_; ++j)
          if (f.get(frow, j) >= 0) // coefficient grids are sparse
            out.at(row, j) = b_.add(out.at(row, j), b_.mul(factor, f.get(frow, j)));
        out.offset[row] = b_.add(out.offset[row], b_.mul(factor, f.off(frow)));
      }
    }
  return out;
}

} // namespace ssm::passes
