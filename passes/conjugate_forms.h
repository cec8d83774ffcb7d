// The expression forms of the em-m-steps analysis (em_m_steps.cpp): a relation's arguments read
// as linear expressions of the E-step's points (ReadSum), as forms linear in the parameters
// (ParamForm), as vector means with a coefficient table, and the role each parameter plays.
#pragma once

#include "structure.h"

#include "ir/printer.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>

namespace ssm::passes::conjugate {

using Family = ConjugatePiece::Family;
using Noise = ConjugatePiece::Noise;

// How a piece uses a parameter: what must agree where several pieces read it.
enum class Role { Probabilities, Rate, Coefficient, Noise, Matrix };

inline std::string_view role_name(Role r) {
  switch (r) {
  case Role::Probabilities:
    return "probabilities";
  case Role::Rate:
    return "rate";
  case Role::Coefficient:
    return "coefficient of the mean";
  case Role::Noise:
    return "noise";
  case Role::Matrix:
    return "matrix of the mean";
  }
  return "";
}

inline std::string where(const ir::SourceLoc& loc) {
  return loc.line > 0 ? fmt::format(" at {}:{}", loc.line, loc.col) : "";
}

inline ReadSum scaled(ReadSum r, double c) {
  r.constant *= c;
  for (auto& [coef, read] : r.terms)
    coef *= c;
  return r;
}

inline ReadSum added(ReadSum a, const ReadSum& b) {
  a.constant += b.constant;
  for (const auto& term : b.terms)
    a.terms.push_back(term);
  return a;
}

inline bool constant_only(const ReadSum& r) {
  return r.terms.empty();
}

// offset + sum_j theta_j * feature_j: linear in the parameters, with reads as coefficients.
struct ParamForm {
  ReadSum offset;
  std::vector<ConjugatePiece::Coefficient> terms;

  void add_term(ConjugatePiece::Coefficient term) {
    for (auto& t : terms)
      if (t.theta == term.theta) {
        t.feature = added(t.feature, term.feature);
        return;
      }
    terms.push_back(std::move(term));
  }
};

// Whether the product of a form and a non-constant read sum stays linear: every part constant.
inline bool constant_form(const ParamForm& f) {
  if (!constant_only(f.offset))
    return false;
  return std::all_of(f.terms.begin(), f.terms.end(),
                     [](const auto& t) { return constant_only(t.feature); });
}

// Reads one relation's arguments as the forms a piece needs; `why` says what failed first.
class PieceReader {
public:
  PieceReader(const ir::Model& model, const ir::Block& block) : model_(model), block_(block) {}

  std::optional<PointRead> group;
  int groups = 1;
  std::map<int, Role> roles; // model parameter -> its role in this piece
  std::string why;

  // A scalar without parameters, linear in the state at t and t-1 and the observation at t.
  std::optional<ReadSum> reads(int id) {
    const ir::Node& n = block_.nodes[id];
    switch (n.op) {
    case ir::Op::Const:
      if (n.shape.is_scalar())
        return ReadSum{n.values[0], {}};
      return std::nullopt;
    case ir::Op::State:
    case ir::Op::Obs:
    case ir::Op::Input:
      if (!n.shape.is_scalar())
        return std::nullopt;
      return component(n, 0);
    case ir::Op::Index: {
      const ir::Node& base = block_.nodes[n.args[0]];
      if (!n.shape.is_scalar() ||
          (base.op != ir::Op::State && base.op != ir::Op::Obs && base.op != ir::Op::Input))
        return std::nullopt;
      return component(base, ir::index_offset(base.shape, n.index));
    }
    case ir::Op::Neg:
      if (auto a = reads(n.args[0]))
        return scaled(*a, -1);
      return std::nullopt;
    case ir::Op::Add:
    case ir::Op::Sub: {
      auto a = reads(n.args[0]), b = reads(n.args[1]);
      if (!a || !b)
        return std::nullopt;
      return added(*a, n.op == ir::Op::Sub ? scaled(*b, -1) : *b);
    }
    case ir::Op::Mul: {
      auto a = reads(n.args[0]), b = reads(n.args[1]);
      if (!a || !b)
        return std::nullopt;
      if (constant_only(*a))
        return scaled(*b, a->constant);
      if (constant_only(*b))
        return scaled(*a, b->constant);
      return std::nullopt;
    }
    case ir::Op::Div: {
      auto a = reads(n.args[0]), b = reads(n.args[1]);
      if (a && b && constant_only(*b) && b->constant != 0)
        return scaled(*a, 1 / b->constant);
      return std::nullopt;
    }
    default:
      return std::nullopt;
    }
  }

