// The variational objectives' gradient estimators against exact gradients, on hand-written plate
// models whose ELBO is known in closed form: a conjugate Gaussian model (reparameterisation and
// score function, with and without a baseline) and a two-component mixture (the score function
// against exact enumeration), the full-rank and amortized guides by the chain rule, and IWAE's
// gradient by VIMCO against the reparameterised one. Each estimator's mean over many independent
// draws must be within 4 standard errors of the exact gradient (or of the other estimator), and
// the baseline must cut the score function's variance.
#include "core/csv.h"
#include "core/metadata.h"
#include "kernel/distributions.h"
#include "vi/guide_plan.h"
#include "vi/variational.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

namespace {

// Conjugate model, theta = [b]: z_n ~ N(b, 1), x_n | z_n ~ N(z_n, 1).
void g_init_sample(const double* th, uint64_t seed, int64_t begin, int64_t end, int64_t,
                   double* x) {
  for (int64_t n = begin; n < end; ++n)
    x[n] = ssm::sample_normal(seed, n, 0, 1, th[0], 1.0);
}
void g_init_logpdf(const double* th, int64_t begin, int64_t end, int64_t, const double* x,
                   double* out) {
  for (int64_t n = begin; n < end; ++n)
    out[n] = ssm::lpdf_normal(x[n], th[0], 1.0);
}
void g_transition_logpdf(const double* th, int64_t, int64_t begin, int64_t end, int64_t s,
                         const double*, const int64_t*, const double* x, double* out) {
  g_init_logpdf(th, begin, end, s, x, out);
}
void g_obs_logpdf(const double*, int64_t, int64_t begin, int64_t end, int64_t, const double* x,
                  const double* y, double* out) {
  for (int64_t n = begin; n < end; ++n)
    out[n] = ssm::lpdf_normal(y[0], x[n], 1.0);
}
void g_state_gradient(const double* th, int64_t, int64_t begin, int64_t end, int64_t, const double*,
                      const int64_t*, const double* x, const double* y, double* out) {
  for (int64_t n = begin; n < end; ++n)
    out[n] = -(x[n] - th[0]) + (y[0] - x[n]);
}
void g_score_terms(const double* th, int64_t, int64_t begin, int64_t end, int64_t, const double*,
                   const int64_t*, const double* x, const double*, double* out) {
  for (int64_t n = begin; n < end; ++n)
    out[n] = x[n] - th[0];
}

const char* kGaussianMeta = R"json({"name":"conjugate","n_state":1,"n_obs":1,"n_theta":1,
 "state":[{"name":"z","shape":[],"offset":0,"size":1}],
 "obs":[{"name":"x","shape":[],"offset":0,"size":1,"joint":false}],
 "params":[{"name":"b","type":"real","shape":[],"offset":0,"size":1,"default":[0.3],
            "lower":null,"upper":null,"prior":""}],
 "structure":{"items":"n"}})json";

// Mixture, no parameters: z_n ~ categorical([0.3, 0.7]), x_n | z_n ~ N(mu[z_n], 1), mu = (-1, 2).
constexpr double kWeights[2] = {0.3, 0.7}, kMeans[2] = {-1.0, 2.0};
void m_init_sample(const double*, uint64_t seed, int64_t begin, int64_t end, int64_t, double* x) {
  for (int64_t n = begin; n < end; ++n)
    x[n] = ssm::philox_u01(seed, n, 0, 1, 0) < kWeights[0] ? 0 : 1;
}
void m_init_logpdf(const double*, int64_t begin, int64_t end, int64_t, const double* x,
                   double* out) {
  for (int64_t n = begin; n < end; ++n)
    out[n] = std::log(kWeights[static_cast<int>(x[n])]);
}
void m_transition_logpdf(const double* th, int64_t, int64_t begin, int64_t end, int64_t s,
                         const double*, const int64_t*, const double* x, double* out) {
  m_init_logpdf(th, begin, end, s, x, out);
}
void m_obs_logpdf(const double*, int64_t, int64_t begin, int64_t end, int64_t, const double* x,
                  const double* y, double* out) {
  for (int64_t n = begin; n < end; ++n)
    out[n] = ssm::lpdf_normal(y[0], kMeans[static_cast<int>(x[n])], 1.0);
}

