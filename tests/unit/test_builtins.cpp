// The tables of built-in functions (ir/builtins.h) and distributions (ir/dists.h): every
// function through the IR evaluator against its C library twin (Phi against 0.5 erfc(-x / sqrt 2),
// log_sum_exp and softmax against a hand computation that subtracts the maximum), and each
// table's consistency. Compiled kernels are checked against the same twins in
// tests/e2e/test_builtins.cpp, derivatives in test_derivatives.cpp.
#include "frontend/frontend.h"
#include "ir/builtins.h"
#include "ir/dists.h"
#include "ir/evaluate.h"

#include "../reference_math.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <vector>

using namespace ssm;

namespace {

const std::vector<double> kPoints = {-30, -7.5, -2, -0.9, -0.3, 0, 1e-9, 0.25, 0.7, 1, 3.5, 12};

double call(const char* fn, double a, double b = 0) {
  ir::Node node;
  node.op = ir::Op::Call;
  node.fn = fn;
  const ir::Builtin* f = ir::find_builtin(fn);
  REQUIRE(f);
  std::vector<std::vector<double>> args{{a}};
  if (f->arity == 2)
    args.push_back({b});
  return ir::evaluate(node, args, std::vector<ir::Shape>(args.size()))
      .at(0); // scalar shapes: one element
}

std::vector<double> call_vector(const char* fn, const std::vector<double>& v) {
  ir::Node node;
  node.op = ir::Op::Call;
  node.fn = fn;
  node.shape = *ir::builtin_result_shape(*ir::find_builtin(fn), {ir::Shape::vector(3)});
  return ir::evaluate(node, {v}, {ir::Shape::vector(static_cast<int>(v.size()))});
}

// Equal, or both NaN.
void check_same(double got, double want, const std::string& what) {
  INFO(what << ": got " << got << ", want " << want);
  if (std::isnan(want))
    CHECK(std::isnan(got));
  else
    CHECK(got == want);
}

} // namespace

TEST_CASE("built-in functions evaluate as their C library twins", "[ir][builtins]") {
  const std::vector<std::pair<const char*, std::function<double(double)>>> unary = {
      {"atan", [](double x) { return std::atan(x); }},
      {"tan", [](double x) { return std::tan(x); }},
      {"asin", [](double x) { return std::asin(x); }},
      {"acos", [](double x) { return std::acos(x); }},
      {"log1p", [](double x) { return std::log1p(x); }},
      {"expm1", [](double x) { return std::expm1(x); }},
      {"lgamma", [](double x) { return std::lgamma(x); }},
      {"erf", [](double x) { return std::erf(x); }},
      {"Phi", [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }},
  };
  for (const auto& [name, twin] : unary)
    for (double x : kPoints)
      check_same(call(name, x), twin(x), std::string(name) + "(" + std::to_string(x) + ")");
  for (double y : kPoints)
    for (double x : kPoints)
      check_same(call("atan2", y, x), std::atan2(y, x), "atan2");
}

TEST_CASE("Phi is accurate in both tails", "[ir][builtins]") {
  // 1 - Phi(8) would be 0 through erf; through erfc the lower tail keeps its relative accuracy.
  CHECK(call("Phi", -8) == Approx(6.220960574271785e-16).epsilon(1e-12));
  CHECK(call("Phi", -38) > 0);
  CHECK(call("Phi", 0) == 0.5);
  CHECK(call("Phi", 40) == 1);
  CHECK(call("Phi", -1.959963984540054) == Approx(0.025).epsilon(1e-12));
}

TEST_CASE("log_sum_exp and softmax subtract the maximum", "[ir][builtins]") {
  const std::vector<std::vector<double>> cases = {
      {0.1, -2, 3}, {1000, 999, -5}, {-1000, -1001, -1002}, {710, 0, 0}, {-800, -800, -800}};
  for (const std::vector<double>& v : cases) {
    const double lse = ssm::test::reference_log_sum_exp(v);
    CHECK(call_vector("log_sum_exp", v).at(0) == Approx(lse).epsilon(1e-15));
    const std::vector<double> p = call_vector("softmax", v);
    const std::vector<double> want = ssm::test::reference_softmax(v);
    REQUIRE(p.size() == v.size());
    double total = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      CHECK(p[i] == Approx(want[i]).epsilon(1e-15).margin(1e-300));
      total += p[i];
    }
    CHECK(total == Approx(1).epsilon(1e-15));
  }
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(call_vector("log_sum_exp", {-inf, -inf, -inf}).at(0) == -inf);
  CHECK(call_vector("log_sum_exp", {inf, 0, 1}).at(0) == inf);
  CHECK(std::isnan(call_vector("log_sum_exp", {std::nan(""), 0, 1}).at(0)));
}

