// Unit tests of the frontend on models that compile: the IR that lowering produces (ops, shapes,
// variables, lags, relation targets and order), constant evaluation, and diagnostic rendering.
#include "frontend/frontend.h"
#include "ir/verifier.h"

#include "core/spelling.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <sstream>

using namespace ssm;
using ir::Op;
using ir::Shape;

namespace {

ir::Model compile(const std::string& source) {
  frontend::DiagnosticEngine diags;
  std::optional<ir::Model> model = frontend::compile_model(source, "test.ssm", diags);
  INFO(diags.str());
  REQUIRE(model.has_value());
  CHECK(!diags.has_errors()); // the snippets leave declarations unused: warnings are expected
  std::vector<std::string> errors = ir::verify(*model);
  INFO((errors.empty() ? std::string() : errors.front()));
  REQUIRE(errors.empty());
  return *model;
}

std::string diagnostics_of(const std::string& source) {
  frontend::DiagnosticEngine diags;
  frontend::compile_model(source, "test.ssm", diags);
  return diags.str();
}

const ir::Node& arg(const ir::Block& block, const ir::Relation& rel, int k) {
  return block.nodes.at(rel.args.at(k));
}
const ir::Node& operand(const ir::Block& block, const ir::Node& node, int k) {
  return block.nodes.at(node.args.at(k));
}

// A model whose transition is x[t] ~ normal(EXPR, 1), with a few parameters to use in EXPR.
const char* const expr_prelude = R"(model m {
  param a = 2;
  param v : vector[3] = 1;
  param w : vector[3] = 1;
  param A : matrix[2, 3] = 1;
  param B : matrix[3, 3] = 1;
  const k = 3;
  state x : )";

struct ExprModel {
  ir::Model model;
  const ir::Block& block() const { return model.transition; }
  const ir::Node& mu() const { return arg(block(), block().relations.at(0), 0); }
  const ir::Node& at(const ir::Node& n, int k) const { return operand(block(), n, k); }
};

ExprModel transition_mu(const std::string& expr, const std::string& state_type = "real") {
  std::string source = std::string(expr_prelude) + state_type + R"(;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ normal()" + expr +
                       R"(, 1);
  y[t] ~ normal(sum_first(x[t]), 1);
})";
  std::string first = state_type == "real" ? "x[t]" : "x[t][0]";
  source.replace(source.find("sum_first(x[t])"), std::string("sum_first(x[t])").size(), first);
  return {compile(source)};
}

const char* const sv = R"(// Stochastic volatility
model sv {
  param mu    ~ normal(0, 2)     = -1.02;    // prior, and default value
  param rho   ~ uniform(-1, 1)   = 0.9702;
  param sigma ~ half_normal(0.5) = 0.178;

  state x : real;
  obs   y : real;

  x[0] ~ normal(mu, sigma / sqrt(1 - rho^2));
  x[t] ~ normal(mu + rho * (x[t-1] - mu), sigma);
  y[t] ~ normal(0, exp(x[t] / 2));
}
)";

} // namespace

