// A plate model's kernels in the item layout (kernel/abi.h, ssm_item_kernel_fn) against the step
// layout's, which evaluate one item per call: a harness written here is linked with the object
// `ssmc build --emit=obj` writes, evaluates both on a batch of items (their own observations,
// some missing, and inputs; item 0, whose step is the initial one, among them) and prints, per
// kernel, how many numbers it compared and the largest relative difference. The item layout's
// call covers the batch in two ranges, so that a range that does not start at 0 and the vector
// loop's remainder are both exercised; the step layout runs one particle at a time, its loop's
// scalar path.
#include "support.h"

#include <catch2/catch.hpp>

#include <map>
#include <sstream>
#include <string>
#include <utility>

using namespace e2e;

namespace {

const char* kItemHarness = R"(
#include "kernel/abi.h"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
extern "C" const ssm_model ssm_model_table;
int main(int argc, char** argv) {
  const ssm_model& m = ssm_model_table;
  // states, observations, inputs, guide outputs, items, then theta
  const int ns = std::atoi(argv[1]), no = std::atoi(argv[2]), nu = std::atoi(argv[3]),
            na = std::atoi(argv[4]), N = std::atoi(argv[5]), nt = argc - 6;
  std::vector<double> theta(nt);
  for (int k = 0; k < nt; ++k) theta[k] = std::atof(argv[6 + k]);
  unsigned long long state = 12345;
  auto uniform = [&] { state = state * 6364136223846793005ULL + 1442695040888963407ULL;
                       return static_cast<double>(state >> 11) / 9007199254740992.0; };
  // Per step t: observations (components 0..2 real, 3..4 binary, one in five missing), inputs.
  std::vector<double> y(N * no), u(N * nu), x(N * ns);
  for (int t = 0; t < N; ++t) {
    for (int k = 0; k < no; ++k)
      y[t * no + k] = (t + k) % 5 == 0 ? NAN : (k < 3 ? 2 * uniform() - 1 : (uniform() < 0.5));
    for (int k = 0; k < nu; ++k) u[t * nu + k] = 0.5 + uniform();
  }
  std::vector<long long> items(N); // a permutation of the steps, 0 among them
  for (int i = 0; i < N; ++i) items[i] = (7LL * i + 3) % N;
  for (double& v : x) v = 3 * uniform() - 1.5;
  const int outs[] = {1, 1, ns, nt, na};
  const char* names[] = {"prior_logpdf", "obs_logpdf", "state_gradient", "score_terms", "guide_args"};
  // The step layout: item i's frame (theta, its inputs, no previous observation), one call each.
  std::vector<std::vector<double>> step(5);
  for (int k = 0; k < 5; ++k) step[k].assign(outs[k] * N, NAN);
  for (int i = 0; i < N; ++i) {
    const long long t = items[i];
    std::vector<double> frame(theta);
    for (int k = 0; k < nu; ++k) frame.push_back(u[t * nu + k]);
    for (int k = 0; k < no; ++k) frame.push_back(NAN);
    const double* f = frame.data();
    std::vector<double> xi(ns), out(std::max({ns, nt, na, 1}), NAN);
    for (int c = 0; c < ns; ++c) xi[c] = x[c * N + i];
    const double* yt = &y[t * no];
    if (t == 0) m.init_logpdf(f, 0, 1, 1, xi.data(), &step[0][i]);
    else m.transition_logpdf(f, t, 0, 1, 1, xi.data(), nullptr, xi.data(), &step[0][i]);
    m.obs_logpdf(f, t, 0, 1, 1, xi.data(), yt, &step[1][i]);
    ssm_functional_terms_fn terms[] = {m.state_gradient, m.score_terms, m.guide_args};
    for (int k = 0; k < 3; ++k) {
      terms[k](f, t, 0, 1, 1, xi.data(), nullptr, xi.data(), yt, out.data());
      for (int c = 0; c < outs[2 + k]; ++c) step[2 + k][c * N + i] = out[c];
    }
  }
  // The item layout: one batch, structure-of-arrays over the items.
  std::vector<double> ys(no * N), us(nu * N);
  for (int i = 0; i < N; ++i) {
    for (int k = 0; k < no; ++k) ys[k * N + i] = y[items[i] * no + k];
    for (int k = 0; k < nu; ++k) us[k * N + i] = u[items[i] * nu + k];
  }
  std::vector<double> frame(theta); // the item layout reads no inputs from the frame
  for (int k = 0; k < nu + no; ++k) frame.push_back(NAN);
  ssm_item_kernel_fn kernels[] = {m.item_prior_logpdf, m.item_obs_logpdf, m.item_state_gradient,
                                  m.item_score_terms, m.item_guide_args};
  const int split = 13;
  for (int k = 0; k < 5; ++k) {
    if (!kernels[k]) { std::printf("%s absent\n", names[k]); continue; }
    std::vector<double> out(outs[k] * N, NAN);
    for (auto [begin, end] : {std::pair{0, split}, std::pair{split, N}})
      kernels[k](frame.data(), reinterpret_cast<const int64_t*>(items.data()), begin, end, N,
                 x.data(), ys.data(), us.data(), out.data());
    double worst = 0;
    int compared = 0;
    for (size_t e = 0; e < out.size(); ++e) {
      const double a = out[e], b = step[k][e];
      // A guide argument that reads a missing observation is NaN in both; one NaN fails.
      const double d = std::isnan(a) && std::isnan(b) ? 0
                       : std::isfinite(a) && std::isfinite(b)
                           ? std::fabs(a - b) / std::max(1.0, std::fabs(b)) : 1e300;
      worst = std::max(worst, d);
      ++compared;
    }
    std::printf("%s %d %.3g\n", names[k], compared, worst);
  }
}
)";

} // namespace

