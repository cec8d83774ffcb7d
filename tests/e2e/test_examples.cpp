// The other shipped examples: each builds, reports itself (info), simulates and filters; the
// simulated densities are checked exactly through their standardised residuals; and nile, a local
// level model, is compared with the Kalman filter on the real Nile data.
#include "compare.h"
#include "kalman.h"
#include "support.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <numbers>
#include <numeric>
#include <regex>

using namespace e2e;

namespace {

// Standardised residuals should be i.i.d. N(0, 1): mean, variance and lag-1 correlation within
// 4 standard errors (1/sqrt(n), sqrt(2/n), 1/sqrt(n)).
// info, simulate, filter on the simulation: the generic contract of a compiled model.
void smoke(const std::string& model, const std::string& state,
           const std::vector<std::string>& params) {
  const std::string& exe = example_exe(model);
  ProcessResult info = run_ok({exe, "info"});
  CHECK_THAT(info.out, Catch::Contains("model " + model));
  for (const auto& p : params)
    CHECK_THAT(info.out, Catch::Contains(p));
  ProcessResult help = run_ok({exe, "--help"});
  CHECK_THAT(help.out, Catch::Contains("simulate"));
  CHECK_THAT(help.out, Catch::Contains("filter"));

  const std::string sim = scratch_path(model + "-smoke-sim.csv");
  run_ok({exe, "simulate", "--T", "50", "--seed", "1", "--out", sim});
  Table t = read_table(sim);
  CHECK(t.header == std::vector<std::string>{"t", state, "y"});
  CHECK(t.rows.size() == 50);
  // Without --out, simulate writes the same CSV to standard output.
  CHECK(run_ok({exe, "simulate", "--T", "50", "--seed", "1"}).out == read_file(sim));

  FilterRun f = run_filter(exe, {"--data", sim, "--particles", "2000", "--seed", "2"},
                           scratch_path(model + "-smoke-filter.csv"));
  CHECK(f.summary.at("T").get<int>() == 50);
  CHECK(f.summary.at("particles").get<int>() == 2000);
  CHECK(f.summary.at("model").get<std::string>() == model);
  CHECK(std::isfinite(f.summary.at("log_likelihood").get<double>()));
  CHECK(f.table.header ==
        std::vector<std::string>{"t", "mean_" + state, "var_" + state, "ess", "loglik_increment"});
  CHECK(f.table.rows.size() == 50);
  for (double v : f.table.column("var_" + state))
    CHECK(v >= 0);
}

double number(const std::string& s) {
  size_t used = 0;
  const double v = std::stod(s, &used);
  REQUIRE(used == s.size());
  return v;
}

} // namespace

TEST_CASE("sv: builds, simulates, filters; y / exp(x/2) is standard normal", "[e2e][examples]") {
  smoke("sv", "x", {"mu", "rho", "sigma"});
  const std::string sim = scratch_path("sv-long.csv");
  run_ok({example_exe("sv"), "simulate", "--T", "20000", "--seed", "4", "--out", sim});
  Table t = read_table(sim);
  std::vector<double> x = t.column("x"), y = t.column("y"), z;
  for (size_t i = 0; i < x.size(); ++i)
    z.push_back(y[i] / std::exp(x[i] / 2));
  check_standard_normal(z, "sv: y / exp(x / 2)");
  // The AR(1) innovations with the defaults mu = -1.02, rho = 0.9702, sigma = 0.178.
  std::vector<double> e;
  for (size_t i = 1; i < x.size(); ++i)
    e.push_back((x[i] - (-1.02 + 0.9702 * (x[i - 1] + 1.02))) / 0.178);
  check_standard_normal(e, "sv: state innovations");
}

