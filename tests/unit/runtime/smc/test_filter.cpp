// Tests of the runtime's bootstrap particle filter, resampling and simulation on hand-written
// models: log-likelihood and filtering moments against an exact Kalman filter (Monte Carlo
// tolerances from replicate runs) with every resampling scheme, bit-identical results across
// thread counts, systematic resampling offspring counts, missing observations and weight collapse.
#include "runtime_test_models.h"

#include "core/error.h"
#include "core/thread_pool.h"
#include "smc/filter.h"
#include "smc/resample.h"
#include "smc/simulate.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

using namespace rt_test;

namespace {

const double kNA = std::numeric_limits<double>::quiet_NaN();

// Observations of a simulated AR(1) trajectory as ObsData (one component).
ssm::ObsData obs_from(const std::vector<double>& y) {
  ssm::ObsData d;
  d.source = "test";
  d.T = static_cast<int64_t>(y.size());
  d.n_obs = 1;
  d.y = y;
  for (int64_t t = 0; t < d.T; ++t)
    d.lines.push_back(t + 2);
  return d;
}

std::vector<double> simulated_y(const ssm_model& m, const ssm::ModelInfo& info,
                                const std::vector<double>& theta, int64_t T, uint64_t seed) {
  return ssm::simulate(m, info, theta, T, seed).y;
}

struct Stats {
  double mean = 0, se = 0;
};
Stats stats(const std::vector<double>& v) {
  const double n = static_cast<double>(v.size());
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / n;
  double ss = 0;
  for (double x : v)
    ss += (x - mean) * (x - mean);
  return {mean, std::sqrt(ss / (n - 1) / n)};
}

// Runs R filters with seeds 1..R and checks against the Kalman filter, each within 4 standard
// errors of the replicate mean: the likelihood ratio Z_hat / Z (exactly unbiased, mean 1); the
// log-likelihood, whose estimator is asymptotically N(log Z - s^2 / 2, s^2) (Berard, Del Moral
// and Doucet 2014), so the replicate mean plus s^2 / 2 is compared with log Z; and the final
// filtering mean and variance.
void check_against_kalman(const std::vector<double>& y, int64_t particles, double ess_threshold,
                          int threads, ssm::Resampling resampling = ssm::Resampling::Systematic) {
  ssm_model m = ar1_model();
  ssm::ModelInfo info = ssm::parse_metadata(m.metadata_json);
  const std::vector<double> theta = {0.9, 0.5, 1.0};
  const Kalman exact = kalman_ar1(theta[0], theta[1], theta[2], y);
  const size_t T = y.size();
  ssm::ObsData data = obs_from(y);
  ssm::ThreadPool pool(threads);
  const int R = 100;
  std::vector<double> ll, ratio, mean_last, var_last;
  for (int r = 1; r <= R; ++r) {
    ssm::FilterOptions opt;
    opt.particles = particles;
    opt.ess_threshold = ess_threshold;
    opt.resampling = resampling;
    opt.seed = static_cast<uint64_t>(r);
    ssm::FilterResult res = ssm::bootstrap_filter(m, info, theta, data, opt, pool);
    ll.push_back(res.log_likelihood);
    ratio.push_back(std::exp(res.log_likelihood - exact.log_likelihood));
    mean_last.push_back(res.mean[T - 1]);
    var_last.push_back(res.var[T - 1]);
    REQUIRE(res.T == static_cast<int64_t>(T));
    if (ess_threshold >= 1)
      REQUIRE(res.resample_count == static_cast<int64_t>(T) - 1);
  }
  Stats s = stats(ll);
  const double var_ll = s.se * s.se * R;
  INFO("exact log-likelihood " << exact.log_likelihood << ", PF mean " << s.mean << " (se " << s.se
                               << ", s^2/2 " << var_ll / 2 << ")");
  CHECK(std::abs(s.mean + var_ll / 2 - exact.log_likelihood) < 4 * s.se);
  Stats sr = stats(ratio);
  INFO("likelihood ratio mean " << sr.mean << " (se " << sr.se << ")");
  CHECK(std::abs(sr.mean - 1) < 4 * sr.se);
  Stats sm = stats(mean_last);
  INFO("final mean: exact " << exact.mean[T - 1] << ", PF " << sm.mean << " (se " << sm.se << ")");
  CHECK(std::abs(sm.mean - exact.mean[T - 1]) < 4 * sm.se);
  Stats sv = stats(var_last);
  INFO("final var: exact " << exact.var[T - 1] << ", PF " << sv.mean << " (se " << sv.se << ")");
  CHECK(std::abs(sv.mean - exact.var[T - 1]) < 4 * sv.se);
}

} // namespace