TEST_CASE("item kernels: a batch of items in one call computes what the step layout computes item "
          "by item",
          "[codegen][vi]") {
  // Inputs per item, a vector observation of two distributions with missing components, a
  // guide that reads the observation and the input, parameters with priors.
  const char* model = R"(model item_kernels {
  param mu ~ normal(0, 1) = 0.3;
  param tau ~ half_normal(1) = 1.2;
  input s[n];
  latent z[n] : vector[3] ~ normal(mu, tau);
  obs y[n] : vector[3] ~ normal(z[n], s[n]);
  obs b[n] : vector[2] ~ bernoulli_logit(z[n][0:2] * s[n]);
  guide z[n] ~ normal(y[n] * 0.5 + 0.1, exp(s[n] - 1));
}
)";
  const std::string src = scratch_path("item_kernels.ssm");
  write_file(src, model);
  // 3 states, 5 observation components, 1 input, 4 guide arguments (3 means, the sd), 37 items.
  std::istringstream out(run_kernel_harness("item_kernels", src, kItemHarness,
                                            {"3", "5", "1", "4", "37", "0.3", "1.2"}));
  std::map<std::string, std::pair<int, double>> result;
  std::string name;
  int compared = 0;
  double worst = 0;
  while (out >> name >> compared >> worst)
    result[name] = {compared, worst};
  const std::map<std::string, int> expected = {{"prior_logpdf", 37},
                                               {"obs_logpdf", 37},
                                               {"state_gradient", 3 * 37},
                                               {"score_terms", 2 * 37},
                                               {"guide_args", 4 * 37}};
  for (const auto& [kernel, count] : expected) {
    INFO(kernel);
    REQUIRE(result.count(kernel) == 1);
    CHECK(result[kernel].first == count);
    // libmvec's vector exp and log1p against libm's scalar ones: a few units in the last place
    CHECK(result[kernel].second < 1e-13);
  }
}

