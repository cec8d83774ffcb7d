// The differentiation pass (passes/derivatives.h) against central finite differences, on every
// stdlib model and shipped example: the derivative of every argument of every transition and
// observation relation (means, scales, probabilities) with respect to each real component of the
// state the block conditions on and to each parameter, and the gradient of every relation's
// log-density with respect to those and to its own (continuous) target. Expressions are evaluated
// with ir::evaluate at a fixed point; a derivative must match within 1e-6 relative.
#include "derivative_checks.h"
#include "frontend/frontend.h"
#include "ir/evaluate.h"
#include "passes/derivatives.h"
#include "passes/pass.h"
#include "passes/passes.h"
#include "text_file.h"

#include "kernel/kernel_lib.h"

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <numbers>
#include <sstream>

using namespace ssm;

using unit_test_files::read_file;
using namespace derivative_checks;

namespace {
// The log-density of one relation at the point, computed without the IR: the kernel library's
// scalar densities, Eigen for the multivariate normal, lgamma for the rest.
double reference_log_density(ir::Dist dist, const std::vector<double>& x,
                             const std::vector<std::vector<double>>& args) {
  auto a = [&](size_t k, size_t i) { return args[k].size() == 1 ? args[k][0] : args[k][i]; };
  const size_t d = x.size();
  double total = 0;
  switch (dist) {
  case ir::Dist::MvNormal:
  case ir::Dist::MvNormalChol: {
    const Eigen::Map<const Eigen::MatrixXd> m(args[1].data(), d, d); // symmetric or row-major L'
    Eigen::MatrixXd L = dist == ir::Dist::MvNormal ? Eigen::MatrixXd(m.llt().matrixL())
                                                   : Eigen::MatrixXd(m.transpose());
    L = L.triangularView<Eigen::Lower>();
    Eigen::VectorXd r(d);
    for (size_t i = 0; i < d; ++i)
      r[i] = x[i] - a(0, i);
    const Eigen::VectorXd z = L.triangularView<Eigen::Lower>().solve(r);
    return -0.5 * z.squaredNorm() - L.diagonal().array().log().sum() -
           0.5 * static_cast<double>(d) * std::log(2 * std::numbers::pi);
  }
  case ir::Dist::Categorical: {
    double sum = 0;
    for (double p : args[0])
      sum += p;
    return std::log(args[0].at(static_cast<size_t>(x[0])) / sum);
  }
  case ir::Dist::Dirichlet: {
    double sum = 0;
    for (size_t i = 0; i < d; ++i) {
      sum += a(0, i);
      total += (a(0, i) - 1) * std::log(x[i]) - std::lgamma(a(0, i));
    }
    return total + std::lgamma(sum);
  }
  case ir::Dist::Multinomial: {
    double sum = 0;
    for (size_t i = 0; i < d; ++i)
      sum += a(1, i);
    total = std::lgamma(args[0][0] + 1);
    for (size_t i = 0; i < d; ++i)
      total += x[i] * std::log(a(1, i) / sum) - std::lgamma(x[i] + 1);
    return total;
  }
  default:
    break;
  }
  for (size_t i = 0; i < d; ++i) {
    const double v = x[i];
    switch (dist) {
    case ir::Dist::Normal:
      total += ssm_lpdf_normal(v, a(0, i), a(1, i));
      break;
    case ir::Dist::LogNormal:
      total += ssm_lpdf_lognormal(v, a(0, i), a(1, i));
      break;
    case ir::Dist::StudentT:
      total += ssm_lpdf_student_t(v, a(0, i), a(1, i), a(2, i));
      break;
    case ir::Dist::HalfNormal:
      total += ssm_lpdf_half_normal(v, a(0, i));
      break;
    case ir::Dist::Uniform:
      total += ssm_lpdf_uniform(v, a(0, i), a(1, i));
      break;
    case ir::Dist::Gamma:
      total += ssm_lpdf_gamma(v, a(0, i), a(1, i));
      break;
    case ir::Dist::Exponential:
      total += ssm_lpdf_exponential(v, a(0, i));
      break;
    case ir::Dist::Poisson:
      total += ssm_lpdf_poisson(v, a(0, i));
      break;
    case ir::Dist::Bernoulli:
      total += ssm_lpdf_bernoulli(v, a(0, i));
      break;
    case ir::Dist::BernoulliLogit:
      total += ssm_lpdf_bernoulli_logit(v, a(0, i));
      break;
    case ir::Dist::Beta:
      total += ssm_lpdf_beta(v, a(0, i), a(1, i));
      break;
    case ir::Dist::InverseGamma:
      total += ssm_lpdf_inverse_gamma(v, a(0, i), a(1, i));
      break;
    case ir::Dist::Laplace:
      total += ssm_lpdf_laplace(v, a(0, i), a(1, i));
      break;
    case ir::Dist::Cauchy:
      total += ssm_lpdf_cauchy(v, a(0, i), a(1, i));
      break;
    case ir::Dist::Binomial:
      total += ssm_lpdf_binomial(v, a(0, i), a(1, i));
      break;
    case ir::Dist::NegativeBinomial:
      total += ssm_lpdf_negative_binomial(v, a(0, i), a(1, i));
      break;
    case ir::Dist::Weibull:
      total += ssm_lpdf_weibull(v, a(0, i), a(1, i));
      break;
    case ir::Dist::Gumbel:
      total += ssm_lpdf_gumbel(v, a(0, i), a(1, i));
      break;
    case ir::Dist::TruncatedNormal:
      total += ssm_lpdf_truncated_normal(v, a(0, i), a(1, i), a(2, i), a(3, i));
      break;
    default:
      FAIL("no reference log-density for " << ir::dist_info(dist).name);
    }
  }
  return total;
}

struct Totals {
  Counts counts;
  int log_densities = 0;
};

// Every transition and observation relation of the model: its arguments' derivatives, its
// log-density's value (against reference_log_density) and gradient.
void check_model(const ir::Model& m, const std::string& file, Totals& totals) {
  for (const ir::Block* block : {&m.transition, &m.observation}) {
    const bool transition = block == &m.transition;
    // The inputs: real components of the state the block conditions on, and the parameters.
    std::vector<passes::Wrt> inputs;
    for (size_t s = 0; s < m.states.size(); ++s)
      if (!m.states[s].integer)
        for (int c = 0; c < m.states[s].shape.size(); ++c)
          inputs.push_back({ir::Op::State, static_cast<int>(s), transition ? 1 : 0, c});
    for (size_t k = 0; k < m.params.size(); ++k)
      for (int c = 0; c < m.params[k].shape.size(); ++c)
        inputs.push_back({ir::Op::Param, static_cast<int>(k), 0, c});
    ir::Block arena{block->kind, {}, {}, {}};
    passes::ExprBuilder b(arena);
    passes::Differentiator from_block(*block, b), in_arena(arena, b);
    for (const ir::Relation& rel : block->relations) {
      const std::string name = fmt::format("{} {}[t]", file, m.var_name(rel.kind, rel.var));
      for (size_t a = 0; a < rel.args.size(); ++a)
        for (const passes::Wrt& w : inputs)
          check(m, *block, rel.args[a], arena, from_block.derivative(rel.args[a], w), w,
                fmt::format("{} argument {}", name, a), totals.counts);
      if (rel.dist == ir::Dist::Dirac || rel.dist == ir::Dist::Diffusion)
        continue; // a hidden copy (augment-lags), an SDE: no density
      std::string why;
      std::optional<int> lp = passes::log_density(m, *block, rel, b, why);
      INFO(name << ": " << why);
      REQUIRE(lp); // every distribution of these models has a log-density formula
      ++totals.log_densities;
      const Point p = make_point(m);
      const bool obs = rel.kind == ir::VarKind::Obs;
      const std::vector<double>& target = obs ? p.y : p.x;
      const int offset = obs ? m.obs_offset(rel.var) : m.state_offset(rel.var);
      const std::vector<double> x(target.begin() + offset,
                                  target.begin() + offset + m.var_shape(rel.kind, rel.var).size());
      std::vector<std::vector<double>> args;
      for (int a : rel.args)
        args.push_back(evaluate_at(m, *block, a, p));
      const double expected = reference_log_density(rel.dist, x, args);
      CHECK(evaluate_at(m, arena, *lp, p)[0] == Approx(expected).epsilon(1e-10).margin(1e-12));
      std::vector<passes::Wrt> wrt = inputs;
      const bool continuous = !ir::dist_info(rel.dist).discrete;
      const ir::Shape& shape = m.var_shape(rel.kind, rel.var);
      if (continuous)
        for (int c = 0; c < shape.size(); ++c)
          wrt.push_back({obs ? ir::Op::Obs : ir::Op::State, rel.var, 0, c});
      for (const passes::Wrt& w : wrt)
        check(m, arena, *lp, arena, in_arena.derivative(*lp, w), w, name + " log-density",
              totals.counts);
    }
  }
}

// check_model on a model given as source text.
Totals check_source(const std::string& source, const std::string& file) {
  frontend::DiagnosticEngine diags;
  std::optional<ir::Model> model = frontend::compile_model(source, file, diags);
  INFO(diags.str());
  REQUIRE(model);
  Totals totals;
  check_model(*model, file, totals);
  return totals;
}

} // namespace

