// End-to-end tests of `dif` guides (`guide z[n] ~ dif(context, components, width, layers)`: a
// conditional
// Discretely Indexed Flow as the variational family of a plate model's latent, trained by `vi`
// with the Rao-Blackwellised ELBO). On a model whose posterior is bimodal for every item, the
// exact log p(x) and posterior moments come from quadrature: the dif guide must reach them where
// a Gaussian guide cannot, serve held-out items, and read back what it saved; bad guides and bad
// saved files are refused with their reasons.
#include "support.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <vector>

using namespace e2e;

namespace {

// z ~ N(0, 1), x | z ~ N(z^2, 0.5^2): p(z | x) is symmetric in z, with two modes at +-sqrt(x)
// once x is large enough, which no Gaussian holds.
std::string bimodal_model(const std::string& name, const std::string& guide) {
  return "model " + name + R"( {
  param sigma : real(0, inf) = 0.5;
  latent z[n] ~ normal(0, 1);
  obs    x[n] ~ normal(z[n] * z[n], sigma);
  )" + guide +
         "\n}\n";
}
// The default sizes: 8 maps, networks of 32 units.
const std::string kDif = bimodal_model("bimodal_dif", "guide z[n] ~ dif(x[n]);");
const std::string kGaussian = bimodal_model("bimodal_gauss", "");

// Per item: log p(x) and the posterior's mean and sd of z, by the trapezoid rule on [-8, 8] (the
// integrand is below 1e-13 beyond, and smooth: the rule's error is far below the tests'
// tolerances).
struct ExactPosterior {
  double log_p = 0, mean = 0, sd = 0;
};
ExactPosterior exact_posterior(double x) {
  constexpr int kPoints = 16001;
  const double lo = -8, h = 16.0 / (kPoints - 1), sigma = 0.5;
  double p = 0, m1 = 0, m2 = 0;
  for (int i = 0; i < kPoints; ++i) {
    const double z = lo + i * h, r = (x - z * z) / sigma;
    const double f = std::exp(-0.5 * z * z - 0.5 * r * r) / (2 * M_PI * sigma) *
                     (i == 0 || i == kPoints - 1 ? 0.5 : 1.0) * h;
    p += f;
    m1 += f * z;
    m2 += f * z * z;
  }
  return {std::log(p), m1 / p, std::sqrt(m2 / p - (m1 / p) * (m1 / p))};
}

// The items of a file as their exact answers, and the mean log p(x) over them.
std::vector<ExactPosterior> exact_items(const std::string& path, double& mean_log_p) {
  std::vector<ExactPosterior> out;
  mean_log_p = 0;
  for (double x : read_table(path).column("x")) {
    out.push_back(exact_posterior(x));
    mean_log_p += out.back().log_p;
  }
  mean_log_p /= static_cast<double>(out.size());
  return out;
}

std::string simulated_items(const std::string& name, int count, int seed) {
  const std::string path = scratch_path(name + ".csv");
  if (!file_exists(path))
    run_ok({model_exe("bimodal_gauss", kGaussian), "simulate", "--T", std::to_string(count),
            "--seed", std::to_string(seed), "--out", path});
  return path;
}

} // namespace

