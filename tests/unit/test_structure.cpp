// Unit tests of the structure analyses (linear-gaussian, finite-state, density) on the shipped
// examples and small models: the symbolic matrices and bounds are evaluated with ir::evaluate at
// given parameter values and compared with the known ones.
#include "analysed_models.h"
#include "core/metadata.h"
#include "frontend/frontend.h"
#include "ir/evaluate.h"
#include "ir/printer.h"
#include "kernel/distributions.h"
#include "passes/distribution_formulas.h"
#include "passes/pass_manager.h"
#include "passes/passes.h"
#include "passes/structure_report.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <numbers>
#include <sstream>

using namespace ssm;
using namespace ssm::unit_test;

namespace {

// The value of arena node `id` for parameters theta (the flat vector, Model::param_offset) at t.
std::vector<double> evaluate(const ir::Model& model, const ir::Block& arena, int id,
                             const std::vector<double>& theta, double t = 0) {
  std::vector<std::optional<std::vector<double>>> memo(arena.nodes.size());
  std::function<const std::vector<double>&(int)> value = [&](int i) -> const std::vector<double>& {
    if (memo[i])
      return *memo[i];
    const ir::Node& n = arena.nodes[i];
    if (n.op == ir::Op::Param) {
      auto begin = theta.begin() + model.param_offset(n.var);
      memo[i] = std::vector<double>(begin, begin + n.shape.size());
    } else if (n.op == ir::Op::Time) {
      memo[i] = std::vector<double>{t};
    } else {
      REQUIRE(n.op != ir::Op::State);
      REQUIRE(n.op != ir::Op::Obs);
      std::vector<std::vector<double>> args;
      std::vector<ir::Shape> shapes;
      for (int a : n.args) {
        args.push_back(value(a));
        shapes.push_back(arena.nodes[a].shape);
      }
      memo[i] = ir::evaluate(n, args, shapes);
    }
    return *memo[i];
  };
  return value(id);
}

std::vector<double> matrix(const ir::Model& model, const passes::LinearGaussian& lg,
                           const std::string& name, const std::vector<double>& theta) {
  const passes::SymbolicValue* v = lg.find(name);
  REQUIRE(v != nullptr);
  return evaluate(model, lg.arena(v->block), v->node, theta);
}

void check_close(const std::vector<double>& actual, const std::vector<double>& expected) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO("element " << i);
    CHECK(actual[i] == Approx(expected[i]).epsilon(1e-14).margin(1e-300));
  }
}

} // namespace

TEST_CASE("linear-gaussian extracts the matrices of lgssm1", "[structure]") {
  ir::Model model = example("lgssm1");
  passes::PassContext ctx = analyse(model);
  REQUIRE(ctx.linear_gaussian);
  const passes::LinearGaussian& lg = *ctx.linear_gaussian;
  REQUIRE(lg.is_linear_gaussian);
  CHECK_FALSE(lg.time_varying);
  // a, q, r, m0, s0
  std::vector<double> theta = {0.7, 0.3, 1.5, 0.2, 2.0};
  check_close(matrix(model, lg, "F", theta), {0.7});
  check_close(matrix(model, lg, "c", theta), {0});
  check_close(matrix(model, lg, "Q", theta), {0.09});
  check_close(matrix(model, lg, "H", theta), {1});
  check_close(matrix(model, lg, "d", theta), {0});
  check_close(matrix(model, lg, "R", theta), {2.25});
  check_close(matrix(model, lg, "m0", theta), {0.2});
  check_close(matrix(model, lg, "P0", theta), {4});
  CHECK(lg.find("F")->text == "[[a]]");
  CHECK(lg.find("Q")->text == "[[q^2]]");
  CHECK(lg.find("H")->text == "[[1]]");
  CHECK(lg.find("H")->value == std::vector<double>{1});
}

