// Declarations: which declarations each kind of model (state-space, plate, simulator) allows, and
// the types, bounds, priors and defaults of parameters, states, observations, data and inputs.
#include "lowering.h"
#include "messages.h"

#include <Eigen/Cholesky>
#include <Eigen/Core>

#include <algorithm>
#include <cmath>

namespace ssm::frontend::lowering {

// A simulator; a model over a plate when it declares a latent variable or an observation with a
// plate index (latent z[n], obs x[n]); else a state-space model (where `input u[n]` is an error).
ir::ModelKind Lowering::model_kind() const {
  if (ast_.is_simulator)
    return ir::ModelKind::Simulator;
  for (const ast::VarDecl& v : ast_.vars) // an input's index alone does not make one
    if (v.kind == ast::VarDecl::Kind::Latent || (v.plate && v.kind != ast::VarDecl::Kind::Input))
      return ir::ModelKind::Plate;
  return ir::ModelKind::StateSpace;
}

ir::BlockKind Lowering::static_block() const {
  return model_.kind == ir::ModelKind::Plate ? ir::BlockKind::Plate : ir::BlockKind::Simulator;
}

bool Lowering::in_static_block(const Scope& s) const {
  return s.kind() == ir::BlockKind::Plate || s.kind() == ir::BlockKind::Simulator ||
         s.kind() == ir::BlockKind::Guide;
}

// `what` (a state, an input, a time relation...) in a model without time.
void Lowering::no_time(Range r, const std::string& what) {
  if (model_.kind == ir::ModelKind::Plate)
    error(r, fmt::format(msg::time_series_in_plate_model, what));
  else
    error(r, fmt::format(msg::time_series_in_simulator, what, model_.name));
}

// Which declarations each kind of model allows, and in which form; a rejected declaration is
// marked invalid so that its uses report nothing more.
void Lowering::check_declaration_forms() {
  using VK = ast::VarDecl::Kind;
  const bool plate = model_.kind == ir::ModelKind::Plate;
  const bool simulator = model_.kind == ir::ModelKind::Simulator;
  for (const ast::VarDecl& v : ast_.vars) {
    Symbol* sym = declared(v.name);
    const std::string& name = v.name.name;
    bool ok = true;
    auto reject = [&](Range r, std::string message) {
      error(r, std::move(message));
      ok = false;
    };
    const bool latent = v.kind == VK::Latent;
    if (v.kind == VK::Param && simulator && !v.prior)
      // Likelihood-free inference learns a simulator's parameters from draws of their prior.
      reject(v.name.range, fmt::format(msg::simulator_parameter_without_prior, name, model_.name));
    using TK = ast::TypeSpec::Kind;
    if (v.kind == VK::Param && simulator && v.type &&
        (v.type->kind == TK::Matrix || v.type->kind == TK::CovMatrix))
      // Each simulation draws its own parameters into the kernels' state, which holds reals and
      // vectors (passes/simulator_draws.cpp).
      reject(v.type->range, fmt::format(msg::simulator_matrix_parameter, name));
    if (v.kind == VK::Input && plate) { // a covariate per item: input x[n]
      if (!v.plate)
        reject(v.name.range, fmt::format(msg::plate_input_index_missing, name, name));
      else if (v.plate->name != "n")
        reject(v.plate->range, fmt::format(msg::plate_index_not_n, name));
    } else if (v.kind == VK::Input && v.plate && !simulator) {
      reject(v.plate->range, fmt::format(msg::time_series_input_with_plate_index, name));
    } else if (v.kind == VK::State || v.kind == VK::Input) {
      if (plate || simulator) {
        no_time(v.range, fmt::format("{} '{}'", kind_name(var_symbol_kind(v.kind)), name));
        ok = false;
      }
    } else if (latent || v.kind == VK::Obs) {
      std::string what = latent ? "latent variable" : "observation";
      if (v.plate && v.plate->name != "n")
        reject(v.plate->range, fmt::format(msg::plate_index_not_n, name));
      else if (simulator && v.plate)
        reject(v.plate->range,
               fmt::format(msg::plate_index_in_simulator, latent ? "latent" : "obs", name));
      else if (plate && !v.plate)
        reject(v.name.range,
               fmt::format(msg::plate_index_missing, what, name, latent ? "latent" : "obs", name));
      else if (!plate && !simulator && v.defines_relation())
        reject(v.range, fmt::format(msg::time_series_obs_with_relation, name));
      else if (!plate && !simulator && !v.type)
        reject(v.range, fmt::format(msg::obs_without_type, name, name));
      else if (v.kind == VK::Obs && (plate || simulator) && v.prior && v.default_value)
        reject(v.default_value->range, fmt::format(msg::obs_with_distribution_and_value, name));
      else if (v.kind == VK::Obs && plate && v.default_value)
        reject(v.default_value->range, fmt::format(msg::deterministic_obs_in_plate_model, name));
      else if (v.kind == VK::Obs && (plate || simulator) && !v.defines_relation())
        reject(v.range, fmt::format(msg::obs_without_distribution, name,
                                    simulator ? " or a value" : "", plate ? "[n]" : ""));
    }
    if (!ok && sym)
      sym->valid = false;
  }
}

std::optional<ir::Shape> Lowering::type_shape(const ast::TypeSpec& t) {
  std::vector<int> dims;
  bool ok = true;
  for (const ast::ExprPtr& d : t.dims) {
    std::optional<int> n = eval_dimension(*d, "a dimension");
    ok = ok && n.has_value();
    dims.push_back(n.value_or(0));
  }
  if (!ok)
    return std::nullopt;
  long elements = 1;
  for (int d : dims)
    elements *= d;
  if (elements > max_elements) {
    error(t.range, fmt::format(msg::type_too_large, elements, max_elements));
    return std::nullopt;
  }
  switch (t.kind) {
  case ast::TypeSpec::Kind::Real:
    return ir::Shape::scalar();
  case ast::TypeSpec::Kind::Vector:
    return ir::Shape::vector(dims[0]);
  case ast::TypeSpec::Kind::Matrix:
    return ir::Shape::matrix(dims[0], dims[1]);
  case ast::TypeSpec::Kind::CovMatrix:
    return ir::Shape::matrix(dims[0], dims[0]);
  case ast::TypeSpec::Kind::Simplex:
    if (dims[0] < 1) {
      error(t.range, msg::empty_simplex);
      return std::nullopt;
    }
    return ir::Shape::vector(dims[0]);
  case ast::TypeSpec::Kind::Int:
    return ir::Shape::scalar();
  case ast::TypeSpec::Kind::Sequence: // one slot: its length (the tokens are the runtime's)
    if (dims[0] < 1) {
      error(t.range, msg::empty_vocabulary);
      return std::nullopt;
    }
    return ir::Shape::scalar();
  }
  return std::nullopt;
}

// The bounds of real(lo, hi) or int[lo..hi]; nullopt after an error.
std::optional<std::pair<double, double>> Lowering::type_bounds(const ast::TypeSpec& t) {
  if (t.bounds.empty())
    return std::pair(-INFINITY, INFINITY);
  bool integer = t.kind == ast::TypeSpec::Kind::Int;
  std::optional<double> lo, hi;
  if (integer) { // an integer, or inf / -inf for an open side: int[0..inf]
    auto bound = [&](const Expr& e, const char* what) -> std::optional<double> {
      std::optional<double> v = eval_real(e, what);
      if (v && std::isfinite(*v) && *v != std::floor(*v)) {
        error(e.range, fmt::format(msg::bound_not_integer, what, *v));
        return std::nullopt;
      }
      return v;
    };
    lo = bound(*t.bounds[0], "the lower bound");
    hi = bound(*t.bounds[1], "the upper bound");
  } else {
    lo = eval_real(*t.bounds[0], "the lower bound");
    hi = eval_real(*t.bounds[1], "the upper bound");
  }
  if (!lo || !hi)
    return std::nullopt;
  if (!(*lo <= *hi) || (!integer && *lo == *hi)) {
    error(t.range, fmt::format(msg::bounds_out_of_order, *lo, integer ? "at most" : "below", *hi));
    return std::nullopt;
  }
  return std::pair(*lo, *hi);
}

void Lowering::define_var(const ast::VarDecl& v) {
  using TK = ast::TypeSpec::Kind;
  using VK = ast::VarDecl::Kind;
  Symbol* sym = declared(v.name);
  std::optional<ir::Shape> shape = ir::Shape::scalar();
  double lower = -INFINITY, upper = INFINITY;
  bool bounds_ok = true;
  TK tk = v.type ? v.type->kind : TK::Real;
  if (v.type) {
    shape = type_shape(*v.type);
    if (auto b = type_bounds(*v.type))
      std::tie(lower, upper) = *b;
    else
      bounds_ok = false;
    std::string what = kind_name(var_symbol_kind(v.kind));
    if (tk == TK::CovMatrix && v.kind != VK::Param && v.kind != VK::Data) {
      error(v.type->range, fmt::format(msg::cov_matrix_misplaced, a_kind(var_symbol_kind(v.kind))));
      shape.reset();
    } else if (tk == TK::Sequence && (v.kind != VK::Obs || model_.kind != ir::ModelKind::Plate)) {
      error(v.type->range,
            fmt::format(msg::sequence_misplaced,
                        v.kind != VK::Obs ? a_kind(var_symbol_kind(v.kind))
                        : model_.kind == ir::ModelKind::Simulator
                            ? std::string("a simulator's observation")
                            : std::string("an observation of a model over time (a time series "
                                          "is its own sequence)")));
      shape.reset();
    } else if (tk == TK::Simplex && v.kind != VK::Param && v.kind != VK::Data) {
      error(v.type->range, fmt::format(msg::simplex_misplaced, a_kind(var_symbol_kind(v.kind))));
      shape.reset();
    } else if (tk == TK::Int && v.kind == VK::Param) {
      error(v.type->range, msg::integer_parameter);
      shape.reset();
    } else if (tk == TK::Real && !v.type->bounds.empty() && v.kind != VK::Param &&
               v.kind != VK::Data) {
      error(v.type->range,
            fmt::format(msg::real_bounds_misplaced, what, v.name.name,
                        v.kind == VK::Input ? "is read as given (declare it real)"
                                            : "takes the support of its distribution"));
      shape.reset();
    }
  }
  if (!sym)
    return;
  if (!shape || !bounds_ok) {
    sym->valid = false;
    return;
  }
  ir::VarDecl* var = nullptr;
  switch (v.kind) {
  case VK::State:
    var = &model_.states[sym->index];
    break;
  case VK::Obs:
    var = &model_.obs[sym->index];
    break;
  case VK::Data:
    var = &model_.data[sym->index];
    break;
  case VK::Input:
    var = &model_.inputs[sym->index];
    break;
  case VK::Latent:
    var = &model_.latents[sym->index];
    break;
  case VK::Param:
    break;
  }
  if (var) {
    var->shape = *shape;
    var->integer = tk == TK::Int;
    var->lower = lower;
    var->upper = upper;
    var->constraint = tk == TK::CovMatrix  ? ir::Constraint::CovMatrix
                      : tk == TK::Simplex  ? ir::Constraint::Simplex
                      : tk == TK::Sequence ? ir::Constraint::Sequence
                                           : ir::Constraint::None;
    if (tk == TK::Sequence) { // tokens 0..V-1
      var->integer = true;
      var->lower = 0;
      var->upper =
          static_cast<double>(eval_dimension(*v.type->dims[0], "a dimension").value_or(1)) - 1;
    }
    return;
  }
  ir::ParamDecl& p = model_.params[sym->index];
  p.shape = *shape;
  p.lower = lower;
  p.upper = upper;
  p.type = tk == TK::Real      ? ir::ParamType::Real
           : tk == TK::Vector  ? ir::ParamType::Vector
           : tk == TK::Matrix  ? ir::ParamType::Matrix
           : tk == TK::Simplex ? ir::ParamType::Simplex
                               : ir::ParamType::CovMatrix;
  if (v.prior) {
    if (tk == TK::CovMatrix)
      error(v.prior->range, msg::cov_matrix_prior_unsupported);
    else
      add_prior(v, sym->index, p.shape);
  }
  if (v.default_value)
    set_default(v, p);
}

// What an argument of v's prior that is not a constant may read: constants, functions, and the
// parameters declared before v (a hierarchical prior: mu ~ normal(0, tau)), so that the priors
// are one joint law, sampled in declaration order.
bool Lowering::check_prior_reads(const Expr& e, const ast::VarDecl& v) {
  bool ok = true;
  if (e.kind == EKind::Call) // a user function or network: lowered after the declarations
    if (const auto it = symbols_.find(e.name);
        it != symbols_.end() &&
        (it->second.kind == Symbol::Kind::Fn || it->second.kind == Symbol::Kind::Net)) {
      error(e.range, fmt::format(msg::prior_calls_function, v.name.name, e.name));
      return false;
    }
  if (e.kind == EKind::Name && e.name != "pi" && e.name != "inf") {
    const Symbol* sym = lookup(e.name, e.range);
    if (sym && sym->kind == Symbol::Kind::Param && sym->range.begin == v.name.range.begin) {
      error(e.range, fmt::format(msg::prior_reads_itself, v.name.name));
      ok = false;
    } else if (sym && sym->kind == Symbol::Kind::Param &&
               order(sym->range.begin) > order(v.name.range.begin)) {
      error(e.range, fmt::format(msg::prior_reads_later_parameter, v.name.name, e.name));
      ok = false;
    } else if (sym && sym->kind != Symbol::Kind::Param && sym->kind != Symbol::Kind::Const &&
               sym->kind != Symbol::Kind::Fn) {
      error(e.range,
            fmt::format(msg::prior_reads_variable, v.name.name, e.name, a_kind(sym->kind)));
      ok = false;
    } else if (!sym && e.name == "t") {
      error(e.range, fmt::format(msg::prior_reads_variable, v.name.name, e.name, "the time index"));
      ok = false;
    }
  }
  for (const ast::ExprPtr& a : e.args)
    ok = check_prior_reads(*a, v) && ok;
  return ok;
}

// The values a parameter declared before can take: its declared bounds narrowed by its prior's
// support (the constant bounds of a uniform, or the distribution's).
std::pair<double, double> Lowering::param_support(int param) const {
  const ir::ParamDecl& p = model_.params[param];
  double lo = p.lower, hi = p.upper;
  for (const ir::Relation& rel : model_.prior.relations)
    if (rel.var == param)
      if (const auto support = ir::continuous_support(model_.prior, rel)) {
        lo = std::max(lo, support->first);
        hi = std::min(hi, support->second);
      }
  return {lo, hi};
}

// Whether a prior argument that reads parameters stays positive (or, with `probability`, within
// [0, 1]) whatever their values: products and sums of positive constants and of parameters
// whose support is positive, exp, sqrt. The log densities of the priors are only defined there.
bool Lowering::positive_in_prior(const Expr& e, bool probability) const {
  switch (e.kind) {
  case EKind::Number:
    return e.number > 0 && (!probability || e.number <= 1);
  case EKind::Name: {
    const auto it = symbols_.find(e.name);
    if (it == symbols_.end())
      return false;
    if (it->second.kind == Symbol::Kind::Const) {
      const std::vector<double>& v = consts_[it->second.index].values;
      return std::all_of(v.begin(), v.end(),
                         [&](double x) { return x > 0 && (!probability || x <= 1); });
    }
    if (it->second.kind != Symbol::Kind::Param)
      return false;
    const auto [lo, hi] = param_support(it->second.index);
    return lo >= 0 && (!probability || hi <= 1);
  }
  case EKind::Index:
    return positive_in_prior(*e.args[0], probability);
  case EKind::Binary:
    if (probability)
      return e.op == "*" && positive_in_prior(*e.args[0], true) &&
             positive_in_prior(*e.args[1], true);
    return (e.op == "*" || e.op == "/" || e.op == "+") && positive_in_prior(*e.args[0], false) &&
           positive_in_prior(*e.args[1], false);
  case EKind::Call:
    return !probability && (e.name == "exp" || (e.name == "sqrt" && e.args.size() == 1 &&
                                                positive_in_prior(*e.args[0], false)));
  default:
    return false;
  }
}

void Lowering::add_prior(const ast::VarDecl& v, int param, const ir::Shape& shape) {
  const ast::DistCall& d = *v.prior;
  Scope s(model_.prior,
          RelationScope(ir::BlockKind::Prior, fmt::format("the prior of '{}'", v.name.name),
                        ir::VarKind::Param, param, v.name.name));
  if (refuse_guide_only(d, v.name.name))
    return;
  std::vector<std::optional<int>> args;
  std::vector<std::optional<ir::Shape>> shapes;
  for (const ast::ExprPtr& a : d.args) {
    std::optional<int> id;
    if (is_constant(*a, s)) {
      if (std::optional<ConstValue> value = eval_const(*a, "a prior argument"))
        id = emit_const(s, value->shape, value->values, a->range);
    } else if (check_prior_reads(*a, v)) {
      id = lower(*a, s);
    }
    args.push_back(id);
    shapes.push_back(id ? std::optional(model_.prior.nodes[*id].shape) : std::nullopt);
  }
  std::optional<ir::Dist> dist = check_dist(d, shapes, shape, v.name.name, v.name.range);
  if (!dist || std::find(args.begin(), args.end(), std::nullopt) != args.end())
    return;
  // The parameter's support, and so its unconstrained map, comes from these arguments.
  const ir::DistInfo& info = ir::dist_info(*dist);
  if (info.support_from >= 0)
    for (int k : {info.support_from, info.support_from + 1})
      if (model_.prior.nodes[*args[k]].op != ir::Op::Const) {
        error(d.args[k]->range,
              fmt::format(msg::prior_support_not_constant, v.name.name, info.name));
        return;
      }
  check_argument_domain(*dist, d, model_.prior, args);
  // An argument that reads parameters: its domain must hold for all their values, and the
  // prior's support must lie within the declared bounds (no truncation whose normaliser would
  // depend on them).
  bool reads_params = false;
  for (size_t k = 0; k < args.size(); ++k) {
    if (model_.prior.nodes[*args[k]].op == ir::Op::Const)
      continue;
    reads_params = true;
    using enum ir::ArgDomain;
    const ir::ArgDomain rule = k < info.domains.size() ? info.domains[k] : Any;
    if (rule == Any || rule == Covariance || rule == Cholesky || // checked at run time
        positive_in_prior(*d.args[k], rule == Probability))
      continue;
    const bool probability = rule == Probability;
    error(d.args[k]->range,
          fmt::format(msg::prior_argument_domain_unknown, info.arg_names[k], info.name, v.name.name,
                      probability ? "between 0 and 1" : "positive",
                      probability ? "between 0 and 1" : "positive"));
    return;
  }
  if (reads_params) { // the support: constant bounds (truncated_normal's), else the table's
    const ir::ParamDecl& p = model_.params[param];
    ir::Relation candidate;
    candidate.dist = *dist;
    for (const std::optional<int>& id : args)
      candidate.args.push_back(*id);
    const auto [lo, hi] =
        ir::continuous_support(model_.prior, candidate).value_or(std::pair(info.lower, info.upper));
    if (lo < p.lower || hi > p.upper) {
      error(d.name.range, fmt::format(msg::prior_truncated_reads_parameters, info.name, v.name.name,
                                      p.lower, p.upper, v.name.name));
      return;
    }
  }
  ir::Relation rel;
  rel.kind = ir::VarKind::Param;
  rel.var = param;
  rel.dist = *dist;
  rel.loc = loc(v.range);
  for (const std::optional<int>& id : args)
    rel.args.push_back(*id);
  model_.prior.relations.push_back(std::move(rel));
}

void Lowering::set_default(const ast::VarDecl& v, ir::ParamDecl& p) {
  const Expr& e = *v.default_value;
  std::optional<ConstValue> value = eval_const(e, fmt::format(msg::what_default_value, p.name));
  if (!value)
    return;
  std::vector<double> values;
  if (value->shape == p.shape) {
    values = value->values;
  } else if (value->shape.is_scalar()) {
    values.assign(p.shape.size(), value->values[0]);
  } else {
    error(e.range, fmt::format(msg::default_shape_mismatch, p.name, value->shape.str(), p.name,
                               p.shape.str()));
    return;
  }
  for (double x : values)
    if (!std::isfinite(x)) {
      error(e.range, fmt::format(msg::default_not_finite, p.name, x));
      return;
    }
  for (double x : values)
    if (x < p.lower || x > p.upper) {
      error(e.range, fmt::format(msg::default_outside_bounds, p.name, x, p.lower, p.upper));
      return;
    }
  if (p.type == ir::ParamType::Simplex) {
    double total = 0;
    for (double x : values)
      total += x;
    auto negative = std::find_if(values.begin(), values.end(), [](double x) { return x < 0; });
    if (negative != values.end() || std::fabs(total - 1) > 1e-9) {
      error(e.range,
            fmt::format(msg::default_not_on_simplex, p.name,
                        negative != values.end() ? fmt::format(msg::simplex_component_negative,
                                                               negative - values.begin(), *negative)
                                                 : fmt::format(msg::simplex_sum, total)));
      return;
    }
  }
  if (p.type == ir::ParamType::CovMatrix) {
    int n = p.shape.dims[0];
    Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> m(
        values.data(), n, n);
    if (!m.isApprox(m.transpose(), 1e-12) && !(m - m.transpose()).isZero(1e-12)) {
      error(e.range, fmt::format(msg::default_cov_matrix_not_symmetric, p.name));
      return;
    }
    if (Eigen::LLT<Eigen::MatrixXd>(m).info() != Eigen::Success) {
      error(e.range, fmt::format(msg::default_cov_matrix_not_positive_definite, p.name));
      return;
    }
  }
  p.default_value = std::move(values);
}

} // namespace ssm::frontend::lowering