TEST_CASE("the stochastic volatility model lowers to the expected IR", "[frontend]") {
  ir::Model m = compile(sv);
  CHECK(m.name == "sv");
  CHECK(m.source_file == "test.ssm");
  REQUIRE(m.params.size() == 3);
  CHECK(m.params[0].name == "mu");
  CHECK(m.params[0].type == ir::ParamType::Real);
  CHECK(m.params[0].shape == Shape::scalar());
  CHECK(m.params[0].default_value == std::vector<double>{-1.02});
  CHECK(m.params[2].default_value == std::vector<double>{0.178});
  REQUIRE(m.states.size() == 1);
  REQUIRE(m.obs.size() == 1);

  // Priors: one relation per parameter, arguments are constants.
  REQUIRE(m.prior.relations.size() == 3);
  const ir::Relation& p1 = m.prior.relations[1];
  CHECK(p1.kind == ir::VarKind::Param);
  CHECK(p1.var == 1);
  CHECK(p1.dist == ir::Dist::Uniform);
  CHECK(arg(m.prior, p1, 0).op == Op::Const);
  CHECK(arg(m.prior, p1, 0).values == std::vector<double>{-1});
  CHECK(arg(m.prior, p1, 1).values == std::vector<double>{1});
  CHECK(m.prior.relations[2].dist == ir::Dist::HalfNormal);

  // x[0] ~ normal(mu, sigma / sqrt(1 - rho^2))
  REQUIRE(m.initial.relations.size() == 1);
  const ir::Relation& init = m.initial.relations[0];
  CHECK(init.kind == ir::VarKind::State);
  CHECK(init.var == 0);
  CHECK(init.dist == ir::Dist::Normal);
  CHECK(arg(m.initial, init, 0).op == Op::Param);
  CHECK(arg(m.initial, init, 0).var == 0);
  const ir::Node& sd = arg(m.initial, init, 1);
  CHECK(sd.op == Op::Div);
  CHECK(operand(m.initial, sd, 0).op == Op::Param);
  CHECK(operand(m.initial, sd, 0).var == 2);
  const ir::Node& root = operand(m.initial, sd, 1);
  CHECK(root.op == Op::Call);
  CHECK(root.fn == "sqrt");
  const ir::Node& diff = operand(m.initial, root, 0);
  CHECK(diff.op == Op::Sub);
  CHECK(operand(m.initial, diff, 1).op == Op::Pow);

  // x[t] ~ normal(mu + rho * (x[t-1] - mu), sigma)
  REQUIRE(m.transition.relations.size() == 1);
  const ir::Relation& trans = m.transition.relations[0];
  const ir::Node& mean = arg(m.transition, trans, 0);
  CHECK(mean.op == Op::Add);
  const ir::Node& prod = operand(m.transition, mean, 1);
  CHECK(prod.op == Op::Mul);
  const ir::Node& dev = operand(m.transition, prod, 1);
  CHECK(dev.op == Op::Sub);
  const ir::Node& prev = operand(m.transition, dev, 0);
  CHECK(prev.op == Op::State);
  CHECK(prev.var == 0);
  CHECK(prev.lag == 1);

  // y[t] ~ normal(0, exp(x[t] / 2))
  REQUIRE(m.observation.relations.size() == 1);
  const ir::Relation& obs = m.observation.relations[0];
  CHECK(obs.kind == ir::VarKind::Obs);
  CHECK(obs.var == 0);
  CHECK(arg(m.observation, obs, 0).op == Op::Const);
  const ir::Node& scale = arg(m.observation, obs, 1);
  CHECK(scale.op == Op::Call);
  CHECK(scale.fn == "exp");
  const ir::Node& now = operand(m.observation, operand(m.observation, scale, 0), 0);
  CHECK(now.op == Op::State);
  CHECK(now.lag == 0);

  // Source locations: the relation's statement and each node's expression.
  CHECK(trans.loc.line == 11);
  CHECK(trans.loc.col == 3);
  CHECK(prev.loc.line == 11);
  CHECK(prev.loc.col == 29);
  CHECK(prev.loc.end_col == 35);
  CHECK(m.states[0].loc.line == 7);
  CHECK(m.params[1].loc.col == 9);
}

