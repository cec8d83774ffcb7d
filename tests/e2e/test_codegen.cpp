// Code generation of vector and matrix expressions: a model that uses literals, both indexing
// forms, dot, matrix-matrix and matrix-vector products, eye, max and logistic. Its simulated
// residuals, recomputed here from the same formulas, must be exactly standard normal; a wrong
// index or product shifts their mean by many standard errors. And products too large to write out
// term by term, which compile to loops outside the particle loop: the kernels' densities and
// matrices against the same arithmetic written here.
#include "support.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <sstream>

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

// 4 x 20 and 20 x 20 parameter matrices: C * C (8,000 products, over kUnrolledProducts) before the
// particle loop, a loop there; its product with x[t-1] (400) and M * x[t] (80) inside it,
// unrolled so that the particle loop vectorises. Small, to compile quickly, but not so small that
// LLVM unrolls the loop (it does at 16 x 16, and the IR then has no matmul.k to check for).
const char* const kBigProducts = R"(
model bigmat {
  param M : matrix[4, 20];
  param C : matrix[20, 20];
  state x : vector[20];
  obs   y : vector[4];
  x[0] ~ normal(0, 1);
  x[t] ~ normal(C * C * x[t-1] / 20, 1);
  y[t] ~ normal(M * x[t], 1);
}
)";

// Prints "what index kernel reference" lines: the transition and observation log-densities of
// three particles (also through ancestors), and the linear-Gaussian kernel's F and H.
const char* const kBigProductHarness = R"(
#include "kernel/abi.h"
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>
extern "C" const ssm_model ssm_model_table;
int main() {
  const ssm_model& m = ssm_model_table;
  const int r = 4, d = 20, np = 3;
  std::vector<double> theta(r * d + d * d);
  for (size_t k = 0; k < theta.size(); ++k) theta[k] = std::sin(1.0 + 0.37 * k);
  const double* M = theta.data();
  const double* C = theta.data() + r * d;
  std::vector<double> prev(d * np), x(d * np), y(r), out(np);
  for (int c = 0; c < d; ++c)
    for (int n = 0; n < np; ++n) {
      prev[c * np + n] = std::cos(0.1 * c + n);
      x[c * np + n] = std::sin(0.2 * c - n);
    }
  for (int k = 0; k < r; ++k) y[k] = 0.3 * k - 5;
  std::vector<double> cc(d * d), f(d * d);
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < d; ++j) {
      double s = 0;
      for (int k = 0; k < d; ++k) s += C[i * d + k] * C[k * d + j];
      cc[i * d + j] = s;
      f[i * d + j] = s / d;
    }
  const double half_log_2pi = 0.5 * std::log(2 * M_PI);
  const int64_t ancestors[np] = {2, 0, 1};
  for (int gather = 0; gather < 2; ++gather) {
    m.transition_logpdf(theta.data(), 1, 0, np, np, prev.data(), gather ? ancestors : nullptr,
                        x.data(), out.data());
    for (int n = 0; n < np; ++n) {
      const int a = gather ? ancestors[n] : n;
      double lp = 0;
      for (int i = 0; i < d; ++i) {
        double mean = 0;
        for (int k = 0; k < d; ++k) mean += cc[i * d + k] * prev[k * np + a];
        const double z = x[i * np + n] - mean / d;
        lp += -0.5 * z * z - half_log_2pi;
      }
      std::printf("transition%s %d %.17g %.17g\n", gather ? "-ancestors" : "", n, out[n], lp);
    }
  }
  m.obs_logpdf(theta.data(), 1, 0, np, np, x.data(), y.data(), out.data());
  for (int n = 0; n < np; ++n) {
    double lp = 0;
    for (int i = 0; i < r; ++i) {
      double mean = 0;
      for (int k = 0; k < d; ++k) mean += M[i * d + k] * x[k * np + n];
      lp += -0.5 * (y[i] - mean) * (y[i] - mean) - half_log_2pi;
    }
    std::printf("observation %d %.17g %.17g\n", n, out[n], lp);
  }
  if (!m.linear_gaussian) return 1;
  std::vector<double> lg(d + 3 * d * d + d + r * d + r + r * r);
  m.linear_gaussian(theta.data(), 1, lg.data());
  for (int e = 0; e < d * d; ++e) std::printf("F %d %.17g %.17g\n", e, lg[d + d * d + e], f[e]);
  for (int e = 0; e < r * d; ++e)
    std::printf("H %d %.17g %.17g\n", e, lg[d + 3 * d * d + d + e], M[e]);
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

