// End-to-end tests of `net` declarations (a network in a plate model's relations, trained by
// `vi`): a linear decoder network makes factor analysis with a mean, whose maximum likelihood
// `optimize` finds exactly (Kalman), and which the trained ELBO and IWAE bound must reach; trained
// networks saved and read back; a network whose output the gradient sends out of its density's
// domain stops with the last finite networks saved; and the refusals.
#include "support.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <vector>

using namespace e2e;

namespace {

// Factor analysis with a mean, as a plate model: the exact likelihood's reference.
const char* kFactorMean = R"(model fam {
  param W   : matrix[4, 2] = [[1.0, 0.9], [0.8, 0.7], [0.6, 1.0], [0.5, 0.4]];
  param mu  : vector[4] = [0.5, 0, -0.5, 1];
  param psi : real(0, inf) = 0.5;
  latent z[n] : vector[2] ~ normal(0, 1);
  obs    x[n] : vector[4] ~ normal(W * z[n] + mu, psi);
}
)";

// The same model with W z + mu as a network from the 2 factors to the 4 observations: `none`
// (an affine map) is factor analysis with a mean.
std::string decoder_model(const std::string& name, const std::string& hidden,
                          const std::string& activation) {
  return "model " + name + " {\n  net decoder : mlp(inputs = 2, outputs = 4, hidden = " + hidden +
         ", activation = " + activation + R"();
  param psi : real(0, inf) = 0.5;
  latent z[n] : vector[2] ~ normal(0, 1);
  obs    x[n] : vector[4] ~ normal(decoder(z[n]), psi);
}
)";
}
const std::string kFactorNet = decoder_model("famnet", "none", "tanh");
const std::string kTanhNet = decoder_model("tanhnet", "[8]", "tanh");
const std::string kReluNet = decoder_model("relunet", "[16]", "relu"); // for a mismatched file

// 200 items of the factor model, written once.
std::string factor_items() {
  const std::string path = scratch_path("fam_items.csv");
  if (!file_exists(path))
    run_ok({model_exe("fam", kFactorMean), "simulate", "--T", "200", "--seed", "5", "--out", path});
  return path;
}

} // namespace

TEST_CASE("networks: a linear decoder trained by vi reaches factor analysis' exact maximum "
          "likelihood",
          "[vi][networks]") {
  const std::string data = factor_items();
  // The maximum likelihood of the same family (W, mu, psi free), exact by Kalman and L-BFGS.
  const nlohmann::json ml =
      run_json({model_exe("fam", kFactorMean), "optimize", "--data", data, "--json"});
  const double best = double(ml["log_likelihood"]) / 200;
  // The full-rank guide is the exact posterior family: the ELBO's maximum is the likelihood's.
  const nlohmann::json j =
      run_json({model_exe("famnet", kFactorNet), "vi", "--method", "fullrank", "--data", data,
                "--iterations", "2000", "--net-learning-rate", "0.02", "--schedule", "cosine",
                "--eval-samples", "2000", "--json"});
  CAPTURE(ml.dump(), j.dump());
  const double elbo = j["elbo"], iwae = j["iwae"], iwae_se = j["iwae_se"];
  CHECK(j["learned"] == nlohmann::json({"psi", "decoder"}));
  // Neither bound can exceed the maximum likelihood (beyond Monte Carlo error), and training
  // must bring both within 2e-3 nats per item of it.
  CHECK(iwae <= best + 4 * iwae_se + 1e-9);
  CHECK(elbo <= iwae + 1e-3);
  CHECK(best - elbo < 2e-3);
  CHECK(std::abs(double(j["params"]["psi"]) - double(ml["params"]["psi"])) < 0.01);
}