TEST_CASE("operator precedence and associativity", "[frontend]") {
  SECTION("unary minus binds looser than ^") {
    ExprModel e = transition_mu("-a^2");
    CHECK(e.mu().op == Op::Neg);
    CHECK(e.at(e.mu(), 0).op == Op::Pow);
    CHECK(e.at(e.at(e.mu(), 0), 0).op == Op::Param);
  }
  SECTION("^ is right-associative and takes a signed exponent") {
    ExprModel e = transition_mu("a^2^-3");
    CHECK(e.mu().op == Op::Pow);
    CHECK(e.at(e.mu(), 0).op == Op::Param);
    const ir::Node& exponent = e.at(e.mu(), 1);
    CHECK(exponent.op == Op::Pow);
    CHECK(e.at(exponent, 0).values == std::vector<double>{2});
    CHECK(e.at(exponent, 1).op == Op::Neg);
  }
  SECTION("- and / are left-associative") {
    ExprModel e = transition_mu("a - 1 - 2 / a / 4");
    CHECK(e.mu().op == Op::Sub);
    CHECK(e.at(e.mu(), 0).op == Op::Sub);
    const ir::Node& quotient = e.at(e.mu(), 1);
    CHECK(quotient.op == Op::Div);
    CHECK(e.at(quotient, 0).op == Op::Div);
    CHECK(e.at(quotient, 1).values == std::vector<double>{4});
  }
  SECTION("* binds tighter than +, parentheses group") {
    ExprModel e = transition_mu("a + 2 * (a + 1)");
    CHECK(e.mu().op == Op::Add);
    const ir::Node& prod = e.at(e.mu(), 1);
    CHECK(prod.op == Op::Mul);
    CHECK(e.at(prod, 1).op == Op::Add);
  }
  SECTION("number syntax") {
    ExprModel e = transition_mu("1e-3 + .5 + 2. + 1.5E+2");
    const ir::Node& n4 = e.at(e.mu(), 1);
    CHECK(n4.values == std::vector<double>{150});
    const ir::Node& s3 = e.at(e.mu(), 0);
    CHECK(e.at(s3, 1).values == std::vector<double>{2});
    const ir::Node& s2 = e.at(s3, 0);
    CHECK(e.at(s2, 0).values == std::vector<double>{1e-3});
    CHECK(e.at(s2, 1).values == std::vector<double>{0.5});
  }
}

TEST_CASE("shapes of products, calls, literals and indexing", "[frontend]") {
  SECTION("matrix * vector and matrix * matrix are MatMul") {
    ExprModel e = transition_mu("A * (B * v)", "vector[2]");
    CHECK(e.mu().op == Op::MatMul);
    CHECK(e.mu().shape == Shape::vector(2));
    CHECK(e.at(e.mu(), 1).op == Op::MatMul);
    CHECK(e.at(e.mu(), 1).shape == Shape::vector(3));
    ExprModel f = transition_mu("(A * B)[1]", "vector[3]");
    CHECK(f.at(f.mu(), 0).shape == Shape::matrix(2, 3));
  }
  SECTION("scalars broadcast") {
    ExprModel e = transition_mu("2 * v + 1 - a / v", "vector[3]");
    CHECK(e.mu().op == Op::Sub);
    CHECK(e.mu().shape == Shape::vector(3));
    const ir::Node& sum = e.at(e.mu(), 0);
    CHECK(sum.op == Op::Add);
    CHECK(e.at(sum, 0).op == Op::Mul);
    CHECK(e.at(sum, 0).shape == Shape::vector(3));
    CHECK(e.at(e.mu(), 1).op == Op::Div);
  }
  SECTION("functions") {
    ExprModel e = transition_mu("logistic(v) + pow(v, 2) + max(a, w) + dot(v, w)", "vector[3]");
    const ir::Node& d = e.at(e.mu(), 1);
    CHECK(d.op == Op::Call);
    CHECK(d.fn == "dot");
    CHECK(d.shape == Shape::scalar());
    const ir::Node& mx = e.at(e.at(e.mu(), 0), 1);
    CHECK(mx.fn == "max");
    CHECK(mx.shape == Shape::vector(3));
    const ir::Node& pw = e.at(e.at(e.at(e.mu(), 0), 0), 1);
    CHECK(pw.fn == "pow");
    CHECK(pw.shape == Shape::vector(3));
  }
  SECTION("vector and matrix literals build from scalars, row-major") {
    ExprModel e = transition_mu("[[1, a], [3, 4]] * [a, 2]", "vector[2]");
    const ir::Node& mat = e.at(e.mu(), 0);
    CHECK(mat.op == Op::Build);
    CHECK(mat.shape == Shape::matrix(2, 2));
    REQUIRE(mat.args.size() == 4);
    CHECK(e.at(mat, 1).op == Op::Param);
    CHECK(e.at(mat, 2).values == std::vector<double>{3});
    const ir::Node& vec = e.at(e.mu(), 1);
    CHECK(vec.op == Op::Build);
    CHECK(vec.shape == Shape::vector(2));
  }
  SECTION("a literal of vector expressions is a matrix of their components") {
    ExprModel e = transition_mu("[v, w] * v", "vector[2]");
    const ir::Node& mat = e.at(e.mu(), 0);
    CHECK(mat.op == Op::Build);
    CHECK(mat.shape == Shape::matrix(2, 3));
    CHECK(e.at(mat, 4).op == Op::Index);
    CHECK(e.at(mat, 4).index == std::vector<int>{1});
  }
  SECTION("indexing") {
    ExprModel e = transition_mu("A[1] + A[1, 2] + A[0][k - 1] + v[2]", "vector[3]");
    const ir::Node& sum2 = e.at(e.mu(), 0);
    const ir::Node& row = e.at(sum2, 0);
    CHECK(row.op == Op::Add);
    const ir::Node& a1 = e.at(row, 0);
    CHECK(a1.op == Op::Index);
    CHECK(a1.index == std::vector<int>{1});
    CHECK(a1.shape == Shape::vector(3));
    const ir::Node& a12 = e.at(row, 1);
    CHECK(a12.index == std::vector<int>{1, 2});
    CHECK(a12.shape == Shape::scalar());
    const ir::Node& a02 = e.at(sum2, 1);
    CHECK(a02.index == std::vector<int>{2});
    CHECK(e.at(a02, 0).index == std::vector<int>{0});
    CHECK(e.at(e.mu(), 1).index == std::vector<int>{2});
  }
  SECTION("component of a lagged state") {
    ExprModel e = transition_mu("x[t - 1][1] + x[t-1]", "vector[2]");
    const ir::Node& comp = e.at(e.mu(), 0);
    CHECK(comp.op == Op::Index);
    CHECK(comp.shape == Shape::scalar());
    CHECK(e.at(comp, 0).op == Op::State);
    CHECK(e.at(comp, 0).lag == 1);
    CHECK(e.at(comp, 0).shape == Shape::vector(2));
  }
  SECTION("t, pi, zeros and eye") {
    ExprModel e = transition_mu("t * pi + eye(2) * zeros(2)", "vector[2]");
    const ir::Node& tp = e.at(e.mu(), 0);
    CHECK(e.at(tp, 0).op == Op::Time);
    CHECK(e.at(tp, 1).values == std::vector<double>{std::numbers::pi});
    const ir::Node& prod = e.at(e.mu(), 1);
    CHECK(e.at(prod, 0).op == Op::Const);
    CHECK(e.at(prod, 0).values == std::vector<double>{1, 0, 0, 1});
    CHECK(e.at(prod, 1).values == std::vector<double>{0, 0});
  }
}