TEST_CASE("linear-gaussian extracts the matrices of nile", "[structure]") {
  ir::Model model = example("nile");
  passes::PassContext ctx = analyse(model);
  const passes::LinearGaussian& lg = *ctx.linear_gaussian;
  REQUIRE(lg.is_linear_gaussian);
  std::vector<double> theta = {122.88, 38.33}; // sigma_eps, sigma_eta
  check_close(matrix(model, lg, "F", theta), {1});
  check_close(matrix(model, lg, "Q", theta), {38.33 * 38.33});
  check_close(matrix(model, lg, "H", theta), {1});
  check_close(matrix(model, lg, "R", theta), {122.88 * 122.88});
  check_close(matrix(model, lg, "m0", theta), {1000});
  check_close(matrix(model, lg, "P0", theta), {250000});
  CHECK(lg.find("R")->text == "[[sigma_eps^2]]");
  CHECK(lg.find("P0")->value == std::vector<double>{250000});
}

TEST_CASE("linear-gaussian extracts the matrices of the 10-D lgssm", "[structure]") {
  ir::Model model = example("lgssm");
  passes::PassContext ctx = analyse(model);
  const passes::LinearGaussian& lg = *ctx.linear_gaussian;
  REQUIRE(lg.is_linear_gaussian);
  auto params =
      nlohmann::json::parse(read(std::string(SSM_EXAMPLES_DIR) + "/data/lgssm_params.json"));
  std::map<std::string, std::vector<double>> flat;
  std::vector<double> theta;
  for (const auto& p : model.params) {
    for (const auto& row : params.at(p.name))
      for (double v : row)
        flat[p.name].push_back(v);
    theta.insert(theta.end(), flat[p.name].begin(), flat[p.name].end());
  }
  REQUIRE(static_cast<int>(theta.size()) == model.theta_size());
  check_close(matrix(model, lg, "F", theta), flat["A"]);
  check_close(matrix(model, lg, "Q", theta), flat["Q"]);
  check_close(matrix(model, lg, "H", theta), flat["B"]);
  check_close(matrix(model, lg, "R", theta), flat["R"]);
  check_close(matrix(model, lg, "c", theta), std::vector<double>(10, 0.0));
  check_close(matrix(model, lg, "m0", theta), std::vector<double>(10, 0.0));
  check_close(matrix(model, lg, "P0", theta), flat["Q"]);
  CHECK(lg.find("F")->text == "A");
  CHECK(lg.find("Q")->text == "Q");
  CHECK(lg.find("H")->text == "B");
  CHECK(lg.find("c")->text == "zeros(10)");

  // The density bound of mvnormal: (2 pi)^(-d/2) det(Q)^(-1/2), here with Q = 0.5 I.
  REQUIRE(ctx.density);
  REQUIRE(ctx.density->bound);
  std::vector<double> half = theta;
  for (int i = 0; i < 100; ++i)
    half[model.param_offset(1) + i] = i % 11 == 0 ? 0.5 : 0;
  double expected = std::pow(2 * std::numbers::pi, -5) * std::pow(std::pow(0.5, 10), -0.5);
  check_close(evaluate(model, ctx.density->arena, ctx.density->bound->node, half), {expected});
  CHECK(ctx.density->bound->constant_in_state());
}