TEST_CASE("derivatives of relation arguments and log-densities match finite differences",
          "[passes][derivatives]") {
  std::vector<std::string> files;
  for (const std::string& dir :
       {std::string(SSM_SOURCE_DIR) + "/stdlib/models", std::string(SSM_SOURCE_DIR) + "/examples"})
    for (const auto& entry : std::filesystem::directory_iterator(dir))
      if (entry.path().extension() == ".ssm")
        files.push_back(entry.path().string());
  REQUIRE(files.size() >= 13);
  Totals totals;
  for (const std::string& file : files) {
    frontend::DiagnosticEngine diags;
    std::optional<ir::Model> model = frontend::compile_model(
        read_file(file), file, diags, {std::string(SSM_SOURCE_DIR) + "/stdlib"});
    INFO(file << "\n" << diags.str());
    REQUIRE(model);
    passes::augment_lags(*model); // as before code generation: x[t-2] becomes a state at t-1
    check_model(*model, file, totals);
  }
  INFO(totals.counts.checked << " derivatives checked, " << totals.log_densities
                             << " log-densities");
  CHECK(totals.counts.checked > 500);
  CHECK(totals.log_densities >= 30);
}

TEST_CASE("log-densities of the distributions the shipped models do not use",
          "[passes][derivatives]") {
  // The point puts states near 0.35-0.6 and observations near 0.65-1 (integers at 1).
  const std::string source = R"(
model dists {
  param a = 2.5;
  param L : matrix[2, 2] = [[1.2, 0], [0.3, 0.8]];
  state u : real;
  state v : real;
  state w : vector[2];
  state s : real;
  obs yb : real;
  obs yi : real;
  obs yd : vector[3];
  obs ym : vector[3];
  obs yl : real;
  obs yc : real;
  obs yt : real;
  obs ye : real;
  obs yn : int[0..inf];
  obs ybin : int[0..5];
  obs yber : int[0..1];
  obs ytn : real;
  obs yw : real;
  obs yg : real;
  obs ybl : int[0..1];
  u[0] ~ beta(2, 3);
  v[0] ~ inverse_gamma(3, 1);
  w[0] ~ normal(0, 1);
  s[0] ~ normal(0, 1);
  u[t] ~ beta(a * u[t-1] + 1, 2);
  v[t] ~ inverse_gamma(a, v[t-1] + 0.5);
  w[t] ~ mvnormal_chol(L * w[t-1], L);
  s[t] ~ uniform(s[t-1] - 1, s[t-1] + a);
  yb[t] ~ normal(u[t], 1);
  yi[t] ~ lognormal(log(v[t]), 0.5);
  yd[t] ~ dirichlet([a, u[t] + 1, v[t] + 1]);
  ym[t] ~ multinomial(3, [u[t], v[t], 1]);
  yl[t] ~ laplace(w[t][0], a);
  yc[t] ~ cauchy(w[t][1], 0.7);
  yt[t] ~ student_t(a + 2, s[t], 1.5);
  ye[t] ~ exponential(exp(u[t]));
  yn[t] ~ negative_binomial(exp(v[t]), a);
  ybin[t] ~ binomial(5, u[t]);
  yber[t] ~ bernoulli(v[t] / 2);
  ytn[t] ~ truncated_normal(s[t], a, -1, u[t] + 2);
  yw[t] ~ weibull(a + 1, v[t] + 0.5);
  yg[t] ~ gumbel(s[t], v[t] + a);
  ybl[t] ~ bernoulli_logit(a * u[t] - 3);
}
)";
  const Totals totals = check_source(source, "dists.ssm");
  CHECK(totals.log_densities == 19);
  CHECK(totals.counts.checked > 100);
}

