// End-to-end tests of `vi` (runtime/vi) on plate models whose log p(x) is exact (factor analysis
// by the Kalman filter, mixtures by the forward algorithm): ELBO <= IWAE_K <= log p(x), IWAE_K
// non-decreasing in K and at K = 1000 within Monte Carlo error of log p(x); with the exact
// posterior family the trained ELBO equals log p(x); a mixture's variational fit (the categorical
// guide is exact) reaches EM's maximum; held-out items; refusals and a diverging run.
#include "support.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

using namespace e2e;

namespace {

// One factor: the posterior of z given x is a 1-D Gaussian, so the mean-field guide is exact.
const char* kFactor1 = R"(model fa1 {
  param w   : vector[3] = [1.0, 0.6, -0.8];
  param mu  : vector[3] = [0.0, 0.5, -0.3];
  param psi : real(0, inf) = 0.7;
  latent z[n] ~ normal(0, 1);
  obs    x[n] : vector[3] ~ normal(mu + w * z[n], psi);
}
)";

// Two factors with loadings far from orthogonal: the posterior's components are correlated, so
// the mean-field guide is not exact and the full-rank one is.
const char* kFactor2 = R"(model fa2 {
  param W   : matrix[4, 2] = [[1.0, 0.5], [0.8, 0.2], [0.3, 1.0], [0.5, 0.4]];
  param psi : real(0, inf) = 0.7;
  latent z[n] : vector[2] ~ normal(0, 1);
  obs    x[n] : vector[4] ~ normal(W * z[n], psi);
}
)";

// A two-component mixture on the unit scale.
const char* kMixture = R"(model mix {
  param w     : simplex[2] = [0.5, 0.5];
  param m     : vector[2] = [-0.5, 0.5];
  param sigma : real(0, inf) = 1.0;
  latent z[n] : int[0..1] ~ categorical(w);
  obs    y[n] ~ normal(m[z[n]], sigma);
}
)";

// Simulated items of a model, written once per name.
std::string items_of(const std::string& exe, const std::string& name, int n, int seed) {
  const std::string path = scratch_path(name + ".csv");
  if (!file_exists(path))
    run_ok(
        {exe, "simulate", "--T", std::to_string(n), "--seed", std::to_string(seed), "--out", path});
  return path;
}

} // namespace

TEST_CASE("vi: with the exact family the trained ELBO is log p(x), and ELBO <= IWAE <= log p(x)",
          "[vi]") {
  const std::string& exe = model_exe("fa1", kFactor1);
  const std::string data = items_of(exe, "fa1_items", 40, 3);
  const nlohmann::json j = run_json({exe, "vi", "--data", data, "--fix", "w", "--fix", "mu",
                                     "--fix", "psi", "--iterations", "1500", "--schedule", "cosine",
                                     "--eval-samples", "2000", "--json"});
  CAPTURE(j.dump());
  REQUIRE(j.contains("log_likelihood")); // Kalman: exact
  const double ll = j["log_likelihood"], elbo = j["elbo"], iwae = j["iwae"], kl = j["kl"];
  CHECK(j["estimators"]["z"]["estimator"] == "reparam");
  CHECK(j["learned"].empty());
  // With q equal to the posterior, log p(x, z) - log q(z) is log p(x) for every draw: the gap
  // left is the KL between the trained guide and the posterior, tiny after cosine annealing.
  CHECK(elbo <= ll + 1e-9);
  CHECK(ll - elbo < 2e-3);
  CHECK(iwae <= ll + 1e-9);
  CHECK(iwae >= elbo - 1e-9);
  CHECK(kl > 0);
}