namespace {

// The guide's arguments' Jacobian in the network outputs it reads (guide_args' rows after the
// arguments, at the metadata's structure.guide.jacobian pairs) against central differences of
// its argument rows in each state component; prints "a s difference" for every argument a and
// state component s, then "J a c value" for every Jacobian entry (input component c).
const char* kGuideHarness = R"(
#include "kernel/abi.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>
extern "C" const ssm_model ssm_model_table;
int main(int argc, char** argv) {
  const ssm_model& m = ssm_model_table;
  const int ns = std::atoi(argv[1]), no = std::atoi(argv[2]), na = std::atoi(argv[3]);
  std::vector<std::pair<int, int>> pairs; // from the metadata's "jacobian":[[a,c],...]
  const char* at = std::strstr(m.metadata_json, "\"jacobian\":[");
  if (!at) { std::printf("no jacobian\n"); return 0; }
  at += std::strlen("\"jacobian\":[");
  int a = 0, c = 0, used = 0;
  while (std::sscanf(at, "[%d,%d]%n", &a, &c, &used) == 2) {
    pairs.push_back({a, c});
    at += used;
    if (*at == ',') ++at;
  }
  std::vector<double> x(ns), y(no);
  for (int s = 0; s < ns; ++s) x[s] = 0.3 - 0.17 * s;
  for (int k = 0; k < no; ++k) y[k] = 0.5 + 0.25 * k;
  const int rows = na + static_cast<int>(pairs.size());
  auto args = [&](const std::vector<double>& at) {
    std::vector<double> out(rows);
    m.guide_args(nullptr, 0, 0, 1, 1, at.data(), nullptr, at.data(), y.data(), out.data());
    return out;
  };
  const double h = 1e-6;
  for (int s = 0; s < ns; ++s) {
    std::vector<double> up = x, down = x;
    up[s] += h; down[s] -= h;
    const std::vector<double> u = args(up), d = args(down);
    for (int k = 0; k < na; ++k) std::printf("%d %d %.17g\n", k, s, (u[k] - d[k]) / (2 * h));
  }
  const std::vector<double> out = args(x);
  for (size_t j = 0; j < pairs.size(); ++j)
    std::printf("J %d %d %.17g\n", pairs[j].first, pairs[j].second, out[na + j]);
}
)";

} // namespace

TEST_CASE("item kernels: the guide's Jacobian in its networks' outputs is the derivative of its "
          "arguments",
          "[codegen][vi]") {
  // The guide reads the encoder's three outputs through nonlinear, mixed expressions; its state
  // is z (components 0, 1), then the encoder's outputs (2, 3, 4: input components 0, 1, 2).
  const char* model = R"(model guide_jacobian {
  net enc : mlp(inputs = 2, outputs = 3, hidden = [4]);
  latent z[n] : vector[2] ~ normal(0, 1);
  obs x[n] : vector[2] ~ normal(z[n], 1);
  guide z[n] ~ normal(tanh(enc(x[n])[0:2]) * 2 + enc(x[n])[2], exp(enc(x[n])[2] * enc(x[n])[0]));
}
)";
  const std::string src = scratch_path("guide_jacobian.ssm");
  write_file(src, model);
  // 5 state components, 2 observation components, 3 arguments (2 means, the sd).
  std::istringstream out(run_kernel_harness("guide_jacobian", src, kGuideHarness, {"5", "2", "3"}));
  std::map<std::pair<int, int>, double> difference, jacobian;
  std::string first;
  while (out >> first) {
    int a = 0, c = 0;
    double v = 0;
    if (first == "J") {
      out >> a >> c >> v;
      jacobian[{a, c}] = v;
    } else {
      a = std::stoi(first);
      out >> c >> v;
      difference[{a, c}] = v;
    }
  }
  REQUIRE(difference.size() == 15);
  REQUIRE(jacobian.size() >= 4); // each mean reads its own output and the third; the sd two
  for (int a = 0; a < 3; ++a)
    for (int s = 0; s < 5; ++s) {
      INFO("argument " << a << ", state component " << s);
      const double d = difference.at({a, s});
      if (s < 2) { // the latents: the guide does not read them
        CHECK(d == 0);
        continue;
      }
      const auto j = jacobian.find({a, s - 2});
      CHECK((j == jacobian.end() ? 0.0 : j->second) == Approx(d).epsilon(1e-6).margin(1e-8));
    }
}
