// The compiled diffusion_terms kernel's parametrix and gradient rows (kernel/abi.h) against central
// finite differences of the same kernel's other rows: a harness written here is linked with the
// object `ssmc build --emit=obj` writes, evaluates the kernel at a point and at points (or
// parameters) around it, and prints, per row, the kernel's value and the difference quotient.
// The parametrix rows, sum_i d gamma_il / dx_i (l < d) and sum_il d^2 gamma_il / dx_i dx_l of
// gamma = sigma sigma^T from the coefficient rows: real, vector and matrix coefficients that read
// the path, in one and two dimensions. The gradient rows, d drift_i / d theta_k and d (div drift)
// / d theta_k from the drift and Jacobian rows, for scalar and vector parameters.
#include "support.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

using namespace e2e;

namespace {

const char* kTermsHarness = R"(
#include "kernel/abi.h"
#include <cstdio>
#include <cstdlib>
#include <vector>
extern "C" const ssm_model ssm_model_table;
// argv: d, the coefficient's size, the rows before the parametrix ones, then the point.
int main(int argc, char** argv) {
  const ssm_model& m = ssm_model_table;
  const int d = std::atoi(argv[1]), ncoef = std::atoi(argv[2]), first = std::atoi(argv[3]);
  std::vector<double> x0(d);
  for (int c = 0; c < d; ++c) x0[c] = std::atof(argv[4 + c]);
  const int rows = first + d + 1;
  auto terms = [&](const std::vector<double>& x) {
    std::vector<double> out(rows);
    m.diffusion_terms(nullptr, 1, 0, 1, 1, nullptr, nullptr, x.data(), nullptr, out.data());
    return out;
  };
  // gamma_il at x from the coefficient rows (after the drift and its Jacobian).
  auto gamma = [&](const std::vector<double>& x, int i, int l) {
    const std::vector<double> r = terms(x);
    const double* s = &r[d + d * d];
    if (ncoef == 1) return i == l ? s[0] * s[0] : 0.0;
    if (ncoef == d) return i == l ? s[i] * s[i] : 0.0;
    double sum = 0;
    for (int k = 0; k < d; ++k) sum += s[i * d + k] * s[l * d + k];
    return sum;
  };
  const double h = 1e-4;
  auto shifted = [&](int i, double a, int l, double b) {
    std::vector<double> x = x0;
    x[i] += a;
    x[l] += b;
    return x;
  };
  const std::vector<double> at = terms(x0);
  double second = 0;
  for (int l = 0; l < d; ++l) {
    double first_sum = 0;
    for (int i = 0; i < d; ++i)
      first_sum += (gamma(shifted(i, h, i, 0), i, l) - gamma(shifted(i, -h, i, 0), i, l)) / (2 * h);
    std::printf("c1 %d %.12g %.12g\n", l, at[first + l], first_sum);
    for (int i = 0; i < d; ++i)
      second += (gamma(shifted(i, h, l, h), i, l) - gamma(shifted(i, h, l, -h), i, l) -
                 gamma(shifted(i, -h, l, h), i, l) + gamma(shifted(i, -h, l, -h), i, l)) /
                (4 * h * h);
  }
  std::printf("c2 0 %.12g %.12g\n", at[first + d], second);
}
)";

// Writes the model to the scratch directory: its path, and its structure report's SDE section.
std::pair<std::string, nlohmann::json> sde_model(const std::string& name,
                                                 const std::string& source) {
  const std::string src = scratch_path(name + ".ssm");
  write_file(src, source);
  const nlohmann::json structure = nlohmann::json::parse(
      run_ok({ssmc_path(), "check", "--structure", "--format", "json", src}).out);
  return {src, structure["sde"]};
}

// The number of the coefficient's elements as written (1, dim or dim x dim).
int coefficient_size(const nlohmann::json& sde) {
  const int d = sde["dim"];
  const std::string kind = sde["coefficient"];
  return kind == "matrix" ? d * d : kind == "vector" ? d : 1;
}