TEST_CASE("constants are evaluated and inlined", "[frontend]") {
  ir::Model m = compile(R"(model c {
    const d = 2 * 3 - 4;            // 2
    const v = [1, d, pi];
    const M = [[1, 2], [3, 4]] * d;
    const s = M[1, 0] + v[1] + exp(0) + dot(v, v) * 0;
    param A : matrix[d, d] = M;
    state x : vector[d];
    obs y : real;
    x[0] ~ normal(zeros(d), s);
    x[t] ~ normal(A * x[t-1] + v[0], 1);
    y[t] ~ normal(x[t][d - 1], 1);
  })");
  REQUIRE(m.consts.size() == 4);
  CHECK(m.consts[0].name == "d");
  CHECK(m.consts[0].values == std::vector<double>{2});
  CHECK(m.consts[1].shape == Shape::vector(3));
  CHECK(m.consts[1].values == std::vector<double>{1, 2, std::numbers::pi});
  CHECK(m.consts[2].shape == Shape::matrix(2, 2));
  CHECK(m.consts[2].values == std::vector<double>{2, 4, 6, 8});
  CHECK(m.consts[3].values == std::vector<double>{6 + 2 + 1});
  CHECK(m.params[0].shape == Shape::matrix(2, 2));
  CHECK(m.params[0].default_value == std::vector<double>{2, 4, 6, 8});
  CHECK(m.states[0].shape == Shape::vector(2));
  const ir::Relation& init = m.initial.relations.at(0);
  CHECK(arg(m.initial, init, 1).op == Op::Const);
  CHECK(arg(m.initial, init, 1).values == std::vector<double>{9});
  const ir::Node& comp = arg(m.observation, m.observation.relations.at(0), 0);
  CHECK(comp.op == Op::Index);
  CHECK(comp.index == std::vector<int>{1});
  // In a relation, indexing a constant stays an Index of a Const: folding is a pass's job.
  const ir::Node& mean = arg(m.transition, m.transition.relations.at(0), 0);
  const ir::Node& v0 = operand(m.transition, mean, 1);
  CHECK(v0.op == Op::Index);
  CHECK(operand(m.transition, v0, 0).op == Op::Const);
}