TEST_CASE("dif guides: a bimodal posterior's ELBO reaches log p(x) where a Gaussian cannot; the "
          "guide's moments are the posterior's, on held-out items too, and it reads back",
          "[vi][guides][dif]") {
  const std::string train = simulated_items("bimodal_train", 40, 11),
                    test = simulated_items("bimodal_test", 20, 12);
  double log_p = 0, test_log_p = 0;
  const std::vector<ExactPosterior> truth = exact_items(train, log_p);
  exact_items(test, test_log_p);
  const std::string out = scratch_path("bimodal_dif_items.csv"),
                    saved = scratch_path("bimodal_dif_guide.pt");
  const std::vector<std::string> common = {"--data", train, "--fix", "sigma", "--json"};
  std::vector<std::string> argv = {model_exe("bimodal_dif", kDif),
                                   "vi",
                                   "--iterations",
                                   "1000",
                                   "--net-learning-rate",
                                   "0.01",
                                   "--schedule",
                                   "cosine",
                                   "--test",
                                   test,
                                   "--out",
                                   out,
                                   "--save-guide",
                                   saved};
  argv.insert(argv.end(), common.begin(), common.end());
  const nlohmann::json j = run_json(argv);
  CAPTURE(j.dump(), log_p, test_log_p);
  CHECK(j["estimators"]["z"]["estimator"] == "reparam");
  CHECK(std::string(j["estimators"]["z"]["why"]).find("dif") != std::string::npos);
  // Both bounds stay below log p(x) (up to their Monte Carlo error), and reach it: the family
  // holds the posterior's two modes.
  const double elbo = j["elbo"], iwae = j["iwae"];
  CHECK(elbo <= log_p + 4 * double(j["elbo_se"]));
  CHECK(iwae <= log_p + 4 * double(j["iwae_se"]));
  CHECK(log_p - elbo < 0.015);
  CHECK(log_p - iwae < 0.005);
  // Held-out items get the trained flow, applied to their observations without fitting.
  CHECK(double(j["test"]["elbo"]) <= test_log_p + 4 * double(j["test"]["elbo_se"]));
  CHECK(test_log_p - double(j["test"]["elbo"]) < 0.03);
  // Each item's guide mean and sd (from its weighted points) are the posterior's.
  const Table fitted = read_table(out);
  const std::vector<double> mean = fitted.column("mean_z"), sd = fitted.column("sd_z");
  REQUIRE(mean.size() == truth.size());
  double worst_mean = 0, worst_sd = 0;
  for (size_t n = 0; n < truth.size(); ++n) {
    worst_mean = std::max(worst_mean, std::abs(mean[n] - truth[n].mean));
    worst_sd = std::max(worst_sd, std::abs(sd[n] - truth[n].sd));
  }
  CAPTURE(worst_mean, worst_sd);
  CHECK(worst_mean < 0.08);
  CHECK(worst_sd < 0.03);

  // The mean-field Gaussian's ELBO stays a KL away: about log 2 for the items whose modes part.
  const nlohmann::json g =
      run_json({model_exe("bimodal_gauss", kGaussian), "vi", "--data", train, "--fix", "sigma",
                "--iterations", "1000", "--schedule", "cosine", "--json"});
  CAPTURE(g.dump());
  CHECK(log_p - double(g["elbo"]) > 0.2);

  // The saved guide, read back and evaluated without training, gives the same bound (other
  // draws: within their Monte Carlo error).
  argv = {model_exe("bimodal_dif", kDif), "vi", "--iterations", "0", "--load-guide", saved};
  argv.insert(argv.end(), common.begin(), common.end());
  const nlohmann::json back = run_json(argv);
  CAPTURE(back.dump());
  const double se = std::hypot(double(j["elbo_se"]), double(back["elbo_se"]));
  CHECK(std::abs(double(back["elbo"]) - elbo) < 5 * se);
}

// A correlated posterior: z ~ N(0, I_2), x ~ N(z[0] + z[1], 0.5²). Given x, z is Gaussian with
// precision I + 4 (1, 1)(1, 1)ᵀ, whose correlation a location-scale map (a diagonal Gaussian per
// component) cannot hold: the best one is ½ log(5 · 5 / 9) = 0.511 nats short per item. A MAF
// layer before the map (4.3.8) shifts z[1] by a function of z[0]: one component then holds it.
TEST_CASE("dif guides: flow-layer maps hold a correlated posterior that location-scale maps miss",
          "[vi][guides][dif]") {
  auto model = [](const std::string& name, const std::string& guide) {
    return "model " + name +
           " {\n  latent z[n] : vector[2] ~ normal(0, 1);\n  obs    x[n] ~ normal(z[n][0] + "
           "z[n][1], 0.5);\n  guide  z[n] ~ " +
           guide + ";\n}\n";
  };
  const std::string& layered =
      model_exe("corr_dif_maf", model("corr_dif_maf", "dif(x[n], components = 1, layers = 1)"));
  const std::string data = scratch_path("corr_dif_items.csv");
  if (!file_exists(data))
    run_ok({model_exe("corr_dif_truth", "model corr_dif_truth {\n  latent z[n] : vector[2] ~ "
                                        "normal(0, 1);\n  obs    x[n] ~ normal(z[n][0] + z[n][1], "
                                        "0.5);\n}\n"),
            "simulate", "--T", "50", "--seed", "4", "--out", data});
  // log p(x) per item: x ~ N(0, 2.25).
  double log_p = 0;
  for (double x : read_table(data).column("x"))
    log_p += (-0.5 * x * x / 2.25 - 0.5 * std::log(2 * M_PI * 2.25)) / 50;
  const std::vector<std::string> common = {"vi",   "--data",     data,     "--iterations",
                                           "1500", "--schedule", "cosine", "--net-learning-rate",
                                           "0.01", "--json"};
  std::vector<std::string> argv = {layered};
  argv.insert(argv.end(), common.begin(), common.end());
  const nlohmann::json f = run_json(argv);
  argv = {model_exe("corr_dif_affine", model("corr_dif_affine", "dif(x[n], components = 1)"))};
  argv.insert(argv.end(), common.begin(), common.end());
  const nlohmann::json a = run_json(argv);
  CAPTURE(log_p, f.dump(), a.dump());
  CHECK(double(f["elbo"]) <= log_p + 4 * double(f["elbo_se"]));
  CHECK(log_p - double(f["elbo"]) < 0.03);
  CHECK(log_p - double(a["elbo"]) == Approx(0.511).margin(0.03));
}

