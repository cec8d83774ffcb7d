// End-to-end tests of guides declared in a model (`guide z[n] ~ ...`), trained by `vi`: families
// that hold the exact posterior must reach the exact log-likelihood (Kalman, forward algorithm)
// and the exact posterior moments, computed here in closed form; an encoder guide serves
// held-out items without fitting; a model whose networks serve only its guide still filters; a
// guide for some latents beside the default family for the others; a guide with nothing to train;
// observations the guide does not read may be missing.
#include "support.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace e2e;

namespace {

// One factor: z ~ N(0, 1), x | z ~ N(w z + mu, psi^2 I). The posterior of z is Gaussian with a
// mean linear in x and a constant variance, which an affine encoder's (mean, log sd) holds.
const char* kOneFactor = R"(model onefactor {
  param w   : vector[4] = [1.0, 0.8, -0.6, 0.5];
  param mu  : vector[4] = [0.5, 0, -0.5, 1];
  param psi : real(0, inf) = 0.7;
  net enc : mlp(inputs = 4, outputs = 2, hidden = none);
  latent z[n] ~ normal(0, 1);
  obs    x[n] : vector[4] ~ normal(w * z[n] + mu, psi);
  guide  z[n] ~ normal(enc(x[n])[0], exp(enc(x[n])[1]));
}
)";

// Two discrete latents, each seen by its own observation, so that the posterior factorises:
// p(a | y) and p(b | u) are logistic, resp. softmax, of functions linear in y and u (equal
// variances), which the classifiers' affine maps hold. `guides`: the guide statements and the
// networks they call.
std::string classes_model(const std::string& name, const std::string& guides) {
  return "model " + name + R"( {
  const m = [-1.0, 1.5];
  const k = [-2.0, 0.0, 2.0];
  latent a[n] : int[0..1] ~ bernoulli(0.35);
  latent b[n] : int[0..2] ~ categorical([0.2, 0.5, 0.3]);
  obs    y[n] ~ normal(m[a[n]], 1);
  obs    u[n] ~ normal(k[b[n]], 0.8);)" +
         guides + "}\n";
}
const std::string kTwoClasses = classes_model("twoclasses", R"(
  net ca : mlp(inputs = 1, outputs = 1, hidden = none);
  net cb : mlp(inputs = 1, outputs = 3, hidden = none);
  guide  a[n] ~ bernoulli(logistic(ca(y[n])[0]));
  guide  b[n] ~ categorical(softmax(cb(u[n])));
)");
// Only a's guide declared: b keeps vi's default family.
const std::string kOneClassGuided = classes_model("oneclass", R"(
  net ca : mlp(inputs = 1, outputs = 1, hidden = none);
  guide  a[n] ~ bernoulli_logit(ca(y[n])[0]);
)");

// A guide of constants and observations alone: nothing to train when the parameters are fixed.
const char* kFixedGuide = R"(model fixedguide {
  param w : real = 1.5;
  latent z[n] ~ normal(0, 1);
  obs    x[n] ~ normal(w * z[n], 1);
  guide  z[n] ~ normal(x[n] * 1.5 / 3.25, sqrt(1 / 3.25));
}
)";

// Two factors: z ~ N(0, I_2), x | z ~ N(W z, psi^2 I_4). The posterior is Gaussian with a mean
// linear in x and a constant covariance S = (I + W^T W / psi^2)^-1 whose correlation a mean-field
// guide cannot hold: a full-rank guide with its Cholesky factor from an affine encoder can.
std::string two_factor_model(const std::string& name, const std::string& guide) {
  return "model " + name + R"( {
  param W   : matrix[4, 2] = [[1.0, 0.5], [0.8, 0.2], [0.3, 1.0], [0.5, 0.4]];
  param psi : real(0, inf) = 0.7;
  net enc : mlp(inputs = 4, outputs = 5, hidden = none);
  latent z[n] : vector[2] ~ normal(0, 1);
  obs    x[n] : vector[4] ~ normal(W * z[n], psi);
  )" + guide +
         "\n}\n";
}
const std::string kTwoFactorFullRank = two_factor_model(
    "twofactor_full", "guide z[n] ~ mvnormal_chol(enc(x[n])[0:2], [[exp(enc(x[n])[2]), 0], "
                      "[enc(x[n])[3], exp(enc(x[n])[4])]]);");