TEST_CASE("hierarchical priors: a truncation within the declared bounds is accepted",
          "[frontend]") {
  // truncated_normal(mu, 1, 0, 10) lies within real(0, inf): no truncation by the declared
  // bounds, so its location may read mu.
  ir::Model m = compile(R"(model tn {
    param mu ~ normal(1, 1) = 1;
    param s : real(0, inf) ~ truncated_normal(mu, 1, 0, 10) = 1;
    state x : real;
    obs y : real;
    x[0] ~ normal(0, 1);
    x[t] ~ normal(0.5 * x[t-1], s);
    y[t] ~ normal(x[t], 1);
  })");
  REQUIRE(m.prior.relations.size() == 2);
  CHECK(arg(m.prior, m.prior.relations[1], 0).op == Op::Param);
  // A normal prior would be truncated at 0 by the bounds: refused.
  CHECK(diagnostics_of(R"(model tn {
    param mu ~ normal(1, 1) = 1;
    param s : real(0, inf) ~ normal(mu, 1) = 1;
    state x : real;
    obs y : real;
    x[0] ~ normal(0, 1);
    x[t] ~ normal(0.5 * x[t-1], s);
    y[t] ~ normal(x[t], 1);
  })")
            .find("reaches outside its declared bounds") != std::string::npos);
}

TEST_CASE("parameter types, defaults and priors", "[frontend]") {
  ir::Model m = compile(R"(model p {
    param v : vector[3] ~ normal(0, 1) = 1.5;
    param u : vector[2] ~ mvnormal([0, 1], [[1, 0], [0, 2]]) = [3, 4];
    param Q : cov_matrix[2] = [[2, 0.5], [0.5, 1]];
    param B : matrix[2, 3] = [[1, 2, 3], [4, 5, 6]];
    param r : real;
    state x : vector[2];
    obs y : vector[2];
    x[0] ~ mvnormal(u, Q);
    x[t] ~ normal(x[t-1], 1);
    y[t] ~ poisson(exp(x[t]));
  })");
  REQUIRE(m.params.size() == 5);
  CHECK(m.params[0].type == ir::ParamType::Vector);
  CHECK(m.params[0].default_value == std::vector<double>{1.5, 1.5, 1.5});
  CHECK(m.params[1].default_value == std::vector<double>{3, 4});
  CHECK(m.params[2].type == ir::ParamType::CovMatrix);
  CHECK(m.params[2].shape == Shape::matrix(2, 2));
  CHECK(m.params[3].type == ir::ParamType::Matrix);
  CHECK(m.params[3].default_value == std::vector<double>{1, 2, 3, 4, 5, 6});
  CHECK(!m.params[4].default_value.has_value());

  REQUIRE(m.prior.relations.size() == 2);
  // A scalar prior on a vector: independent components, scalar arguments.
  CHECK(m.prior.relations[0].var == 0);
  CHECK(arg(m.prior, m.prior.relations[0], 0).shape == Shape::scalar());
  const ir::Relation& mv = m.prior.relations[1];
  CHECK(mv.var == 1);
  CHECK(mv.dist == ir::Dist::MvNormal);
  CHECK(arg(m.prior, mv, 0).op == Op::Const);
  CHECK(arg(m.prior, mv, 0).values == std::vector<double>{0, 1});
  CHECK(arg(m.prior, mv, 1).shape == Shape::matrix(2, 2));
  CHECK(arg(m.prior, mv, 1).values == std::vector<double>{1, 0, 0, 2});

  const ir::Relation& init = m.initial.relations.at(0);
  CHECK(init.dist == ir::Dist::MvNormal);
  CHECK(arg(m.initial, init, 0).shape == Shape::vector(2));
  CHECK(arg(m.initial, init, 1).shape == Shape::matrix(2, 2));
  // Vector target, scalar argument: independent components.
  const ir::Relation& trans = m.transition.relations.at(0);
  CHECK(arg(m.transition, trans, 1).shape == Shape::scalar());
  CHECK(m.observation.relations.at(0).dist == ir::Dist::Poisson);
}