TEST_CASE("linear-gaussian stacks several states and composes same-time reads", "[structure]") {
  // level[t] reads slope[t]: level[t] = level[t-1] + slope[t-1] + e_slope + e_level.
  ir::Model model = compile_source(R"(model trend {
    param s_level = 0.5;  param s_slope = 0.2;  param s_y = 1;
    state level : real;  state slope : real;
    obs y : real;
    level[0] ~ normal(0, 10);
    slope[0] ~ normal(0, 1);
    level[t] ~ normal(level[t-1] + slope[t], s_level);
    slope[t] ~ normal(slope[t-1], s_slope);
    y[t] ~ normal(level[t], s_y);
  })");
  passes::PassContext ctx = analyse(model);
  const passes::LinearGaussian& lg = *ctx.linear_gaussian;
  INFO((lg.reasons.empty() ? "" : lg.reasons[0].str()));
  REQUIRE(lg.is_linear_gaussian);
  std::vector<double> theta = {0.5, 0.2, 1.3};
  double l = 0.25, s = 0.04;
  check_close(matrix(model, lg, "F", theta), {1, 1, 0, 1});
  check_close(matrix(model, lg, "Q", theta), {l + s, s, s, s});
  check_close(matrix(model, lg, "H", theta), {1, 0});
  check_close(matrix(model, lg, "R", theta), {1.69});
  check_close(matrix(model, lg, "P0", theta), {100, 0, 0, 1});
}

TEST_CASE("linear-gaussian handles index, build, matmul and dot with vector states",
          "[structure]") {
  ir::Model model = compile_source(R"(model v {
    param A : matrix[2, 2] = [[0.9, 0.1], [0, 0.8]];
    param b : vector[2] = [1, 2];
    param w : vector[2] = [0.3, 0.7];
    param s : vector[2] = [0.1, 0.2];
    state x : vector[2];
    state z : real;
    obs y : real;
    obs u : vector[2];
    x[0] ~ normal(0, 1);
    z[0] ~ normal(0, 1);
    x[t] ~ normal(A * x[t-1] + b, s);
    z[t] ~ normal(-(2 * z[t-1]) + x[t-1][1] / 4, 1);
    y[t] ~ normal(dot(w, x[t]) + z[t], 0.5);
    u[t] ~ mvnormal([x[t][1] - z[t], 3 * x[t][0]], [[1, 0.5], [0.5, 2]]);
  })");
  passes::PassContext ctx = analyse(model);
  const passes::LinearGaussian& lg = *ctx.linear_gaussian;
  INFO((lg.reasons.empty() ? "" : lg.reasons[0].str()));
  REQUIRE(lg.is_linear_gaussian);
  // A (4), b (2), w (2), s (2)
  std::vector<double> theta = {0.9, 0.1, 0, 0.8, 1, 2, 0.3, 0.7, 0.1, 0.2};
  check_close(matrix(model, lg, "F", theta), {0.9, 0.1, 0, 0, 0.8, 0, 0, 0.25, -2});
  check_close(matrix(model, lg, "c", theta), {1, 2, 0});
  check_close(matrix(model, lg, "Q", theta), {0.01, 0, 0, 0, 0.04, 0, 0, 0, 1});
  check_close(matrix(model, lg, "H", theta), {0.3, 0.7, 1, 0, 1, -1, 3, 0, 0});
  check_close(matrix(model, lg, "R", theta), {0.25, 0, 0, 0, 1, 0.5, 0, 0.5, 2});
}

TEST_CASE("linear-gaussian says why a model is not linear-Gaussian", "[structure]") {
  SECTION("a non-affine mean (gordon)") {
    ir::Model model = example("gordon");
    passes::PassContext ctx = analyse(model);
    const passes::LinearGaussian& lg = *ctx.linear_gaussian;
    REQUIRE_FALSE(lg.is_linear_gaussian);
    const passes::StructureReason& r = lg.reasons.at(0);
    CHECK(r.block == ir::BlockKind::Transition);
    CHECK(r.relation == "x[t]");
    CHECK(r.variable == "x");
    CHECK(r.lag == 1);
    CHECK(r.loc.line == 11);
    CHECK(r.message.find("25 * x[t-1] / (1 + x[t-1]^2)") != std::string::npos);
  }
  SECTION("a state-dependent observation noise (sv)") {
    ir::Model model = example("sv");
    passes::PassContext ctx = analyse(model);
    const passes::LinearGaussian& lg = *ctx.linear_gaussian;
    REQUIRE_FALSE(lg.is_linear_gaussian);
    const passes::StructureReason& r = lg.reasons.at(0);
    CHECK(r.block == ir::BlockKind::Observation);
    CHECK(r.variable == "x");
    CHECK(r.lag == 0);
    CHECK(r.message == "the standard deviation depends on x[t]: exp(x[t] / 2)");
  }
}

