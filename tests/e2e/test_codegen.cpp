// Code generation of vector and matrix expressions: a model that uses literals, both indexing
// forms, dot, matrix-matrix and matrix-vector products, eye, max and logistic. Its simulated
// residuals, recomputed here from the same formulas, must be exactly standard normal; a wrong
// index or product shifts their mean by many standard errors.
#include "support.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace e2e;

namespace {

const char* const kVecOps = R"(
model vecops {
  param M : matrix[2, 2] = [[0.5, 0.2], [-0.1, 0.4]];
  param v : vector[2] = [1, -2];
  param s = 0.3;
  state x : vector[2];
  obs   y : vector[3];
  x[0] ~ normal(v, 1);
  x[t] ~ normal((eye(2) + M * M) * x[t-1] / 4 + [v[1] / 10, M[1, 0]], s);
  y[t] ~ normal([dot(x[t], v), x[t][0] * M[0][1] + max(x[t][1], 0), logistic(x[t][1])],
                [0.5, 1, 2]);
}
)";

} // namespace

TEST_CASE("vector and matrix expressions compile to the right arithmetic", "[e2e][codegen]") {
  const std::string& exe = model_exe("vecops", kVecOps);
  const std::string sim = scratch_path("vecops-sim.csv");
  run_ok({exe, "simulate", "--T", "20000", "--seed", "9", "--out", sim});
  Table t = read_table(sim);
  std::vector<double> x0 = t.column("x[0]"), x1 = t.column("x[1]");
  std::vector<double> y0 = t.column("y[0]"), y1 = t.column("y[1]"), y2 = t.column("y[2]");

  const double M[2][2] = {{0.5, 0.2}, {-0.1, 0.4}}, v[2] = {1, -2}, s = 0.3;
  // (I + M M) / 4
  double A[2][2];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      A[i][j] = ((i == j) + M[i][0] * M[0][j] + M[i][1] * M[1][j]) / 4;
  const double c[2] = {v[1] / 10, M[1][0]};

  std::vector<double> e0, e1, u0, u1, u2;
  for (size_t n = 1; n < x0.size(); ++n) {
    e0.push_back((x0[n] - (A[0][0] * x0[n - 1] + A[0][1] * x1[n - 1] + c[0])) / s);
    e1.push_back((x1[n] - (A[1][0] * x0[n - 1] + A[1][1] * x1[n - 1] + c[1])) / s);
  }
  for (size_t n = 0; n < x0.size(); ++n) {
    u0.push_back((y0[n] - (x0[n] * v[0] + x1[n] * v[1])) / 0.5);
    u1.push_back(y1[n] - (x0[n] * M[0][1] + std::max(x1[n], 0.0)));
    u2.push_back((y2[n] - 1 / (1 + std::exp(-x1[n]))) / 2);
  }
  check_standard_normal(e0, "x[0] innovations");
  check_standard_normal(e1, "x[1] innovations");
  check_standard_normal(u0, "y[0] = dot(x, v) + noise");
  check_standard_normal(u1, "y[1] = x[0] M[0][1] + max(x[1], 0) + noise");
  check_standard_normal(u2, "y[2] = logistic(x[1]) + noise");
}