// Checks each "what index kernel quotient" line of a harness's output: the kernel's row within
// `tolerance` (relative) of the difference quotient and, with `all_move`, away from 0 (so that
// a misplaced row shows). Returns the number of lines.
int check_harness_rows(const std::string& name, const std::string& output, double tolerance,
                       bool all_move) {
  std::istringstream out(output);
  std::string what;
  int index = 0, lines = 0;
  double kernel = 0, quotient = 0;
  while (out >> what >> index >> kernel >> quotient) {
    INFO(name << ": " << what << "[" << index << "] kernel " << kernel << ", difference quotient "
              << quotient);
    CHECK(std::fabs(kernel - quotient) <= tolerance * (1 + std::fabs(quotient)));
    if (all_move)
      CHECK(std::fabs(kernel) > 1e-3);
    ++lines;
  }
  return lines;
}

// Builds the model's object and the harness, runs it at the point, and checks every row against
// its difference quotient (relative 1e-5: the quotients' error is O(h^2)).
void check_rows(const std::string& name, const std::string& source,
                const std::vector<std::string>& point) {
  const auto [src, sde] = sde_model(name, source);
  REQUIRE(sde["parametrix"]["available"] == true);
  const int d = sde["dim"], rows = sde["parametrix"]["rows"];
  REQUIRE(rows == d + 1);
  const int gradient =
      sde["gradient"]["available"] == true
          ? sde["gradient"]["rows"].get<int>() + sde["gradient"]["coefficient_rows"].get<int>()
          : 0;
  const int ncoef = coefficient_size(sde), first = d + d * d + ncoef + 1 + 4 + gradient;
  std::vector<std::string> args = {std::to_string(d), std::to_string(ncoef), std::to_string(first)};
  args.insert(args.end(), point.begin(), point.end());
  CHECK(check_harness_rows(name, run_kernel_harness(name, src, kTermsHarness, args), 1e-5, false) ==
        d + 1);
}

// argv: d, K (theta components), the coefficient's size, then theta (K) and the point (d). Prints
// per gradient row its value and the central difference in theta of the drift (or of the
// Jacobian's trace).
const char* kGradientHarness = R"(
#include "kernel/abi.h"
#include <cstdio>
#include <cstdlib>
#include <vector>
extern "C" const ssm_model ssm_model_table;
int main(int argc, char** argv) {
  const ssm_model& m = ssm_model_table;
  const int d = std::atoi(argv[1]), K = std::atoi(argv[2]), ncoef = std::atoi(argv[3]);
  std::vector<double> theta(K), x(d);
  for (int k = 0; k < K; ++k) theta[k] = std::atof(argv[4 + k]);
  for (int c = 0; c < d; ++c) x[c] = std::atof(argv[4 + K + c]);
  const int first = d + d * d + ncoef + 1 + 4, rows = first + (d + 1) * K + d + 1;
  auto terms = [&](const std::vector<double>& th) {
    std::vector<double> out(rows);
    m.diffusion_terms(th.data(), 1, 0, 1, 1, nullptr, nullptr, x.data(), nullptr, out.data());
    return out;
  };
  const std::vector<double> at = terms(theta);
  const double h = 1e-5;
  for (int k = 0; k < K; ++k) {
    std::vector<double> up = theta, down = theta;
    up[k] += h;
    down[k] -= h;
    const std::vector<double> a = terms(up), b = terms(down);
    double divergence = 0;
    for (int i = 0; i < d; ++i) {
      std::printf("drift %d %.12g %.12g\n", i * K + k, at[first + i * K + k],
                  (a[i] - b[i]) / (2 * h));
      divergence += (a[d + i * d + i] - b[d + i * d + i]) / (2 * h);
    }
    std::printf("divergence %d %.12g %.12g\n", k, at[first + d * K + k], divergence);
  }
}
)";