const char* kMixtureMeta = R"json({"name":"mixture","n_state":1,"n_obs":1,"n_theta":0,
 "state":[{"name":"z","shape":[],"offset":0,"size":1,"integer":[0,1]}],
 "obs":[{"name":"x","shape":[],"offset":0,"size":1,"joint":false}],
 "params":[], "structure":{"items":"n"}})json";

ssm_model table(bool mixture) {
  ssm_model m{};
  m.abi_version = SSM_ABI_VERSION;
  m.metadata_json = mixture ? kMixtureMeta : kGaussianMeta;
  m.init_sample = mixture ? m_init_sample : g_init_sample;
  m.init_logpdf = mixture ? m_init_logpdf : g_init_logpdf;
  m.transition_logpdf = mixture ? m_transition_logpdf : g_transition_logpdf;
  m.obs_logpdf = mixture ? m_obs_logpdf : g_obs_logpdf;
  if (!mixture) {
    m.state_gradient = g_state_gradient;
    m.score_terms = g_score_terms;
  }
  return m;
}

ssm::ObsData items(const std::vector<double>& x) {
  ssm::ObsData d;
  d.T = static_cast<int64_t>(x.size());
  d.n_obs = 1;
  d.y = x;
  return d;
}

struct Moments {
  std::vector<double> mean, sd; // of the gradient's coordinates over the draws
  double objective = 0;
};

// `draws` independent estimates at the given parameters.
Moments estimates(const ssm_model& m, const ssm::ModelInfo& info, const ssm::ObsData& data,
                  const ssm::VariationalOptions& options, const std::vector<double>& at, int draws,
                  int warmup = 0) {
  ssm::OptionValues none;
  ssm::MethodRun run{m, info, none, 7, false, 1};
  std::vector<double> fixed = {info.n_theta ? 0.3 : 0.0};
  fixed.resize(info.n_theta);
  run.fixed = &fixed;
  run.data = &data;
  ssm::VariationalProblem problem(run, options);
  problem.set_parameters(at);
  for (int r = 0; r < warmup; ++r) // what the estimators learn as they go (a learned baseline)
    problem.estimate(draws + r);
  Moments out;
  std::vector<double> s, ss;
  for (int r = 0; r < draws; ++r) {
    const ssm::VariationalProblem::Estimate e = problem.estimate(r);
    if (s.empty()) {
      s.assign(e.gradient.size(), 0.0);
      ss.assign(e.gradient.size(), 0.0);
    }
    for (size_t k = 0; k < e.gradient.size(); ++k) {
      s[k] += e.gradient[k];
      ss[k] += e.gradient[k] * e.gradient[k];
    }
    out.objective += e.objective / draws;
  }
  for (size_t k = 0; k < s.size(); ++k) {
    out.mean.push_back(s[k] / draws);
    out.sd.push_back(std::sqrt(std::max(0.0, ss[k] / draws - out.mean.back() * out.mean.back())));
  }
  return out;
}

// Guide N(m_n, s_n^2) per item and b: d ELBO / d m_n = (b - m_n) + (x_n - m_n),
// d / d log s_n = 1 - 2 s_n^2, d / d b = sum_n (m_n - b).
std::vector<double> exact_gradient(const std::vector<double>& x, const std::vector<double>& m,
                                   const std::vector<double>& log_s, double b) {
  std::vector<double> g;
  for (size_t n = 0; n < x.size(); ++n)
    g.push_back((b - m[n]) + (x[n] - m[n]));
  for (double ls : log_s)
    g.push_back(1 - 2 * std::exp(2 * ls));
  double gb = 0;
  for (double mn : m)
    gb += mn - b;
  g.push_back(gb);
  return g;
}

} // namespace