TEST_CASE("linear-gaussian: an observation that reads no state has zero rows of H", "[structure]") {
  // The frontend rejects such a model; the analysis must still answer for IR built otherwise.
  ir::Model model = example("nile");
  ir::Node mean;
  mean.op = ir::Op::Const;
  mean.values = {3};
  model.observation.relations.at(0).args.at(0) = model.observation.add(mean);
  passes::PassContext ctx = analyse(model);
  const passes::LinearGaussian& lg = *ctx.linear_gaussian;
  REQUIRE(lg.is_linear_gaussian);
  check_close(matrix(model, lg, "H", {122.88, 38.33}), {0});
  check_close(matrix(model, lg, "d", {122.88, 38.33}), {3});
  REQUIRE(lg.notes.size() == 1);
  CHECK(lg.notes[0].find("y[t] reads no state") == 0);
}

TEST_CASE("finite-state: real-valued and binary states", "[structure]") {
  ir::Model sv = example("sv");
  passes::PassContext ctx = analyse(sv);
  REQUIRE(ctx.finite_state);
  CHECK_FALSE(ctx.finite_state->is_finite);
  CHECK(ctx.finite_state->summary() ==
        "finite state space: no: state x is real-valued (normal at 15:3)");

  ir::Model binary = compile_source(R"(model b {
    param p = 0.3;
    state s : vector[3];
    obs y : real;
    s[0] ~ bernoulli(0.5);
    s[t] ~ bernoulli(p + 0.5 * s[t-1][0]);
    y[t] ~ normal(s[t][0] + s[t][1] + s[t][2], 1);
  })");
  // Whole-number values, but declared vector: the exact methods enumerate declared int ranges,
  // so the analysis says no rather than promise what the runtime refuses.
  ctx = analyse(binary);
  CHECK_FALSE(ctx.finite_state->is_finite);
  CHECK(ctx.finite_state->summary() ==
        "finite state space: no: state s is declared vector, not int[lo..hi], although its values "
        "are whole numbers (bernoulli at 5:5)");

  ir::Model declared = compile_source(R"(model b {
    param p = 0.3;
    state s : int[0..1];
    state u : int[0..1];
    state w : int[0..2];
    obs y : real;
    s[0] ~ bernoulli(0.5);
    u[0] ~ bernoulli(0.5);
    w[0] ~ categorical([1, 1, 1]);
    s[t] ~ bernoulli(p + 0.5 * s[t-1]);
    u[t] ~ bernoulli(0.5);
    w[t] ~ categorical([1, 1, 1]);
    y[t] ~ normal(s[t] + u[t] + w[t], 1);
  })");
  ctx = analyse(declared);
  CHECK(ctx.finite_state->is_finite);
  CHECK(ctx.finite_state->size == 12);
}

// passes/distribution_formulas.cpp's switch has no default (-Wswitch), but a case may still
// return null formulas: each must then say why.
TEST_CASE("every distribution has a log-density and a bound formula, or says why not",
          "[structure]") {
  for (const ir::DistInfo& d : ir::all_dists()) {
    INFO(d.name);
    const passes::DistFormulas f = passes::distribution_formulas(d.dist);
    if (f.log_density && f.bound)
      continue;
    REQUIRE(f.none != nullptr);
    CHECK(std::string(f.none).find(d.name) != std::string::npos);
  }
}