// Builds the model, checks its gradient rows' count ((dim + 1) x the theta size), and each row at
// the point against the central difference in theta at `theta` (the model's parameters in their
// frame order); with `all_move`, every row is also away from 0 (so a misplaced row shows).
void check_gradient_rows(const std::string& name, const std::string& source, int K,
                         const std::vector<std::string>& theta,
                         const std::vector<std::string>& point, bool all_move) {
  const auto [src, sde] = sde_model(name, source);
  REQUIRE(sde["gradient"]["available"] == true);
  const int d = sde["dim"];
  REQUIRE(sde["gradient"]["rows"] == (d + 1) * K);
  std::vector<std::string> args = {std::to_string(d), std::to_string(K),
                                   std::to_string(coefficient_size(sde))};
  args.insert(args.end(), theta.begin(), theta.end());
  args.insert(args.end(), point.begin(), point.end());
  CHECK(check_harness_rows(name, run_kernel_harness(name, src, kGradientHarness, args), 1e-6,
                           all_move) == (d + 1) * K);
}

// argv: K (theta components), theta (K), the point (a scalar SDE). Prints the coefficient's
// gradient rows (a scalar coefficient s(theta) constant in the path): each d s / d theta_k and
// drift'', with the central differences of the coefficient's row in theta and of the Jacobian's
// in x.
const char* kCoefficientHarness = R"(
#include "kernel/abi.h"
#include <cstdio>
#include <cstdlib>
#include <vector>
extern "C" const ssm_model ssm_model_table;
int main(int argc, char** argv) {
  const ssm_model& m = ssm_model_table;
  const int K = std::atoi(argv[1]);
  std::vector<double> theta(K);
  for (int k = 0; k < K; ++k) theta[k] = std::atof(argv[2 + k]);
  const double x0 = std::atof(argv[2 + K]);
  const int first = 1 + 1 + 1 + 1 + 4 + 2 * K, rows = first + K + 1 + 2;
  auto terms = [&](const std::vector<double>& th, double x) {
    std::vector<double> out(rows);
    m.diffusion_terms(th.data(), 1, 0, 1, 1, nullptr, nullptr, &x, nullptr, out.data());
    return out;
  };
  const std::vector<double> at = terms(theta, x0);
  const double h = 1e-5;
  for (int k = 0; k < K; ++k) {
    std::vector<double> up = theta, down = theta;
    up[k] += h;
    down[k] -= h;
    std::printf("coefficient %d %.12g %.12g\n", k, at[first + k],
                (terms(up, x0)[2] - terms(down, x0)[2]) / (2 * h));
  }
  std::printf("drift'' 0 %.12g %.12g\n", at[first + K],
              (terms(theta, x0 + h)[1] - terms(theta, x0 - h)[1]) / (2 * h));
}
)";

} // namespace

TEST_CASE("diffusion: a constant coefficient's derivatives in the parameters, and drift''",
          "[e2e][sde]") {
  // The rows the General Poisson estimate's derivative in s reads (gradient.coefficient_rows).
  const auto [src, sde] = sde_model("terms_scale", R"(
model terms_scale {
  param theta : real = 0.785;
  param s : real(0, inf) = 0.8;
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ diffusion(s * sin(x[t] - theta) + theta, 1.5 * s, 0.5);
  y[t] ~ normal(x[t], 1);
}
)");
  REQUIRE(sde["gradient"]["available"] == true);
  REQUIRE(sde["gradient"]["coefficient_rows"] == 3);
  CHECK(check_harness_rows("terms_scale",
                           run_kernel_harness("terms_scale", src, kCoefficientHarness,
                                              {"2", "0.785", "0.8", "0.6"}),
                           1e-6, false) == 3); // d s / d theta is exactly 0
}