  // A vector without parameters, component by component.
  std::optional<std::vector<ReadSum>> vector_reads(int id) {
    const ir::Node& n = block_.nodes[id];
    if (n.shape.rank() != 1)
      return std::nullopt;
    const int size = n.shape.dims[0];
    std::vector<ReadSum> out;
    switch (n.op) {
    case ir::Op::Const:
      for (double v : n.values)
        out.push_back({v, {}});
      return out;
    case ir::Op::State:
    case ir::Op::Obs:
    case ir::Op::Input: // dot(w, x[n]) with a covariate vector: a regression's features
      for (int k = 0; k < size; ++k) {
        auto r = component(n, k);
        if (!r)
          return std::nullopt;
        out.push_back(*r);
      }
      return out;
    case ir::Op::Build:
      for (int a : n.args) {
        auto r = reads(a);
        if (!r)
          return std::nullopt;
        out.push_back(*r);
      }
      return out;
    case ir::Op::MatMul: { // a constant matrix times such a vector
      const ir::Node& m = block_.nodes[n.args[0]];
      auto v = vector_reads(n.args[1]);
      if (m.op != ir::Op::Const || m.shape.rank() != 2 || !v)
        return std::nullopt;
      const int cols = m.shape.dims[1];
      for (int i = 0; i < size; ++i) {
        ReadSum row;
        for (int j = 0; j < cols; ++j)
          if (const double c = m.values[i * cols + j]; c != 0)
            row = added(row, scaled((*v)[j], c));
        out.push_back(row);
      }
      return out;
    }
    case ir::Op::Add:
    case ir::Op::Sub: {
      auto a = vector_reads(n.args[0]), b = vector_reads(n.args[1]);
      if (!a || !b || a->size() != b->size())
        return std::nullopt;
      for (size_t k = 0; k < a->size(); ++k)
        out.push_back(added((*a)[k], n.op == ir::Op::Sub ? scaled((*b)[k], -1) : (*b)[k]));
      return out;
    }
    default:
      return std::nullopt;
    }
  }

  // A vector mean as offsets, features and their coefficients' table (ConjugatePiece::matrix),
  // added to `piece` with the factor `sign`: sums of `M * v` (M a matrix parameter, v a vector
  // without parameters), vector parameters, and vectors without parameters.
  bool vector_form(int id, double sign, ConjugatePiece& piece) {
    const ir::Node& n = block_.nodes[id];
    const size_t d = piece.offset.size();
    if (auto v = vector_reads(id)) {
      for (size_t i = 0; i < d && v->size() == d; ++i)
        piece.offset[i] = added(piece.offset[i], scaled((*v)[i], sign));
      return v->size() == d;
    }
    if (n.op == ir::Op::Add || n.op == ir::Op::Sub)
      return vector_form(n.args[0], sign, piece) &&
             vector_form(n.args[1], n.op == ir::Op::Sub ? -sign : sign, piece);
    if (n.op == ir::Op::Param && n.shape.rank() == 1 && static_cast<size_t>(n.shape.dims[0]) == d) {
      if (roles.count(n.var) || !use(n.var, Role::Matrix, {}))
        return false; // read twice: its columns would be fitted apart

      piece.features.push_back(ReadSum{sign, {}});
      for (size_t i = 0; i < d; ++i)
        piece.matrix[i].push_back(model_.param_offset(n.var) + static_cast<int>(i));
      return true;
    }
    if (n.op == ir::Op::MatMul) {
      const ir::Node& a = block_.nodes[n.args[0]];
      auto f = vector_reads(n.args[1]);
      if (a.op != ir::Op::Param || a.shape.rank() != 2 || !f || roles.count(a.var) ||
          !use(a.var, Role::Matrix, {}))
        return false;
      const int k = a.shape.dims[1];
      for (int j = 0; j < k; ++j) {
        piece.features.push_back(scaled((*f)[j], sign));
        for (size_t i = 0; i < d; ++i)
          piece.matrix[i].push_back(model_.param_offset(a.var) + static_cast<int>(i) * k + j);
      }
      return true;
    }
    return false;
  }

