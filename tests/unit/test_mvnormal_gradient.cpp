// mvnormal's and mvnormal_chol's closed-form gradients (passes/distribution_formulas.cpp, chained
// by log_density_derivative): against forward mode through the written-out factorisation and
// central differences, in the parameters, x[t] and x[t-1]; and the size they leave a large
// transition's state gradient.
#include "derivative_checks.h"
#include "frontend/frontend.h"
#include "passes/pass.h"
#include "passes/passes.h"
#include "passes/structure.h"

#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

using namespace ssm;
using namespace derivative_checks;

TEST_CASE("mvnormal's closed-form gradient equals forward mode through its formula and finite "
          "differences",
          "[passes][derivatives][score]") {
  // The analysis differentiates mvnormal and mvnormal_chol through their gradients in the mean,
  // the covariance (or factor) and the target; forward mode through the written-out
  // factorisation is the reference, with finite differences. Covariances that read parameters
  // through expressions, a factor as a parameter.
  const std::string source = R"(model gauss3 {
  param A : matrix[3, 3] = [[0.5, 0.1, 0], [0.2, 0.4, 0.1], [0, 0.3, 0.6]];
  param Q : cov_matrix[3] = [[1.0, 0.3, 0.1], [0.3, 0.8, 0.2], [0.1, 0.2, 0.7]];
  param s : real(0, inf) = 1.3;
  param m = 0.2;
  param L : matrix[2, 2] = [[1.1, 0], [0.4, 0.9]];
  state x : vector[3];
  obs   y : vector[3];
  obs   w : vector[2];
  x[0] ~ mvnormal([m, m, m], s * Q);
  x[t] ~ mvnormal(A * x[t-1] + m, Q + [[s, 0, 0], [0, 0.1, 0], [0, 0, 0.2]]);
  y[t] ~ mvnormal(A * x[t], s * s * Q);
  w[t] ~ mvnormal_chol([x[t][0] * m, x[t][2]], L * s);
})";
  frontend::DiagnosticEngine diags;
  std::optional<ir::Model> model = frontend::compile_model(source, "gauss3.ssm", diags);
  INFO(diags.str());
  REQUIRE(model);
  passes::PassContext context;
  passes::create_pass("derivatives")->run(*model, context);
  passes::Derivatives& d = *context.derivatives;
  REQUIRE(d.score_why_not.empty());
  REQUIRE(d.relations.size() == 4);
  std::vector<passes::Wrt> params;
  for (size_t k = 0; k < model->params.size(); ++k)
    for (int c = 0; c < model->params[k].shape.size(); ++c)
      params.push_back({ir::Op::Param, static_cast<int>(k), 0, c});
  passes::ExprBuilder b(d.arena);
  passes::Differentiator forward(d.arena, b);
  const Point p = make_point(*model);
  auto at = [&](int id) { return id < 0 ? 0.0 : evaluate_at(*model, d.arena, id, p)[0]; };
  Counts counts;
  for (size_t r = 0; r < d.relations.size(); ++r) {
    const passes::RelationDerivatives& rel = d.relations[r];
    const int lag = r == 1 ? 1 : 0;
    std::vector<passes::Wrt> states;
    for (int c = 0; c < 3; ++c)
      states.push_back({ir::Op::State, 0, lag, c});
    REQUIRE(rel.grad_params.size() == params.size());
    REQUIRE(rel.grad_state.size() == states.size());
    auto compare = [&](int closed_form, const passes::Wrt& w) {
      const int reference = forward.derivative(rel.log_density, w)[0];
      INFO(rel.relation << " d/d" << w.str(*model));
      CHECK(at(closed_form) == Approx(at(reference)).epsilon(1e-10).margin(1e-12));
      check(*model, d.arena, rel.log_density, d.arena, {closed_form}, w, rel.relation, counts);
    };
    for (size_t k = 0; k < params.size(); ++k)
      compare(rel.grad_params[k], params[k]);
    for (size_t j = 0; j < states.size(); ++j)
      compare(rel.grad_state[j], states[j]);
  }
  // The step's gradients in x[t] (the transition's target, both observations' argument) and in
  // x[t-1] (the transition's mean), as the state-gradient kernels compile them.
  REQUIRE(d.state_gradient.size() == 3);
  REQUIRE(d.prev_state_gradient.size() == 3);
  Point later = p;
  later.t = 3;
  auto at_later = [&](int id) { return id < 0 ? 0.0 : evaluate_at(*model, d.arena, id, later)[0]; };
  for (int c = 0; c < 3; ++c) {
    const passes::Wrt now{ir::Op::State, 0, 0, c}, before{ir::Op::State, 0, 1, c};
    double expected = 0;
    for (size_t r = 1; r < 4; ++r)
      expected += at_later(forward.derivative(d.relations[r].log_density, now)[0]);
    CHECK(at_later(d.state_gradient[c]) == Approx(expected).epsilon(1e-10).margin(1e-12));
    CHECK(at_later(d.prev_state_gradient[c]) ==
          Approx(at_later(forward.derivative(d.relations[1].log_density, before)[0]))
              .epsilon(1e-10)
              .margin(1e-12));
  }
  CHECK(counts.checked > 80);
}

TEST_CASE("a 30-D mvnormal transition has a state gradient small enough to compile",
          "[passes][derivatives]") {
  // Forward mode through the factorisation wrote it in 6,428 operations, past the 5,000 compiled;
  // through the closed-form gradient it is x - A x[t-1] and its products with A and the
  // observation's term.
  const std::string source = R"(model big_gauss {
  param A : matrix[30, 30] = 0.5 * eye(30);
  state x : vector[30];
  obs y : vector[30];
  x[0] ~ normal(0, 1);
  x[t] ~ mvnormal(A * x[t-1], eye(30));
  y[t] ~ normal(x[t], 1);
})";
  frontend::DiagnosticEngine diags;
  std::optional<ir::Model> model = frontend::compile_model(source, "big_gauss.ssm", diags);
  REQUIRE(model);
  passes::PassContext context;
  passes::create_pass("derivatives")->run(*model, context);
  const passes::Derivatives& d = *context.derivatives;
  INFO(d.state_gradient_why_not);
  REQUIRE(d.state_gradient.size() == 30);
  CHECK(d.size(d.state_gradient) <= passes::kMaxScoreOperations);
  CHECK(d.size(d.prev_state_gradient) <= passes::kMaxScoreOperations);
}
