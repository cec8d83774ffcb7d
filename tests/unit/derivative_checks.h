// Helpers of the differentiation tests (test_derivatives.cpp, test_mvnormal_gradient.cpp): a point
// at which every expression a model's blocks can read is evaluated, its evaluation with
// ir::evaluate, and the check of an arena derivative against a central difference.
#pragma once

#include "ir/evaluate.h"
#include "passes/derivatives.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace derivative_checks {

using namespace ssm;

// Values of everything an expression can read, laid out as the IR's offsets say.
struct Point {
  std::vector<double> theta, x_prev, x, y_prev, y, frame_rest;
  double t = 3;
};

inline std::vector<double> evaluate_at(const ir::Model& model, const ir::Block& block, int id,
                                       const Point& p) {
  std::map<int, std::vector<double>> memo;
  std::function<const std::vector<double>&(int)> value = [&](int i) -> const std::vector<double>& {
    if (auto it = memo.find(i); it != memo.end())
      return it->second;
    const ir::Node n = block.nodes[i];
    std::vector<double> out;
    auto slice = [&](const std::vector<double>& v, int offset) {
      return std::vector<double>(v.begin() + offset, v.begin() + offset + n.shape.size());
    };
    switch (n.op) {
    case ir::Op::Param:
      out = slice(p.theta, model.param_offset(n.var));
      break;
    case ir::Op::State:
      out = slice(n.lag == 0 ? p.x : p.x_prev, model.state_offset(n.var));
      break;
    case ir::Op::Obs:
      out = slice(n.lag == 0 ? p.y : p.y_prev, model.obs_offset(n.var));
      break;
    case ir::Op::Time:
      out = {p.t};
      break;
    case ir::Op::Data:
    case ir::Op::Input:
      out.assign(n.shape.size(), 0.5);
      break;
    default: {
      std::vector<std::vector<double>> args;
      std::vector<ir::Shape> shapes;
      for (int a : n.args) {
        args.push_back(value(a));
        shapes.push_back(block.nodes[a].shape);
      }
      out = ir::evaluate(n, args, shapes);
    }
    }
    return memo[i] = std::move(out);
  };
  return value(id);
}

// A point inside every support: parameters at their defaults (0.5 without one, a covariance
// 0.5 off the diagonal and 1 on it), real states and
// observations small and positive, integer ones 1.
inline Point make_point(const ir::Model& m) {
  Point p;
  for (const ir::ParamDecl& d : m.params) {
    std::vector<double> v =
        d.default_value ? *d.default_value : std::vector<double>(d.shape.size(), 0.5);
    if (!d.default_value && d.type == ir::ParamType::CovMatrix) // positive definite: 0.2 + 0.8 I
      for (int i = 0; i < d.shape.dims[0]; ++i)
        v[i * d.shape.dims[0] + i] = 1.0;
    p.theta.insert(p.theta.end(), v.begin(), v.end());
  }
  auto fill = [](const std::vector<ir::VarDecl>& vars, double base) {
    std::vector<double> out;
    for (const ir::VarDecl& v : vars)
      for (int i = 0; i < v.shape.size(); ++i)
        out.push_back(v.integer ? 1.0 : base + 0.07 * static_cast<double>(out.size()));
    return out;
  };
  p.x_prev = fill(m.states, 0.35);
  p.x = fill(m.states, 0.45);
  p.y_prev = fill(m.obs, 0.55);
  p.y = fill(m.obs, 0.65);
  return p;
}

// The scalar input `w` of the point, to perturb.
inline double& input(Point& p, const ir::Model& m, const passes::Wrt& w) {
  if (w.op == ir::Op::Param)
    return p.theta[m.param_offset(w.var) + w.component];
  if (w.op == ir::Op::Obs)
    return (w.lag == 0 ? p.y : p.y_prev)[m.obs_offset(w.var) + w.component];
  return (w.lag == 0 ? p.x : p.x_prev)[m.state_offset(w.var) + w.component];
}

struct Counts {
  int checked = 0;
};

// d(node)/d(w) from the arena against a central difference of the node in its block.
inline void check(const ir::Model& m, const ir::Block& block, int node, const ir::Block& arena,
                  const std::vector<int>& d, const passes::Wrt& w, const std::string& what,
                  Counts& counts) {
  Point p = make_point(m);
  double& v = input(p, m, w);
  const double v0 = v, h = 1e-6 * std::max(1.0, std::abs(v0));
  v = v0 + h;
  const std::vector<double> up = evaluate_at(m, block, node, p);
  v = v0 - h;
  const std::vector<double> down = evaluate_at(m, block, node, p);
  v = v0;
  for (size_t i = 0; i < d.size(); ++i) {
    const double ad = d[i] < 0 ? 0.0 : evaluate_at(m, arena, d[i], p)[0];
    const double fd = (up[i] - down[i]) / (2 * h);
    if (!std::isfinite(fd) || !std::isfinite(ad))
      continue; // outside the domain at this point
    INFO(fmt::format("{}: d/d{} component {}: derivative {}, finite difference {}", what, w.str(m),
                     i, ad, fd));
    CHECK(std::abs(ad - fd) <= 1e-6 * std::max(1.0, std::abs(ad)));
    ++counts.checked;
  }
}

} // namespace derivative_checks