TEST_CASE("the derivatives analysis records Jacobians and gradients (lgssm1)",
          "[passes][derivatives]") {
  const std::string file = std::string(SSM_SOURCE_DIR) + "/examples/lgssm1.ssm";
  frontend::DiagnosticEngine diags;
  std::optional<ir::Model> model = frontend::compile_model(read_file(file), file, diags);
  REQUIRE(model);
  passes::PassContext context;
  passes::create_pass("derivatives")->run(*model, context);
  REQUIRE(context.derivatives);
  const passes::Derivatives& d = *context.derivatives;
  REQUIRE(d.relations.size() == 3); // initial, transition, observation
  CHECK(d.relations[0].relation == "x[0] ~ normal");
  const passes::RelationDerivatives &trans = d.relations[1], &obs = d.relations[2];
  const Point p = make_point(*model);
  const double a = p.theta[model->param_offset(0)]; // x[t] ~ normal(a * x[t-1], q)
  CHECK(trans.relation == "x[t] ~ normal");
  REQUIRE(trans.location_jacobian.size() == 1);
  CHECK(evaluate_at(*model, d.arena, trans.location_jacobian[0], p)[0] == Approx(a).epsilon(1e-14));
  CHECK(obs.relation == "y[t] ~ normal");
  CHECK(evaluate_at(*model, d.arena, obs.location_jacobian[0], p)[0] == 1.0);
  // d/dx[t-1] log N(x[t]; a x[t-1], q) = a (x[t] - a x[t-1]) / q^2.
  const double q = p.theta[model->param_offset(1)];
  const double x = p.x[0], xp = p.x_prev[0];
  CHECK(evaluate_at(*model, d.arena, trans.grad_state[0], p)[0] ==
        Approx(a * (x - a * xp) / (q * q)).epsilon(1e-12));
  CHECK(trans.grad_params.size() == static_cast<size_t>(model->theta_size()));
}