TEST_CASE("gordon: builds, simulates, filters; the time-dependent transition is exact",
          "[e2e][examples]") {
  smoke("gordon", "x", {"q", "r"});
  const std::string sim = scratch_path("gordon-long.csv");
  run_ok({example_exe("gordon"), "simulate", "--T", "20000", "--seed", "4", "--out", sim});
  Table t = read_table(sim);
  std::vector<double> tc = t.column("t"), x = t.column("x"), y = t.column("y"), e, u;
  // q = 10, r = 1 (the defaults); the transition uses t through cos(1.2 t).
  for (size_t i = 1; i < x.size(); ++i) {
    const double xp = x[i - 1];
    const double f = xp / 2 + 25 * xp / (1 + xp * xp) + 8 * std::cos(1.2 * tc[i]);
    e.push_back((x[i] - f) / std::sqrt(10.0));
  }
  for (size_t i = 0; i < x.size(); ++i)
    u.push_back(y[i] - x[i] * x[i] / 20);
  check_standard_normal(e, "gordon: state innovations");
  check_standard_normal(u, "gordon: observation noise");
}

TEST_CASE("nile: builds, simulates, filters; the likelihood of the Nile data matches Kalman",
          "[e2e][examples][stat]") {
  smoke("nile", "level", {"sigma_eps", "sigma_eta"});

  // The model's defaults, read from the source rather than trusted from the executable.
  const std::string src = read_file(example_path("nile.ssm"));
  std::map<std::string, double> defaults;
  const std::regex param(R"(param\s+(\w+)[^=;]*=\s*([-+0-9.eE]+)\s*;)");
  for (auto it = std::sregex_iterator(src.begin(), src.end(), param); it != std::sregex_iterator();
       ++it)
    defaults[(*it)[1]] = number((*it)[2]);
  std::smatch init;
  REQUIRE(std::regex_search(
      src, init,
      std::regex(R"(level\[0\]\s*~\s*normal\(\s*([-+0-9.eE]+)\s*,\s*([-+0-9.eE]+)\s*\))")));
  REQUIRE(defaults.count("sigma_eps"));
  REQUIRE(defaults.count("sigma_eta"));
  const double m0 = number(init[1]), s0 = number(init[2]);
  const double se = defaults["sigma_eps"], sh = defaults["sigma_eta"];

  const std::string data = example_path("data/nile.csv");
  Table table = read_table(data);
  std::vector<double> y = table.column("y");
  REQUIRE(y.size() == 100);
  std::vector<Eigen::VectorXd> ys;
  for (double v : y)
    ys.push_back(Eigen::VectorXd::Constant(1, v));
  LinearGaussianModel m;
  m.m0 = Eigen::VectorXd::Constant(1, m0);
  m.P0 = Eigen::MatrixXd::Constant(1, 1, s0 * s0);
  m.A = Eigen::MatrixXd::Constant(1, 1, 1.0);
  m.Q = Eigen::MatrixXd::Constant(1, 1, sh * sh);
  m.B = Eigen::MatrixXd::Constant(1, 1, 1.0);
  m.R = Eigen::MatrixXd::Constant(1, 1, se * se);
  const KalmanResult exact = kalman_filter(m, ys);
  PfVsKalman c;
  c.label = "nile";
  c.exe = example_exe("nile");
  c.args = {"--data", data};
  c.state_cols = {"level"};
  c.particles = 10000;
  c.runs = 32;
  c.seed0 = 3000;
  compare_with_kalman(c, exact);
}