TEST_CASE("density bounds match the density at the mode", "[structure]") {
  auto bound_of = [](const std::string& relation, const std::vector<double>& theta) {
    ir::Model model = compile_source("model m {\n  param a = 1;\n  param b = 1;\n"
                                     "  state x : real;\n  obs y : real;\n"
                                     "  x[0] ~ normal(1, 1);\n  x[t] ~ " +
                                     relation + ";\n  y[t] ~ normal(x[t], 1);\n}\n");
    passes::PassContext ctx = analyse(model);
    REQUIRE(ctx.density);
    const passes::RelationDensity& r = ctx.density->relations.at(0);
    INFO(r.no_bound_reason);
    REQUIRE(r.bound);
    CHECK(r.bound->constant_in_state());
    return evaluate(model, ctx.density->arena, r.bound->node, theta).at(0);
  };
  const double pi = std::numbers::pi;
  // a = 0.7, b = 2.5
  std::vector<double> theta = {0.7, 2.5};
  CHECK(bound_of("normal(x[t-1], a)", theta) == Approx(1 / (0.7 * std::sqrt(2 * pi))));
  CHECK(bound_of("half_normal(a)", theta) == Approx(std::sqrt(2 / pi) / 0.7));
  CHECK(bound_of("exponential(b)", theta) == Approx(2.5));
  CHECK(bound_of("uniform(a, b)", theta) == Approx(1 / 1.8));
  // lognormal(mu, sigma) at its mode exp(mu - sigma^2)
  {
    double mu = 2.5, s = 0.7, m = std::exp(mu - s * s);
    double f = std::exp(-std::pow(std::log(m) - mu, 2) / (2 * s * s)) / (m * s * std::sqrt(2 * pi));
    CHECK(bound_of("lognormal(b, a)", theta) == Approx(f));
  }
  // gamma(alpha, beta) at the mode (alpha - 1) / beta, alpha constant and a parameter
  auto gamma_mode = [](double alpha, double beta) {
    double m = (alpha - 1) / beta;
    return std::pow(beta, alpha) * std::pow(m, alpha - 1) * std::exp(-beta * m) /
           std::tgamma(alpha);
  };
  CHECK(bound_of("gamma(3, b)", theta) == Approx(gamma_mode(3, 2.5)));
  CHECK(bound_of("gamma(b, a)", theta) == Approx(gamma_mode(2.5, 0.7)));
  // student_t at its location
  auto t_mode = [&](double nu, double s) {
    return std::tgamma((nu + 1) / 2) / (std::tgamma(nu / 2) * std::sqrt(nu * pi) * s);
  };
  CHECK(bound_of("student_t(4, x[t-1], a)", theta) == Approx(t_mode(4, 0.7)));
  CHECK(bound_of("student_t(b, x[t-1], a)", theta) == Approx(t_mode(2.5, 0.7)));
  // mvnormal_chol(mu, L) at mu: (2 pi)^(-d/2) / |prod diag L|, whatever the sign of L's diagonal.
  ir::Model model = compile_source(R"(
model m {
  param L : matrix[2, 2] = [[0.7, 0], [0.4, -1.5]];
  state x : vector[2];
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ mvnormal_chol(x[t-1], L);
  y[t] ~ normal(x[t][0], 1);
}
)");
  passes::PassContext ctx = analyse(model);
  REQUIRE(ctx.density);
  const passes::RelationDensity& r = ctx.density->relations.at(0);
  REQUIRE(r.bound);
  CHECK(evaluate(model, ctx.density->arena, r.bound->node, {0.7, 0, 0.4, -1.5}).at(0) ==
        Approx(1 / (2 * pi * 0.7 * 1.5)));
}

