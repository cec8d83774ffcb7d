// End-to-end tests of learned densities as latents' distributions (`net p : dif(...)`,
// `latent z[n] ~ p(...)`, trained by `vi`): density deconvolution, x_n = z_n + noise with the law
// of z learned. A one-component dif is a Gaussian, whose maximum likelihood is a closed form that
// the ELBO must reach; a several-component dif must reach the likelihood of the bimodal law that
// made the data, where the best Gaussian is far below; a conditional dif reading a covariate must
// reach least squares'; a cascade (a dif over a MAF) must reach the correlated Gaussian's
// likelihood, which its dif alone cannot; the trained density is saved and read back (a file of
// another declaration refused); and the refusals.
#include "support.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

using namespace e2e;

namespace {

constexpr double kNoise = 0.5; // the observations' sd, known to the model
constexpr double kLogSqrtTwoPi = 0.91893853320467274178;

double normal_logpdf(double x, double mean, double var) {
  return -0.5 * (x - mean) * (x - mean) / var - 0.5 * std::log(var) - kLogSqrtTwoPi;
}

// The best Gaussian law of z for observations x = z + N(0, kNoise²): x ~ N(m, s² + kNoise²) with
// m the mean of x and s² + kNoise² its (maximum likelihood) variance. Per item.
double gaussian_best(const std::vector<double>& x) {
  const double n = double(x.size()), mean = std::accumulate(x.begin(), x.end(), 0.0) / n;
  double var = 0;
  for (double v : x)
    var += (v - mean) * (v - mean) / n;
  REQUIRE(var > kNoise * kNoise);
  return -0.5 * std::log(var) - kLogSqrtTwoPi - 0.5;
}

// Draws the items of a model without networks (simulate refuses the learned one) once, and keeps
// their observations x and covariate c (a column named as the learned model's latent would draw
// a warning). `extra`: more arguments of simulate (its --inputs).
std::string items(const std::string& name, const std::string& source, const char* seed,
                  const std::vector<std::string>& extra = {}) {
  const std::string path = scratch_path(name + "_items.csv");
  if (file_exists(path))
    return path;
  const std::string all = scratch_path(name + "_simulated.csv");
  std::vector<std::string> argv = {
      model_exe(name, source), "simulate", "--T", "200", "--seed", seed, "--out", all};
  argv.insert(argv.end(), extra.begin(), extra.end());
  run_ok(argv);
  const Table simulated = read_table(all);
  Table kept;
  std::vector<size_t> columns;
  for (size_t k = 0; k < simulated.header.size(); ++k)
    if (simulated.header[k] == "n" || simulated.header[k] == "c" ||
        simulated.header[k].rfind("x", 0) == 0) {
      columns.push_back(k);
      kept.header.push_back(simulated.header[k]);
    }
  for (const std::vector<std::string>& row : simulated.rows) {
    kept.rows.emplace_back();
    for (size_t k : columns)
      kept.rows.back().push_back(row[k]);
  }
  write_table(path, kept);
  return path;
}

const char* kGaussianTruth = R"(model deconv_gauss_truth {
  latent z[n] ~ normal(2, 1.5);
  obs    x[n] ~ normal(z[n], 0.5);
}
)";
const char* kBimodalTruth = R"(model deconv_bimodal_truth {
  latent k[n] : int[0..1] ~ bernoulli(0.5);
  latent z[n] ~ normal(4 * k[n] - 2, 0.3);
  obs    x[n] ~ normal(z[n], 0.5);
}
)";
const char* kCorrelatedTruth = R"(model deconv_corr_truth {
  latent z[n] : vector[2] ~ mvnormal([1, -1], [[1, 0.8], [0.8, 1]]);
  obs    x[n] : vector[2] ~ normal(z[n], 0.5);
}
)";
const char* kRegressionTruth = R"(model deconv_regression_truth {
  input c[n];
  latent z[n] ~ normal(1 + 2 * c[n], 0.5);
  obs    x[n] ~ normal(z[n], 0.5);
}
)";