TEST_CASE("relations are ordered so that lag-0 values are sampled before they are read",
          "[frontend]") {
  ir::Model m = compile(R"(model order {
    state a : real;
    state b : real;
    state c : real;
    obs y : real;
    obs z : real;
    /* block comment
       over two lines */
    a[0] ~ normal(b[0] + c[0], 1);
    b[0] ~ normal(t, 1);             // t is 0 in the initial block
    c[0] ~ normal(b[0], 1);
    c[t] ~ normal(a[t] + c[t-1], 1);
    a[t] ~ normal(b[t] * a[t-1], 1);
    b[t] ~ normal(b[t-1] + t, 1);
    z[t] ~ normal(y[t] + a[t], 1);
    y[t] ~ normal(c[t], 1);
  })");
  auto vars = [](const ir::Block& b) {
    std::vector<int> v;
    for (const ir::Relation& r : b.relations)
      v.push_back(r.var);
    return v;
  };
  CHECK(vars(m.initial) == std::vector<int>{1, 2, 0});
  CHECK(vars(m.transition) == std::vector<int>{1, 0, 2});
  CHECK(vars(m.observation) == std::vector<int>{0, 1});
  const ir::Relation& b0 = m.initial.relations[0];
  CHECK(arg(m.initial, b0, 0).op == Op::Const);
  CHECK(arg(m.initial, b0, 0).values == std::vector<double>{0});
  const ir::Relation& bt = m.transition.relations[0];
  CHECK(operand(m.transition, arg(m.transition, bt, 0), 1).op == Op::Time);
  const ir::Relation& zt = m.observation.relations[1];
  const ir::Node& ynow = operand(m.observation, arg(m.observation, zt, 0), 0);
  CHECK(ynow.op == Op::Obs);
  CHECK(ynow.var == 0);
  CHECK(ynow.lag == 0);
}

TEST_CASE("compile_model reports errors and returns nothing", "[frontend]") {
  frontend::DiagnosticEngine diags;
  auto m =
      frontend::compile_model("model m { state x : real; x[0] ~ normal(0, 1); }", "a.ssm", diags);
  CHECK(!m);
  CHECK(diags.has_errors());
  CHECK(diags.error_count() == 1);
  auto error = std::find_if(diags.diagnostics().begin(), diags.diagnostics().end(), [](auto& d) {
    return d.severity == frontend::Diagnostic::Severity::Error;
  });
  REQUIRE(error != diags.diagnostics().end());
  CHECK(error->loc.line == 1);
  CHECK(error->loc.col == 17);
  CHECK(error->message.find("no transition relation") != std::string::npos);
}

TEST_CASE("diagnostic rendering", "[frontend][diagnostics]") {
  frontend::DiagnosticEngine diags("f.ssm", "ab\n\tcd ef\nlast line\n");
  diags.error(diags.loc(7, 9), "two");      // "ef" after a tab
  diags.note(diags.loc(3, 3), "empty");     // an empty range still gets a caret
  diags.warning(diags.loc(12, 100), "far"); // clipped to the end of its line
  diags.error({}, "nowhere");
  CHECK(diags.str() == "f.ssm:2:5: error: two\n"
                       "\tcd ef\n"
                       "\t   ^~\n"
                       "f.ssm:2:1: note: empty\n"
                       "\tcd ef\n"
                       "^\n"
                       "f.ssm:3:3: warning: far\n"
                       "last line\n"
                       "  ^~~~~~~\n"
                       "f.ssm: error: nowhere\n");
  CHECK(diags.error_count() == 2);
}