TEST_CASE("density bounds of beta, inverse_gamma, truncated_normal, weibull, gumbel and dirichlet "
          "are the maximum of the density (brute force)",
          "[structure]") {
  // The bound for parameters a, b (and the 3-vector c), against the largest density on a fine
  // grid: never below it, and above it by no more than the grid's resolution allows.
  auto bound_of = [](const std::string& state_type, const std::string& relation,
                     const std::vector<double>& theta) -> std::optional<double> {
    ir::Model model = compile_source(
        "model m {\n  param a = 1;\n  param b = 1;\n  param c : vector[3] = [2, 2, 2];\n"
        "  state x : " +
        state_type + ";\n  obs y : real;\n  x[0] ~ " + relation + ";\n  x[t] ~ " + relation +
        ";\n  y[t] ~ normal(" + std::string(state_type == "real" ? "x[t]" : "x[t][0]") +
        ", 1);\n}\n");
    passes::PassContext ctx = analyse(model);
    REQUIRE(ctx.density);
    const passes::RelationDensity& r = ctx.density->relations.at(0);
    INFO(relation << ": " << r.no_bound_reason);
    REQUIRE(r.bound);
    CHECK(r.bound->constant_in_state());
    const double v = evaluate(model, ctx.density->arena, r.bound->node, theta).at(0);
    if (std::isnan(v))
      return std::nullopt; // the bound's condition fails for theta
    return v;
  };
  auto grid_max = [](double lo, double hi, const std::function<double(double)>& log_f) {
    double m = -INFINITY;
    for (int i = 1; i < 200000; ++i)
      m = std::max(m, log_f(lo + (hi - lo) * i / 200000.0));
    return std::exp(m);
  };
  auto check_tight = [](std::optional<double> bound, double brute) {
    REQUIRE(bound);
    CHECK(*bound >= brute * (1 - 1e-12));
    CHECK(*bound <= brute * (1 + 1e-6));
  };
  using ssm::lpdf_beta, ssm::lpdf_inverse_gamma, ssm::lpdf_truncated_normal;
  for (const auto& [a, b] :
       std::vector<std::pair<double, double>>{{2.5, 1.7}, {1, 3}, {4, 1}, {1, 1}, {30, 2}}) {
    INFO("beta(" << a << ", " << b << ")");
    const double brute = grid_max(0, 1, [&](double x) { return lpdf_beta(x, a, b); });
    check_tight(bound_of("real", "beta(a, b)", {a, b, 2, 2, 2}),
                std::max({brute, a == 1 ? b : 0.0, b == 1 ? a : 0.0}));
    check_tight(bound_of("real", fmt::format("beta({}, {})", a, b), {0, 0, 2, 2, 2}),
                std::max({brute, a == 1 ? b : 0.0, b == 1 ? a : 0.0}));
    check_tight(bound_of("real", fmt::format("beta({}, b)", a), {0, b, 2, 2, 2}),
                std::max({brute, a == 1 ? b : 0.0, b == 1 ? a : 0.0}));
  }
  // With a symbolic shape below 1 the bound is NaN (exact draws at that step).
  CHECK_FALSE(bound_of("real", "beta(a, b)", {0.7, 2, 2, 2, 2}));
  for (const auto& [alpha, beta] : std::vector<std::pair<double, double>>{{0.5, 1}, {3, 0.2}}) {
    INFO("inverse_gamma(" << alpha << ", " << beta << ")");
    const double brute = grid_max(0, 20 * beta / (alpha + 1), // up to 20 times the mode
                                  [&](double x) { return lpdf_inverse_gamma(x, alpha, beta); });
    check_tight(bound_of("real", "inverse_gamma(a, b)", {alpha, beta, 2, 2, 2}), brute);
  }
  // truncated_normal(mu, sigma, lo, hi) with mu inside, below and above [lo, hi].
  for (const double mu : {0.8, -2.0, 7.0}) {
    INFO("truncated_normal(" << mu << ", 0.6, 0, 3)");
    const double brute =
        grid_max(0, 3, [&](double x) { return lpdf_truncated_normal(x, mu, 0.6, 0, 3); });
    const double at_end = std::exp(lpdf_truncated_normal(std::clamp(mu, 0.0, 3.0), mu, 0.6, 0, 3));
    check_tight(bound_of("real", "truncated_normal(a, b, 0, 3)", {mu, 0.6, 2, 2, 2}),
                std::max(brute, at_end));
  }
  // weibull(k, lambda): for k = 1 the maximum 1 / lambda is at x = 0, which the grid leaves out.
  for (const auto& [k, lambda] :
       std::vector<std::pair<double, double>>{{1.5, 2}, {3.7, 0.4}, {1, 2.5}, {25, 1e3}}) {
    INFO("weibull(" << k << ", " << lambda << ")");
    const double brute =
        std::max(grid_max(0, 3 * lambda, [&](double x) { return ssm::lpdf_weibull(x, k, lambda); }),
                 k == 1 ? 1 / lambda : 0.0);
    check_tight(bound_of("real", "weibull(a, b)", {k, lambda, 2, 2, 2}), brute);
    check_tight(bound_of("real", fmt::format("weibull({}, b)", k), {0, lambda, 2, 2, 2}), brute);
  }
  CHECK_FALSE(bound_of("real", "weibull(a, b)", {0.7, 2, 2, 2, 2})); // unbounded at 0
  for (const auto& [mu, beta] :
       std::vector<std::pair<double, double>>{{0, 1}, {-3, 0.2}, {40, 7}}) {
    INFO("gumbel(" << mu << ", " << beta << ")");
    const double brute = grid_max(mu - 3 * beta, mu + 10 * beta,
                                  [&](double x) { return ssm::lpdf_gumbel(x, mu, beta); });
    check_tight(bound_of("real", "gumbel(a, b)", {mu, beta, 2, 2, 2}), brute);
  }
  // dirichlet(c) on the 2-simplex: the grid over (x0, x1), x2 = 1 - x0 - x1.
  for (const std::vector<double>& c : std::vector<std::vector<double>>{{2, 3, 1.5}, {1, 4, 2}}) {
    INFO("dirichlet(" << c[0] << ", " << c[1] << ", " << c[2] << ")");
    auto log_f = [&](double x0, double x1) {
      const double x[3] = {x0, x1, 1 - x0 - x1};
      double lf = std::lgamma(c[0] + c[1] + c[2]);
      for (int i = 0; i < 3; ++i)
        lf += (c[i] - 1) * (c[i] == 1 ? 0.0 : std::log(x[i])) - std::lgamma(c[i]);
      return lf;
    };
    double m = -INFINITY;
    for (int i = 0; i <= 1000; ++i)
      for (int j = 0; i + j <= 1000; ++j)
        m = std::max(m, log_f(i / 1000.0, j / 1000.0));
    const std::optional<double> bound =
        bound_of("vector[3]", "dirichlet(c)", {0, 0, c[0], c[1], c[2]});
    REQUIRE(bound);
    CHECK(*bound >= std::exp(m) * (1 - 1e-12));
    CHECK(*bound <= std::exp(m) * (1 + 1e-4));
  }
}