// The correlated items' best Gaussian law of z: x ~ N(x̄, S) with S the (maximum likelihood)
// covariance of x, when S - 0.25 I is a covariance (checked). S's entries, and the law's
// log-likelihood per item: -log(2 pi) - log(det S) / 2 - 1.
std::array<double, 4> correlated_best(const std::string& data) {
  const Table t = read_table(data);
  const std::vector<double> x0 = t.column("x[0]"), x1 = t.column("x[1]");
  const double n = double(x0.size()), m0 = sample_mean(x0), m1 = sample_mean(x1);
  double s00 = 0, s01 = 0, s11 = 0;
  for (size_t i = 0; i < x0.size(); ++i) {
    s00 += (x0[i] - m0) * (x0[i] - m0) / n;
    s01 += (x0[i] - m0) * (x1[i] - m1) / n;
    s11 += (x1[i] - m1) * (x1[i] - m1) / n;
  }
  REQUIRE((s00 - 0.25) * (s11 - 0.25) > s01 * s01);
  return {s00, s01, s11, -std::log(2 * M_PI) - 0.5 * std::log(s00 * s11 - s01 * s01) - 1};
}

std::string learned(const std::string& name, const std::string& net, const std::string& call,
                    const std::string& extra = "") {
  return "model " + name + " {\n" + extra + "  net prior : " + net + ";\n  latent z[n] ~ " + call +
         ";\n  obs    x[n] ~ normal(z[n], 0.5);\n}\n";
}
const std::string kGaussianLearned =
    learned("deconv_gauss", "dif(dim = 1, components = 1)", "prior()");

} // namespace

TEST_CASE("density latents: a one-component dif learned by vi reaches the Gaussian "
          "deconvolution's maximum likelihood",
          "[vi][networks][density-latent]") {
  const std::string data = items("deconv_gauss_truth", kGaussianTruth, "3");
  const std::vector<double> x = read_table(data).column("x");
  const double best = gaussian_best(x);
  const std::string density = scratch_path("deconv_gauss_density.pt");
  const nlohmann::json j =
      run_json({model_exe("deconv_gauss", kGaussianLearned), "vi", "--data", data, "--eval-samples",
                "1000", "--iterations", "1500", "--net-learning-rate", "0.05", "--schedule",
                "cosine", "--save-density", density, "--json"});
  CAPTURE(best, j.dump());
  CHECK(j["learned"] == nlohmann::json({"prior"}));
  // The mean-field Gaussian guide holds each item's exact posterior under a Gaussian law of z: the
  // ELBO's maximum is the likelihood's. Neither bound may pass it beyond Monte Carlo error, and
  // training brings the ELBO within 3e-3 nats per item of it (a law of z off by 0.04 in its mean
  // costs more).
  const double elbo = j["elbo"], iwae = j["iwae"], iwae_se = j["iwae_se"];
  CHECK(iwae <= best + 4 * iwae_se + 1e-9);
  CHECK(best - elbo < 3e-3);
  // The learned law, saved for `ssmc density`: its draws' moments are the maximum likelihood's
  // (mean x̄, variance that of x less the noise's). Tolerances: the ELBO's 3e-3 nats per item
  // allow the mean to be off by sqrt(6e-3 var(x)) and the variance of x by 11%, plus 4 standard
  // errors of 20000 draws.
  const std::string draws = scratch_path("deconv_gauss_draws.csv");
  run_ok({ssmc_path(), "density", "sample", "--load", density, "--n", "20000", "--seed", "1",
          "--out", draws});
  const std::vector<double> z = read_table(draws).column("z");
  const double x_mean = sample_mean(x),
               x_var = sample_variance(x) * double(x.size() - 1) / double(x.size());
  CHECK(std::abs(sample_mean(z) - x_mean) < std::sqrt(6e-3 * x_var) + 4 * std::sqrt(x_var / 20000));
  CHECK(std::abs(sample_variance(z) + kNoise * kNoise - x_var) < 0.15 * x_var);
}