TEST_CASE("sunspots: the guided filter agrees with the bootstrap filter and varies less",
          "[e2e][examples][stat]") {
  smoke("sunspots", "x", {"mu", "phi", "sigma"});
  // On the real data no exact likelihood exists, but both filters' likelihood estimates are
  // unbiased: their means over seeds (of exp, via the log-mean-exp of each run's log Z^) must
  // agree, which they would not if the proposal's density or the weight correction were wrong.
  const std::string& exe = example_exe("sunspots");
  const std::string data = example_path("data/sunspots.csv");
  std::map<std::string, std::vector<double>> ll;
  const int R = 24;
  for (int k = 0; k < R; ++k)
    for (const std::string method : {"guided", "bootstrap"}) {
      const FilterRun f = run_filter(exe,
                                     {"--data", data, "--method", method, "--particles", "4000",
                                      "--seed", std::to_string(900 + k)},
                                     scratch_path(fmt::format("sunspots-{}-{}.csv", method, k)));
      REQUIRE(f.summary.at("method") == method);
      ll[method].push_back(f.summary.at("log_likelihood").get<double>());
    }
  const double g = sample_mean(ll["guided"]), b = sample_mean(ll["bootstrap"]);
  const double vg = sample_variance(ll["guided"]), vb = sample_variance(ll["bootstrap"]);
  // E[log Z^] ~= log Z - Var/2 for each filter: compare the bias-corrected means.
  const double diff = (g + vg / 2) - (b + vb / 2), se = std::sqrt((vg + vb) / R);
  INFO(fmt::format("guided {} (var {}), bootstrap {} (var {}); corrected difference {} se", g, vg,
                   b, vb, diff / se));
  CHECK(std::abs(diff) <= 4 * se);
  CHECK(vg * 4 < vb); // the proposal's purpose
  // auto picks the guided filter for a model with a proposal and no exact filter.
  const FilterRun a = run_filter(exe, {"--data", data, "--method", "auto", "--particles", "100"},
                                 scratch_path("sunspots-auto.csv"));
  CHECK(a.summary.at("method") == "guided");
  CHECK(a.summary.at("chosen_by") == "auto");
  const nlohmann::json info = nlohmann::json::parse(run_ok({exe, "info", "--json"}).out);
  CHECK(info["methods"]["filter"] == nlohmann::json({"guided", "bootstrap", "apf"}));
  // Its look-ahead replaces the simulated one of a non-Gaussian model.
  const FilterRun apf = run_filter(exe, {"--data", data, "--method", "apf", "--particles", "100"},
                                   scratch_path("sunspots-apf.csv"));
  CHECK(apf.summary.at("lookahead") == "user");
}

TEST_CASE("char_hmm: EM on words; the held-out log-likelihood is the forward algorithm's, per "
          "word, and beats the letters' frequencies",
          "[e2e][examples]") {
  const std::string& exe = example_exe("char_hmm");
  const std::string train = example_path("data/words_train.csv");
  const std::string test = example_path("data/words_test.csv");
  const std::string fit = scratch_path("char-hmm-fit.json");
  const ProcessResult em = run_ok({exe, "optimize", "--method", "em", "--data", train,
                                   "--max-iterations", "40", "--json", "--save", fit});
  const nlohmann::json summary = nlohmann::json::parse(em.out);
  CHECK(summary.at("series").size() == 1000);
  const nlohmann::json params = nlohmann::json::parse(read_file(fit));
  const auto p0 = params.at("p0").get<std::vector<double>>();
  const auto P = params.at("P").get<std::vector<std::vector<double>>>();
  const auto E = params.at("E").get<std::vector<std::vector<double>>>();
  const int K = 5, V = 27;
  REQUIRE(p0.size() == K);
  REQUIRE(E.size() == K);

  // The forward algorithm per word, written here, and the letters' frequencies in training.
  const Table held_out = read_table(test);
  const int series = held_out.column_index("series");
  const std::vector<double> c = held_out.column("c");
  std::vector<double> frequency(V, 0);
  for (double v : read_table(train).column("c"))
    frequency[static_cast<int>(v)] += 1;
  double total = 0;
  for (double f : frequency)
    total += f;
  double forward = 0, unigram = 0;
  std::vector<double> alpha(K);
  for (size_t row = 0; row < c.size(); ++row) {
    const int letter = static_cast<int>(c[row]);
    const bool first = row == 0 || held_out.rows[row][series] != held_out.rows[row - 1][series];
    std::vector<double> next(K, 0);
    for (int j = 0; j < K; ++j) {
      if (first)
        next[j] = p0[j];
      else
        for (int i = 0; i < K; ++i)
          next[j] += alpha[i] * P[i][j];
      next[j] *= E[j][letter];
    }
    double norm = 0;
    for (double v : next)
      norm += v;
    forward += std::log(norm);
    for (int j = 0; j < K; ++j)
      alpha[j] = next[j] / norm;
    unigram += std::log(frequency[letter] / total);
  }
  const nlohmann::json filtered =
      nlohmann::json::parse(run_ok({exe, "filter", "--data", test, "--params", fit, "--json"}).out);
  CHECK(filtered.at("method").get<std::string>() == "forward");
  CHECK(filtered.at("log_likelihood").get<double>() == Approx(forward).epsilon(1e-9));
  // 40 iterations of EM learn more than letter frequencies: at least 0.1 nats per character.
  INFO(fmt::format("per character: HMM {:.4f}, frequencies {:.4f}", forward / c.size(),
                   unigram / c.size()));
  CHECK(forward / c.size() > unigram / c.size() + 0.1);
}