TEST_CASE("networks: trained networks are saved and read back", "[vi][networks]") {
  const std::string data = factor_items();
  const std::string& exe = model_exe("tanhnet", kTanhNet);
  const std::string nets = scratch_path("tanhnet_nets.pt"), guide = scratch_path("tanhnet_g.pt"),
                    params = scratch_path("tanhnet_params.json");
  const std::vector<std::string> common = {
      exe, "vi", "--method", "amortized", "--data", data, "--eval-samples", "200", "--json"};
  std::vector<std::string> train = common;
  train.insert(train.end(), {"--iterations", "1500", "--net-learning-rate", "0.01", "--save-nets",
                             nets, "--save-guide", guide, "--save", params});
  const nlohmann::json trained = run_json(train);
  REQUIRE(file_exists(nets));
  // Read back with the guide and psi, and only evaluated: the same bounds up to Monte Carlo error
  // (other draws), where untrained networks are far worse.
  std::vector<std::string> again = common;
  again.insert(again.end(), {"--iterations", "0", "--load-nets", nets, "--load-guide", guide,
                             "--params", params});
  const nlohmann::json loaded = run_json(again);
  std::vector<std::string> fresh = common;
  fresh.insert(fresh.end(), {"--iterations", "0", "--load-guide", guide, "--params", params});
  const nlohmann::json untrained = run_json(fresh);
  CAPTURE(trained.dump(), loaded.dump(), untrained.dump());
  const double se = std::hypot(double(trained["elbo_se"]), double(loaded["elbo_se"]));
  CHECK(std::abs(double(trained["elbo"]) - double(loaded["elbo"])) < 4 * se + 1e-3);
  CHECK(double(untrained["elbo"]) < double(loaded["elbo"]) - 1);
  // The same networks evaluated in single precision (and the same draws): the same bound to
  // float32's rounding.
  std::vector<std::string> single = again;
  single.insert(single.end(), {"--precision", "single"});
  const nlohmann::json fast = run_json(single);
  CAPTURE(fast.dump());
  CHECK(std::abs(double(fast["elbo"]) - double(loaded["elbo"])) < 1e-5);
  // A file of networks declared otherwise is refused, naming both declarations.
  ProcessResult r = run_process({model_exe("relunet", kReluNet), "vi", "--data", data,
                                 "--iterations", "0", "--load-nets", nets});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("network 'decoder' was saved as mlp(inputs = 2, outputs = 4, hidden = [8], "
                   "activation = tanh), but the model declares mlp(inputs = 2, outputs = 4, "
                   "hidden = [16], activation = relu)") != std::string::npos);
  r = run_process({exe, "vi", "--data", data, "--iterations", "0", "--load-nets", data});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("is not a file of networks saved by ssmc") != std::string::npos);
}

TEST_CASE("networks: a diverging run keeps its last finite networks; other commands refuse",
          "[vi][networks]") {
  const std::string data = factor_items();
  const std::string& exe = model_exe("tanhnet", kTanhNet);
  const std::string nets = scratch_path("tanhnet_diverged.pt");
  // psi fixed tiny and a huge step: the ELBO overflows within a few iterations.
  ProcessResult r =
      run_process({exe, "vi", "--data", data, "--fix", "psi", "--param", "psi=1e-150",
                   "--net-learning-rate", "1e150", "--clip", "0", "--save-nets", nets});
  CAPTURE(r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("at iteration") != std::string::npos);
  CHECK(r.err.find("are in " + nets) != std::string::npos);
  REQUIRE(file_exists(nets));
  // They are the networks of the last finite ELBO: read back, the ELBO is finite again.
  const nlohmann::json back =
      run_json({exe, "vi", "--data", data, "--fix", "psi", "--param", "psi=1e-150", "--iterations",
                "0", "--load-nets", nets, "--eval-samples", "10", "--json"});
  CHECK(std::isfinite(double(back["elbo"])));
  r = run_process({exe, "filter", "--data", data});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("model 'tanhnet' calls networks (decoder): only 'vi' and 'simulate' evaluate "
                   "them so far") != std::string::npos);
  const std::string info = run_ok({exe, "info"}).out;
  CHECK(info.find("network decoder : mlp(inputs = 2, outputs = 4, hidden = [8], activation = "
                  "tanh), called as decoder(z)") != std::string::npos);
  // Networks that read an item's observations need every one of them.
  const std::string holes = scratch_path("tanhnet_missing.csv");
  write_file(holes, "x[0],x[1],x[2],x[3]\n0.1,0.2,0.3,0.4\n0.5,,0.1,0.2\n");
  for (const char* baseline : {"average", "learned"}) {
    r = run_process({exe, "vi", "--data", holes, "--method", "amortized", "--estimator", "score",
                     "--baseline", baseline});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find(holes + " line 3: a missing observation; the amortized guide's encoder "
                             "reads every observation of an item") != std::string::npos);
  }
  r = run_process({exe, "vi", "--data", holes, "--estimator", "score", "--baseline", "learned"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("a missing observation; the learned baseline (--baseline learned) reads") !=
        std::string::npos);
  r = run_process({model_exe("fam", kFactorMean), "vi", "--data", data, "--save-nets", nets});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("--save-nets: model 'fam' declares no networks") != std::string::npos);
}