TEST_CASE("density: beta and dirichlet shapes below 1 have no bound", "[structure]") {
  auto density_of = [](const std::string& type, const std::string& relation) {
    ir::Model model = compile_source(
        "model m {\n  param a = 1;\n  state x : " + type + ";\n  obs y : real;\n  x[0] ~ " +
        relation + ";\n  x[t] ~ " + relation + ";\n  y[t] ~ normal(" +
        std::string(type == "real" ? "x[t]" : "x[t][0]") + ", 1);\n}\n");
    return *analyse(model).density;
  };
  passes::TransitionDensity d = density_of("real", "beta(0.5, a)");
  CHECK_FALSE(d.bound);
  CHECK(d.relations.at(0).no_bound_reason ==
        "the first shape 0.5 is below 1, which makes the density unbounded at 0");
  d = density_of("vector[2]", "dirichlet([a, 0.3])");
  CHECK_FALSE(d.bound);
  CHECK(d.relations.at(0).no_bound_reason ==
        "a concentration below 1 (0.3) makes the density unbounded");
}

TEST_CASE("density: unbounded, per-particle and discrete bounds", "[structure]") {
  auto density_of = [](const std::string& relations) {
    ir::Model model = compile_source("model m {\n  param a = 1;\n  state x : real;\n"
                                     "  obs y : real;\n  x[0] ~ normal(1, 1);\n" +
                                     relations + "\n  y[t] ~ normal(x[t], 1);\n}\n");
    return *analyse(model).density;
  };
  passes::TransitionDensity d = density_of("x[t] ~ gamma(0.5, a);");
  CHECK_FALSE(d.relations.at(0).bound);
  CHECK(d.relations.at(0).no_bound_reason ==
        "the shape alpha = 0.5 < 1 makes the density unbounded at 0");
  CHECK_FALSE(d.bound);

  d = density_of("x[t] ~ normal(0, exp(x[t-1] / 2));");
  REQUIRE(d.bound);
  CHECK_FALSE(d.bound->constant_in_state());
  CHECK(d.bound->depends_on == std::vector<std::string>{"x[t-1]"});

  d = density_of("x[t] ~ poisson(exp(x[t-1]));");
  REQUIRE(d.bound);
  CHECK(d.bound->text == "1");
  CHECK_FALSE(d.bound->exact);
}