TEST_CASE("density latents: a trained density is saved and read back", "[vi][networks]"
                                                                       "[density-latent]") {
  const std::string data = items("deconv_gauss_truth", kGaussianTruth, "3");
  const std::string& exe = model_exe("deconv_gauss", kGaussianLearned);
  const std::string nets = scratch_path("deconv_gauss_nets.pt"),
                    guide = scratch_path("deconv_gauss_guide.pt");
  // An amortized guide, which carries over to a run that only evaluates.
  const std::vector<std::string> common = {exe,  "vi",     "--method",       "amortized", "--data",
                                           data, "--json", "--eval-samples", "500"};
  std::vector<std::string> train = common;
  train.insert(train.end(), {"--iterations", "1000", "--net-learning-rate", "0.02", "--save-nets",
                             nets, "--save-guide", guide});
  const nlohmann::json trained = run_json(train);
  REQUIRE(file_exists(nets));
  std::vector<std::string> again = common;
  again.insert(again.end(), {"--iterations", "0", "--load-nets", nets, "--load-guide", guide});
  const nlohmann::json loaded = run_json(again);
  std::vector<std::string> fresh = common;
  fresh.insert(fresh.end(), {"--iterations", "0", "--load-guide", guide});
  const nlohmann::json untrained = run_json(fresh);
  CAPTURE(trained.dump(), loaded.dump(), untrained.dump());
  const double se = std::hypot(double(trained["elbo_se"]), double(loaded["elbo_se"]));
  CHECK(std::abs(double(trained["elbo"]) - double(loaded["elbo"])) < 4 * se + 1e-4);
  CHECK(double(untrained["elbo"]) < double(loaded["elbo"]) - 0.1);
  // Read back into a run in single precision (the density's networks in float32): the same
  // bound to float32's rounding.
  std::vector<std::string> single = again;
  single.insert(single.end(), {"--precision", "single"});
  const nlohmann::json fast = run_json(single);
  CAPTURE(fast.dump());
  CHECK(std::abs(double(fast["elbo"]) - double(loaded["elbo"])) < 1e-4);
  // A file whose density was declared otherwise is refused, naming the declaration.
  const ProcessResult r =
      run_process({model_exe("deconv_gauss_k2",
                             learned("deconv_gauss_k2", "dif(dim = 1, components = 2)", "prior()")),
                   "vi", "--data", data, "--iterations", "0", "--load-nets", nets});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("density 'prior' was saved as dif(dim = 1, context = 0, components = 1, "
                   "hidden = [32, 32]), but the model declares dif(dim = 1, context = 0, "
                   "components = 2, hidden = [32, 32])") != std::string::npos);
}

TEST_CASE("density latents: a dif learns a bimodal law of z from noisy observations, where the "
          "best Gaussian cannot",
          "[vi][networks][density-latent]") {
  const std::string data = items("deconv_bimodal_truth", kBimodalTruth, "4");
  const std::vector<double> x = read_table(data).column("x");
  // The likelihood of the law that made the data: x ~ ½ N(±2, 0.3² + 0.5²).
  double truth = 0;
  for (double v : x)
    truth += std::log(0.5 * std::exp(normal_logpdf(v, -2, 0.34)) +
                      0.5 * std::exp(normal_logpdf(v, 2, 0.34))) /
             double(x.size());
  const double gaussian = gaussian_best(x);
  const nlohmann::json j =
      run_json({model_exe("deconv_bimodal",
                          learned("deconv_bimodal", "dif(dim = 1, components = 4, hidden = [16])",
                                  "prior()")),
                "vi", "--data", data, "--iterations", "2000", "--net-learning-rate", "0.03",
                "--schedule", "cosine", "--eval-samples", "1000", "--json"});
  CAPTURE(truth, gaussian, j.dump());
  // The data's likelihood under the true law is 0.5 nats per item above the best Gaussian's; the
  // learned law's lower bound must come within 0.05 of the truth (the mean-field guide loses a
  // little on the few items between the modes, whose posterior is bimodal).
  REQUIRE(truth - gaussian > 0.4);
  const double elbo = j["elbo"];
  CHECK(elbo > truth - 0.05);
  CHECK(double(j["iwae"]) > elbo - 1e-9);
}

TEST_CASE(
    "density latents: a dif with flow maps learns a correlated law of z, which location-scale "
    "maps cannot",
    "[vi][networks][density-latent]") {
  const std::string data = items("deconv_corr_truth", kCorrelatedTruth, "8");
  const auto [s00, s01, s11, best] = correlated_best(data);
  auto fit = [&](const std::string& name, const std::string& net) {
    return run_json({model_exe(name, "model " + name + " {\n  net prior : " + net +
                                         ";\n  latent z[n] : vector[2] ~ prior();\n  obs    x[n] "
                                         ": vector[2] ~ normal(z[n], 0.5);\n}\n"),
                     "vi", "--method", "fullrank", "--data", data, "--iterations", "2000",
                     "--net-learning-rate", "0.02", "--schedule", "cosine", "--eval-samples",
                     "1000", "--json"});
  };
  // One component with a MAF layer before it, without hidden units: z[1]'s shift and log-scale
  // are affine in z[0], a family that holds every Gaussian and adds only the log-scale's slope
  // (a chi-square(1)/2 gain on 200 items: above 0.02 per item with probability 5e-3). The
  // full-rank guide holds each item's posterior, so the ELBO's maximum is the likelihood's.
  const nlohmann::json mapped =
      fit("deconv_corr_maf", "dif(dim = 2, components = 1, maps = maf, layers = 1, hidden = none)");
  // One location-scale map: a diagonal Gaussian, short by the correlation's -log(1 - r²) / 2.
  const nlohmann::json affine = fit("deconv_corr_affine", "dif(dim = 2, components = 1)");
  const double r2 = s01 * s01 / (s00 * s11);
  CAPTURE(best, r2, mapped.dump(), affine.dump());
  CHECK(double(mapped["iwae"]) <= best + 0.02 + 4 * double(mapped["iwae_se"]));
  CHECK(best - double(mapped["elbo"]) < 0.01);
  REQUIRE(-0.5 * std::log(1 - r2) > 0.1);
  CHECK(best - double(affine["elbo"]) > 0.5 * -0.5 * std::log(1 - r2));
}