TEST_CASE("a guide's arguments and their Jacobian in its networks' outputs match finite "
          "differences",
          "[passes][derivatives]") {
  const std::string source = R"(model guided {
  net enc : mlp(inputs = 3, outputs = 4, hidden = none);
  net cls : mlp(inputs = 3, outputs = 3, hidden = [5]);
  latent z[n] : vector[2] ~ normal(0, 1);
  latent c[n] : int[0..2] ~ categorical([0.2, 0.3, 0.5]);
  obs    x[n] : vector[3] ~ normal([z[n][0], z[n][1], c[n]], 1);
  guide  z[n] ~ normal(enc(x[n])[0:2] * x[n][0] + sin(enc(x[n])[3]), exp(enc(x[n])[2:4]));
  guide  c[n] ~ categorical(softmax(cls(x[n]) / 2));
}
)";
  frontend::DiagnosticEngine diags;
  std::optional<ir::Model> model = frontend::compile_model(source, "guided.ssm", diags);
  INFO(diags.str());
  REQUIRE(model);
  passes::lower_plate_items(*model);
  passes::hoist_net_calls(*model);
  passes::PassContext context;
  passes::create_pass("derivatives")->run(*model, context);
  REQUIRE(context.derivatives);
  const passes::Derivatives& d = *context.derivatives;
  // Inputs: enc's 4 outputs, cls's 3; arguments: 2 + 2 (z's mean and sd), 3 (c's probabilities).
  REQUIRE(d.guide_inputs.size() == 7);
  const size_t A = 7, In = d.guide_inputs.size();
  // The Jacobian's entries that are not identically zero, at their (row, column).
  REQUIRE(d.guide_arguments.size() == A + d.guide_jacobian.size());
  std::vector<int> dense(A * In, -1);
  for (size_t k = 0; k < d.guide_jacobian.size(); ++k)
    dense[d.guide_jacobian[k].first * In + d.guide_jacobian[k].second] = d.guide_arguments[A + k];
  const Point p = make_point(*model);
  Counts counts;
  size_t row = 0;
  for (const ir::Relation& rel : model->guide.relations)
    for (int arg : rel.args) {
      const int size = model->guide.nodes[arg].shape.size();
      const std::vector<double> value = evaluate_at(*model, model->guide, arg, p);
      for (int pos = 0; pos < size; ++pos)
        CHECK(evaluate_at(*model, d.arena, d.guide_arguments[row + pos], p)[0] ==
              Approx(value[pos]).epsilon(1e-14));
      for (size_t col = 0; col < In; ++col) {
        std::vector<int> column;
        for (int pos = 0; pos < size; ++pos)
          column.push_back(dense[(row + pos) * In + col]);
        const auto [state, component] = d.guide_inputs[col];
        check(*model, model->guide, arg, d.arena, column, {ir::Op::State, state, 0, component},
              "guide", counts);
      }
      row += size;
    }
  CHECK(row == A);
  CHECK(counts.checked == static_cast<int>(A * In));
}