const std::string kTwoFactorMeanField =
    two_factor_model("twofactor_diag", "guide z[n] ~ normal(enc(x[n])[0:2], exp(enc(x[n])[2:4]));");

std::string simulated(const std::string& name, const std::string& source, int items, int seed) {
  const std::string path = scratch_path(name + "_items.csv");
  if (!file_exists(path))
    run_ok({model_exe(name, source), "simulate", "--T", std::to_string(items), "--seed",
            std::to_string(seed), "--out", path});
  return path;
}

// The rows of a CSV file as name -> column.
std::map<std::string, std::vector<double>> read_columns(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  std::vector<std::string> names;
  std::stringstream header(line);
  for (std::string cell; std::getline(header, cell, ',');)
    names.push_back(cell);
  std::map<std::string, std::vector<double>> columns;
  while (std::getline(in, line)) {
    std::stringstream row(line);
    size_t k = 0;
    for (std::string cell; std::getline(row, cell, ','); ++k)
      columns[names.at(k)].push_back(std::stod(cell));
  }
  return columns;
}

} // namespace

TEST_CASE("guides: an encoder whose family holds the posterior reaches log p(x) and its moments",
          "[vi][guides]") {
  const std::string data = simulated("onefactor", kOneFactor, 200, 3);
  const std::string out = scratch_path("onefactor_vi.csv");
  const nlohmann::json j = run_json({model_exe("onefactor", kOneFactor),
                                     "vi",
                                     "--data",
                                     data,
                                     "--fix",
                                     "w",
                                     "--fix",
                                     "mu",
                                     "--fix",
                                     "psi",
                                     "--iterations",
                                     "1500",
                                     "--net-learning-rate",
                                     "0.03",
                                     "--schedule",
                                     "cosine",
                                     "--eval-samples",
                                     "500",
                                     "--out",
                                     out,
                                     "--json"});
  CAPTURE(j.dump());
  CHECK(j["learned"] == nlohmann::json({"enc"}));
  CHECK(std::string(j["estimators"]["z"]["why"]).find("the model's guide (normal)") !=
        std::string::npos);
  // The exact log-likelihood (Kalman) bounds both; the trained ELBO reaches it.
  const double exact = j["log_likelihood"], elbo = j["elbo"], iwae = j["iwae"];
  CHECK(iwae <= exact + 4 * double(j["iwae_se"]) + 1e-9);
  CHECK(elbo <= exact + 4 * double(j["elbo_se"]) + 1e-9);
  CHECK(exact - elbo < 3e-3);
  // Each item's guide is its exact posterior: precision 1 + |w|^2 / psi^2, mean w.(x - mu) /
  // psi^2 over it.
  const std::vector<double> w = {1.0, 0.8, -0.6, 0.5}, mu = {0.5, 0, -0.5, 1};
  const double psi2 = 0.49;
  double ww = 0;
  for (double v : w)
    ww += v * v;
  const double precision = 1 + ww / psi2, sd = 1 / std::sqrt(precision);
  const auto items = read_columns(data), fitted = read_columns(out);
  REQUIRE(fitted.at("mean_z").size() == 200);
  double worst_mean = 0, worst_sd = 0;
  for (size_t n = 0; n < 200; ++n) {
    double s = 0;
    for (size_t i = 0; i < 4; ++i)
      s += w[i] * (items.at(fmt::format("x[{}]", i)).at(n) - mu[i]);
    worst_mean = std::max(worst_mean, std::abs(fitted.at("mean_z")[n] - s / psi2 / precision));
    worst_sd = std::max(worst_sd, std::abs(fitted.at("sd_z")[n] - sd));
  }
  CAPTURE(worst_mean, worst_sd, sd);
  CHECK(worst_mean < 0.02);
  CHECK(worst_sd < 0.01);
}