TEST_CASE("density latents: a cascade (a dif over a flow, `base = NET`) learns the correlated law "
          "its dif alone cannot, and is saved, read back and checked as one density",
          "[vi][networks][density-latent]") {
  const std::string data = items("deconv_corr_truth", kCorrelatedTruth, "8");
  const auto [s00, s01, s11, best] = correlated_best(data);
  auto source = [](const std::string& name, const std::string& flow, const std::string& prior) {
    return "model " + name + " {\n" + (flow.empty() ? "" : "  net flow : " + flow + ";\n") +
           "  net prior : " + prior +
           ";\n  latent z[n] : vector[2] ~ prior();\n  obs    x[n] : vector[2] ~ normal(z[n], "
           "0.5);\n}\n";
  };
  const std::string linear_maf = "maf(dim = 2, layers = 1, hidden = none)";
  const std::string& exe =
      model_exe("deconv_cascade",
                source("deconv_cascade", linear_maf, "dif(dim = 2, components = 1, base = flow)"));
  const std::string nets = scratch_path("deconv_cascade_nets.pt"),
                    density = scratch_path("deconv_cascade_density.pt");
  const nlohmann::json j =
      run_json({exe, "vi", "--method", "fullrank", "--data", data, "--iterations", "2000",
                "--net-learning-rate", "0.02", "--schedule", "cosine", "--eval-samples", "1000",
                "--save-nets", nets, "--save-density", density, "--json"});
  // The stages' weights, each model's alone (no training).
  auto weights = [&](const std::string& name, const std::string& prior) {
    return run_json({model_exe(name, source(name, "", prior)), "vi", "--data", data, "--iterations",
                     "0", "--eval-samples", "10", "--json"})["weights"]["prior"]
        .get<int64_t>();
  };
  const int64_t dif_alone = weights("deconv_cascade_dif", "dif(dim = 2, components = 1)"),
                maf_alone = weights("deconv_cascade_maf", linear_maf);
  CAPTURE(best, j.dump(), dif_alone, maf_alone);
  // One density, learned as one: the flow is part of it.
  CHECK(j["learned"] == nlohmann::json({"prior"}));
  CHECK(j["weights"] == nlohmann::json({{"prior", dif_alone + maf_alone}}));
  // The dif's one location-scale map over a linear MAF layer holds every Gaussian (the MAF gives
  // the correlation, which the dif alone lacks: the previous case), and adds only the MAF's
  // log-scale slope (chi-square(1)/2 over 200 items). The full-rank guide holds each item's
  // posterior, so the ELBO's maximum is the likelihood's.
  CHECK(double(j["iwae"]) <= best + 0.02 + 4 * double(j["iwae_se"]));
  CHECK(best - double(j["elbo"]) < 0.01);
  // The saved density is the cascade: its draws' covariance plus the noise's is S. A gap of 0.01
  // nats per item allows the correlation of x to be off by about 0.08 at S's 0.6; 20000 draws
  // add 0.01.
  const std::string draws = scratch_path("deconv_cascade_draws.csv");
  run_ok({ssmc_path(), "density", "sample", "--load", density, "--n", "20000", "--seed", "1",
          "--out", draws});
  const Table zt = read_table(draws);
  const std::vector<double> z0 = zt.column("z[0]"), z1 = zt.column("z[1]");
  double c01 = 0;
  for (size_t i = 0; i < z0.size(); ++i)
    c01 += (z0[i] - sample_mean(z0)) * (z1[i] - sample_mean(z1)) / double(z0.size() - 1);
  const double r_learned =
      c01 / std::sqrt((sample_variance(z0) + 0.25) * (sample_variance(z1) + 0.25));
  const double r_data = s01 / std::sqrt(s00 * s11);
  CAPTURE(r_learned, r_data);
  CHECK(std::abs(r_learned - r_data) < 0.1);
  // Read back by --load-nets, both stages' weights: the saved density's log-density at the draws
  // is the same.
  const std::string again = scratch_path("deconv_cascade_again.pt");
  run_ok({exe, "vi", "--data", data, "--iterations", "0", "--eval-samples", "10", "--load-nets",
          nets, "--save-density", again});
  auto mean_logpdf = [&](const std::string& saved) {
    return run_json({ssmc_path(), "density", "logpdf", "--load", saved, "--at", draws,
                     "--json"})["mean_logpdf"]
        .get<double>();
  };
  CHECK(mean_logpdf(again) == mean_logpdf(density));
  // A file of a cascade with another base is refused, naming both declarations.
  const ProcessResult r =
      run_process({model_exe("deconv_cascade2",
                             source("deconv_cascade2", "maf(dim = 2, layers = 2, hidden = none)",
                                    "dif(dim = 2, components = 1, base = flow)")),
                   "vi", "--data", data, "--iterations", "0", "--load-nets", nets});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("density 'prior' was saved as dif(dim = 2, context = 0, components = 1, "
                   "hidden = [32, 32], base = maf(dim = 2, layers = 1, hidden = none)), but the "
                   "model declares dif(dim = 2, context = 0, components = 1, hidden = [32, 32], "
                   "base = maf(dim = 2, layers = 2, hidden = none))") != std::string::npos);
}