TEST_CASE("vi: reparameterised and score-function ELBO gradients match the exact gradient",
          "[vi]") {
  const ssm_model m = table(false);
  ssm::ModelInfo info = ssm::parse_metadata(m.metadata_json);
  const std::vector<double> x = {0.5, -1.0, 2.0}, mu = {0.1, -0.4, 1.2}, log_s = {-0.3, 0.2, -1.0};
  const double b = 0.3;
  std::vector<double> at = mu;
  at.insert(at.end(), log_s.begin(), log_s.end());
  at.push_back(b); // b is unconstrained (identity)
  const ssm::ObsData data = items(x);
  const std::vector<double> exact = exact_gradient(x, mu, log_s, b);
  constexpr int kDraws = 4000;
  for (const char* estimator : {ssm::kReparamName, ssm::kScoreName}) {
    CAPTURE(estimator);
    ssm::VariationalOptions o;
    o.estimators = {estimator};
    o.samples = 2;
    const Moments g = estimates(m, info, data, o, at, kDraws);
    REQUIRE(g.mean.size() == exact.size());
    for (size_t k = 0; k < exact.size(); ++k) {
      CAPTURE(k, g.mean[k], exact[k], g.sd[k]);
      CHECK(std::abs(g.mean[k] - exact[k]) < 4 * g.sd[k] / std::sqrt(kDraws) + 1e-12);
    }
  }
  // The full-rank guide's path (a Cholesky factor, a triangular solve in log q): with one latent
  // component its factor has no free entry below the diagonal, whose gradient is 0.
  ssm::VariationalOptions full;
  full.family = ssm::kFullRankName;
  full.samples = 2;
  std::vector<double> at_full(at.begin(), at.begin() + 6);
  at_full.insert(at_full.end(), {0.0, 0.0, 0.0, b}); // the three items' 1x1 factors, then b
  const Moments gf = estimates(m, info, data, full, at_full, kDraws);
  REQUIRE(gf.mean.size() == exact.size() + 3);
  for (size_t k = 0; k < gf.mean.size(); ++k) {
    const double want = k < 6 ? exact[k] : k < 9 ? 0.0 : exact[6];
    CAPTURE(k, gf.mean[k], want, gf.sd[k]);
    CHECK(std::abs(gf.mean[k] - want) < 4 * gf.sd[k] / std::sqrt(kDraws) + 1e-12);
  }
  // The ELBO itself: sum over items of its closed form.
  double elbo = 0;
  for (size_t n = 0; n < x.size(); ++n) {
    const double s2 = std::exp(2 * log_s[n]);
    elbo += -0.5 * std::log(2 * M_PI) - 0.5 * std::pow(mu[n] - b, 2) -
            0.5 * std::pow(x[n] - mu[n], 2) - s2 + log_s[n] + 0.5;
  }
  ssm::VariationalOptions o;
  const Moments g = estimates(m, info, data, o, at, kDraws);
  CHECK(g.objective == Approx(elbo).epsilon(0.01));
}

TEST_CASE("vi: a baseline cuts the score function's variance", "[vi]") {
  const ssm_model m = table(false);
  ssm::ModelInfo info = ssm::parse_metadata(m.metadata_json);
  const std::vector<double> x = {0.5, -1.0, 2.0};
  const std::vector<double> at = {0.1, -0.4, 1.2, -0.3, 0.2, -1.0, 0.3};
  const ssm::ObsData data = items(x);
  double var[2];
  for (int with = 0; with < 2; ++with) {
    ssm::VariationalOptions o;
    o.estimators = {ssm::kScoreName};
    o.samples = 4;
    o.baseline = with ? "average" : "none";
    const Moments g = estimates(m, info, data, o, at, 2000);
    var[with] = 0;
    for (int k = 0; k < 3; ++k) // the means' coordinates
      var[with] += g.sd[k] * g.sd[k];
  }
  CAPTURE(var[0], var[1]);
  CHECK(var[1] < 0.5 * var[0]);
}

TEST_CASE("vi: a learned baseline cuts the score function's variance and keeps it unbiased",
          "[vi]") {
  const ssm_model m = table(false);
  ssm::ModelInfo info = ssm::parse_metadata(m.metadata_json);
  const std::vector<double> x = {0.5, -1.0, 2.0, 3.5, -2.5, 0.0};
  const std::vector<double> mu = {0.1, -0.4, 1.2, 1.5, -1.0, 0.0},
                            log_s = {-0.3, 0.2, -1.0, 0.0, -0.5, 0.1};
  const double b = 0.3;
  std::vector<double> at = mu;
  at.insert(at.end(), log_s.begin(), log_s.end());
  at.push_back(b);
  const ssm::ObsData data = items(x);
  const std::vector<double> exact = exact_gradient(x, mu, log_s, b);
  constexpr int kDraws = 3000, kWarmup = 1000; // the network learns during the warm-up
  double var[2];
  for (int learned = 0; learned < 2; ++learned) {
    ssm::VariationalOptions o;
    o.estimators = {ssm::kScoreName};
    o.samples = 1;
    o.baseline = learned ? "learned" : "none";
    o.learning_rate = 0.01;
    const Moments g = estimates(m, info, data, o, at, kDraws, kWarmup);
    var[learned] = 0;
    for (size_t k = 0; k < exact.size(); ++k) {
      var[learned] += g.sd[k] * g.sd[k];
      CAPTURE(learned, k, g.mean[k], exact[k], g.sd[k]);
      CHECK(std::abs(g.mean[k] - exact[k]) < 4 * g.sd[k] / std::sqrt(kDraws) + 1e-12);
    }
  }
  CAPTURE(var[0], var[1]);
  CHECK(var[1] < 0.5 * var[0]);
}