TEST_CASE("bootstrap filter matches the Kalman filter on AR(1) + noise", "[runtime][filter]") {
  ssm_model m = ar1_model();
  ssm::ModelInfo info = ssm::parse_metadata(m.metadata_json);
  std::vector<double> y = simulated_y(m, info, {0.9, 0.5, 1.0}, 50, 2024);
  SECTION("adaptive resampling (r = 0.5)") {
    check_against_kalman(y, 2000, 0.5, 1);
  }
  SECTION("resampling at every step (r = 1), two threads") {
    check_against_kalman(y, 2000, 1.0, 2);
  }
}

TEST_CASE("bootstrap filter with every resampling scheme matches the Kalman filter",
          "[runtime][filter][resample]") {
  ssm_model m = ar1_model();
  ssm::ModelInfo info = ssm::parse_metadata(m.metadata_json);
  std::vector<double> y = simulated_y(m, info, {0.9, 0.5, 1.0}, 50, 2025);
  for (ssm::Resampling s : ssm::kResamplingSchemes)
    DYNAMIC_SECTION(ssm::resampling_name(s) << ", resampling at every step") {
      check_against_kalman(y, 2000, 1.0, 2, s);
    }
}

TEST_CASE("bootstrap filter with missing observations", "[runtime][filter]") {
  ssm_model m = ar1_model();
  ssm::ModelInfo info = ssm::parse_metadata(m.metadata_json);
  std::vector<double> y = simulated_y(m, info, {0.9, 0.5, 1.0}, 50, 7);
  for (int t : {0, 10, 11, 12, 13, 30, 49})
    y[t] = kNA;
  check_against_kalman(y, 2000, 0.5, 1);

  SECTION("all missing: the weights stay uniform and the log-likelihood is exactly 0") {
    std::vector<double> none(20, kNA);
    ssm::ThreadPool pool(1);
    ssm::FilterOptions opt;
    opt.particles = 300;
    ssm::FilterResult r =
        ssm::bootstrap_filter(m, info, {0.9, 0.5, 1.0}, obs_from(none), opt, pool);
    CHECK(r.log_likelihood == 0.0);
    CHECK(r.resample_count == 0);
    for (double e : r.ess)
      CHECK(e == 300.0);
  }
}

TEST_CASE("filter output is bit-identical for 1, 2 and 3 threads", "[runtime][filter]") {
  ssm_model m = ar2_model();
  ssm::ModelInfo info = ssm::parse_metadata(m.metadata_json);
  const std::vector<double> theta = {0.8, 0.7, 0.6};
  ssm::Simulation sim = ssm::simulate(m, info, theta, 30, 99);
  ssm::ObsData data;
  data.source = "sim";
  data.T = 30;
  data.n_obs = 2;
  data.y = sim.y;
  data.y[2 * 5] = data.y[2 * 5 + 1] = kNA;
  data.lines.assign(30, 0);
  ssm::FilterOptions opt;
  opt.particles = 10000; // three blocks: 4096, 4096 and a partial one
  opt.seed = 17;
  std::vector<ssm::FilterResult> results;
  std::vector<std::string> csvs;
  for (int threads : {1, 2, 3}) {
    ssm::ThreadPool pool(threads);
    results.push_back(ssm::bootstrap_filter(m, info, theta, data, opt, pool));
    csvs.push_back(ssm::filter_csv(info, results.back()));
  }
  for (size_t i = 1; i < results.size(); ++i) {
    CHECK(results[i].log_likelihood == results[0].log_likelihood);
    CHECK(results[i].mean == results[0].mean);
    CHECK(results[i].var == results[0].var);
    CHECK(results[i].ess == results[0].ess);
    CHECK(results[i].loglik_increment == results[0].loglik_increment);
    CHECK(results[i].resample_count == results[0].resample_count);
    CHECK(csvs[i] == csvs[0]);
  }
  CHECK(results[0].resample_count > 0);
  // The other schemes too, and each gives its own result.
  for (ssm::Resampling s : ssm::kResamplingSchemes) {
    INFO(ssm::resampling_name(s));
    ssm::FilterOptions o = opt;
    o.resampling = s;
    std::vector<ssm::FilterResult> rs;
    for (int threads : {1, 3}) {
      ssm::ThreadPool pool(threads);
      rs.push_back(ssm::bootstrap_filter(m, info, theta, data, o, pool));
    }
    CHECK(rs[1].log_likelihood == rs[0].log_likelihood);
    CHECK(rs[1].mean == rs[0].mean);
    CHECK(rs[1].var == rs[0].var);
    CHECK((s == ssm::Resampling::Systematic) ==
          (rs[0].log_likelihood == results[0].log_likelihood));
  }
  CHECK(csvs[0].substr(0, csvs[0].find('\n')) ==
        "t,mean_x[0],var_x[0],mean_x[1],var_x[1],ess,loglik_increment");
}

