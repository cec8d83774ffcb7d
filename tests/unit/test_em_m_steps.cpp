// Unit tests of the em-m-steps analysis (passes/em_m_steps.cpp): which parameters of the
// examples and of small models have a closed-form M-step, the pieces they come from (families,
// groups, features, coefficient tables), and the reason given for those that have none.
#include "analysed_models.h"
#include "passes/structure.h"

#include <catch2/catch.hpp>

#include <map>
#include <string>

using namespace ssm;
using namespace ssm::unit_test;

namespace {

// The em-m-steps verdict of each parameter, by name.
std::map<std::string, passes::EmSteps::Verdict> em_verdicts(ir::Model& model,
                                                            passes::EmSteps* out = nullptr) {
  passes::PassContext ctx = analyse(model);
  REQUIRE(ctx.em_steps);
  INFO(ctx.em_steps->report());
  std::map<std::string, passes::EmSteps::Verdict> v;
  for (const passes::EmSteps::Verdict& p : ctx.em_steps->params)
    v[p.param] = p;
  if (out)
    *out = *ctx.em_steps;
  return v;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace

TEST_CASE("em-m-steps: the examples' conjugate pieces", "[structure][em]") {
  using Family = passes::ConjugatePiece::Family;
  using Noise = passes::ConjugatePiece::Noise;
  passes::EmSteps e;
  // examples/hmm.ssm without its import.
  ir::Model hmm = compile_source(R"(
model hmm {
  param P : matrix[2, 2] = [[0.95, 0.05], [0.10, 0.90]];
  param rate : vector[2] = [2, 9];
  param p0 : simplex[2] = [0.5, 0.5];
  param weekly : real(0, 1) = 0.2;
  state z : int[0..1];
  obs y : int;
  let season = t % 7 == 6 ? weekly : 0;
  z[0] ~ categorical(p0);
  z[t] ~ categorical(P[z[t-1]]);
  y[t] ~ poisson(rate[z[t]] * (1 + season));
}
)");
  auto v = em_verdicts(hmm, &e);
  CHECK(v["P"].closed_form);
  CHECK(v["p0"].closed_form);
  CHECK_FALSE(v["rate"].closed_form);
  CHECK(contains(v["rate"].reason, "y[t] ~ poisson at 12:3"));
  CHECK(contains(v["weekly"].reason, "is not linear in the parameters"));
  const passes::ConjugatePiece& rows = e.pieces.at(v["P"].pieces.at(0));
  CHECK(rows.family == Family::Categorical);
  REQUIRE(rows.group);
  CHECK(rows.group->lag == 1); // P[z[t-1]]
  CHECK(rows.probabilities == std::vector<passes::ThetaSlots>{{0, 1}, {2, 3}});

  ir::Model gmm = example("gmm");
  passes::lower_plate_items(gmm); // as the driver does
  v = em_verdicts(gmm, &e);
  for (const char* p : {"w", "mu", "sigma"})
    CHECK(v[p].closed_form);
  REQUIRE(v["w"].pieces.size() == 1); // z[n]: one piece at every item
  CHECK(e.pieces.at(v["w"].pieces.at(0)).block == ir::BlockKind::Plate);
  const passes::ConjugatePiece& mixture = e.pieces.at(v["mu"].pieces.at(0));
  CHECK(mixture.family == Family::Normal);
  CHECK(mixture.noise == Noise::Sd);
  REQUIRE(mixture.coefficients.size() == 1);
  CHECK(mixture.coefficients[0].theta.size() == 2); // mu[z[n]]: one per component
  CHECK(mixture.noise_theta.size() == 1);           // a common sigma

  ir::Model lg1 = example("lgssm1");
  v = em_verdicts(lg1, &e);
  for (const char* p : {"a", "q", "r", "m0", "s0"})
    CHECK(v[p].closed_form);
  const passes::ConjugatePiece& ar = e.pieces.at(v["a"].pieces.at(0));
  REQUIRE(ar.coefficients.size() == 1);
  REQUIRE(ar.coefficients[0].feature.terms.size() == 1);
  CHECK(ar.coefficients[0].feature.terms[0].second.lag == 1); // a * x[t-1]

  ir::Model lg = example("lgssm");
  v = em_verdicts(lg, &e);
  for (const char* p : {"A", "Q", "B", "R"})
    CHECK(v[p].closed_form);
  CHECK(v["Q"].pieces.size() == 2); // x[0] and x[t] share it
  const passes::ConjugatePiece& obs = e.pieces.at(v["B"].pieces.at(0));
  CHECK(obs.family == Family::MvNormal);
  CHECK(obs.noise == Noise::Cov);
  CHECK(obs.features.size() == 10);

  // An intercept is one more feature, the constant 1, whose coefficients are b's components;
  // dot(w, v) is a sum of coefficients times states.
  ir::Model intercept = compile_source(R"(
model em_intercept {
  param A : matrix[2, 2] = [[0.5, 0], [0, 0.5]];
  param b : vector[2] = [0, 0];
  param Q : cov_matrix[2] = [[1, 0], [0, 1]];
  param w : vector[2] = [1, 1];
  param r : real(0, inf) = 1;
  state x : vector[2];
  obs y : real;
  x[0] ~ mvnormal(b, Q);
  x[t] ~ mvnormal(A * x[t-1] + b, Q);
  y[t] ~ normal(dot(w, x[t]), r);
}
)");
  v = em_verdicts(intercept, &e);
  CHECK_FALSE(v["b"].closed_form); // in both x[0] and x[t]: a coefficient of two pieces
  CHECK(contains(v["b"].reason, "in both"));
  CHECK(v["w"].closed_form);
  CHECK(v["r"].closed_form);
  const passes::ConjugatePiece& reg = e.pieces.at(v["w"].pieces.at(0));
  CHECK(reg.coefficients.size() == 2);

  ir::Model trend = compile_source(R"(
model em_trend {
  param A : matrix[2, 2] = [[0.5, 0], [0, 0.5]];
  param b : vector[2] = [0, 0];
  param Q : cov_matrix[2] = [[1, 0], [0, 1]];
  state x : vector[2];
  obs y : vector[2];
  x[0] ~ mvnormal(zeros(2), Q);
  x[t] ~ mvnormal(A * x[t-1] + b, Q);
  y[t] ~ mvnormal(x[t], Q);
}
)");
  v = em_verdicts(trend, &e);
  for (const char* p : {"A", "b", "Q"})
    CHECK(v[p].closed_form);
  const passes::ConjugatePiece& drift = e.pieces.at(v["b"].pieces.at(0));
  REQUIRE(drift.features.size() == 3);                      // x[t-1][0], x[t-1][1], 1
  CHECK(drift.matrix.at(1) == passes::ThetaSlots{2, 3, 5}); // A[1, 0], A[1, 1], b[1]
}

TEST_CASE("em-m-steps: what has no closed form, and why", "[structure][em]") {
  ir::Model squared = compile_source(R"(
model em1 {
  param a = 0.5;
  param q : real(0, inf) = 1;
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ normal(a * x[t-1], q * q);
  y[t] ~ normal(x[t], 1);
}
)");
  auto v = em_verdicts(squared);
  CHECK_FALSE(v["q"].closed_form);
  CHECK(contains(v["q"].reason, "its sd is not a parameter"));
  CHECK(contains(v["a"].reason, "x[t] ~ normal"));

  ir::Model bounded = compile_source(R"(
model em2 {
  param a : real(-1, 1) = 0.5;
  param q : real(0, inf) = 1;
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ normal(a * x[t-1], q);
  y[t] ~ normal(x[t], 1);
}
)");
  v = em_verdicts(bounded);
  CHECK(contains(v["a"].reason, "bounded"));
  CHECK(contains(v["q"].reason, "also reads a"));

  ir::Model shared = compile_source(R"(
model em3 {
  param m = 0;
  param s : real(0, inf) = 1;
  param v : real(0, inf) = 1;
  state x : real;
  obs y1 : real;
  obs y2 : real;
  x[0] ~ normal(0, 1);
  x[t] ~ normal(x[t-1], sqrt(v));
  y1[t] ~ normal(m + x[t], s);
  y2[t] ~ normal(m + 2 * x[t], s);
}
)");
  passes::EmSteps e;
  v = em_verdicts(shared, &e);
  CHECK(contains(v["m"].reason, "in both"));
  CHECK_FALSE(v["s"].closed_form);
  REQUIRE(v["v"].closed_form);
  CHECK(e.pieces.at(v["v"].pieces.at(0)).noise == passes::ConjugatePiece::Noise::Variance);

  ir::Model grouped = compile_source(R"(
model em4 {
  param P : matrix[2, 2] = [[0.9, 0.1], [0.2, 0.8]];
  param rate : vector[2] = [1, 5];
  param m = 0;
  param b : vector[2] = [0, 1];
  param s : vector[2] = [1, 1];
  state z : int[0..1];
  obs c : int;
  obs y : real;
  z[0] ~ categorical([0.5, 0.5]);
  z[t] ~ categorical(P[z[t-1]]);
  c[t] ~ poisson(2 * rate[z[t]]);
  y[t] ~ normal(m + b[z[t]], s[z[t]]);
}
)");
  v = em_verdicts(grouped, &e);
  CHECK(v["P"].closed_form);
  REQUIRE(v["rate"].closed_form);
  const passes::ConjugatePiece& counts = e.pieces.at(v["rate"].pieces.at(0));
  CHECK(counts.exposure.constant == 2);
  CHECK(counts.exposure.terms.empty());
  CHECK(contains(v["m"].reason, "its sd depends on a state"));
  CHECK_FALSE(v["b"].closed_form);
  CHECK_FALSE(v["s"].closed_form);
}

TEST_CASE("em-m-steps: a parameter read twice, and components of a simplex", "[structure][em]") {
  // A matrix read twice in one mean would have its columns fitted apart.
  ir::Model twice = compile_source(R"(
model em_twice {
  param A : matrix[2, 2] = [[0.5, 0], [0, 0.5]];
  param Q : cov_matrix[2] = [[1, 0], [0, 1]];
  state x : vector[2];
  obs y : vector[2];
  x[0] ~ mvnormal(zeros(2), eye(2));
  x[t] ~ mvnormal(A * x[t-1] - A * x[t-2], Q);
  y[t] ~ mvnormal(x[t], eye(2));
}
)");
  auto v = em_verdicts(twice);
  CHECK_FALSE(v["A"].closed_form);
  CHECK_FALSE(v["Q"].closed_form);

  // A simplex is updated whole, as probabilities; one component as a rate would leave it.
  ir::Model simplex = compile_source(R"(
model em_simplex {
  param p : simplex[2] = [0.3, 0.7];
  param S : cov_matrix[2] = [[1, 0], [0, 1]];
  state z : int[0..1];
  obs c : int;
  obs y : real;
  z[0] ~ categorical([0.5, 0.5]);
  z[t] ~ categorical([[0.9, 0.1], [0.1, 0.9]][z[t-1]]);
  c[t] ~ bernoulli(p[z[t]]);
  y[t] ~ normal(z[t], S[0, 0]);
}
)");
  v = em_verdicts(simplex);
  CHECK(contains(v["p"].reason, "a component of a simplex cannot be updated alone"));
  CHECK(contains(v["S"].reason, "a component of a cov_matrix cannot be updated alone"));
}