TEST_CASE("guides: bernoulli and categorical guides from classifiers reach the forward "
          "algorithm's likelihood",
          "[vi][guides]") {
  const std::string data = simulated("twoclasses", kTwoClasses, 300, 4);
  const std::string test = simulated("twoclasses_test", kTwoClasses, 100, 5);
  const nlohmann::json j =
      run_json({model_exe("twoclasses", kTwoClasses), "vi", "--data", data, "--iterations", "1500",
                "--net-learning-rate", "0.05", "--schedule", "cosine", "--test", test, "--json"});
  CAPTURE(j.dump());
  CHECK(j["estimators"]["a"]["estimator"] == "enumerate");
  CHECK(j["estimators"]["b"]["estimator"] == "enumerate");
  // Enumerated latents make the ELBO exact for the guide: its gap to log p(x) is the KL from the
  // guide to the posterior, which training closes.
  const double exact = j["log_likelihood"], elbo = j["elbo"];
  CHECK(elbo <= exact + 1e-9);
  CHECK(exact - elbo < 3e-3);
  // Held-out items are served by the trained classifiers, with no fitting of their own: their
  // gap is as small.
  CHECK(double(j["test"]["iwae"]) - double(j["test"]["elbo"]) < 5e-3);
}

TEST_CASE("guides: the networks of a guide do not stop the model's other methods", "[vi][guides]") {
  const std::string data = simulated("onefactor", kOneFactor, 200, 3);
  const nlohmann::json f =
      run_json({model_exe("onefactor", kOneFactor), "filter", "--data", data, "--json"});
  CHECK(f["method"] == "kalman");
  // A mini-batch needs no per-item parameters when the model's guide covers every latent.
  const nlohmann::json j =
      run_json({model_exe("onefactor", kOneFactor), "vi", "--data", data, "--fix", "w", "--fix",
                "mu", "--fix", "psi", "--iterations", "50", "--batch-size", "20", "--json"});
  CHECK(j["items"] == 200);
}