TEST_CASE("vi: IWAE_K rises with K towards log p(x); the full-rank guide closes the gap", "[vi]") {
  const std::string& exe = model_exe("fa2", kFactor2);
  const std::string data = items_of(exe, "fa2_items", 30, 5);
  const std::string per_item = scratch_path("fa2_vi.csv");
  const std::vector<std::string> fit = {exe,          "vi",     "--data", data,           "--fix",
                                        "W",          "--fix",  "psi",    "--iterations", "1500",
                                        "--schedule", "cosine", "--out",  per_item,       "--json"};
  double ll = 0, last = -INFINITY, last_se = 0;
  for (int K : {10, 100, 1000}) {
    std::vector<std::string> argv = fit;
    argv.insert(argv.end(), {"--eval-samples", std::to_string(K)});
    const nlohmann::json j = run_json(argv);
    CAPTURE(K, j.dump());
    ll = j["log_likelihood"];
    const double iwae = j["iwae"], se = j["iwae_se"], elbo = j["elbo"];
    // The same guide each time (training does not depend on --eval-samples).
    CHECK(ll - elbo > 0.05); // the mean-field gap: the posterior's correlation
    CHECK(iwae >= elbo);
    CHECK(iwae >= last - 4 * std::hypot(se, last_se));
    CHECK(iwae <= ll + 4 * se);
    last = iwae;
    last_se = se;
  }
  // At K = 1000, IWAE is log p(x) up to its error and its delta-method bias, se^2 / 2 per item.
  const std::vector<double> se = read_table(per_item).column("iwae_se");
  double bias = 0;
  for (double s : se)
    bias += s * s / 2 / static_cast<double>(se.size());
  CHECK(ll - last < bias + 4 * last_se);
  std::vector<std::string> argv = fit;
  argv.insert(argv.end(), {"--method", "fullrank", "--eval-samples", "1000"});
  const nlohmann::json full = run_json(argv);
  CAPTURE(full.dump());
  CHECK(full["method"] == "fullrank");
  CHECK(double(full["elbo"]) <= ll + 1e-9);
  CHECK(ll - double(full["elbo"]) < 1e-3);
}

TEST_CASE("vi: a mixture's fit with enumerated latents reaches EM's maximum", "[vi]") {
  const std::string& exe = model_exe("mix", kMixture);
  const std::string data = scratch_path("mix_items.csv");
  // Items from components at -1.5 and 1.5 (sd 0.8), weights 0.35 / 0.65.
  run_ok({exe, "simulate", "--T", "200", "--seed", "11", "--param", "w=[0.35,0.65]", "--param",
          "m=[-1.5,1.5]", "--param", "sigma=0.8", "--out", data});
  const nlohmann::json em = run_json({exe, "optimize", "--method", "em", "--data", data, "--json"});
  const nlohmann::json vi = run_json(
      {exe, "vi", "--data", data, "--iterations", "3000", "--schedule", "cosine", "--json"});
  CAPTURE(em.dump(), vi.dump());
  CHECK(vi["estimators"]["z"]["estimator"] == "enumerate");
  // The categorical guide is exact, so the ELBO is the log-likelihood at the fitted parameters,
  // and its maximum is EM's.
  const double n = 200;
  CHECK(double(vi["elbo"]) == Approx(double(vi["log_likelihood"])).margin(1e-4));
  CHECK(double(vi["log_likelihood"]) == Approx(double(em["log_likelihood"]) / n).margin(1e-4));
  for (const char* p : {"m", "w"})
    for (int k = 0; k < 2; ++k)
      CHECK(double(vi["params"][p][k]) == Approx(double(em["params"][p][k])).margin(5e-3));
  CHECK(double(vi["params"]["sigma"]) == Approx(double(em["params"]["sigma"])).margin(5e-3));
}