TEST_CASE("systematic resampling gives floor or ceil of N w offspring", "[runtime][resample]") {
  SECTION("fixed weights, many uniforms") {
    const std::vector<double> w = {0.13, 0.0, 2.4, 0.71, 0.05, 1.3, 0.0, 0.41, 0.9};
    const int64_t N = static_cast<int64_t>(w.size());
    const double total = std::accumulate(w.begin(), w.end(), 0.0);
    std::vector<int64_t> anc(N);
    for (int k = 0; k < 200; ++k) {
      const double u = (k + 0.5) / 200.0;
      ssm::systematic_resample(w.data(), N, u, anc.data());
      std::vector<int64_t> count(N, 0);
      for (int64_t i = 0; i < N; ++i) {
        REQUIRE(anc[i] >= 0);
        REQUIRE(anc[i] < N);
        if (i > 0)
          REQUIRE(anc[i] >= anc[i - 1]);
        ++count[anc[i]];
      }
      for (int64_t j = 0; j < N; ++j) {
        const double expected = N * w[j] / total;
        INFO("u = " << u << ", particle " << j << ", N w = " << expected);
        CHECK(count[j] >= std::floor(expected));
        CHECK(count[j] <= std::ceil(expected));
      }
    }
  }
  SECTION("exact cases") {
    std::vector<int64_t> anc(4);
    const std::vector<double> equal = {1, 1, 1, 1};
    ssm::systematic_resample(equal.data(), 4, 0.999, anc.data());
    CHECK(anc == std::vector<int64_t>{0, 1, 2, 3});
    const std::vector<double> two = {0, 1, 0, 1};
    ssm::systematic_resample(two.data(), 4, 0.3, anc.data());
    CHECK(anc == std::vector<int64_t>{1, 1, 3, 3});
    const std::vector<double> last = {0, 0, 0, 5e-300};
    ssm::systematic_resample(last.data(), 4, 0.9999999, anc.data());
    CHECK(anc == std::vector<int64_t>{3, 3, 3, 3});
    const std::vector<double> first = {2, 0, 0, 0};
    ssm::systematic_resample(first.data(), 4, 0.9999999999999999, anc.data());
    CHECK(anc == std::vector<int64_t>{0, 0, 0, 0});
  }
}

TEST_CASE("filter reports a weight collapse with time, line and hint", "[runtime][filter]") {
  ssm_model m = ar1_uniform_obs_model();
  ssm::ModelInfo info = ssm::parse_metadata(m.metadata_json);
  std::vector<double> y = {0.1, -0.2, 0.3, 1000.0, 0.0};
  ssm::ObsData data = obs_from(y);
  data.source = "data.csv";
  ssm::ThreadPool pool(2);
  ssm::FilterOptions opt;
  opt.particles = 100;
  try {
    ssm::bootstrap_filter(m, info, {0.9, 0.5, 1.0}, data, opt, pool);
    FAIL("expected an error");
  } catch (const ssm::Error& e) {
    std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find("filter: all 100 particle weights are zero or NaN at t=3 (data.csv line 5: "
                   "y=1000)") == 0);
    CHECK(msg.find("--particles") != std::string::npos);
  }
}