TEST_CASE("vi: the score function over a discrete latent matches exact enumeration", "[vi]") {
  const ssm_model m = table(true);
  ssm::ModelInfo info = ssm::parse_metadata(m.metadata_json);
  const ssm::ObsData data = items({0.2, 1.5, -2.0});
  const std::vector<double> at = {0.4, -0.1, 0.0, 0.3, -0.5, 0.2}; // logits per item
  ssm::VariationalOptions enumerate;
  enumerate.estimators = {ssm::kEnumerateName};
  const Moments exact = estimates(m, info, data, enumerate, at, 2);
  for (double sd : exact.sd)
    CHECK(sd < 1e-12); // enumeration is deterministic
  ssm::VariationalOptions score;
  score.estimators = {ssm::kScoreName};
  score.samples = 2;
  constexpr int kDraws = 8000;
  const Moments g = estimates(m, info, data, score, at, kDraws);
  REQUIRE(g.mean.size() == exact.mean.size());
  for (size_t k = 0; k < g.mean.size(); ++k) {
    CAPTURE(k, g.mean[k], exact.mean[k], g.sd[k]);
    CHECK(std::abs(g.mean[k] - exact.mean[k]) < 4 * g.sd[k] / std::sqrt(kDraws) + 1e-12);
  }
  CHECK(g.objective == Approx(exact.objective).epsilon(0.02));
}

TEST_CASE("vi: Gumbel-softmax's bias shrinks as its temperature goes to 0", "[vi]") {
  const ssm_model m = table(true);
  ssm::ModelInfo info = ssm::parse_metadata(m.metadata_json);
  const ssm::ObsData data = items({0.2, 1.5, -2.0});
  const std::vector<double> at = {0.4, -0.1, 0.0, 0.3, -0.5, 0.2}; // logits per item
  ssm::VariationalOptions enumerate;
  enumerate.estimators = {ssm::kEnumerateName};
  const Moments exact = estimates(m, info, data, enumerate, at, 2);
  constexpr int kDraws = 1000; // estimates of 50 draws each
  // The largest bias over the gradient's coordinates, and its Monte Carlo standard error there.
  auto bias = [&](double temperature, bool straight_through) {
    ssm::VariationalOptions o;
    o.estimators = {ssm::kGumbelName};
    o.samples = 50;
    o.temperature = temperature;
    o.straight_through = straight_through;
    const Moments g = estimates(m, info, data, o, at, kDraws);
    REQUIRE(g.mean.size() == exact.mean.size());
    std::pair<double, double> worst{0, 0};
    for (size_t k = 0; k < g.mean.size(); ++k)
      if (std::abs(g.mean[k] - exact.mean[k]) > worst.first)
        worst = {std::abs(g.mean[k] - exact.mean[k]), g.sd[k] / std::sqrt(kDraws)};
    return worst;
  };
  const auto hot = bias(2.0, false), warm = bias(0.5, false), cold = bias(0.1, false);
  CAPTURE(hot.first, hot.second, warm.first, warm.second, cold.first, cold.second);
  CHECK(hot.first > 10 * hot.second); // a real bias, which the test can see
  CHECK(warm.first + 4 * std::hypot(warm.second, hot.second) < hot.first);
  CHECK(cold.first + 4 * std::hypot(cold.second, warm.second) < warm.first);
  CHECK(cold.first < 0.1 * hot.first);
  // Straight-through: the hard draw's objective, the relaxed gradient; biased too.
  const auto st = bias(0.5, true);
  CAPTURE(st.first, st.second);
  CHECK(std::isfinite(st.first));
}