TEST_CASE("vi: held-out items get a guide of their own and their bounds", "[vi]") {
  const std::string& exe = model_exe("fa1", kFactor1);
  const std::string train = items_of(exe, "fa1_items", 40, 3);
  const std::string test = items_of(exe, "fa1_test", 20, 4);
  const std::string saved = scratch_path("fa1_fit.json"), per_item = scratch_path("fa1_vi.csv"),
                    per_test = scratch_path("fa1_vi_test.csv");
  const nlohmann::json j =
      run_json({exe, "vi", "--data", train, "--test", test, "--iterations", "1500", "--schedule",
                "cosine", "--save", saved, "--out", per_item, "--test-out", per_test, "--json"});
  CAPTURE(j.dump());
  CHECK(j["learned"].size() == 3);
  REQUIRE(j.contains("test"));
  CHECK(j["test"]["items"] == 20);
  // The held-out items' exact log-likelihood at the trained parameters, by the Kalman filter.
  const nlohmann::json f = run_json({exe, "filter", "--data", test, "--params", saved, "--json"});
  const double ll_test = double(f["log_likelihood"]) / 20;
  CHECK(double(j["test"]["elbo"]) <= ll_test + 1e-9);
  CHECK(ll_test - double(j["test"]["elbo"]) < 3e-3);
  const Table t = read_table(per_item);
  CHECK(t.header == std::vector<std::string>{"n", "elbo", "elbo_se", "kl", "iwae", "iwae_se",
                                             "mean_z", "sd_z"});
  CHECK(t.rows.size() == 40);
  // The held-out items' rows, whose means are the JSON's held-out bounds.
  const Table h = read_table(per_test);
  CHECK(h.header == t.header);
  REQUIRE(h.rows.size() == 20);
  for (const char* bound : {"elbo", "kl", "iwae"}) {
    const std::vector<double> v = h.column(bound);
    const double mean = std::accumulate(v.begin(), v.end(), 0.0) / 20;
    CHECK(mean == Approx(double(j["test"][bound])).epsilon(1e-12));
  }
  const ProcessResult r = run_process({exe, "vi", "--data", train, "--test-out", per_test});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("--test-out writes the held-out items' rows: give them with --test FILE") !=
        std::string::npos);
}

TEST_CASE("vi: auto chooses an estimator per latent and says why; gumbel's temperature anneals",
          "[vi]") {
  // A continuous latent, a two-valued one and one whose enumeration with it would take 600 joint
  // values: reparameterised, enumerated, and the score function.
  const std::string& exe = model_exe("autoest", R"(model autoest {
  latent u[n] ~ normal(0, 1);
  latent b[n] : int[0..1] ~ bernoulli(0.5);
  latent k[n] : int[0..299] ~ binomial(299, 0.3);
  obs y[n] ~ normal(u[n] + b[n] + k[n] / 30.0, 1);
}
)");
  const std::string data = scratch_path("autoest.csv");
  run_ok({exe, "simulate", "--T", "20", "--out", data});
  const nlohmann::json j =
      run_json({exe, "vi", "--data", data, "--iterations", "5", "--eval-samples", "2", "--json"});
  CAPTURE(j.dump());
  const nlohmann::json& e = j["estimators"];
  CHECK(e["u"]["estimator"] == "reparam");
  CHECK(e["u"]["why"] == "continuous: z = mu + sd * eps, the gradient through the model's "
                         "compiled state gradient");
  CHECK(e["b"]["estimator"] == "enumerate");
  CHECK(e["b"]["why"] == "int[0..1]: 2 values, summed over exactly");
  CHECK(e["k"]["estimator"] == "score");
  CHECK(e["k"]["why"] == "int[0..299]: enumerating it would make 600 joint values (more than 256)");
  CHECK_FALSE(j.contains("temperature"));
  // Gumbel-softmax's temperature, tau exp(-R i) at the last iteration i, floored at the minimum.
  const std::string& mix = model_exe("mix", kMixture);
  const std::string items = scratch_path("mix_gumbel.csv");
  run_ok({mix, "simulate", "--T", "30", "--out", items});
  for (const auto& [iterations, expected] :
       {std::pair{"100", 2 * std::exp(-0.01 * 99)}, std::pair{"300", 0.3}}) {
    const nlohmann::json g =
        run_json({mix, "vi", "--data", items, "--estimator", "gumbel", "--temperature", "2",
                  "--temperature-decay", "0.01", "--temperature-min", "0.3", "--iterations",
                  iterations, "--eval-samples", "2", "--json"});
    CHECK(double(g["temperature"]) == Approx(expected).epsilon(1e-12));
  }
}