  // A scalar linear in the parameters, whose components play `role`.
  std::optional<ParamForm> form(int id, Role role = Role::Coefficient) {
    if (auto r = reads(id))
      return ParamForm{*r, {}};
    const ir::Node& n = block_.nodes[id];
    switch (n.op) {
    case ir::Op::Param:
    case ir::Op::Index:
    case ir::Op::DynIndex:
      if (auto s = slot(id, role)) {
        ParamForm f;
        f.terms.push_back({*s, ReadSum{1, {}}});
        return f;
      }
      return std::nullopt;
    case ir::Op::Neg:
      if (auto a = form(n.args[0], role))
        return scaled_form(*a, ReadSum{-1, {}});
      return std::nullopt;
    case ir::Op::Add:
    case ir::Op::Sub: {
      auto a = form(n.args[0], role), b = form(n.args[1], role);
      if (!a || !b)
        return std::nullopt;
      if (n.op == ir::Op::Sub)
        b = scaled_form(*b, ReadSum{-1, {}});
      a->offset = added(a->offset, b->offset);
      for (auto& t : b->terms)
        a->add_term(std::move(t));
      return a;
    }
    case ir::Op::Mul: {
      auto a = form(n.args[0], role), b = form(n.args[1], role);
      if (!a || !b)
        return std::nullopt;
      if (a->terms.empty())
        std::swap(a, b);
      if (!b->terms.empty())
        return fail("it multiplies two parameters");
      if (!constant_only(b->offset) && !constant_form(*a))
        return fail("it is not linear in the states and observations");
      return scaled_form(*a, b->offset);
    }
    case ir::Op::Call:
      if (n.fn == "dot") { // dot(w, v): sum_i w[i] v[i], for a vector parameter w
        const ir::Node& a = block_.nodes[n.args[0]];
        const ir::Node& b = block_.nodes[n.args[1]];
        const bool first = a.op == ir::Op::Param;
        const ir::Node& w = first ? a : b;
        auto v = vector_reads(first ? n.args[1] : n.args[0]);
        if (w.op != ir::Op::Param || w.shape.rank() != 1 || !v || !use(w.var, role, {}))
          return fail("it is a dot product other than of a vector parameter and states");
        ParamForm f;
        for (size_t i = 0; i < v->size(); ++i)
          f.add_term({ThetaSlots{model_.param_offset(w.var) + static_cast<int>(i)}, (*v)[i]});
        return f;
      }
      return fail(
          fmt::format("{} is not linear in the parameters", ir::print_expr(model_, block_, id)));
    case ir::Op::Div: {
      auto a = form(n.args[0], role);
      auto b = reads(n.args[1]);
      if (a && b && constant_only(*b) && b->constant != 0)
        return scaled_form(*a, ReadSum{1 / b->constant, {}});
      return fail("it divides by something other than a constant");
    }
    default:
      return fail(
          fmt::format("{} is not linear in the parameters", ir::print_expr(model_, block_, id)));
    }
  }

  // A parameter's scalar component (`a`, `mu[1]`, `A[0, 1]`), or one per value of an integer
  // state (`mu[z[t]]`), in `role`.
  std::optional<ThetaSlots> slot(int id, Role role) {
    const ir::Node& n = block_.nodes[id];
    if (n.op == ir::Op::Param && n.shape.is_scalar())
      return use(n.var, role, ThetaSlots{model_.param_offset(n.var)});
    if (n.op == ir::Op::Index && n.shape.is_scalar()) {
      const ir::Node& base = block_.nodes[n.args[0]];
      if (base.op == ir::Op::Param)
        return use(
            base.var, role,
            ThetaSlots{model_.param_offset(base.var) + ir::index_offset(base.shape, n.index)});
    }
    if (n.op == ir::Op::DynIndex && n.shape.is_scalar()) {
      const ir::Node& base = block_.nodes[n.args[0]];
      if (base.op != ir::Op::Param || base.shape.rank() != 1)
        return fail("it indexes something other than a vector parameter");
      const int count = base.shape.dims[0];
      if (!grouped(n.args[1], count))
        return std::nullopt;
      ThetaSlots s;
      for (int g = 0; g < count; ++g)
        s.push_back(model_.param_offset(base.var) + g);
      return use(base.var, role, std::move(s));
    }
    return fail(
        fmt::format("{} is not a parameter's component", ir::print_expr(model_, block_, id)));
  }