TEST_CASE("typo suggestions", "[frontend][diagnostics]") {
  std::vector<std::string> names = {"sigma", "mu", "normal", "half_normal"};
  CHECK(frontend::closest_name("sigm", names) == "sigma");
  CHECK(frontend::closest_name("nromal", names) == "normal");
  CHECK(frontend::closest_name("halfnormal", names) == "half_normal");
  CHECK(!frontend::closest_name("x", names));
  CHECK(!frontend::closest_name("beta", names));
}

namespace {
// The full table, for reference.
int naive_edit_distance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (size_t i = 0; i <= n; ++i)
    d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= m; ++j)
    d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}
} // namespace

TEST_CASE("the banded edit distance equals the full table's within its limit",
          "[frontend][diagnostics]") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> length(0, 9), letter(0, 2);
  for (int k = 0; k < 5000; ++k) {
    std::string a, b;
    for (int i = length(rng); i > 0; --i)
      a += static_cast<char>('a' + letter(rng));
    for (int i = length(rng); i > 0; --i)
      b += static_cast<char>('a' + letter(rng));
    const int exact = naive_edit_distance(a, b);
    for (int limit : {0, 1, 2, 3, 5, 10}) {
      INFO(a << " / " << b << ", limit " << limit);
      const int banded = ssm::edit_distance(a, b, limit);
      if (exact <= limit)
        CHECK(banded == exact);
      else
        CHECK(banded > limit);
    }
  }
  // Names of 300,000 characters are compared within a band of 8 edits (linear time), not
  // quadratically.
  const std::string huge(300000, 'q'), near = std::string(299994, 'q') + "sigma",
                                       far = std::string(299990, 'q') + "sigma";
  CHECK(!frontend::closest_name(huge, {"sigma"}));
  CHECK(frontend::closest_name(huge, {"sigma", far, near}) == near);
  CHECK(!frontend::closest_name(huge, {far}));
  CHECK(ssm::edit_distance(huge, far, 20) == 10);
}

TEST_CASE("a syntax error stops, semantic errors accumulate", "[frontend][diagnostics]") {
  std::string two = diagnostics_of(R"(model m {
    state x : real;
    obs y : real;
    x[0] ~ normal(a, 1);
    x[t] ~ normal(b, 1);
    y[t] ~ normal(x[t], 1);
  })");
  CHECK(two.find("unknown name 'a'") != std::string::npos);
  CHECK(two.find("unknown name 'b'") != std::string::npos);
  std::string one = diagnostics_of("model m { state x : real x[0] ~ normal(a, 1); }");
  CHECK(one.find("expected ';'") != std::string::npos);
  CHECK(one.find("unknown name") == std::string::npos);
}

TEST_CASE("an untyped deterministic observation of a simulator has its value's shape, even when "
          "a declaration before it reads it",
          "[frontend]") {
  ir::Model m = compile(R"(simulator s {
  param theta : vector[2] ~ uniform(-1, 1);
  let w = z[1] + 1;
  obs y ~ normal(w, 1);
  obs z = theta * 2;
  obs v = [z[0], y];
})");
  REQUIRE(m.obs.size() == 3);
  CHECK(m.obs[0].name == "y");
  CHECK(m.obs[0].shape == ir::Shape::scalar());
  CHECK(m.obs[1].name == "z");
  CHECK(m.obs[1].shape == ir::Shape::vector(2));
  CHECK(m.obs[2].shape == ir::Shape::vector(2));
}