TEST_CASE("the score terms are the step's log-density gradients, 0 for a missing observation",
          "[passes][derivatives][score]") {
  const std::string file = std::string(SSM_SOURCE_DIR) + "/examples/lgssm1.ssm";
  frontend::DiagnosticEngine diags;
  std::optional<ir::Model> model = frontend::compile_model(read_file(file), file, diags);
  REQUIRE(model);
  passes::PassContext context;
  passes::create_pass("derivatives")->run(*model, context);
  const passes::Derivatives& d = *context.derivatives;
  CHECK(d.score_why_not.empty());
  REQUIRE(d.score_terms.size() == static_cast<size_t>(model->theta_size()));
  REQUIRE(d.relations.size() == 3);
  Point p = make_point(*model);
  // The gradient of relation r with respect to theta component k at p (0 where none).
  auto grad = [&](size_t r, size_t k) {
    const int id = d.relations[r].grad_params[k];
    return id < 0 ? 0.0 : evaluate_at(*model, d.arena, id, p)[0];
  };
  auto term = [&](size_t k) {
    return d.score_terms[k] < 0 ? 0.0 : evaluate_at(*model, d.arena, d.score_terms[k], p)[0];
  };
  for (size_t k = 0; k < d.score_terms.size(); ++k) {
    INFO("theta component " << k);
    p.t = 3; // transition and observation
    CHECK(term(k) == Approx(grad(1, k) + grad(2, k)).epsilon(1e-13).margin(1e-15));
    p.t = 0; // initial and observation
    CHECK(term(k) == Approx(grad(0, k) + grad(2, k)).epsilon(1e-13).margin(1e-15));
    p.y.assign(p.y.size(), NAN); // missing: the observation adds nothing
    CHECK(term(k) == Approx(grad(0, k)).epsilon(1e-13).margin(1e-15));
    p = make_point(*model);
  }
  // m0 and s0 enter only the initial law: no term after t = 0.
  p.t = 5;
  CHECK(term(static_cast<size_t>(model->param_offset(3))) == 0.0);
}

TEST_CASE("derivatives of the trigonometric, special and vector built-in functions",
          "[passes][derivatives][builtins]") {
  // The point puts x[t-1] near 0.35, v[t-1] near 0.42-0.56, x[t] near 0.45, y near 0.65.
  const std::string source = R"(
model functions {
  param a = 0.8;
  state x : real;
  state v : vector[3];
  obs y1 : real;
  obs y2 : vector[3];
  x[0] ~ normal(0, 1);
  v[0] ~ normal(0, 1);
  x[t] ~ normal(atan2(x[t-1], a) + atan(x[t-1]) + tan(a * x[t-1]), exp(erf(x[t-1])));
  v[t] ~ normal(softmax(a * v[t-1]) + asin(x[t-1]) - acos(a * x[t-1]), 1 + log_sum_exp(v[t-1]));
  y1[t] ~ normal(lgamma(x[t] + a) + Phi(x[t] - a) + log1p(x[t]) + expm1(a * x[t]),
                 log_sum_exp(a * v[t]));
  y2[t] ~ normal(softmax(v[t] + x[t]) + atan2(a, v[t]), Phi(a * x[t]));
}
)";
  const Totals totals = check_source(source, "functions.ssm");
  CHECK(totals.log_densities == 4);
  CHECK(totals.counts.checked >= 80);
}

