// Where the compiled densities meet a model's network (vi/model_networks.h): the objective's
// gradient in the network's weights and in a parameter that enters only through the network,
// against central finite differences of the objective at the same draws. The model is written by
// hand as the compiler would lower it (passes/net_outputs.cpp): the state holds z and the slots of
// the network's output, g(z, b), which the observation's density reads.
#include "core/csv.h"
#include "core/metadata.h"
#include "kernel/distributions.h"
#include "vi/variational.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

namespace {

// theta = [b]; state = [z, o0, o1] with (o0, o1) = g(z, b); z_n ~ N(0, 1), x_n ~ N(o, I).
void init_logpdf(const double*, int64_t begin, int64_t end, int64_t, const double* x, double* out) {
  for (int64_t n = begin; n < end; ++n)
    out[n] = ssm::lpdf_normal(x[n], 0.0, 1.0);
}
void init_sample(const double*, uint64_t seed, int64_t begin, int64_t end, int64_t, double* x) {
  for (int64_t n = begin; n < end; ++n)
    x[n] = ssm::sample_normal(seed, n, 0, 1, 0.0, 1.0);
}
void transition_logpdf(const double* th, int64_t, int64_t begin, int64_t end, int64_t s,
                       const double*, const int64_t*, const double* x, double* out) {
  init_logpdf(th, begin, end, s, x, out);
}
void obs_logpdf(const double*, int64_t, int64_t begin, int64_t end, int64_t s, const double* x,
                const double* y, double* out) {
  for (int64_t n = begin; n < end; ++n)
    out[n] = ssm::lpdf_normal(y[0], x[s + n], 1.0) + ssm::lpdf_normal(y[1], x[2 * s + n], 1.0);
}
void state_gradient(const double*, int64_t, int64_t begin, int64_t end, int64_t s, const double*,
                    const int64_t*, const double* x, const double* y, double* out) {
  for (int64_t n = begin; n < end; ++n) {
    out[n] = -x[n];
    out[s + n] = std::isnan(y[0]) ? 0 : y[0] - x[s + n];
    out[2 * s + n] = std::isnan(y[1]) ? 0 : y[1] - x[2 * s + n];
  }
}
void score_terms(const double*, int64_t, int64_t begin, int64_t end, int64_t, const double*,
                 const int64_t*, const double*, const double*, double* out) {
  for (int64_t n = begin; n < end; ++n)
    out[n] = 0; // b enters only through the network
}

const char* kMeta = R"json({"name":"decoded","n_state":3,"n_obs":2,"n_theta":1,
 "state":[{"name":"z","shape":[],"offset":0,"size":1},
          {"name":"g@net","shape":[2],"offset":1,"size":2}],
 "obs":[{"name":"x","shape":[2],"offset":0,"size":2,"joint":false}],
 "params":[{"name":"b","type":"real","shape":[],"offset":0,"size":1,"default":[0.3],
            "lower":null,"upper":null,"prior":""}],
 "nets":[{"name":"g","kind":"mlp","inputs":2,"outputs":2,"hidden":[3],"activation":"tanh"}],
 "net_calls":[{"net":0,"state":"g@net","offset":1,"size":2,
               "arguments":[{"kind":"state","name":"z","offset":0,"size":1},
                            {"kind":"param","name":"b","offset":0,"size":1}]}],
 "structure":{"items":"n"}})json";

} // namespace

TEST_CASE("vi: the gradient through a model's network matches finite differences", "[vi]") {
  ssm_model m{};
  m.abi_version = SSM_ABI_VERSION;
  m.metadata_json = kMeta;
  m.init_sample = init_sample;
  m.init_logpdf = init_logpdf;
  m.transition_logpdf = transition_logpdf;
  m.obs_logpdf = obs_logpdf;
  m.state_gradient = state_gradient;
  m.score_terms = score_terms;
  const ssm::ModelInfo info = ssm::parse_metadata(m.metadata_json);
  ssm::ObsData data;
  data.T = 3;
  data.n_obs = 2;
  data.y = {0.5, -1.0, 2.0, 0.3, -0.7, 1.1};
  ssm::OptionValues none;
  ssm::MethodRun run{m, info, none, 11, false, 1};
  std::vector<double> fixed = {0.3};
  run.fixed = &fixed;
  run.data = &data;
  for (const char* objective : {"elbo", "iwae"}) {
    CAPTURE(objective);
    ssm::VariationalOptions o;
    o.objective = objective;
    o.samples = 3;
    ssm::VariationalProblem problem(run, o);
    const std::vector<std::string> names = problem.parameter_names();
    std::vector<double> at = problem.parameters();
    REQUIRE(names.size() == at.size());
    const ssm::VariationalProblem::Estimate e = problem.estimate(5);
    // The weights and b: their objective's gradient is the surrogate's (the guide's log q does
    // not read them), so finite differences of the objective at the same draws must agree.
    int checked = 0;
    for (size_t k = 0; k < at.size(); ++k) {
      if (names[k].rfind("g.", 0) != 0 && names[k] != "b")
        continue;
      const double h = 1e-5, keep = at[k];
      at[k] = keep + h;
      problem.set_parameters(at);
      const double up = problem.estimate(5).objective;
      at[k] = keep - h;
      problem.set_parameters(at);
      const double down = problem.estimate(5).objective;
      at[k] = keep;
      problem.set_parameters(at);
      const double fd = (up - down) / (2 * h);
      CAPTURE(names[k], e.gradient[k], fd);
      CHECK(std::abs(e.gradient[k] - fd) < 1e-6 * (1 + std::abs(fd)));
      ++checked;
    }
    // 2x3 + 3 weights and biases of the hidden layer, 3x2 + 2 of the output layer, and b.
    CHECK(checked == 9 + 8 + 1);
    CHECK(std::abs(e.gradient[at.size() - 1]) > 0); // the output layer's bias moves the ELBO
  }
}