TEST_CASE("the built-in function table is consistent", "[ir][builtins]") {
  for (const ir::Builtin& f : ir::all_builtins()) {
    INFO(f.name);
    CHECK(&ir::builtin(f.fn) == &f);
    CHECK(ir::find_builtin(f.name) == &f);
    // Elementwise functions have a scalar value, the others a whole one.
    CHECK((f.shape == ir::FnShape::Elementwise) == (f.scalar != nullptr));
    CHECK((f.whole == nullptr) == (f.scalar != nullptr));
    CHECK((f.emit == ir::Emit::Inline) == f.symbol.empty());
    if (!f.internal)
      CHECK(f.derivative != nullptr); // every function of the language is differentiable
    CHECK(f.arity == (f.params.find(',') == std::string_view::npos ? 1 : 2));
  }
  CHECK(ir::find_callable("lt") == nullptr);      // an operator's: a < b
  CHECK(ir::find_callable("digamma") == nullptr); // analyses' only
  CHECK(ir::find_callable("Phi") != nullptr);
}

TEST_CASE("the distribution table is consistent", "[ir][builtins]") {
  for (const ir::DistInfo& d : ir::all_dists()) {
    INFO(d.name);
    CHECK(&ir::dist_info(d.dist) == &d); // indexed by Dist
    CHECK(ir::find_dist(d.name) == &d);
    CHECK(d.domains.size() == d.arg_names.size());
    CHECK(d.location < static_cast<int>(d.arg_names.size()));
    CHECK(d.support_from + 1 < static_cast<int>(d.arg_names.size()));
    CHECK(d.lower <= d.upper);
    CHECK(d.count_arg < static_cast<int>(d.arg_names.size()));
    if (d.count_arg >= 0)
      CHECK(d.discrete);
  }
  CHECK(ir::dist_info(ir::Dist::StudentT).location == 1);
  CHECK(ir::dist_info(ir::Dist::TruncatedNormal).support_from == 2);
}

TEST_CASE("the frontend checks calls of built-in functions against the table", "[ir][builtins]") {
  auto errors = [](const std::string& expr) {
    const std::string source = "model m {\n  state x : real;\n  state v : vector[2];\n"
                               "  obs y : real;\n  x[0] ~ normal(0, 1);\n  v[0] ~ normal(0, 1);\n"
                               "  x[t] ~ normal(x[t-1], 1);\n  v[t] ~ normal(v[t-1], 1);\n"
                               "  y[t] ~ normal(" +
                               expr + ", 1);\n}\n";
    frontend::DiagnosticEngine diags;
    const bool ok = frontend::compile_model(source, "m.ssm", diags).has_value();
    return ok ? std::string() : diags.str();
  };
  CHECK(errors("x[t] + log_sum_exp(v[t]) + softmax(v[t])[1] + atan2(v[t], 2)[0]").empty());
  CHECK_THAT(errors("softmax(x[t])[0]"),
             Catch::Contains("softmax(v) needs a vector, but got real"));
  CHECK_THAT(errors("log_sum_exp(x[t])"),
             Catch::Contains("log_sum_exp(v) needs a vector, but got real"));
  CHECK_THAT(errors("Phi(x[t], 1)"), Catch::Contains("Phi(x) takes 1 argument, but 2 were given"));
  CHECK_THAT(errors("atan2(v[t], [1, 2, 3])[0]"),
             Catch::Contains("shape mismatch in atan2(): vector[2] and vector[3]"));
  CHECK_THAT(errors("digamma(x[t])"), Catch::Contains("unknown function 'digamma'"));
}