TEST_CASE("a scale whose square underflows to zero is differentiated, not a crash",
          "[passes][derivatives]") {
  // 1e-300^2 folds to 0, which the expression builder keeps as 'no node'; the derivative of the
  // observation's log-density divides by it (it used to index node -1).
  const std::string source = R"(
model tiny {
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ normal(x[t-1], 1);
  y[t] ~ normal(x[t], 1e-300);
}
)";
  frontend::DiagnosticEngine diags;
  std::optional<ir::Model> model = frontend::compile_model(source, "tiny.ssm", diags);
  REQUIRE(model);
  passes::PassContext context;
  passes::create_pass("constant-fold")->run(*model, context);
  REQUIRE_NOTHROW(passes::create_pass("derivatives")->run(*model, context));
  REQUIRE(context.derivatives);
  const passes::Derivatives& d = *context.derivatives;
  REQUIRE(d.relations.size() == 3);
  const Point p = make_point(*model);
  // d/dx[t] log N(y; x, s) = (y - x) / s^2: s^2 is 0, so the gradient is +-inf or NaN, never
  // finite.
  const double g = evaluate_at(*model, d.arena, d.relations[2].grad_state[0], p)[0];
  CHECK(!std::isfinite(g));
}

TEST_CASE("a shape outside its domain gives a NaN log-density and gradient, as the kernels do",
          "[passes][derivatives]") {
  // lgamma is finite at negative non-integers: without a check the formulas (and so the score
  // and prior kernels) would give finite values where the density is undefined.
  const std::string source = R"(
model bad_shapes {
  param a = 2.5;
  state u : real;
  obs yg : real;
  obs yb : real;
  obs yi : real;
  obs yn : int[0..inf];
  obs yd : vector[3];
  u[0] ~ normal(0, 1);
  u[t] ~ normal(u[t-1], 1);
  yg[t] ~ gamma(a - 3 - u[t], 1);
  yb[t] ~ beta(2, a - 3 - u[t]);
  yi[t] ~ inverse_gamma(a - 3 - u[t], 1);
  yn[t] ~ negative_binomial(10, a - 3 - u[t]);
  yd[t] ~ dirichlet([a - 3 - u[t], 1, 1]);
}
)";
  frontend::DiagnosticEngine diags;
  std::optional<ir::Model> model = frontend::compile_model(source, "bad_shapes.ssm", diags);
  INFO(diags.str());
  REQUIRE(model);
  const ir::Model& m = *model;
  ir::Block arena{m.observation.kind, {}, {}, {}};
  passes::ExprBuilder b(arena);
  passes::Differentiator in_arena(arena, b);
  const Point p = make_point(m);
  int checked = 0;
  for (const ir::Relation& rel : m.observation.relations) {
    std::string why;
    const std::optional<int> lp = passes::log_density(m, m.observation, rel, b, why);
    INFO(m.var_name(rel.kind, rel.var) << ": " << why);
    REQUIRE(lp);
    CHECK(std::isnan(evaluate_at(m, arena, *lp, p)[0]));
    const std::vector<int> d = in_arena.derivative(*lp, {ir::Op::Param, 0, 0, 0});
    REQUIRE(d.size() == 1);
    CHECK((d[0] >= 0 && std::isnan(evaluate_at(m, arena, d[0], p)[0])));
    ++checked;
  }
  CHECK(checked == 5);
}

TEST_CASE("a model with large matrix parameters stops the score's derivation, and says why",
          "[passes][derivatives][score]") {
  // 40 x 30 and 30 x 30 matrix parameters: forward mode would derive 2100 gradients of the
  // 1200-term product, about 10^8 steps; the analysis stops at its budget instead.
  const std::string source = R"(model bigmat {
  param M : matrix[40, 30];
  param C : matrix[30, 30];
  state x : vector[30];
  obs   y : vector[40];
  x[0] ~ normal(0, 1);
  x[t] ~ normal(C * x[t-1] / 30, 1);
  y[t] ~ normal(M * x[t], 1);
})";
  frontend::DiagnosticEngine diags;
  std::optional<ir::Model> model = frontend::compile_model(source, "bigmat.ssm", diags);
  REQUIRE(model);
  passes::PassContext context;
  passes::create_pass("derivatives")->run(*model, context);
  const passes::Derivatives& d = *context.derivatives;
  CHECK(d.score_terms.empty());
  CHECK_THAT(d.score_why_not, Catch::Contains("too large to derive element by element "
                                              "(2100 parameter components"));
  // What needs no parameter gradients is still there: the state gradient and the Jacobians.
  CHECK(d.state_gradient.size() == 30);
  REQUIRE(d.relations.size() == 3);
  CHECK(d.relations[2].location_jacobian.size() == 40 * 30);
  CHECK(d.relations[2].grad_params.size() == 2100); // what was derived, -1 past the budget
}