TEST_CASE("vi: straight-through Gumbel-softmax takes the hard draw's value, the relaxed one a "
          "biased one",
          "[vi]") {
  // A guide of fixed probabilities (0.9, 0.1) and parameters that do not move (step size 0):
  // every iteration's objective is one estimate of the same ELBO, which the JSON's `elbo` gives
  // exactly (the two values summed over). At temperature 5 the relaxed weights are far from
  // one-hot: their mean is not q, and the relaxed objective is biased (by +0.67 nats per item
  // here); with --straight-through the value is the hard draw's, an unbiased estimate.
  const std::string& exe = model_exe("mixg", R"(model mixg {
  param w     : simplex[2] = [0.5, 0.5];
  param m     : vector[2] = [-1.5, 1.5];
  param sigma : real(0, inf) = 1.0;
  latent z[n] : int[0..1] ~ categorical(w);
  obs    y[n] ~ normal(m[z[n]], sigma);
  guide  z[n] ~ categorical([0.9, 0.1]);
}
)");
  const std::string data = scratch_path("mixg.csv");
  run_ok({exe, "simulate", "--T", "30", "--out", data});
  for (const bool straight : {false, true}) {
    std::vector<std::string> args = {exe,
                                     "vi",
                                     "--data",
                                     data,
                                     "--estimator",
                                     "gumbel",
                                     "--temperature",
                                     "5",
                                     "--learning-rate",
                                     "0",
                                     "--iterations",
                                     "2000",
                                     "--eval-samples",
                                     "2",
                                     "--json"};
    if (straight)
      args.push_back("--straight-through");
    const nlohmann::json j = run_json(args);
    // The trace: 100 means of 20 iterations each, independent draws.
    std::vector<double> t;
    for (const nlohmann::json& point : j["trace"])
      t.push_back(double(point[1]));
    REQUIRE(t.size() == 100);
    const double mean = std::accumulate(t.begin(), t.end(), 0.0) / 100;
    double ss = 0;
    for (double v : t)
      ss += (v - mean) * (v - mean);
    const double se = std::sqrt(ss / 99 / 100);
    const double exact = j["elbo"];
    INFO((straight ? "straight-through" : "relaxed")
         << ": " << mean << " +- " << se << " against " << exact);
    if (straight)
      CHECK(std::abs(mean - exact) < 4 * se);
    else
      CHECK(mean - exact > 20 * se);
  }
}

