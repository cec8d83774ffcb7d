// ode_rk4(f, y0, t0, times, h, args...): the solution of dy/dt = f(t, y, args...), y(t0) = y0, at
// each of `times`, by classical Runge-Kutta with steps of at most h. f is a user function
// (t : real, y : vector[n], ...) -> vector[n]; its body is inlined once, on the integration's
// current t and y (ir::Op::OdeTime, OdeState), and codegen evaluates it inside the loop.
#include "limits.h"
#include "lowering.h"
#include "messages.h"

#include <fmt/ranges.h>

#include <cmath>

namespace ssm::frontend::lowering {

std::optional<int> Lowering::lower_ode(const Expr& e, Scope& s) {
  const std::size_t n_args = e.args.size();
  if (n_args < 5) {
    error(e.range, fmt::format(msg::fn_argument_count, "ode_rk4", "f, y0, t0, times, h, ...",
                               "at least 5 arguments",
                               n_args == 1 ? "1 was" : fmt::format("{} were", n_args)));
    return std::nullopt;
  }
  if (const ConstantScope* c = s.constant()) {
    error(e.range, fmt::format(msg::ode_in_constant, c->what));
    return std::nullopt;
  }
  if (s.ode_rate > 0) {
    error(e.range, msg::ode_inside_rate);
    return std::nullopt;
  }
  bool ok = true;
  // The rate: a user function, declared before the function being inlined if any.
  const Expr& fe = *e.args[0];
  Symbol* sym = fe.kind == EKind::Name ? lookup(fe.name, fe.range) : nullptr;
  const ast::FnDecl* f = nullptr;
  if (!sym || sym->kind != Symbol::Kind::Fn) {
    std::vector<std::string> fns;
    for (const ast::FnDecl& d : ast_.fns)
      if (visible(fe.range, d.name.range))
        fns.push_back(d.name.name);
    std::optional<std::string> guess;
    if (fe.kind == EKind::Name && !sym)
      guess = closest_name(fe.name, fns);
    error(fe.range, guess ? fmt::format(msg::unknown_function_did_you_mean, fe.name, *guess)
                          : std::string(msg::ode_rate_not_a_function));
    ok = false;
  } else {
    sym->used = true;
    f = &ast_.fns[sym->index];
    ok = check_call_order(*f, fe.range, s);
  }
  const std::optional<int> y0 = lower(*e.args[1], s);
  std::vector<std::optional<int>> extra;
  for (std::size_t k = 5; k < n_args; ++k)
    extra.push_back(lower(*e.args[k], s));
  const std::optional<double> t0 = eval_real(*e.args[2], "the start time of ode_rk4");
  const std::optional<ConstValue> times = eval_const(*e.args[3], "the times of ode_rk4");
  const std::optional<double> h = eval_real(*e.args[4], "the step of ode_rk4");
  if (!y0 || !t0 || !times || !h || !ok)
    return std::nullopt;

  const ir::Shape state = shape_of(s, *y0);
  if (state.rank() != 1 || state.dims[0] < 1) {
    error(e.args[1]->range, fmt::format(msg::ode_start_not_vector, state.str()));
    ok = false;
  }
  if (times->shape.rank() > 1 || times->values.empty()) {
    error(e.args[3]->range, fmt::format(msg::ode_times_shape, times->shape.str()));
    return std::nullopt;
  }
  double previous = *t0;
  for (double t : times->values) {
    if (!std::isfinite(t) || !std::isfinite(previous) || !(t > previous)) {
      error(e.args[3]->range,
            fmt::format(msg::ode_times_not_increasing, *t0, fmt::join(times->values, ", ")));
      return std::nullopt;
    }
    previous = t;
  }
  if (!std::isfinite(*h) || !(*h > 0)) {
    error(e.args[4]->range, fmt::format(msg::ode_step_not_positive, *h));
    return std::nullopt;
  }
  // k_i steps of (t_i - t_{i-1}) / k_i <= h: the grid meets every output time exactly.
  std::vector<int> steps;
  double total = 0;
  previous = *t0;
  for (double t : times->values) {
    const double k = std::max(1.0, std::ceil((t - previous) / *h * (1 - 1e-12)));
    total += k;
    steps.push_back(static_cast<int>(std::min(k, 1e9)));
    previous = t;
  }
  if (total > static_cast<double>(kMaxOdeSteps)) {
    error(e.args[4]->range, fmt::format(msg::ode_too_many_steps, total, *h, kMaxOdeSteps));
    return std::nullopt;
  }

  auto it = fn_signatures_.find(sym->index);
  if (!ok || !sym->valid || it == fn_signatures_.end())
    return std::nullopt;
  for (const std::optional<int>& a : extra) // reported where it failed: no signature to check
    if (!a)
      return std::nullopt;
  const FnSignature& sig = it->second;
  // f(t : real, y : vector[n], args...) -> vector[n], the extra arguments' shapes as given.
  std::vector<ir::Shape> wanted = {ir::Shape::scalar(), state};
  for (const std::optional<int>& a : extra)
    wanted.push_back(shape_of(s, *a));
  if (!(sig.params == wanted) || !(sig.result == state)) {
    std::vector<std::string> want_types, has_types;
    for (const ir::Shape& w : wanted)
      want_types.push_back(w.str());
    for (const ir::Shape& p : sig.params)
      has_types.push_back(p.str());
    error(fe.range, fmt::format(msg::ode_rate_signature, f->name.name, fmt::join(want_types, ", "),
                                state.str(), fmt::join(has_types, ", "), sig.result.str()));
    return std::nullopt;
  }
  std::vector<int> bound = {emit_op(s, ir::Op::OdeTime, ir::Shape::scalar(), {}, e.range),
                            emit_op(s, ir::Op::OdeState, state, {}, e.range)};
  for (const std::optional<int>& a : extra)
    bound.push_back(*a);
  ++s.ode_rate;
  std::optional<int> rate = expand_call(*f, sig, bound, e.range, s);
  --s.ode_rate;
  if (!rate)
    return std::nullopt;
  ir::Node node;
  node.op = ir::Op::Ode;
  node.args = {*y0, *rate};
  node.shape = ir::Shape::matrix(static_cast<int>(steps.size()), state.dims[0]);
  node.values.push_back(*t0);
  node.values.insert(node.values.end(), times->values.begin(), times->values.end());
  node.index = std::move(steps);
  return emit(s, std::move(node), e.range);
}

} // namespace ssm::frontend::lowering