TEST_CASE("vi: the amortized guide's gradient in its encoder is the chain rule of the exact one",
          "[vi]") {
  const ssm_model m = table(false);
  ssm::ModelInfo info = ssm::parse_metadata(m.metadata_json);
  const std::vector<double> x = {0.5, -1.0, 2.0};
  const ssm::ObsData data = items(x);
  // A linear encoder: (mu_n, log s_n) = W x~_n + c, x~ the standardised observation (the sample
  // sd, n - 1); its parameters in order W (2 x 1), c (2), then b.
  const double W0 = 0.3, W1 = -0.2, c0 = 0.1, c1 = -0.4, b = 0.3;
  const double mean = (x[0] + x[1] + x[2]) / 3;
  double ss = 0;
  for (double v : x)
    ss += (v - mean) * (v - mean);
  const double sd = std::sqrt(ss / 2);
  std::vector<double> mu, log_s, xs;
  for (double v : x) {
    xs.push_back((v - mean) / sd);
    mu.push_back(W0 * xs.back() + c0);
    log_s.push_back(W1 * xs.back() + c1);
  }
  const std::vector<double> per_item = exact_gradient(x, mu, log_s, b); // mu's, log s's, b
  std::vector<double> exact(5, 0.0);
  for (size_t n = 0; n < x.size(); ++n) {
    exact[0] += per_item[n] * xs[n];
    exact[1] += per_item[3 + n] * xs[n];
    exact[2] += per_item[n];
    exact[3] += per_item[3 + n];
  }
  exact[4] = per_item[6];
  for (const char* estimator : {ssm::kReparamName, ssm::kScoreName}) {
    CAPTURE(estimator);
    ssm::VariationalOptions o;
    o.family = ssm::kAmortizedName;
    o.hidden = {};
    o.estimators = {estimator};
    o.samples = 2;
    constexpr int kDraws = 4000;
    const Moments g = estimates(m, info, data, o, {W0, W1, c0, c1, b}, kDraws);
    REQUIRE(g.mean.size() == exact.size());
    for (size_t k = 0; k < exact.size(); ++k) {
      CAPTURE(k, g.mean[k], exact[k], g.sd[k]);
      CHECK(std::abs(g.mean[k] - exact[k]) < 4 * g.sd[k] / std::sqrt(kDraws) + 1e-12);
    }
  }
}

TEST_CASE("vi: the IWAE gradient by VIMCO (score function) agrees with the reparameterised one",
          "[vi]") {
  const ssm_model m = table(false);
  ssm::ModelInfo info = ssm::parse_metadata(m.metadata_json);
  const ssm::ObsData data = items({0.5, -1.0, 2.0});
  const std::vector<double> at = {0.1, -0.4, 1.2, -0.3, 0.2, -1.0, 0.3};
  constexpr int kDraws = 8000;
  Moments g[2];
  for (int k = 0; k < 2; ++k) {
    ssm::VariationalOptions o;
    o.objective = "iwae";
    o.samples = 4;
    o.estimators = {k == 0 ? ssm::kReparamName : ssm::kScoreName};
    g[k] = estimates(m, info, data, o, at, kDraws);
  }
  // Both are unbiased for the gradient of the same IWAE_4 bound: their means agree within the
  // error of their difference.
  REQUIRE(g[0].mean.size() == g[1].mean.size());
  for (size_t k = 0; k < g[0].mean.size(); ++k) {
    CAPTURE(k, g[0].mean[k], g[1].mean[k], g[0].sd[k], g[1].sd[k]);
    CHECK(std::abs(g[0].mean[k] - g[1].mean[k]) <
          4 * std::hypot(g[0].sd[k], g[1].sd[k]) / std::sqrt(kDraws) + 1e-12);
  }
  CHECK(g[0].objective == Approx(g[1].objective).epsilon(0.01));
}

TEST_CASE("vi: auto takes the score function for a continuous latent when the model has no state "
          "gradient, and reparam is refused with what applies",
          "[vi]") {
  ssm_model m = table(false);
  m.state_gradient = nullptr; // as a model with a relation that has no log-density formula
  const ssm::ModelInfo info = ssm::parse_metadata(m.metadata_json);
  ssm::VariationalOptions o;
  const ssm::GuidePlan plan = ssm::plan_guide(m, info, o);
  REQUIRE(plan.estimators.size() == 1);
  CHECK(plan.estimators[0].estimator == ssm::kScoreName);
  CHECK(plan.estimators[0].why.rfind("continuous, but the model has no state gradient (", 0) == 0);
  o.estimators = {ssm::kReparamName};
  CHECK_THROWS_WITH(ssm::plan_guide(m, info, o),
                    Catch::Contains("the reparameterisation estimator needs the gradient of the "
                                    "log joint density in 'z'") &&
                        Catch::Contains("use score"));
}