TEST_CASE("vi: refusals name what applies; a diverging run names its iteration", "[vi]") {
  const std::string& mix = model_exe("mix", kMixture);
  const std::string data = scratch_path("mix_refusal.csv");
  run_ok({mix, "simulate", "--T", "20", "--out", data});
  ProcessResult r = run_process({mix, "vi", "--data", data, "--estimator", "reparam"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("cannot apply to 'z' (int[0..1], discrete): use enumerate, score or gumbel") !=
        std::string::npos);
  r = run_process({mix, "vi", "--data", data, "--estimator", "gumbel", "--objective", "iwae"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("the gumbel estimator serves the ELBO") != std::string::npos);
  const std::string& fa = model_exe("fa1", kFactor1);
  const std::string items = items_of(fa, "fa1_items", 40, 3);
  r = run_process({fa, "vi", "--data", items, "--kl-warmup", "-1"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("--kl-warmup must be 0 or more") != std::string::npos);
  r = run_process({fa, "vi", "--data", items, "--estimator", "q=score"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("no latent variable 'q' (its latent variables: z)") != std::string::npos);
  // A step size that sends psi's log to overflow: the run stops at the first non-finite ELBO and
  // keeps the parameters of the last finite one.
  const std::string saved = scratch_path("fa1_diverged.json");
  r = run_process(
      {fa, "vi", "--data", items, "--learning-rate", "1e4", "--clip", "0", "--save", saved});
  CAPTURE(r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("at iteration") != std::string::npos);
  CHECK(r.err.find("(its batch: items n = 0, 1, 2, 3, 4 and 35 more)") != std::string::npos);
  CHECK(r.err.find("the last finite elbo was") != std::string::npos);
  REQUIRE(file_exists(saved));
  const nlohmann::json p = nlohmann::json::parse(read_file(saved));
  CHECK(std::isfinite(double(p["psi"])));
}

TEST_CASE("vi: a state-space model needs an exact likelihood; ssmc run loads it as the "
          "executable does",
          "[vi]") {
  const std::string& sv = example_exe("sv");
  ProcessResult r = run_process({sv, "vi", "--data", "x.csv"});
  CHECK(r.exit_code == 1); // its parameters' variational inference needs an exact likelihood
  CHECK(r.err.find("needs an exact likelihood and score") != std::string::npos);
  const std::string& mix = model_exe("mix", kMixture);
  const std::string data = scratch_path("mix_jit.csv");
  run_ok({mix, "simulate", "--T", "30", "--out", data});
  const std::vector<std::string> args = {"vi", "--data", data, "--iterations", "200", "--json"};
  std::vector<std::string> built = {mix}, jit = {ssmc_path(), "run", scratch_path("mix.ssm"), "--"};
  built.insert(built.end(), args.begin(), args.end());
  jit.insert(jit.end(), args.begin(), args.end());
  nlohmann::json a = run_json(built), b = run_json(jit);
  for (const char* timing : {"elapsed_s", "train_s"}) {
    a.erase(timing);
    b.erase(timing);
  }
  CHECK(a == b);
  // Neither executable links LibTorch (whose start-up costs 0.6 s): vi loads it when it runs.
  for (const std::string& exe : {sv, mix})
    CHECK(run_ok({"/usr/bin/ldd", exe}).out.find("libtorch") == std::string::npos);
  // A module that cannot be loaded is an error naming it, not a crash.
  r = run_process(
      {"/usr/bin/env", "SSMC_VI_LIBRARY=/nonexistent/libssm_vi.so", mix, "vi", "--data", data});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("cannot load the variational runtime") != std::string::npos);
  CHECK(r.err.find("/nonexistent/libssm_vi.so") != std::string::npos);
}

TEST_CASE("vi --method amortized: an encoder that can be exact is, on held-out items too; saved "
          "and read back",
          "[vi]") {
  const std::string& exe = model_exe("fa1", kFactor1);
  const std::string train = items_of(exe, "fa1_items", 40, 3);
  const std::string test = items_of(exe, "fa1_test", 20, 4);
  const std::string guide = scratch_path("fa1_encoder.pt");
  // The posterior mean is linear in x and its sd constant: a linear encoder (--hidden "") can be
  // the exact posterior, for every item, seen or not.
  const nlohmann::json j =
      run_json({exe,          "vi",     "--method",     "amortized", "--hidden",     "",
                "--data",     train,    "--test",       test,        "--fix",        "w",
                "--fix",      "mu",     "--fix",        "psi",       "--iterations", "2000",
                "--schedule", "cosine", "--save-guide", guide,       "--json"});
  CAPTURE(j.dump());
  const double ll = j["log_likelihood"];
  CHECK(std::abs(ll - double(j["elbo"])) < 1e-5);
  const nlohmann::json f = run_json({exe, "filter", "--data", test, "--json"});
  const double ll_test = double(f["log_likelihood"]) / 20;
  CHECK(std::abs(ll_test - double(j["test"]["elbo"])) < 1e-5);
  // The saved encoder, read back and only evaluated, gives the held-out items the same bounds.
  const nlohmann::json again =
      run_json({exe, "vi", "--method", "amortized", "--hidden", "", "--data", test, "--load-guide",
                guide, "--fix", "w", "--fix", "mu", "--fix", "psi", "--iterations", "0", "--json"});
  CHECK(double(again["elbo"]) == Approx(double(j["test"]["elbo"])).margin(1e-9));
  // A guide of another model's shape, a file that is no guide, a per-item guide saved: refused.
  const std::string& fa2 = model_exe("fa2", kFactor2);
  const std::string items2 = items_of(fa2, "fa2_items", 30, 5);
  ProcessResult r =
      run_process({fa2, "vi", "--method", "amortized", "--data", items2, "--load-guide", guide});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("maps 3 inputs to 2 outputs; this model's amortized guide maps 4 (its "
                   "observations) to 4") != std::string::npos);
  r = run_process({exe, "vi", "--method", "amortized", "--data", train, "--load-guide", train});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("is not a network saved by ssmc") != std::string::npos);
  r = run_process({exe, "vi", "--data", train, "--save-guide", scratch_path("g.pt")});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("--save-guide needs --method amortized") != std::string::npos);
  CHECK(!file_exists(scratch_path("g.pt")));
}