TEST_CASE("guides: a guide cannot share the full-rank family's Gaussian", "[vi][guides]") {
  const std::string data = simulated("onefactor", kOneFactor, 200, 3);
  ProcessResult r = run_process({model_exe("onefactor", kOneFactor), "vi", "--data", data,
                                 "--method", "fullrank", "--iterations", "1"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("'z' has a guide of its own: use --method meanfield") != std::string::npos);
}

TEST_CASE("guides: a guide for some latents, the default family for the others", "[vi][guides]") {
  const std::string data = simulated("twoclasses", kTwoClasses, 300, 4);
  const nlohmann::json j =
      run_json({model_exe("oneclass", kOneClassGuided), "vi", "--data", data, "--iterations",
                "1500", "--net-learning-rate", "0.05", "--schedule", "cosine", "--json"});
  CAPTURE(j.dump());
  CHECK(std::string(j["estimators"]["a"]["why"]).find("the model's guide (bernoulli_logit)") !=
        std::string::npos);
  CHECK(std::string(j["estimators"]["b"]["why"]).find("the model's guide") == std::string::npos);
  // Both families hold their latent's exact posterior: the ELBO reaches the likelihood.
  const double exact = j["log_likelihood"], elbo = j["elbo"];
  CHECK(elbo <= exact + 1e-9);
  CHECK(exact - elbo < 3e-3);
}

TEST_CASE("guides: a guide with nothing to train is evaluated, and it is the exact posterior",
          "[vi][guides]") {
  const std::string data = simulated("fixedguide", kFixedGuide, 100, 6);
  // z | x ~ N(w x / (1 + w^2), 1 / (1 + w^2)) with w = 1.5: the guide is the posterior, so the
  // ELBO equals log p(x) up to rounding, with no training at all.
  const nlohmann::json j = run_json(
      {model_exe("fixedguide", kFixedGuide), "vi", "--data", data, "--fix", "w", "--json"});
  CAPTURE(j.dump());
  CHECK(j["learned"].empty());
  CHECK(std::abs(double(j["log_likelihood"]) - double(j["elbo"])) < 1e-9);
}

TEST_CASE("guides: only the observations a guide reads must be present", "[vi][guides]") {
  // u is missing on the third item: a's guide reads y only, b's reads u.
  const std::string full = simulated("twoclasses", kTwoClasses, 300, 4);
  const std::string gappy = scratch_path("twoclasses_gappy.csv");
  {
    std::ifstream in(full);
    std::ofstream out(gappy);
    std::string line;
    std::getline(in, line);
    out << line << "\n";
    std::vector<std::string> names;
    std::stringstream header(line);
    for (std::string cell; std::getline(header, cell, ',');)
      names.push_back(cell);
    for (int row = 0; std::getline(in, line); ++row) {
      std::stringstream cells(line);
      const char* sep = "";
      for (const std::string& name : names) {
        std::string cell;
        std::getline(cells, cell, ',');
        out << sep << (row == 2 && name == "u" ? "" : cell);
        sep = ",";
      }
      out << "\n";
    }
  }
  const nlohmann::json j = run_json({model_exe("oneclass", kOneClassGuided), "vi", "--data", gappy,
                                     "--iterations", "20", "--json"});
  CHECK(j["items"] == 300);
  ProcessResult r = run_process(
      {model_exe("twoclasses", kTwoClasses), "vi", "--data", gappy, "--iterations", "20"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("line 4: 'u' is missing, and the model's guide reads it") != std::string::npos);
}

TEST_CASE("guides: a full-rank mvnormal_chol guide from an encoder reaches log p(x) and the "
          "posterior's correlation, which a mean-field guide misses",
          "[vi][guides]") {
  const std::string data = simulated("twofactor_full", kTwoFactorFullRank, 200, 7);
  auto fit = [&](const std::string& name, const std::string& source, const std::string& out) {
    return run_json({model_exe(name, source), "vi", "--data", data, "--fix", "W", "--fix", "psi",
                     "--iterations", "1500", "--net-learning-rate", "0.03", "--schedule", "cosine",
                     "--eval-samples", "500", "--out", out, "--json"});
  };
  const std::string out = scratch_path("twofactor_full_vi.csv");
  const nlohmann::json full = fit("twofactor_full", kTwoFactorFullRank, out);
  CAPTURE(full.dump());
  CHECK(std::string(full["estimators"]["z"]["why"]).find("the model's guide (mvnormal_chol)") !=
        std::string::npos);
  const double exact = full["log_likelihood"], elbo = full["elbo"];
  CHECK(elbo <= exact + 4 * double(full["elbo_se"]) + 1e-9);
  CHECK(exact - elbo < 3e-3);
  // The mean-field guide's ELBO stays below by the KL from the best diagonal Gaussian to the
  // posterior, 0.5 (log det S + sum_i log (S^-1)_ii) per item (the JSON's bounds are per item).
  const double W[4][2] = {{1.0, 0.5}, {0.8, 0.2}, {0.3, 1.0}, {0.5, 0.4}}, psi2 = 0.49;
  double P[2][2] = {{1, 0}, {0, 1}}; // S^-1 = I + W^T W / psi^2
  for (const auto& row : W)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j)
        P[i][j] += row[i] * row[j] / psi2;
  const double det_p = P[0][0] * P[1][1] - P[0][1] * P[1][0];
  const double gap = 0.5 * (-std::log(det_p) + std::log(P[0][0]) + std::log(P[1][1]));
  const nlohmann::json diag =
      fit("twofactor_diag", kTwoFactorMeanField, scratch_path("twofactor_diag_vi.csv"));
  CAPTURE(diag.dump(), gap);
  CHECK(double(diag["log_likelihood"]) == Approx(exact).epsilon(1e-12));
  CHECK(exact - double(diag["elbo"]) == Approx(gap).margin(3e-3 + 4 * double(diag["elbo_se"])));
  // Each item's guide is its exact posterior: sds sqrt(S_ii), means S W^T x / psi^2.
  const double S[2][2] = {{P[1][1] / det_p, -P[0][1] / det_p}, {-P[1][0] / det_p, P[0][0] / det_p}};
  const auto items = read_columns(data), fitted = read_columns(out);
  REQUIRE(fitted.at("mean_z[0]").size() == 200);
  double worst_mean = 0, worst_sd = 0;
  for (size_t n = 0; n < 200; ++n) {
    double b[2] = {0, 0}; // W^T x / psi^2
    for (int r = 0; r < 4; ++r)
      for (int i = 0; i < 2; ++i)
        b[i] += W[r][i] * items.at(fmt::format("x[{}]", r)).at(n) / psi2;
    for (int i = 0; i < 2; ++i) {
      const double mean = S[i][0] * b[0] + S[i][1] * b[1];
      worst_mean =
          std::max(worst_mean, std::abs(fitted.at(fmt::format("mean_z[{}]", i))[n] - mean));
      worst_sd = std::max(worst_sd,
                          std::abs(fitted.at(fmt::format("sd_z[{}]", i))[n] - std::sqrt(S[i][i])));
    }
  }
  CAPTURE(worst_mean, worst_sd);
  CHECK(worst_mean < 0.02);
  CHECK(worst_sd < 0.01);
}
