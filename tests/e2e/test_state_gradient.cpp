// The compiled state_gradient kernel (kernel/abi.h) against central finite differences of the
// compiled log-density kernels: a harness written here is linked with the object `ssmc build
// --emit=obj` writes and prints, per model, per step kind and per state component, the kernel's
// value and the difference quotient of log p(x_t | x_{t-1}) + log p(y_t | x_t) (initial at t = 0),
// with the observation present, missing, and missing in its first component only; and the same
// of the prev_state_gradient kernel, in x_{t-1} (0 at t = 0).
#include "support.h"

#include <catch2/catch.hpp>

#include <sstream>
#include <string>

using namespace e2e;

namespace {

const char* kStateGradientHarness = R"(
#include "kernel/abi.h"
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
extern "C" const ssm_model ssm_model_table;
int main(int argc, char** argv) {
  const ssm_model& m = ssm_model_table;
  const int ns = std::atoi(argv[1]), nt = std::atoi(argv[2]), no = std::atoi(argv[3]);
  if (!m.state_gradient) { std::printf("absent\n"); return 0; }
  std::vector<double> theta(nt), x(ns), prev(ns), y(no);
  for (int k = 0; k < nt; ++k) theta[k] = std::atof(argv[4 + k]);
  for (int c = 0; c < ns; ++c) { x[c] = 0.3 + 0.1 * c; prev[c] = 0.2 - 0.05 * c; }
  for (int missing = 0; missing < 3; ++missing) { // none, all, the first component
    for (int k = 0; k < no; ++k) y[k] = missing == 1 || (missing == 2 && k == 0) ? NAN : 0.4 + 0.2 * k;
    for (int t = 0; t < 2; ++t) {
      auto logp = [&](const std::vector<double>& at) {
        double a = 0, b = 0;
        if (t == 0) m.init_logpdf(theta.data(), 0, 1, 1, at.data(), &a);
        else m.transition_logpdf(theta.data(), t, 0, 1, 1, prev.data(), nullptr, at.data(), &a);
        m.obs_logpdf(theta.data(), t, 0, 1, 1, at.data(), y.data(), &b);
        return a + b;
      };
      std::vector<double> g(ns), nan_prev(ns, NAN);
      m.state_gradient(theta.data(), t, 0, 1, 1, t == 0 ? nan_prev.data() : prev.data(), nullptr,
                       x.data(), y.data(), g.data());
      for (int c = 0; c < ns; ++c) {
        const double h = 1e-6;
        std::vector<double> up = x, down = x;
        up[c] += h; down[c] -= h;
        std::printf("%d %d 0 %d %.17g %.17g\n", missing, t, c, g[c], (logp(up) - logp(down)) / (2 * h));
      }
      // In x[t-1]: the transition's (nothing at t = 0).
      if (!m.prev_state_gradient) { std::printf("no prev\n"); return 0; }
      m.prev_state_gradient(theta.data(), t, 0, 1, 1, t == 0 ? nan_prev.data() : prev.data(),
                            nullptr, x.data(), y.data(), g.data());
      for (int c = 0; c < ns; ++c) {
        const double h = 1e-6, keep = prev[c];
        double quotient = 0;
        if (t > 0) {
          prev[c] = keep + h; const double up = logp(x);
          prev[c] = keep - h; const double down = logp(x);
          quotient = (up - down) / (2 * h);
        }
        prev[c] = keep;
        std::printf("%d %d 1 %d %.17g %.17g\n", missing, t, c, g[c], quotient);
      }
    }
  }
}
)";

// Builds the model's object and the harness and runs it with theta: its output.
std::string run_harness(const std::string& name, const std::string& source, int n_state, int n_obs,
                        const std::vector<std::string>& theta) {
  const std::string src = scratch_path(name + ".ssm");
  write_file(src, source);
  std::vector<std::string> args = {std::to_string(n_state), std::to_string(theta.size()),
                                   std::to_string(n_obs)};
  args.insert(args.end(), theta.begin(), theta.end());
  return run_kernel_harness(name, src, kStateGradientHarness, args);
}

// Checks every line of the harness's output: the kernel against the difference quotient.
void check_model(const std::string& name, const std::string& source, int n_state, int n_obs,
                 const std::vector<std::string>& theta) {
  std::istringstream out(run_harness(name, source, n_state, n_obs, theta));
  int missing = 0, t = 0, wrt = 0, c = 0, lines = 0;
  double kernel = 0, quotient = 0;
  while (out >> missing >> t >> wrt >> c >> kernel >> quotient) {
    INFO(name << ": missing " << missing << ", t " << t << ", in x[t" << (wrt ? "-1" : "")
              << "], component " << c);
    CHECK(kernel == Approx(quotient).epsilon(1e-6).margin(1e-6));
    ++lines;
  }
  CHECK(lines == 12 * n_state); // 3 missing patterns x 2 steps x (x[t], x[t-1])
}

} // namespace

TEST_CASE("the state gradient kernels are the derivatives of the step's log-densities",
          "[state-gradient][codegen]") {
  // Stochastic volatility: a nonlinear observation scale.
  check_model("sg_sv", R"(
model sg_sv {
  param mu = -1; param rho = 0.9; param sigma = 0.3;
  state x : real;
  obs y : real;
  x[0] ~ normal(mu, sigma / sqrt(1 - rho^2));
  x[t] ~ normal(mu + rho * (x[t-1] - mu), sigma);
  y[t] ~ normal(0, exp(x[t] / 2));
}
)",
              1, 1, {"-1", "0.9", "0.3"});
  // Two states, one read by the other's transition at t, a vector observation with a gamma and a
  // Student-t component.
  check_model("sg_two", R"(
model sg_two {
  param a = 0.7; param s = 0.5;
  state u : real;
  state v : real;
  obs y : vector[2];
  u[0] ~ normal(0, 1);
  v[0] ~ normal(u[0], 1);
  u[t] ~ normal(a * u[t-1], s);
  v[t] ~ normal(sin(u[t]) + v[t-1], s * (1 + u[t]^2));
  y[t] ~ normal([u[t] * v[t], exp(v[t])], [0.5, 1 + v[t]^2]);
}
)",
              2, 2, {"0.7", "0.5"});
}

TEST_CASE("a deterministic relation leaves the model without a state gradient",
          "[state-gradient][codegen]") {
  // x[t-2] makes a hidden copy of x[t-1], a dirac: no density in x[t].
  const std::string source = R"(
model sg_lag2 {
  param a = 0.5;
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ normal(a * x[t-1] + 0.2 * x[t-2], 1);
  y[t] ~ normal(x[t], 1);
}
)";
  CHECK(run_harness("sg_lag2", source, 2, 1, {"0.5"}) == "absent\n");
}