TEST_CASE("vi --kl-warmup: the KL term's weight shrinks the guide while it is small, and the "
          "bound is the same once it is 1",
          "[vi]") {
  const std::string& exe = model_exe("fa1", kFactor1);
  const std::string data = items_of(exe, "fa1_items", 40, 3);
  // The posterior sd of z: 1 / sqrt(1 + |w|^2 / psi^2), the same for every item.
  const double posterior_sd = 1 / std::sqrt(1 + (1.0 + 0.36 + 0.64) / 0.49);
  auto mean_sd = [&](const std::vector<std::string>& extra) {
    const std::string out = scratch_path("fa1_kl.csv");
    std::vector<std::string> argv = {exe,     "vi",    "--data",       data,    "--fix",
                                     "w",     "--fix", "mu",           "--fix", "psi",
                                     "--out", out,     "--iterations", "1000",  "--json"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    const nlohmann::json j = run_json(argv);
    return std::pair{sample_mean(read_table(out).column("sd_z")), j};
  };
  const auto [sd, plain] = mean_sd({});
  CHECK(sd == Approx(posterior_sd).epsilon(0.02));
  // A warm-up longer than training keeps the KL's weight under 1e-3: the guide maximises the
  // expected log-likelihood alone and its sd collapses towards 0.
  const auto [sd_annealed, annealed] = mean_sd({"--kl-warmup", "1000000"});
  CAPTURE(sd_annealed, annealed.dump());
  CHECK(sd_annealed < 0.5 * posterior_sd);
  CHECK(double(annealed["kl"]) > double(plain["kl"]));
  CHECK(double(annealed["elbo"]) < double(plain["elbo"]));
  // Warm-up over the first half: the end is the exact posterior again.
  const auto [sd_half, half] = mean_sd({"--kl-warmup", "500", "--schedule", "cosine"});
  CHECK(sd_half == Approx(posterior_sd).epsilon(0.02));
  CHECK(double(half["log_likelihood"]) - double(half["elbo"]) < 2e-3);
}

TEST_CASE("vi: enumerated latents' categoricals are each item's exact posterior, with the ELBO and "
          "with IWAE; mini-batches need the amortized guide",
          "[vi]") {
  const std::string& exe = model_exe("mix", kMixture);
  const std::string data = scratch_path("mix_posterior.csv");
  run_ok({exe, "simulate", "--T", "25", "--seed", "13", "--out", data});
  const std::string smoothed = scratch_path("mix_smoothed.csv");
  run_ok({exe, "smooth", "--data", data, "--out", smoothed}); // forward-backward: exact
  const std::vector<double> exact = read_table(smoothed).column("mean_z"); // P(z = 1)
  for (const char* objective : {"elbo", "iwae"}) {
    CAPTURE(objective);
    const std::string out = scratch_path(std::string("mix_vi_") + objective + ".csv");
    run_ok({exe,           "vi",         "--data",    data,    "--fix",
            "w",           "--fix",      "m",         "--fix", "sigma",
            "--objective", objective,    "--samples", "4",     "--iterations",
            "3000",        "--schedule", "cosine",    "--out", out});
    const std::vector<double> p1 = read_table(out).column("prob_z=1");
    REQUIRE(p1.size() == exact.size());
    for (size_t n = 0; n < p1.size(); ++n) {
      CAPTURE(n);
      CHECK(p1[n] == Approx(exact[n]).margin(2e-3));
    }
  }
  ProcessResult r = run_process({exe, "vi", "--data", data, "--batch-size", "5"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("mini-batches need --method amortized") != std::string::npos);
  // The amortized guide trains on mini-batches: a linear encoder is exact for one-factor analysis.
  const std::string& fa = model_exe("fa1", kFactor1);
  const std::string items = items_of(fa, "fa1_items", 40, 3);
  const nlohmann::json j = run_json(
      {fa,      "vi",           "--method",     "amortized", "--hidden",   "",       "--data",
       items,   "--batch-size", "10",           "--fix",     "w",          "--fix",  "mu",
       "--fix", "psi",          "--iterations", "3000",      "--schedule", "cosine", "--json"});
  CHECK(double(j["log_likelihood"]) - double(j["elbo"]) < 1e-4);
}

TEST_CASE("vi: a latent with a bounded support gets a guide inside it (Poisson-gamma, exact "
          "marginal and posterior)",
          "[vi]") {
  // lam ~ gamma(2, rate 1), y | lam ~ Poisson(lam): p(y) is negative binomial, and
  // lam | y ~ gamma(2 + y, rate 2).
  const std::string& exe = model_exe("pg", R"(model pg {
  latent lam[n] ~ gamma(2, 1);
  obs    y[n] : int ~ poisson(lam[n]);
}
)");
  const std::string data = scratch_path("pg_items.csv"), out = scratch_path("pg_vi.csv");
  run_ok({exe, "simulate", "--T", "30", "--seed", "21", "--out", data});
  const std::vector<double> y = read_table(data).column("y");
  double ll = 0;
  for (double v : y) // log NB(y; 2, 1/2) = log G(y+2) - log G(2) - log y! + 2 log 1/2 + y log 1/2
    ll += std::lgamma(v + 2) - std::lgamma(2) - std::lgamma(v + 1) - (v + 2) * std::log(2.0);
  ll /= static_cast<double>(y.size());
  const nlohmann::json j =
      run_json({exe, "vi", "--data", data, "--iterations", "6000", "--samples", "4", "--schedule",
                "cosine", "--eval-samples", "4000", "--out", out, "--json"});
  CAPTURE(j.dump(), ll);
  CHECK(j["estimators"]["lam"]["estimator"] == "reparam");
  // The guide is log-normal (a Gaussian on log lam), the posterior gamma: close, not equal.
  const double elbo = j["elbo"], iwae = j["iwae"], se = j["iwae_se"];
  CHECK(elbo < ll);
  CHECK(ll - elbo < 0.05);
  CHECK(std::abs(iwae - ll) < 4 * se + 1e-3);
  // The log-normal closest to gamma(a, b) in KL(q || p) has E[log q] stationary where its mean is
  // a / b (the posterior's) and its log-scale variance 1 / a: sd = mean sqrt(e^(1/a) - 1).
  const Table t = read_table(out);
  const std::vector<double> mean = t.column("mean_lam"), sd = t.column("sd_lam");
  for (size_t n = 0; n < y.size(); ++n) {
    CAPTURE(n, y[n]);
    const double a = 2 + y[n], m = a / 2;
    CHECK(mean[n] == Approx(m).epsilon(0.04));
    CHECK(sd[n] == Approx(m * std::sqrt(std::exp(1 / a) - 1)).epsilon(0.1));
  }
}

TEST_CASE("vi: a latent whose support depends on a parameter stops with the reason", "[vi]") {
  // uniform(0, b) with b a parameter: the compiler cannot record the support, the Gaussian guide
  // draws outside it, and the model's density is 0 there.
  const std::string& exe = model_exe("ub", R"(model ub {
  param b : real(0, inf) = 2;
  latent u[n] ~ uniform(0, b);
  obs    y[n] ~ normal(u[n], 1);
}
)");
  const std::string data = scratch_path("ub_items.csv");
  run_ok({exe, "simulate", "--T", "10", "--out", data});
  const ProcessResult r = run_process({exe, "vi", "--data", data, "--fix", "b"});
  CAPTURE(r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("the elbo is -inf at iteration") != std::string::npos);
  CHECK(r.err.find("the model's density is 0 (or not a number) at the guide's draws") !=
        std::string::npos);
}