// A discrete latent beside a bounded one with a dif guide: k ~ Bernoulli(0.4), s ~ Gamma(4, 2),
// x = (3 k + e1, (s - 2)^2 + 0.5 e2). Given x the two are independent: p(k | x1) in closed form,
// p(s | x2) bimodal at 2 +- sqrt(x2) while that stays positive, by quadrature on (0, 25].
const char* kMixed = R"(model mixed_dif {
  latent k[n] : int[0..1] ~ bernoulli(0.4);
  latent s[n] ~ gamma(4, 2);
  obs    x[n] : vector[2] ~ normal([3 * k[n], (s[n] - 2) * (s[n] - 2)], [1, 0.5]);
  guide  s[n] ~ dif(x[n], components = 4);
}
)";

struct MixedExact {
  double log_p = 0, prob_k1 = 0, mean_s = 0, sd_s = 0;
};
MixedExact mixed_exact(double x1, double x2) {
  const double l0 = std::log(0.6) - 0.5 * x1 * x1, l1 = std::log(0.4) - 0.5 * (x1 - 3) * (x1 - 3);
  const double m = std::max(l0, l1), lk = m + std::log(std::exp(l0 - m) + std::exp(l1 - m));
  constexpr int kPoints = 100001;
  const double h = 25.0 / (kPoints - 1);
  double p = 0, m1 = 0, m2 = 0;
  for (int i = 1; i < kPoints; ++i) { // the integrand is 0 at s = 0
    const double s = i * h, r = (x2 - (s - 2) * (s - 2)) / 0.5;
    const double f = 16 * s * s * s * std::exp(-2 * s) / 6 * std::exp(-0.5 * r * r) /
                     (0.5 * std::sqrt(2 * M_PI)) * (i == kPoints - 1 ? 0.5 : 1.0) * h;
    p += f;
    m1 += f * s;
    m2 += f * s * s;
  }
  return {lk - 0.5 * std::log(2 * M_PI) + std::log(p), std::exp(l1 - lk), m1 / p,
          std::sqrt(m2 / p - (m1 / p) * (m1 / p))};
}

