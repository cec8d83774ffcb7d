// An SDE's transition, `x[t] ~ diffusion(drift, diffusion, dt[, steps, psi_lower, psi_upper])`:
// dX = drift(X) dt + diffusion(X) dW from x[t-1] over dt, where the drift and the diffusion
// coefficient read x[t] as the path's current value. Lowered to the IR relation
// diffusion(x[t-1], drift, diffusion, dt, steps, psi_lower, psi_upper) (ir/dists.h) after the
// checks here: a real or vector state's transition only, the arguments' shapes, positive
// constants, an invertible constant matrix, whole substeps, psi's bounds for a real state.
#include "lowering.h"
#include "messages.h"

#include "ir/printer.h"

#include <Eigen/Core>
#include <Eigen/LU>

#include <algorithm>
#include <cmath>

namespace ssm::frontend::lowering {

std::optional<std::vector<int>> Lowering::lower_diffusion(const ast::Relation& r,
                                                          const ir::VarDecl& decl,
                                                          ir::BlockKind kind, int state, Scope& s,
                                                          const std::string& target) {
  const ast::DistCall& call = r.dist;
  if (kind != ir::BlockKind::Transition) {
    std::string what = r.proposal()                         ? "a proposal"
                       : kind == ir::BlockKind::Initial     ? "the initial " + target
                       : kind == ir::BlockKind::Observation ? "an observation's relation"
                                                            : "this relation";
    error(call.name.range, fmt::format(msg::diffusion_not_transition, what));
    return std::nullopt;
  }
  if (decl.integer || decl.shape.rank() > 1) {
    error(r.target->range, fmt::format(msg::diffusion_state_type, decl.name, ir::type_str(decl)));
    return std::nullopt;
  }
  if (call.unresolved) // its named arguments were reported wrong
    return std::nullopt;
  if (call.args.size() < 3 || call.args.size() > 6) {
    error(call.range,
          fmt::format(msg::diffusion_argument_count,
                      call.args.size() == 1 ? "1 was" : fmt::format("{} were", call.args.size())));
    return std::nullopt;
  }
  const ir::Shape& shape = decl.shape;
  const int d = shape.size();
  RelationScope& rel = *s.relation();

  // The drift and the diffusion coefficient read the path: x[t] is its current value.
  rel.path = true;
  std::optional<int> drift = lower(*call.args[0], s);
  std::optional<int> sigma = lower(*call.args[1], s);
  rel.path = false;
  rel.sde_fixed = "dt";
  std::optional<int> dt = lower(*call.args[2], s);
  rel.sde_fixed = nullptr;
  bool ok = drift && sigma && dt;
  if (drift && !(shape_of(s, *drift) == shape) && !shape_of(s, *drift).is_scalar()) {
    std::string allowed = shape.is_scalar() ? "real" : "real or " + shape.str();
    error(call.args[0]->range,
          fmt::format(msg::diffusion_drift_shape, target, allowed, shape_of(s, *drift).str()));
    ok = false;
  }
  if (sigma) {
    const ir::Shape& got = shape_of(s, *sigma);
    const ir::Shape square = ir::Shape::matrix(d, d);
    if (!got.is_scalar() && !(got == shape) && !(shape.rank() == 1 && got == square)) {
      std::string allowed =
          shape.is_scalar()
              ? "real"
              : fmt::format("real, {} (one per component) or {} (dX = drift dt + diffusion dW)",
                            shape.str(), square.str());
      error(call.args[1]->range,
            fmt::format(msg::diffusion_coefficient_shape, target, allowed, got.str()));
      ok = false;
    } else if (got.rank() == 2) {
      if (auto v = constant_value(*s.block, *sigma)) { // the noise's covariance sigma sigma^T
        const Eigen::Map<
            const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>
            m(v->data(), d, d);
        if (!m.allFinite()) {
          auto bad = std::find_if(v->begin(), v->end(), [](double x) { return !std::isfinite(x); });
          const auto k = bad - v->begin();
          error(call.args[1]->range,
                fmt::format(msg::diffusion_matrix_not_finite, target, k / d, k % d, *bad));
          ok = false;
        } else if (const auto rank = Eigen::FullPivLU<Eigen::MatrixXd>(m).rank(); rank < d) {
          error(call.args[1]->range, fmt::format(msg::diffusion_matrix_singular, target, rank, d));
          ok = false;
        }
      }
    } else {
      if (auto v = constant_value(*s.block, *sigma)) {
        auto bad = std::find_if(v->begin(), v->end(), [](double x) { return !(x > 0); });
        if (bad != v->end()) {
          error(call.args[1]->range,
                fmt::format(msg::diffusion_coefficient_not_positive, target,
                            v->size() == 1 ? std::string("it is")
                                           : fmt::format(msg::its_component_is, bad - v->begin()),
                            *bad));
          ok = false;
        }
      }
    }
  }
  if (dt && !shape_of(s, *dt).is_scalar()) {
    error(call.args[2]->range,
          fmt::format(msg::diffusion_dt_shape, target, shape_of(s, *dt).str()));
    ok = false;
  } else if (auto v = dt ? constant_value(*s.block, *dt) : std::nullopt; v && !((*v)[0] > 0)) {
    error(call.args[2]->range, fmt::format(msg::diffusion_dt_not_positive, target, (*v)[0]));
    ok = false;
  }
  long steps = ir::kDefaultDiffusionSteps;
  if (call.args.size() >= 4) {
    const std::string what = fmt::format("the number of substeps of {}", target);
    std::optional<long> n = eval_int(*call.args[3], what);
    const long most = ir::max_diffusion_steps(d); // the draws of a path have 32-bit indices
    if (n && (*n < 1 || *n > most))
      error(call.args[3]->range, fmt::format(msg::diffusion_steps_range, target, most, *n));
    ok = ok && n && *n >= 1 && *n <= most;
    steps = n.value_or(steps);
  }
  std::optional<std::vector<int>> psi = lower_psi_bounds(call, decl, s, target);
  if (!ok || !psi)
    return std::nullopt;

  ir::Node from;
  from.op = ir::Op::State;
  from.var = state;
  from.lag = 1;
  from.shape = shape;
  const int start = emit(s, std::move(from), r.target->range);
  rel.reads_state = true;
  const int count = emit_const(s, ir::Shape::scalar(), {static_cast<double>(steps)},
                               call.args.size() >= 4 ? call.args[3]->range : call.range);
  return std::vector<int>{start, *drift, *sigma, *dt, count, (*psi)[0], (*psi)[1]};
}

// The first state or observation (at any lag) that node `id` of the block reads, as written
// ("x[t-1]"); empty when it reads none.
std::string Lowering::state_or_observation_read(const ir::Block& block, int id) const {
  const std::vector<bool> reached = ir::reached_from(block, {id});
  for (size_t i = 0; i < block.nodes.size(); ++i) {
    const ir::Op op = block.nodes[i].op;
    if (reached[i] && (op == ir::Op::State || op == ir::Op::Obs))
      return ir::print_expr(model_, block, static_cast<int>(i));
  }
  return {};
}

// psi_lower and psi_upper, the model's bounds of the General Poisson estimator's psi (the
// sde-estimators pass intersects them with its own): reals that do not read the path, for a real
// state; constants -inf and inf when left out.
std::optional<std::vector<int>> Lowering::lower_psi_bounds(const ast::DistCall& call,
                                                           const ir::VarDecl& decl, Scope& s,
                                                           const std::string& target) {
  const char* names[] = {"psi_lower", "psi_upper"};
  const double unbounded[] = {-INFINITY, INFINITY};
  std::vector<int> out;
  std::vector<std::optional<double>> constants;
  bool ok = true;
  for (size_t k = 0; k < 2; ++k) {
    if (call.args.size() <= 4 + k) {
      out.push_back(emit_const(s, ir::Shape::scalar(), {unbounded[k]}, call.range));
      constants.push_back(unbounded[k]);
      continue;
    }
    const ast::Expr& e = *call.args[4 + k];
    s.relation()->sde_fixed = names[k];
    std::optional<int> id = lower(e, s);
    s.relation()->sde_fixed = nullptr;
    if (id && !shape_of(s, *id).is_scalar()) {
      error(e.range,
            fmt::format(msg::diffusion_psi_bound_shape, names[k], target, shape_of(s, *id).str()));
      id.reset();
    }
    std::optional<double> value;
    if (id)
      if (auto v = constant_value(*s.block, *id))
        value = (*v)[0];
    if (id)
      if (std::string read = state_or_observation_read(*s.block, *id); !read.empty()) {
        error(e.range, fmt::format(msg::diffusion_psi_bound_reads, names[k], target, read));
        id.reset();
      }
    if (id && !decl.shape.is_scalar()) {
      error(e.range,
            fmt::format(msg::diffusion_psi_bounds_vector, target, decl.name, ir::type_str(decl)));
      id.reset();
    }
    ok = ok && id;
    out.push_back(id.value_or(-1));
    constants.push_back(value);
  }
  for (size_t k = 0; k < 2; ++k)
    if (ok && constants[k] && *constants[k] == -unbounded[k]) { // psi_lower = inf
      error(call.args[4 + k]->range,
            fmt::format(msg::diffusion_psi_bound_infinite, names[k], target, *constants[k]));
      ok = false;
    }
  if (ok && constants[0] && constants[1] && *constants[0] > *constants[1]) {
    error(call.args[4]->range,
          fmt::format(msg::diffusion_psi_bounds_order, target, *constants[0], *constants[1]));
    ok = false;
  }
  return ok ? std::optional(out) : std::nullopt;
}

} // namespace ssm::frontend::lowering