TEST_CASE("sum, and zeros and ones of a matrix's shape", "[frontend]") {
  ir::Model m = compile(R"(model s {
    const M = [[1, 2], [3, 4]];
    const total = sum(M) + sum([1, 2, 3]) + sum(5); // 10 + 6 + 5
    const Z = zeros(2, 3) + ones(2, 3);
    param P : matrix[2, 3] = Z / 3;
    state x : vector[2];
    obs y : real;
    x[0] ~ normal(zeros(2), 1);
    x[t] ~ normal(x[t-1], 1);
    y[t] ~ normal(sum(x[t]) + total, 1);
  })");
  REQUIRE(m.consts.size() == 3);
  CHECK(m.consts[1].values == std::vector<double>{21});
  CHECK(m.consts[2].shape == Shape::matrix(2, 3));
  CHECK(m.consts[2].values == std::vector<double>(6, 1.0));
  CHECK(m.params[0].default_value == std::vector<double>(6, 1.0 / 3));
  // In a relation, the sum of a vector is its dot product with ones.
  const ir::Node& mean = arg(m.observation, m.observation.relations.at(0), 0);
  const ir::Node& s = operand(m.observation, mean, 0);
  CHECK(s.op == Op::Call);
  CHECK(s.fn == "dot");
  CHECK(operand(m.observation, s, 0).op == Op::State);
  CHECK(operand(m.observation, s, 1).values == std::vector<double>{1, 1});
  const std::string model = "model e { state x : real; obs y : real; x[0] ~ normal(0, 1); "
                            "x[t] ~ normal(x[t-1], 1); y[t] ~ normal(x[t] + ";
  CHECK(diagnostics_of(model + "sum(1, 2), 1); }")
            .find("sum(x) takes 1 argument, but 2 were given") != std::string::npos);
  // Empty sums are 0, folded or compiled; a matrix constant is held to the element limit.
  const ir::Model empty = compile(model + "sum(zeros(0, 2)) + sum(ones(0)), 1); }");
  CHECK(empty.observation.relations.size() == 1);
  CHECK(diagnostics_of(model + "sum(zeros(100000, 100000)), 1); }")
            .find("this type has 10000000000 elements, more than the limit") != std::string::npos);
  CHECK(diagnostics_of(model + "sum(zeros(2, 3, 4)), 1); }")
            .find("zeros(n) and zeros(rows, columns) take 1 or 2 arguments, but 3 were given") !=
        std::string::npos);
}

TEST_CASE("named arguments of distributions take their places; diffusion's optional ones their "
          "defaults",
          "[frontend]") {
  const ir::Model m = compile(R"(model n {
    param s : real(0, inf) = 2;
    state x : real;
    obs y : real;
    x[0] ~ normal(sigma = 3, mu = 1);
    x[t] ~ diffusion(-x[t], dt = 0.5, diffusion = s, psi_upper = 4);
    y[t] ~ normal(x[t], sigma = 1);
  })");
  const ir::Relation& initial = m.initial.relations.at(0);
  CHECK(arg(m.initial, initial, 0).values == std::vector<double>{1});
  CHECK(arg(m.initial, initial, 1).values == std::vector<double>{3});
  // diffusion(from, drift, diffusion, dt, steps, psi_lower, psi_upper): steps and psi_lower left
  // out before psi_upper take their defaults.
  const ir::Relation& sde = m.transition.relations.at(0);
  REQUIRE(sde.args.size() == 7);
  CHECK(arg(m.transition, sde, 2).op == Op::Param);
  CHECK(arg(m.transition, sde, 3).values == std::vector<double>{0.5});
  CHECK(arg(m.transition, sde, 4).values == std::vector<double>{20});
  CHECK(arg(m.transition, sde, 5).values == std::vector<double>{-INFINITY});
  CHECK(arg(m.transition, sde, 6).values == std::vector<double>{4});
  const ir::Model positional = compile(R"(model p {
    state x : real;
    obs y : real;
    x[0] ~ normal(0, 1);
    x[t] ~ diffusion(-x[t], 1, 0.5, 10);
    y[t] ~ normal(x[t], 1);
  })");
  const ir::Relation& plain = positional.transition.relations.at(0);
  REQUIRE(plain.args.size() == 7);
  CHECK(arg(positional.transition, plain, 4).values == std::vector<double>{10});
  CHECK(arg(positional.transition, plain, 5).values == std::vector<double>{-INFINITY});
  CHECK(arg(positional.transition, plain, 6).values == std::vector<double>{INFINITY});
  // `name == value` is an expression, not a named argument.
  CHECK(diagnostics_of("model e { param a = 1; state x : real; obs y : real; x[0] ~ normal(0, 1); "
                       "x[t] ~ normal(x[t-1], a == 1); y[t] ~ normal(x[t], 1); }")
            .find("has no argument") == std::string::npos);
}