TEST_CASE("dif guides: beside an enumerated latent, for a bounded one, the ELBO reaches log p(x) "
          "and each item's posterior",
          "[vi][guides][dif]") {
  const std::string& exe = model_exe("mixed_dif", kMixed);
  const std::string data = scratch_path("mixed_dif.csv"), out = scratch_path("mixed_dif_out.csv");
  if (!file_exists(data))
    run_ok({exe, "simulate", "--T", "40", "--seed", "3", "--out", data});
  const nlohmann::json j = run_json({exe, "vi", "--data", data, "--iterations", "2000", "--samples",
                                     "4", "--learning-rate", "0.02", "--net-learning-rate", "0.01",
                                     "--schedule", "cosine", "--out", out, "--json"});
  CAPTURE(j.dump());
  CHECK(j["estimators"]["k"]["estimator"] == "enumerate");
  const Table items = read_table(data), fitted = read_table(out);
  const std::vector<double> x1 = items.column("x[0]"), x2 = items.column("x[1]");
  const std::vector<double> prob = fitted.column("prob_k=1"), mean = fitted.column("mean_s"),
                            sd = fitted.column("sd_s");
  REQUIRE(prob.size() == x1.size());
  double log_p = 0, worst_k = 0, worst_mean = 0, worst_sd = 0;
  for (size_t n = 0; n < x1.size(); ++n) {
    const MixedExact e = mixed_exact(x1[n], x2[n]);
    log_p += e.log_p / static_cast<double>(x1.size());
    worst_k = std::max(worst_k, std::abs(prob[n] - e.prob_k1));
    // The guide's mean from 1000 draws (--eval-samples): within 4 of their standard errors.
    worst_mean = std::max(worst_mean,
                          std::abs(mean[n] - e.mean_s) / (4 * e.sd_s / std::sqrt(1000.0) + 0.02));
    worst_sd = std::max(worst_sd, std::abs(sd[n] - e.sd_s));
  }
  CAPTURE(log_p, worst_k, worst_mean, worst_sd);
  const double elbo = j["elbo"], iwae = j["iwae"];
  CHECK(elbo <= log_p + 4 * double(j["elbo_se"]));
  CHECK(iwae <= log_p + 4 * double(j["iwae_se"]));
  CHECK(log_p - elbo < 0.03);
  CHECK(log_p - iwae < 0.01);
  CHECK(worst_k < 0.01);
  CHECK(worst_mean < 1);
  CHECK(worst_sd < 0.05);
  // The IWAE bound would not hold the flow's maps of small weight near the posterior.
  const ProcessResult r = run_process({exe, "vi", "--data", data, "--objective", "iwae"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("the dif guide of 's' trains on the ELBO") != std::string::npos);
}

TEST_CASE("dif guides: bad guides and bad saved guides are refused with their reasons",
          "[vi][guides][dif]") {
  auto check_source = [](const std::string& name, const std::string& source,
                         const std::string& message) {
    const std::string path = scratch_path(name + ".ssm");
    write_file(path, source);
    const ProcessResult r = run_process({ssmc_path(), "check", path});
    CAPTURE(r.err);
    CHECK(r.exit_code == 1);
    CHECK(r.err.find(path + ":") != std::string::npos);
    CHECK(r.err.find(message) != std::string::npos);
  };
  check_source("dif_zero_maps", bimodal_model("m", "guide z[n] ~ dif(x[n], components = 0);"),
               "the components of a dif guide must be a constant whole number from 1 to 64, "
               "but it is 0");
  check_source("dif_data_width", bimodal_model("m", "guide z[n] ~ dif(x[n], 4, x[n]);"),
               "the width of the guide of z[n]");
  check_source("dif_many_layers", bimodal_model("m", "guide z[n] ~ dif(x[n], layers = 17);"),
               "the layers of a dif guide must be a constant whole number from 0 to 16, but it is "
               "17");
  check_source("dif_layers_real", bimodal_model("m", "guide z[n] ~ dif(x[n], layers = 2);"),
               "the dif guide of z[n] has flow layers over 1 dimension");
  check_source("dif_discrete",
               "model m {\n  latent k[n] : int[0..1] ~ bernoulli(0.5);\n  obs x[n] ~ normal(k[n], "
               "1);\n  guide k[n] ~ dif(x[n]);\n}\n",
               "a dif guide is for a continuous latent (real or a vector), but k[n] is int[0..1]");
  check_source("dif_in_model",
               "model m {\n  latent z[n] ~ normal(0, 1);\n  obs x[n] ~ dif(z[n]);\n}\n",
               "dif is a variational family: only a guide can be one");
  // In a prior: that error alone (not what a prior may read).
  check_source("dif_prior",
               "model m {\n  param a ~ dif(x[n]) = 1;\n  latent z[n] ~ normal(a, 1);\n  obs "
               "x[n] ~ normal(z[n], 1);\n}\n",
               "dif is a variational family: only a guide can be one ('guide z[n] ~ dif(...)'), "
               "not the distribution of a\n");

  const std::string train = simulated_items("bimodal_train", 40, 11);
  ProcessResult r = run_process({model_exe("bimodal_dif", kDif), "vi", "--data", train, "--method",
                                 "amortized", "--iterations", "1"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("'z' has a dif guide, which --method amortized cannot hold") !=
        std::string::npos);
  // A guide saved by a dif of other sizes, and a file that is no guide.
  const std::string three =
      bimodal_model("bimodal_dif3", "guide z[n] ~ dif(x[n], components = 3);");
  const std::string saved = scratch_path("bimodal_dif3_guide.pt");
  run_ok({model_exe("bimodal_dif3", three), "vi", "--data", train, "--iterations", "1",
          "--save-guide", saved});
  r = run_process({model_exe("bimodal_dif", kDif), "vi", "--data", train, "--iterations", "0",
                   "--load-guide", saved});
  CAPTURE(r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("(dimension, components, width, context, single precision, layers) = (1, 3, "
                   "32, 1, 0, 0); this run's has (1, 8, 32, 1, 0, 0)") != std::string::npos);
  r = run_process({model_exe("bimodal_dif", kDif), "vi", "--data", train, "--iterations", "0",
                   "--load-guide", train});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("is not a guide saved by ssmc") != std::string::npos);
}