TEST_CASE("digits_vae: a few epochs of vi make the code carry what the pixels' frequencies miss",
          "[e2e][examples][vi]") {
  const std::string& exe = example_exe("digits_vae");
  const std::string train = example_path("data/digits_train.csv");
  const std::string test = example_path("data/digits_test.csv");
  // The best model without a code: each pixel a Bernoulli at its training frequency (add-one),
  // scored on the held-out digits. A decoder that ignores z can be exactly that, so the VAE's
  // bound can only beat it by using the code.
  const Table tr = read_table(train), te = read_table(test);
  double independent = 0;
  for (int k = 0; k < 64; ++k) {
    const std::string column = "x[" + std::to_string(k) + "]";
    const std::vector<double> on = tr.column(column), seen = te.column(column);
    const double p = (std::accumulate(on.begin(), on.end(), 0.0) + 1) / (on.size() + 2.0);
    for (double v : seen)
      independent += v == 1 ? std::log(p) : std::log1p(-p);
  }
  independent /= static_cast<double>(te.rows.size());
  const nlohmann::json j =
      run_json({exe, "vi", "--data", train, "--test", test, "--batch-size", "100", "--iterations",
                "300", "--eval-samples", "20", "--json"});
  CAPTURE(j.dump(), independent);
  CHECK(j["learned"] == nlohmann::json({"decoder", "encoder"}));
  const nlohmann::json& held = j["test"];
  CHECK(held["items"] == 297);
  // 20 epochs: about -20.6 nats per digit against -24.6 without a code (trained 200 epochs:
  // -18.4, bench/README.md); the code is in use (its KL about 3.7 nats).
  CHECK(double(held["elbo"]) > independent + 2);
  CHECK(double(held["kl"]) > 1);
  CHECK(double(held["iwae"]) >= double(held["elbo"]) - 4 * double(held["iwae_se"]));
}

TEST_CASE("word_vae: the decoder models the words without the code (posterior collapse)",
          "[e2e][examples][vi][sequences]") {
  // Kim, Wiseman & Rush (2018): an RNN VAE's KL term goes to 0 when its decoder is a language
  // model strong enough to model the text alone. bench/README.md: 20 epochs give a held-out KL
  // of 0.001 nats and an ELBO of -20.6 per word, the language model's.
  const std::string& exe = example_exe("word_vae");
  const nlohmann::json j =
      run_json({exe, "vi", "--data", example_path("data/words_train.csv"), "--test",
                example_path("data/words_test.csv"), "--iterations", "200", "--batch-size", "100",
                "--net-learning-rate", "0.01", "--eval-samples", "20", "--json"});
  CAPTURE(j.dump());
  const nlohmann::json& held = j["test"];
  CHECK(held["items"] == 300);
  CHECK(double(held["kl"]) < 0.05);
  // The decoder has learnt the words all the same: better than the 5-state HMM's -23.5 per word
  // (char_hmm, by exact EM).
  CHECK(double(held["elbo"]) > -22.5);
  // No information in z for the importance weights to recover.
  CHECK(double(held["iwae"]) - double(held["elbo"]) < 0.1);
}