TEST_CASE("diffusion: the gradient rows are the drift's derivatives in the parameters",
          "[e2e][sde]") {
  // A vector SDE whose drift reads a scalar and a vector parameter nonlinearly, and whose
  // Jacobian's trace reads them too; the coefficient reads the path (gradient rows do not need a
  // constant one).
  check_gradient_rows("terms_gradient", R"(
model terms_gradient {
  param a : real = 1.0;
  param b : vector[2] = [0.3, -0.2];
  state x : vector[2];
  obs y : vector[2];
  x[0] ~ mvnormal([1, 1], [[1, 0], [0, 1]]);
  x[t] ~ diffusion([a * sin(x[t][1]) - b[0] * x[t][0] ^ 2 + b[1] * x[t][1],
                    b[1] * x[t][0] * x[t][1] - a * a * x[t][1] + b[0] * x[t][0]],
                   [0.5 + 0.1 * x[t][0] ^ 2, 0.4], 0.5);
  y[t] ~ normal(x[t], 1);
}
)",
                      3, {"1.0", "0.3", "-0.2"}, {"0.7", "-0.4"}, true);
  // A matrix parameter (its components in the frame's order), some rows exactly 0.
  check_gradient_rows("terms_gradient_matrix", R"(
model terms_gradient_matrix {
  param K : matrix[2, 2] = [[1.0, 0.3], [-0.4, 0.6]];
  state x : vector[2];
  obs y : vector[2];
  x[0] ~ mvnormal([0, 0], [[1, 0], [0, 1]]);
  x[t] ~ diffusion(-(K * x[t]) + [sin(K[0, 0] * x[t][1]), 0], [[0.5, 0], [0.2, 0.4]], 0.5);
  y[t] ~ normal(x[t], 1);
}
)",
                      4, {"1.0", "0.3", "-0.4", "0.6"}, {"0.7", "-0.4"}, false);
}

TEST_CASE("diffusion: the parametrix rows are the divergences of sigma sigma^T", "[e2e][sde]") {
  // A real coefficient that reads the path (not a constant: the rows are not 0).
  check_rows("terms_real", R"(
model terms_real {
  state x : real;
  obs y : real;
  x[0] ~ normal(1, 1);
  x[t] ~ diffusion(-x[t], 0.3 + sin(x[t]) ^ 2, 0.5);
  y[t] ~ normal(x[t], 1);
}
)",
             {"0.7"});
  // A vector coefficient, each component reading both.
  check_rows("terms_vector", R"(
model terms_vector {
  state x : vector[2];
  obs y : vector[2];
  x[0] ~ mvnormal([1, 1], [[1, 0], [0, 1]]);
  x[t] ~ diffusion(-x[t], [1 + x[t][0] * x[t][1], exp(x[t][0] / 3)], 0.5);
  y[t] ~ normal(x[t], 1);
}
)",
             {"0.4", "-0.8"});
  // The stochastic Lotka-Volterra model's coefficient, diag(x) G, and a full matrix whose
  // entries read both components.
  check_rows("terms_diag_g", R"(
model terms_diag_g {
  const G = [[0.5, 0.1], [0.1, 0.2]];
  state x : vector[2];
  obs y : vector[2];
  x[0] ~ mvnormal([50, 20], [[1, 0], [0, 1]]);
  x[t] ~ diffusion([x[t][0] * (12 - 0.05 * x[t][0] - x[t][1]), x[t][1] * (0.2 * x[t][0] - 2)],
                   [[x[t][0] * G[0, 0], x[t][0] * G[0, 1]], [x[t][1] * G[1, 0], x[t][1] * G[1, 1]]],
                   0.01);
  y[t] ~ normal(x[t], 1);
}
)",
             {"30", "12"});
  check_rows("terms_matrix", R"(
model terms_matrix {
  state x : vector[2];
  obs y : vector[2];
  x[0] ~ mvnormal([1, 1], [[1, 0], [0, 1]]);
  x[t] ~ diffusion(-x[t], [[1 + 0.2 * x[t][1] ^ 2, 0.3 * x[t][0]], [tanh(x[t][0]), 2 + cos(x[t][1])]],
                   0.5);
  y[t] ~ normal(x[t], 1);
}
)",
             {"0.6", "-0.3"});
}