TEST_CASE("print_expr uses the language's precedence and names", "[structure]") {
  ir::Model sv = example("sv");
  const ir::Relation& rel = sv.transition.relations.at(0);
  CHECK(ir::print_expr(sv, sv.transition, rel.args[0]) == "mu + rho * (x[t-1] - mu)");
  CHECK(ir::print_expr(sv, sv.initial, sv.initial.relations.at(0).args[1]) ==
        "sigma / sqrt(1 - rho^2)");
}

TEST_CASE("ir::evaluate knows det and lgamma for analysis results", "[structure]") {
  ir::Node det;
  det.op = ir::Op::Call;
  det.fn = "det";
  CHECK(ir::evaluate(det, {{2, 1, 0, 1, 3, 1, 0, 1, 4}}, {ir::Shape::matrix(3, 3)})[0] ==
        Approx(18));
  CHECK(ir::evaluate(det, {{0, 1, 1, 0}}, {ir::Shape::matrix(2, 2)})[0] == Approx(-1));
  CHECK(ir::apply_function("lgamma", 5) == Approx(std::log(24.0)));
}

TEST_CASE("the runtime reads the verdicts from the metadata's structure", "[structure]") {
  // The metadata ssmc embeds: its "structure" is structure_json plus the text report.
  auto metadata = [](const std::string& name) {
    ir::Model model = example(name);
    passes::PassContext ctx = analyse(model);
    nlohmann::json structure = passes::structure_json(model, ctx);
    structure["report"] = passes::structure_summary(ctx);
    structure.erase("em_steps"); // its theta components need the model's real sizes
    nlohmann::json meta = {
        {"name", name},
        {"n_state", 1},
        {"n_obs", 1},
        {"n_theta", 0},
        {"state",
         {{{"name", "x"}, {"shape", nlohmann::json::array()}, {"offset", 0}, {"size", 1}}}},
        {"obs", {{{"name", "y"}, {"shape", nlohmann::json::array()}, {"offset", 0}, {"size", 1}}}},
        {"params", nlohmann::json::array()},
        {"structure", structure}};
    return std::pair{ssm::parse_metadata(meta.dump()), structure_summary(ctx)};
  };
  auto [lg, lg_report] = metadata("lgssm1");
  CHECK(lg.linear_gaussian);
  CHECK_FALSE(lg.finite_state);
  CHECK(lg.structure == lg_report);
  CHECK(lg.structure.find("linear-Gaussian: yes") != std::string::npos);
  auto [sv, sv_report] = metadata("sv");
  CHECK_FALSE(sv.linear_gaussian);
  CHECK(sv.structure == sv_report);
}