  // Probabilities: a vector parameter, a row of a matrix parameter (`P[1]`), or the row an
  // integer state picks (`P[z[t-1]]`).
  std::optional<std::vector<ThetaSlots>> rows(int id) {
    const ir::Node& n = block_.nodes[id];
    auto row = [&](int param, int first, int k) {
      ThetaSlots s;
      for (int j = 0; j < k; ++j)
        s.push_back(model_.param_offset(param) + first + j);
      return s;
    };
    if (n.op == ir::Op::Param && n.shape.rank() == 1) {
      if (!use(n.var, Role::Probabilities, {}))
        return std::nullopt;
      return std::vector<ThetaSlots>{row(n.var, 0, n.shape.dims[0])};
    }
    const ir::Node& base = n.args.empty() ? n : block_.nodes[n.args[0]];
    if (base.op != ir::Op::Param || base.shape.rank() != 2 || n.shape.rank() != 1)
      return fail("its probabilities are not a vector parameter or a row of a matrix parameter");
    const int k = base.shape.dims[1];
    if (!use(base.var, Role::Probabilities, {}))
      return std::nullopt;
    if (n.op == ir::Op::Index)
      return std::vector<ThetaSlots>{row(base.var, ir::index_offset(base.shape, n.index), k)};
    if (n.op != ir::Op::DynIndex || !grouped(n.args[1], base.shape.dims[0]))
      return fail("its probabilities are not a vector parameter or a row of a matrix parameter");
    std::vector<ThetaSlots> out;
    for (int g = 0; g < base.shape.dims[0]; ++g)
      out.push_back(row(base.var, g * k, k));
    return out;
  }

  // The noise of a normal: a constant, a sd parameter, or the square root of a variance one.
  bool noise(int id, ConjugatePiece& piece) {
    const ir::Node& n = block_.nodes[id];
    if (n.op == ir::Op::Const) {
      piece.noise = Noise::Constant;
      piece.noise_value = n.values.empty() ? 0 : n.values[0];
      return true;
    }
    const bool sqrt = n.op == ir::Op::Call && n.fn == "sqrt";
    auto s = slot(sqrt ? n.args[0] : id, Role::Noise);
    if (!s) {
      why = "its sd is not a parameter, the square root of one, or a constant";
      return false;
    }
    piece.noise = sqrt ? Noise::Variance : Noise::Sd;
    piece.noise_theta = *s;
    return true;
  }

  std::nullopt_t fail(std::string reason) {
    if (why.empty())
      why = std::move(reason);
    return std::nullopt;
  }

private:
  const ir::Model& model_;
  const ir::Block& block_;

  // Component k of a state, observation or input node, where the E-step's points (or, for an
  // input, the step's covariates) hold it.
  std::optional<ReadSum> component(const ir::Node& n, int k) {
    PointRead r;
    if (n.op == ir::Op::Input) {
      if (n.lag != 0)
        return std::nullopt;
      r.input = true;
      r.offset = model_.input_offset(n.var) - model_.input_offset(0) + k;
    } else if (n.op == ir::Op::State) {
      const bool allowed = block_.kind == ir::BlockKind::Transition ? n.lag <= 1 : n.lag == 0;
      if (!allowed)
        return std::nullopt;
      r.offset = model_.state_offset(n.var) + k;
      r.lag = n.lag;
    } else {
      if (n.lag != 0 || block_.kind != ir::BlockKind::Observation)
        return std::nullopt; // y[t-1] is in the frame, not in the points
      r.obs = true;
      r.offset = model_.obs_offset(n.var) + k;
    }
    return ReadSum{0, {{1.0, r}}};
  }

  // `index` as the piece's group: a bare read of an integer state, the same for the whole piece.
  bool grouped(int index, int count) {
    auto r = reads(index);
    if (!r || r->constant != 0 || r->terms.size() != 1 || r->terms[0].first != 1 ||
        r->terms[0].second.obs) {
      why = "it indexes a parameter by something other than a state";
      return false;
    }
    const PointRead g = r->terms[0].second;
    if (group && (*group != g || groups != count)) {
      why = "it indexes parameters by two different values";
      return false;
    }
    group = g;
    groups = count;
    return true;
  }

  std::optional<ThetaSlots> use(int param, Role role, ThetaSlots s) {
    auto [it, inserted] = roles.emplace(param, role);
    if (!inserted && it->second != role)
      return fail(fmt::format("it reads {} both as {} and as {}", model_.params[param].name,
                              role_name(it->second), role_name(role)));
    return s;
  }

  ParamForm scaled_form(ParamForm f, const ReadSum& by) {
    // (c + sum theta_j f_j) * r with constant c and f_j, or r constant: still linear.
    if (!constant_only(by)) {
      f.offset = scaled(by, f.offset.constant);
      for (auto& t : f.terms)
        t.feature = scaled(by, t.feature.constant);
      return f;
    }
    f.offset = scaled(f.offset, by.constant);
    for (auto& t : f.terms)
      t.feature = scaled(t.feature, by.constant);
    return f;
  }
};

} // namespace ssm::passes::conjugate