TEST_CASE("products too large to unroll compile to loops with the same arithmetic",
          "[e2e][codegen]") {
  const std::string src = scratch_path("bigmat.ssm");
  write_file(src, kBigProducts);
  const std::string ir = run_ok({ssmc_path(), "build", src, "--emit=llvm", "-o", "-"}).out;
  CHECK(ir.find("matmul.k") != std::string::npos); // C * C took the loop

  std::istringstream out(run_kernel_harness("bigmat", src, kBigProductHarness, {}));
  std::string what;
  int index = 0, lines = 0;
  double kernel = 0, reference = 0;
  while (out >> what >> index >> kernel >> reference) {
    INFO(what << " " << index);
    CHECK(kernel == Approx(reference).epsilon(1e-12).margin(1e-14));
    ++lines;
  }
  CHECK(lines == 9 + 400 + 80);
}

namespace {

// The 10-D example's score kernel (400 outputs; its particle loop too long to vectorise, so one
// loop serves calls with and without ancestors): for particles n = 0..4 with ancestors a, the
// terms must be those of the same call without ancestors on x_prev gathered by hand, bit for bit.
const char* const kOneLoopHarness = R"(
#include "kernel/abi.h"
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>
extern "C" const ssm_model ssm_model_table;
int main() {
  const ssm_model& m = ssm_model_table;
  const int D = 10, N = 5, P = 400;
  std::vector<double> theta(P);
  for (int i = 0; i < D; ++i)
    for (int j = 0; j < D; ++j) { // A, Q, B, R in declaration order, each row-major
      theta[i * D + j] = (i == j ? 0.5 : 0.0) + 0.01 * (i - j);
      theta[100 + i * D + j] = i == j ? 1.0 : 0.1;
      theta[200 + i * D + j] = (i == j ? 1.0 : 0.0) + 0.02 * j;
      theta[300 + i * D + j] = i == j ? 2.0 : 0.1;
    }
  std::vector<double> prev(D * N), gathered(D * N), x(D * N), y(D);
  const int64_t ancestors[N] = {3, 0, 4, 1, 3};
  for (int c = 0; c < D; ++c) {
    y[c] = 0.3 - 0.1 * c;
    for (int n = 0; n < N; ++n) {
      prev[c * N + n] = 0.1 * c - 0.2 * n;
      x[c * N + n] = 0.05 * c * n - 0.3;
    }
  }
  for (int c = 0; c < D; ++c)
    for (int n = 0; n < N; ++n) gathered[c * N + n] = prev[c * N + ancestors[n]];
  std::vector<double> with(P * N), without(P * N);
  m.score_terms(theta.data(), 1, 0, N, N, prev.data(), ancestors, x.data(), y.data(), with.data());
  m.score_terms(theta.data(), 1, 0, N, N, gathered.data(), nullptr, x.data(), y.data(),
                without.data());
  int differ = 0, nonfinite = 0, moved = 0;
  for (int k = 0; k < P * N; ++k) {
    differ += with[k] != without[k];
    nonfinite += !std::isfinite(with[k]);
    moved += k % N > 0 && with[k] != with[k - 1]; // particles' terms are not all alike
  }
  std::printf("%d %d %d\n", differ, nonfinite, moved);
}
)";

} // namespace

TEST_CASE("a score kernel too long to vectorise reads ancestors in its one loop",
          "[e2e][codegen]") {
  std::istringstream out(
      run_kernel_harness("lgssm_one_loop", example_path("lgssm.ssm"), kOneLoopHarness, {}));
  int differ = -1, nonfinite = -1, moved = -1;
  REQUIRE(out >> differ >> nonfinite >> moved);
  CHECK(differ == 0);
  CHECK(nonfinite == 0);
  CHECK(moved > 1000); // 400 terms x 4 neighbouring pairs, most of which read x_prev or x
}