TEST_CASE("networks: an embedding of a mixture's component gives its mean, and reaches the "
          "mixture's exact maximum likelihood",
          "[vi][networks]") {
  // Two Gaussian components of sd 1 whose means are a parameter vector (exact EM) or an
  // embedding of the component (vi with the component enumerated: the IWAE bound is log p).
  const char* with_param = R"(model emb_ref {
  param mu : vector[2] = [-1, 1];
  latent k[n] : int[0..1] ~ bernoulli(0.5);
  obs y[n] ~ normal(mu[k[n]], 1);
}
)";
  const char* with_embedding = R"(model emb_net {
  net means : embedding(vocab = 2, dim = 1);
  latent k[n] : int[0..1] ~ bernoulli(0.5);
  obs y[n] ~ normal(means(k[n])[0], 1);
}
)";
  const std::string data = scratch_path("emb_items.csv");
  run_ok({model_exe("emb_truth", R"(model emb_truth {
  param mu : vector[2] = [-2, 2.5];
  latent k[n] : int[0..1] ~ bernoulli(0.5);
  obs y[n] ~ normal(mu[k[n]], 1);
}
)"),
          "simulate", "--T", "300", "--seed", "3", "--out", data});
  const nlohmann::json ml = run_json(
      {model_exe("emb_ref", with_param), "optimize", "--method", "em", "--data", data, "--json"});
  const nlohmann::json j =
      run_json({model_exe("emb_net", with_embedding), "vi", "--data", data, "--iterations", "600",
                "--net-learning-rate", "0.05", "--eval-samples", "10", "--json"});
  CAPTURE(ml.dump(), j.dump());
  const double best = double(ml["log_likelihood"]) / 300;
  CHECK(j["learned"] == nlohmann::json({"means"}));
  // The bound with k summed out is the likelihood at the embedding's means: at most the
  // maximum, and within 0.01 nats per item of it once trained.
  CHECK(double(j["iwae"]) <= best + 1e-6);
  CHECK(best - double(j["iwae"]) < 0.01);
}

TEST_CASE("networks: simulate draws the items through the networks, a latent's prior at the "
          "network's output of another latent",
          "[networks][simulate]") {
  // g is trained as a regression of b on a (input a[n]), then read by a model where a and b are
  // latents: b's prior reads g(a), y reads b. The fitting model then scores the simulated (a, b)
  // through the same network: each item's log-likelihood gives |b - g(a)|, which must be
  // N(0, 0.2^2) if simulate drew b at g of the a it drew (a draw of b before g(a) is computed
  // reads g = 0, off by g(a) ~ 1).
  const std::string net =
      "  net g : mlp(inputs = 1, outputs = 1, hidden = [8], activation = tanh);\n";
  const std::string& fit = model_exe("chain_fit", "model chain_fit {\n" + net + R"(  input  a[n];
  obs    b[n] ~ normal(g(a[n])[0], 0.2);
}
)");
  const std::string& sim =
      model_exe("chain_sim", "model chain_sim {\n" + net + R"(  latent a[n] ~ normal(0, 1);
  latent b[n] ~ normal(g(a[n])[0], 0.2);
  obs    y[n] ~ normal(b[n], 0.5);
}
)");
  std::string csv = "a,b\n";
  for (int n = 0; n < 400; ++n) {
    const double a = -2.5 + 5.0 * n / 399;
    csv += std::to_string(a) + "," + std::to_string(std::sin(2 * a)) + "\n";
  }
  const std::string train = scratch_path("chain_train.csv"), nets = scratch_path("chain_nets.pt");
  write_file(train, csv);
  run_ok({fit, "vi", "--data", train, "--iterations", "300", "--net-learning-rate", "0.05",
          "--save-nets", nets});
  const int N = 4000;
  const std::string drawn = scratch_path("chain_draws.csv");
  run_ok({sim, "simulate", "--T", std::to_string(N), "--load-nets", nets, "--seed", "4", "--out",
          drawn});
  const Table t = read_table(drawn);
  const std::vector<double> a = t.column("a"), b = t.column("b"), y = t.column("y");
  REQUIRE(a.size() == static_cast<size_t>(N));
  check_standard_normal(a, "a");
  std::vector<double> noise(N);
  for (int n = 0; n < N; ++n)
    noise[n] = (y[n] - b[n]) / 0.5;
  check_standard_normal(noise, "(y - b) / 0.5");
  const std::string scored = scratch_path("chain_scored.csv");
  run_ok({fit, "vi", "--data", drawn, "--iterations", "0", "--load-nets", nets, "--eval-samples",
          "1", "--out", scored});
  const std::vector<double> ll = read_table(scored).column("elbo");
  REQUIRE(ll.size() == static_cast<size_t>(N));
  // log N(b; g(a), 0.2) = -((b - g(a)) / 0.2)^2 / 2 - log(0.2 sqrt(2 pi)): the mean of the
  // squared standardised residuals is 1 within 4 of its standard errors, sqrt(2 / N).
  double square = 0;
  for (double l : ll)
    square += -2 * (l + std::log(0.2 * std::sqrt(2 * M_PI)));
  CHECK(std::abs(square / N - 1) < 4 * std::sqrt(2.0 / N));
  // The same seed, the same items.
  const std::string again = scratch_path("chain_draws_again.csv");
  run_ok({sim, "simulate", "--T", std::to_string(N), "--load-nets", nets, "--seed", "4", "--out",
          again});
  CHECK(read_file(again) == read_file(drawn));
  // The flags of networks and sequences, where there are none.
  ProcessResult r = run_process({sim, "simulate", "--T", "3", "--length", "3"});
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("simulate --length: model 'chain_sim' has no observation that is a sequence") !=
        std::string::npos);
  r = run_process({model_exe("fam", kFactorMean), "simulate", "--T", "3", "--load-nets", nets});
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("simulate --load-nets: model 'fam' calls no networks") != std::string::npos);
}