TEST_CASE("ESS threshold 0 never resamples; resampling uses the runtime stream",
          "[runtime][filter]") {
  ssm_model m = ar1_model();
  ssm::ModelInfo info = ssm::parse_metadata(m.metadata_json);
  std::vector<double> y = simulated_y(m, info, {0.9, 0.5, 1.0}, 10, 3);
  ssm::ThreadPool pool(1);
  ssm::FilterOptions opt;
  opt.particles = 64;
  opt.ess_threshold = 0;
  ssm::FilterResult r = ssm::bootstrap_filter(m, info, {0.9, 0.5, 1.0}, obs_from(y), opt, pool);
  CHECK(r.resample_count == 0);
  // Without resampling the estimate is the importance-sampling one: recompute it directly.
  std::vector<double> x(64), lw(64, 0.0);
  ar_init_sample(std::vector<double>{0.9, 0.5, 1.0}.data(), 1, 0, 64, 64, x.data(), 1);
  const double theta[3] = {0.9, 0.5, 1.0};
  double ll = 0;
  for (int t = 0; t < 10; ++t) {
    if (t > 0) {
      std::vector<double> xn(64);
      ar_transition_sample(theta, 1, t, 0, 64, 64, x.data(), nullptr, xn.data(), 1);
      x = xn;
    }
    double before = 0, after = 0;
    for (int n = 0; n < 64; ++n) {
      before += std::exp(lw[n]);
      lw[n] += ssm::lpdf_normal(y[t], x[n], 1.0);
      after += std::exp(lw[n]);
    }
    ll += std::log(after) - std::log(before);
  }
  CHECK(r.log_likelihood == Approx(ll).epsilon(1e-12));
}

TEST_CASE("simulate runs particle 0 through the kernels and writes t,state,obs",
          "[runtime][simulate]") {
  ssm_model m = ar1_model();
  ssm::ModelInfo info = ssm::parse_metadata(m.metadata_json);
  const std::vector<double> theta = {0.9, 0.5, 1.0};
  ssm::Simulation s = ssm::simulate(m, info, theta, 3, 42);
  const double sd0 = 0.5 / std::sqrt(1 - 0.81);
  CHECK(s.x[0] == ssm::sample_normal(42, 0, 0, 10, 0.0, sd0));
  CHECK(s.x[1] == ssm::sample_normal(42, 0, 1, 20, 0.9 * s.x[0], 0.5));
  CHECK(s.y[2] == ssm::sample_normal(42, 0, 2, 30, s.x[2], 1.0));
  std::string csv = ssm::simulation_csv(info, s);
  CHECK(csv.substr(0, csv.find('\n')) == "t,x,y");
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 4);
}

TEST_CASE("filter reports an infinite log-weight", "[runtime][filter]") {
  ssm_model m = ar1_model();
  // A degenerate observation density: +inf wherever y is above 100.
  m.obs_logpdf = [](const double*, int64_t, int64_t begin, int64_t end, int64_t, const double*,
                    const double* y, double* out) {
    for (int64_t n = begin; n < end; ++n)
      out[n] = y[0] > 100 ? std::numeric_limits<double>::infinity() : 0.0;
  };
  ssm::ModelInfo info = ssm::parse_metadata(m.metadata_json);
  ssm::ObsData data = obs_from({0.0, 200.0});
  ssm::ThreadPool pool(1);
  ssm::FilterOptions opt;
  opt.particles = 10;
  try {
    ssm::bootstrap_filter(m, info, {0.9, 0.5, 1.0}, data, opt, pool);
    FAIL("expected an error");
  } catch (const ssm::Error& e) {
    CHECK_THAT(e.what(), Catch::Matchers::StartsWith(
                             "filter: a particle has an infinite log-weight at t=1 (test line 3: "
                             "y=200)"));
  }
}

TEST_CASE("thread pool runs every task exactly once and propagates exceptions",
          "[runtime][threads]") {
  for (int threads : {1, 2, 3, 5}) {
    ssm::ThreadPool pool(threads);
    CHECK(pool.threads() == threads);
    std::vector<int> hits(97);
    for (int loop = 0; loop < 2000; ++loop) { // many short loops: late workers must stay out
      const int64_t n = 1 + loop % 97;
      pool.parallel_for(n, [&](int64_t i) { ++hits[i]; });
    }
    for (int i = 0; i < 97; ++i) {
      int expected = 0;
      for (int loop = 0; loop < 2000; ++loop)
        expected += i < 1 + loop % 97;
      CHECK(hits[i] == expected);
    }
    std::atomic<int> ran{0};
    CHECK_THROWS_WITH(pool.parallel_for(8,
                                        [&](int64_t i) {
                                          ++ran;
                                          if (i == 3)
                                            throw std::runtime_error("task 3");
                                        }),
                      "task 3");
    CHECK(ran == 8);
  }
}
