// The built-in functions compiled into kernels: a model observes each function of a random state
// with a negligible noise (1e-30), so each simulated observation is the kernel's value of the
// function at the simulated state, which must match the C library twin computed here (within a
// few ulps: kernels may call the vector variants of libm).
#include "../reference_math.h"
#include "support.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

using namespace e2e;
using ssm::test::reference_log_sum_exp;
using ssm::test::reference_softmax;

namespace {

const char* const kFunctions = R"(
model builtins {
  state x : vector[3];
  obs ya : real;
  obs yb : real;
  obs yc : real;
  obs yd : real;
  obs ye : real;
  obs yf : real;
  obs yg : real;
  obs yh : real;
  obs yi : real;
  obs yj : real;
  obs yk : real;
  obs yl : real;
  obs ys : vector[3];
  x[0] ~ normal(0, 3);
  x[t] ~ normal(0.5 * x[t-1], 3);
  ya[t] ~ normal(atan2(x[t][0], x[t][1]), 1e-30);
  yb[t] ~ normal(atan(x[t][0]), 1e-30);
  yc[t] ~ normal(tan(x[t][0]), 1e-30);
  yd[t] ~ normal(asin(tanh(x[t][0])), 1e-30);
  ye[t] ~ normal(acos(tanh(x[t][1])), 1e-30);
  yf[t] ~ normal(log1p(abs(x[t][0])), 1e-30);
  yg[t] ~ normal(expm1(x[t][0]), 1e-30);
  yh[t] ~ normal(lgamma(abs(x[t][0]) + 0.01), 1e-30);
  yi[t] ~ normal(erf(x[t][0]), 1e-30);
  yj[t] ~ normal(Phi(4 * x[t][0]), 1e-30);
  yk[t] ~ normal(log_sum_exp(x[t]), 1e-30);
  yl[t] ~ normal(log_sum_exp(400 * x[t]), 1e-30);
  ys[t] ~ normal(softmax(300 * x[t]), 1e-30);
}
)";

void check_close(double got, double want, const std::string& what) {
  INFO(what << ": kernel " << got << ", C library " << want);
  if (std::isnan(want)) {
    CHECK(std::isnan(got));
    return;
  }
  CHECK(std::abs(got - want) <= 1e-13 * std::max(1.0, std::abs(want)));
}

} // namespace

TEST_CASE("built-in functions compile to their C library twins", "[e2e][codegen][builtins]") {
  const std::string& exe = model_exe("builtins", kFunctions);
  const std::string sim = scratch_path("builtins-sim.csv");
  run_ok({exe, "simulate", "--T", "400", "--seed", "5", "--out", sim});
  Table t = read_table(sim);
  const std::vector<double> x0 = t.column("x[0]"), x1 = t.column("x[1]"), x2 = t.column("x[2]");
  REQUIRE(x0.size() == 400);
  auto col = [&](const char* name) { return t.column(name); };
  const auto ya = col("ya"), yb = col("yb"), yc = col("yc"), yd = col("yd"), ye = col("ye"),
             yf = col("yf"), yg = col("yg"), yh = col("yh"), yi = col("yi"), yj = col("yj"),
             yk = col("yk"), yl = col("yl");
  const auto s0 = col("ys[0]"), s1 = col("ys[1]"), s2 = col("ys[2]");
  for (size_t n = 0; n < x0.size(); ++n) {
    const double a = x0[n], b = x1[n];
    check_close(ya[n], std::atan2(a, b), "atan2");
    check_close(yb[n], std::atan(a), "atan");
    check_close(yc[n], std::tan(a), "tan");
    check_close(yd[n], std::asin(std::tanh(a)), "asin");
    check_close(ye[n], std::acos(std::tanh(b)), "acos");
    check_close(yf[n], std::log1p(std::abs(a)), "log1p");
    check_close(yg[n], std::expm1(a), "expm1");
    check_close(yh[n], std::lgamma(std::abs(a) + 0.01), "lgamma");
    check_close(yi[n], std::erf(a), "erf");
    check_close(yj[n], 0.5 * std::erfc(-4 * a / std::sqrt(2.0)), "Phi");
    const std::vector<double> v = {a, b, x2[n]};
    check_close(yk[n], reference_log_sum_exp(v), "log_sum_exp");
    // exp(400 x) overflows for x > 1.8: only the shifted sum stays finite.
    const double big = reference_log_sum_exp({400 * a, 400 * b, 400 * x2[n]});
    REQUIRE(std::isfinite(yl[n]));
    check_close(yl[n], big, "log_sum_exp of large values");
    const std::vector<double> p = reference_softmax({300 * a, 300 * b, 300 * x2[n]});
    const double s[3] = {s0[n], s1[n], s2[n]};
    for (int i = 0; i < 3; ++i) {
      INFO("softmax component " << i << " at t = " << n);
      CHECK(std::abs(s[i] - p[i]) <= 1e-13);
    }
  }
}