TEST_CASE("density latents: a conditional dif reading a covariate reaches least squares",
          "[vi][networks][density-latent][inputs]") {
  // The covariate c: 200 evenly spaced values in [-1, 1].
  const std::string inputs = scratch_path("deconv_regression_inputs.csv");
  Table t;
  t.header = {"n", "c"};
  for (int n = 0; n < 200; ++n)
    t.rows.push_back({std::to_string(n), std::to_string(-1 + 2.0 * n / 199)});
  write_table(inputs, t);
  const std::string data =
      items("deconv_regression_truth", kRegressionTruth, "6", {"--inputs", inputs});
  const Table items = read_table(data);
  const std::vector<double> x = items.column("x"), c = items.column("c");
  // Least squares of x on c: x ~ N(a + b c, v), the best law of z being N(a + b c, v - 0.25).
  const double n = double(x.size()), mc = std::accumulate(c.begin(), c.end(), 0.0) / n,
               mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (c[i] - mc) * (x[i] - mx);
    sxx += (c[i] - mc) * (c[i] - mc);
  }
  const double b = sxy / sxx, a = mx - b * mc;
  double v = 0;
  for (size_t i = 0; i < x.size(); ++i)
    v += std::pow(x[i] - a - b * c[i], 2) / n;
  const double best = -0.5 * std::log(v) - kLogSqrtTwoPi - 0.5;
  const nlohmann::json j =
      run_json({model_exe("deconv_regression",
                          learned("deconv_regression",
                                  "dif(dim = 1, context = 1, components = 1, hidden = none)",
                                  "prior(c[n])", "  input c[n];\n")),
                "vi", "--data", data, "--iterations", "2000", "--net-learning-rate", "0.02",
                "--schedule", "cosine", "--eval-samples", "1000", "--json"});
  CAPTURE(a, b, v, best, j.dump());
  // Without hidden layers the dif's location and log-scale are affine in c: the family holds
  // least squares' law of z, and adds only a log-scale's slope, whose fit to 200 items gains
  // chi-square(1)/2 nats (above 0.03 per item with probability 5e-4).
  CHECK(double(j["iwae"]) <= best + 0.03 + 4 * double(j["iwae_se"]));
  CHECK(best - double(j["elbo"]) < 3e-3);
}

TEST_CASE("density latents: only vi runs them, and the language's rules are errors",
          "[networks][density-latent]") {
  const std::string data = items("deconv_gauss_truth", kGaussianTruth, "3");
  const std::string& exe =
      model_exe("deconv_gauss", learned("deconv_gauss", "dif(dim = 1, components = 1)", "prior()"));
  ProcessResult r = run_process({exe, "simulate", "--T", "3"});
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("drawing from a learned density in simulate is not served yet") !=
        std::string::npos);
  r = run_process({exe, "filter", "--data", data});
  CHECK(r.exit_code != 0);
  // --save-density needs a density, and never overwrites an input.
  r = run_process({model_exe("deconv_gauss_truth", kGaussianTruth), "vi", "--data", data,
                   "--iterations", "0", "--save-density", scratch_path("none.pt")});
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("--save-density writes a model's one learned density; model "
                   "'deconv_gauss_truth' declares none") != std::string::npos);
  r = run_process({exe, "vi", "--data", data, "--iterations", "0", "--save-density", data});
  CHECK(r.exit_code != 0);
  CHECK(read_table(data).rows.size() == 200);
}
