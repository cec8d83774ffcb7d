// End-to-end tests of `vi` on state-space models: a density fitted to the posterior of the
// parameters, against quadrature with a Kalman likelihood written here. A local level model's two
// noise scales (a correlated posterior): the full-rank Gaussian's ELBO within a few hundredths of
// log p(y), its moments the posterior's, and the importance-weighted log evidence of the draws
// equal to log p(y) for both Gaussians; the mean-field draws resampled by their Pareto-smoothed
// weights have the posterior's moments, which the Gaussian's own draws miss. A coefficient whose
// sign the data cannot tell (a posterior with two modes): a Gaussian's ELBO falls short by log 2, a
// DIF's does not, and its draws fall on both sides; its saved density reads back. The refusals
// (a plate model's --param-guide: test_plate_parameter_vi.cpp).
#include "support.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <numbers>
#include <string>
#include <tuple>
#include <vector>

using namespace e2e;

namespace {

const char* kLevel = R"(
model level_vi {
  param q ~ half_normal(1) = 1;
  param r ~ half_normal(1) = 1;
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ normal(x[t-1], q);
  y[t] ~ normal(x[t], r);
}
)";

// y_t = b x_t + noise with x symmetric: b and -b explain the data equally.
const char* kSignFlip = R"(
model signflip {
  param b ~ normal(0, 1) = 0.5;
  param phi = 0.8;
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ normal(phi * x[t-1], 1);
  y[t] ~ normal(b * x[t], 0.5);
}
)";

// "param q ~ half_normal(1) = 1;" in kLevel.
std::string fmt_param(const char* name) {
  return std::string("param ") + name + " ~ half_normal(1) = 1;";
}

double half_normal_log_density(double s) {
  return 0.5 * std::log(2 / std::numbers::pi) - s * s / 2;
}

} // namespace

TEST_CASE("vi of a state-space model's parameters: Gaussians against quadrature", "[vi][params]") {
  const std::string& exe = model_exe("level_vi", kLevel);
  const std::string data = scratch_path("level_vi.csv");
  run_ok({exe, "simulate", "--T", "100", "--seed", "5", "--param", "q=0.4", "--param", "r=0.6",
          "--out", data});
  const std::vector<double> y = read_table(data).column("y");
  // q and r in (0, 3): the prior's mass beyond 3 and the likelihood there are negligible.
  const GridPosterior g = grid_posterior(
      [&](double q, double r) {
        return scalar_kalman_loglik(y, 1, q * q, 1, r * r, 1) + half_normal_log_density(q) +
               half_normal_log_density(r);
      },
      0, 3, 0, 3, 300);
  const double log_z = g.log_integral;
  for (const char* family : {"fullrank", "meanfield"}) {
    INFO(family);
    const std::string out = scratch_path(std::string("level_vi_") + family + ".csv");
    const nlohmann::json j =
        run_json({exe, "vi", "--data", data, "--method", family, "--samples", "4", "--iterations",
                  "1500", "--schedule", "cosine", "--out", out, "--json", "--seed", "3"});
    CAPTURE(j.dump(), log_z, g.mean_a, g.sd_a, g.mean_b, g.sd_b);
    CHECK(j["likelihood"] == "rts");
    CHECK(j["learned"] == nlohmann::json({"q", "r"}));
    const double elbo = j["elbo"], elbo_se = j["elbo_se"];
    CHECK(elbo <= log_z + 4 * elbo_se); // a bound
    // The draws reweighted by p / q estimate log p(y) whatever q's shape.
    CHECK(j["pareto_k"].is_number());
    CHECK(std::abs(double(j["log_evidence"]) - log_z) < 4 * double(j["log_evidence_se"]) + 0.01);
    if (std::string(family) == "fullrank") {
      CHECK(log_z - elbo < 0.05);
      const nlohmann::json& s = j["summary"];
      CHECK(std::abs(double(s["q"]["mean"]) - g.mean_a) < 0.15 * g.sd_a);
      CHECK(std::abs(double(s["r"]["mean"]) - g.mean_b) < 0.15 * g.sd_b);
      CHECK(double(s["q"]["sd"]) == Approx(g.sd_a).epsilon(0.15));
      CHECK(double(s["r"]["sd"]) == Approx(g.sd_b).epsilon(0.15));
    }
    // CmdStan's layout: the mean first (lp__, log_p__, log_g__ 0), then 1000 draws.
    const Table t = read_stan_csv(out);
    CHECK(t.header == std::vector<std::string>{"lp__", "log_p__", "log_g__", "q", "r"});
    REQUIRE(t.rows.size() == 1001);
    CHECK(t.rows[0][1] == "0");
    CHECK(std::stod(t.rows[1][1]) < 0);
  }
  // Difs of one component over these data, trained alike; `extra` shapes the family.
  auto one_component_dif = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {exe,        "vi",  "--data",       data,
                                     "--method", "dif", "--components", "1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.insert(argv.end(),
                {"--hidden", "16", "--net-learning-rate", "0.01", "--samples", "4", "--iterations",
                 "1500", "--schedule", "cosine", "--json", "--seed", "3"});
    return run_json(argv);
  };
  // A dif of one component whose map starts with a MAF layer (4.3.8): a Gaussian with the
  // scales' correlation, which the layer's shift of r by a function of q holds, as fullrank's.
  const nlohmann::json mapped = one_component_dif({"--maps", "maf", "--layers", "1"});
  CAPTURE(mapped.dump(), log_z);
  CHECK(double(mapped["elbo"]) <= log_z + 4 * double(mapped["elbo_se"]));
  CHECK(log_z - double(mapped["elbo"]) < 0.05);
  // A cascade (--base): the same dif with location-scale maps, over a linear MAF layer, which
  // gives it the correlation its one diagonal map lacks (the dif alone is a diagonal Gaussian,
  // meanfield's family).
  const nlohmann::json cascade = one_component_dif({"--base", "maf", "--layers", "1"});
  const nlohmann::json diagonal = one_component_dif({});
  CAPTURE(cascade.dump(), diagonal.dump());
  CHECK(double(cascade["elbo"]) <= log_z + 4 * double(cascade["elbo_se"]));
  CHECK(log_z - double(cascade["elbo"]) < 0.05);
  CHECK(double(cascade["elbo"]) > double(diagonal["elbo"]) + 4 * double(diagonal["elbo_se"]));

  // The mean-field Gaussian's draws resampled by their Pareto-smoothed weights: the posterior's
  // moments, which the Gaussian alone misses (it ignores the scales' correlation).
  const std::vector<std::string> meanfield = {
      exe, "vi",           "--data", data,         "--method", "meanfield", "--samples",
      "4", "--iterations", "1500",   "--schedule", "cosine",   "--json",    "--seed",
      "3", "--draws",      "4000"};
  const nlohmann::json raw = run_json(meanfield);
  std::vector<std::string> resampled = meanfield;
  resampled.push_back("--psis-resample");
  const nlohmann::json psis = run_json(resampled);
  CAPTURE(raw.dump(), psis.dump());
  CHECK(psis["psis_resample"] == true);
  CHECK(psis["pareto_k"] == raw["pareto_k"]); // the diagnostics are q's own draws'
  for (const auto& [name, mean, sd] :
       {std::tuple{"q", g.mean_a, g.sd_a}, std::tuple{"r", g.mean_b, g.sd_b}}) {
    const nlohmann::json& p = psis["summary"][name];
    CHECK(std::abs(double(p["mean"]) - mean) < 0.1 * sd);
    CHECK(double(p["sd"]) == Approx(sd).epsilon(0.1));
  }
  // What it mends: the Gaussian's own sd of r is further off.
  CHECK(std::abs(double(psis["summary"]["r"]["sd"]) / g.sd_b - 1) <
        std::abs(double(raw["summary"]["r"]["sd"]) / g.sd_b - 1));
}

TEST_CASE("vi of a state-space model's parameters: a DIF holds both modes a Gaussian cannot",
          "[vi][params][dif]") {
  const std::string& exe = model_exe("signflip", kSignFlip);
  const std::string data = scratch_path("signflip.csv");
  run_ok({exe, "simulate", "--T", "60", "--seed", "2", "--param", "b=1", "--out", data});
  const std::vector<double> y = read_table(data).column("y");
  // The posterior of b on (-4, 4) by the midpoint rule: log p(y), E|b| and sd|b|.
  constexpr int kCells = 8000;
  std::vector<double> log_f(kCells);
  double top = -INFINITY;
  for (int i = 0; i < kCells; ++i) {
    const double b = -4 + 8 * (i + 0.5) / kCells;
    log_f[i] = scalar_kalman_loglik(y, 0.8, 1, b, 0.25, 1) - b * b / 2 - 0.5 * std::log(2 * M_PI);
    top = std::max(top, log_f[i]);
  }
  double z = 0, m1 = 0, m2 = 0;
  for (int i = 0; i < kCells; ++i) {
    const double b = std::abs(-4 + 8 * (i + 0.5) / kCells), w = std::exp(log_f[i] - top);
    z += w;
    m1 += w * b;
    m2 += w * b * b;
  }
  const double log_z = top + std::log(z * 8 / kCells), mean_abs = m1 / z,
               sd_abs = std::sqrt(m2 / z - mean_abs * mean_abs);

  const std::string guide = scratch_path("signflip_dif.pt"), out = scratch_path("signflip.csv.out");
  const std::vector<std::string> common = {exe,      "vi",         "--data",    data,
                                           "--fix",  "phi",        "--samples", "4",
                                           "--json", "--schedule", "cosine",    "--iterations"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = common;
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run_json(argv);
  };
  const nlohmann::json gauss = with({"1000", "--method", "meanfield", "--seed", "7"});
  const nlohmann::json dif =
      with({"2000", "--method", "dif", "--components", "8", "--hidden", "16", "--net-learning-rate",
            "0.01", "--save-guide", guide, "--out", out, "--seed", "7"});
  CAPTURE(gauss.dump(), dif.dump(), log_z, mean_abs, sd_abs);
  // The Gaussian sits on one mode: its KL to the posterior is log 2 (the modes barely overlap).
  CHECK(log_z - double(gauss["elbo"]) == Approx(std::log(2.0)).margin(0.1));
  CHECK(double(dif["elbo"]) <= log_z + 4 * double(dif["elbo_se"]));
  CHECK(log_z - double(dif["elbo"]) < 0.1); // about 0.04 after 2000 iterations
  CHECK(std::abs(double(dif["log_evidence"]) - log_z) < 4 * double(dif["log_evidence_se"]) + 0.01);
  CHECK(dif["family"] == "dif(K = 8, hidden = [16]) over normal");
  const std::vector<double> b = read_stan_csv(out).column("b");
  REQUIRE(b.size() == 1001);
  double positive = 0, abs_mean = 0;
  for (size_t i = 1; i < b.size(); ++i) { // row 0 is q's mean
    positive += b[i] > 0 ? 1e-3 : 0;
    abs_mean += std::abs(b[i]) * 1e-3;
  }
  CHECK(std::abs(positive - 0.5) < 4 * 0.5 / std::sqrt(1000.0));
  CHECK(std::abs(abs_mean - mean_abs) < 4 * sd_abs / std::sqrt(1000.0) + 0.01);

  // Flow maps over one learned parameter would be affine maps of the component: refused.
  const ProcessResult one = run_process({exe, "vi", "--data", data, "--fix", "phi", "--method",
                                         "dif", "--maps", "maf", "--iterations", "1"});
  CHECK(one.exit_code == 1);
  CHECK(one.err.find("vi: --maps maf over one learned parameter") != std::string::npos);

  // The saved density reads back: evaluated without training, the same ELBO within its errors.
  const nlohmann::json back = with({"0", "--method", "dif", "--components", "8", "--hidden", "16",
                                    "--load-guide", guide, "--seed", "8"});
  CHECK(std::abs(double(back["elbo"]) - double(dif["elbo"])) <
        4 * std::hypot(double(back["elbo_se"]), double(dif["elbo_se"])));
  const ProcessResult other = run_process({exe, "vi", "--data", data, "--fix", "phi", "--method",
                                           "dif", "--components", "4", "--load-guide", guide});
  CHECK(other.exit_code == 1);
  CHECK(other.err.find("holds a dif(K = 8, hidden = [16]) over normal, and --method dif with these "
                       "options is a dif(K = 4, hidden = [64]) over normal") != std::string::npos);
}

// --prior on a state-space model: a density over (log q, log r) of N(0.5, 0.5^2) and N(0, 1), its
// columns in the other order (r, q), is the model's prior when q ~ lognormal(0.5, 0.5) and r ~
// lognormal(0, 1); with it, the model whose priors are half-normal targets that posterior (the
// file's density replaces the model's priors, it does not multiply them, and its columns are
// matched by name).
TEST_CASE("vi --prior: a density file as the prior of a state-space model's parameters",
          "[vi][params]") {
  const std::string& half = model_exe("level_vi", kLevel);
  std::string lognormal = kLevel;
  for (const auto& [p, prior] : {std::pair{"q", "lognormal(0.5, 0.5)"}, {"r", "lognormal(0, 1)"}})
    lognormal.replace(lognormal.find(fmt_param(p)), fmt_param(p).size(),
                      std::string("param ") + p + " ~ " + prior + " = 1;");
  lognormal.replace(lognormal.find("level_vi"), 8, "level_ln");
  const std::string& ln = model_exe("level_ln", lognormal);
  const std::string data = scratch_path("level_prior.csv");
  run_ok({half, "simulate", "--T", "60", "--seed", "3", "--param", "q=0.5", "--param", "r=0.7",
          "--out", data});
  // r = ±1 and q = 0.5 ± 0.5 over a grid of signs, uncorrelated: `--model normal` fits their
  // means and (population) sds exactly.
  std::string points = "r,q\n";
  for (int i = 0; i < 10000; ++i)
    points += std::string(i % 2 == 0 ? "1" : "-1") + "," + ((i / 2) % 2 == 0 ? "1" : "0") + "\n";
  const std::string points_file = scratch_path("level_prior_points.csv"),
                    prior = scratch_path("level_prior.pt");
  write_file(points_file, points);
  run_ok(
      {ssmc_path(), "density", "fit", "--data", points_file, "--model", "normal", "--save", prior});
  const std::vector<std::string> common = {
      "vi",           "--data", data,         "--method", "fullrank", "--samples", "4",
      "--iterations", "1500",   "--schedule", "cosine",   "--json",   "--seed",    "5"};
  std::vector<std::string> a = {ln}, b = {half};
  a.insert(a.end(), common.begin(), common.end());
  b.insert(b.end(), common.begin(), common.end());
  b.insert(b.end(), {"--prior", prior});
  const nlohmann::json model_prior = run_json(a), file_prior = run_json(b);
  CAPTURE(model_prior.dump(), file_prior.dump());
  // One target and one seed: the two runs agree but for rounding (an ignored or misread --prior
  // moves the evidence by tenths of a nat).
  CHECK(double(file_prior["elbo"]) == Approx(double(model_prior["elbo"])).margin(0.01));
  CHECK(double(file_prior["log_evidence"]) ==
        Approx(double(model_prior["log_evidence"])).margin(0.01));
  for (const char* p : {"q", "r"}) {
    const double sd = model_prior["summary"][p]["sd"];
    CHECK(std::abs(double(model_prior["summary"][p]["mean"]) -
                   double(file_prior["summary"][p]["mean"])) < 0.15 * sd);
  }
}

// --laplace-start on a posterior that is exactly Gaussian (an initial level and a drift of a
// linear-Gaussian model, under Gaussian priors): the full-rank Gaussian starts at the posterior
// itself, so without a step of training log p - log q is the same at every draw (the ELBO's se 0,
// every draw's weight equal) and the ELBO is log p(y); the mean-field Gaussian starts at its
// optimum. On the local level model's scales, whose
// posterior is not Gaussian, it starts closer: after 30 steps its ELBO is above the default
// start's.
TEST_CASE("vi --laplace-start: exact on a Gaussian posterior, closer elsewhere", "[vi][params]") {
  const std::string& exe = model_exe("drift_vi", R"(
model drift_vi {
  param m0 ~ normal(0, 10) = 0;
  param d ~ normal(0, 1) = 0;
  state x : real;
  obs y : real;
  x[0] ~ normal(m0, 1);
  x[t] ~ normal(x[t-1] + d, 0.5);
  y[t] ~ normal(x[t], 0.7);
}
)");
  const std::string data = scratch_path("drift_vi.csv");
  run_ok({exe, "simulate", "--T", "50", "--seed", "2", "--param", "m0=1", "--param", "d=0.3",
          "--out", data});
  const nlohmann::json j = run_json({exe, "vi", "--data", data, "--method", "fullrank",
                                     "--laplace-start", "--iterations", "0", "--json"});
  CAPTURE(j.dump());
  CHECK(double(j["elbo_se"]) < 1e-5);
  CHECK(double(j["importance_ess"]) > 999.9);
  CHECK(double(j["elbo"]) == Approx(double(j["log_evidence"])).margin(1e-5));
  CHECK(j["warnings"].empty());
  // The mean-field Gaussian starts at the best diagonal Gaussian (scales 1 / sqrt of the
  // information's diagonal): training does not raise its ELBO.
  const nlohmann::json untrained = run_json({exe, "vi", "--data", data, "--method", "meanfield",
                                             "--laplace-start", "--iterations", "0", "--json"});
  const nlohmann::json trained =
      run_json({exe, "vi", "--data", data, "--method", "meanfield", "--samples", "4",
                "--iterations", "2000", "--schedule", "cosine", "--json"});
  CAPTURE(untrained.dump(), trained.dump());
  CHECK(std::abs(double(untrained["elbo"]) - double(trained["elbo"])) <
        4 * std::hypot(double(untrained["elbo_se"]), double(trained["elbo_se"])) + 0.005);

  const std::string& level = model_exe("level_vi", kLevel);
  const std::string level_data = scratch_path("level_laplace.csv");
  run_ok({level, "simulate", "--T", "200", "--seed", "8", "--param", "q=0.3", "--param", "r=0.8",
          "--out", level_data});
  auto elbo_after = [&](bool laplace) {
    std::vector<std::string> argv = {level,      "vi",        "--data", level_data,     "--method",
                                     "fullrank", "--samples", "4",      "--iterations", "30",
                                     "--json",   "--seed",    "1"};
    if (laplace)
      argv.push_back("--laplace-start");
    return double(run_json(argv)["elbo"]);
  };
  const double from_values = elbo_after(false), from_laplace = elbo_after(true);
  CAPTURE(from_values, from_laplace);
  CHECK(from_laplace > from_values + 0.5);
}

TEST_CASE("vi of a state-space model's parameters: the refusals", "[vi][params]") {
  const std::string& exe = model_exe("signflip", kSignFlip);
  const std::string data = scratch_path("signflip_refusals.csv");
  run_ok({exe, "simulate", "--T", "20", "--seed", "2", "--out", data});
  auto refused = [&](std::vector<std::string> extra, const std::string& message) {
    std::vector<std::string> argv = {exe, "vi", "--data", data, "--iterations", "1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    const ProcessResult r = run_process(argv);
    CAPTURE(r.err);
    CHECK(r.exit_code == 1);
    CHECK(r.err.find(message) != std::string::npos);
  };
  refused({}, "vi: parameter 'phi' has no prior; give it one (`param phi ~ ...`) or keep it at "
              "its value with --fix phi");
  refused({"--fix", "phi", "--objective", "iwae"},
          "vi: --objective serves the guides of a model over a plate; model 'signflip' is a "
          "state-space model");
  refused({"--fix", "phi", "--method", "amortized"}, "the model is not over a plate");
  refused({"--fix", "phi", "--maps", "maf"},
          "vi: --maps does not apply to --method meanfield (it applies to dif)");
  refused({"--fix", "phi", "--method", "dif", "--layers", "2"},
          "vi: --layers does not apply to --method dif (it applies to maf, realnvp, dif with "
          "--maps maf or realnvp, and --base maf or realnvp)");
  refused({"--fix", "phi", "--method", "fullrank", "--base", "maf"},
          "vi: --base does not apply to --method fullrank (it applies to dif, maf, realnvp)");
  refused({"--fix", "phi", "--method", "maf", "--components", "3"},
          "vi: --components does not apply to --method maf (it applies to gmm, dif, and --base "
          "dif)");
  // A parameter kept at its value that has a prior: its density stays in the target, said aloud.
  const std::string& level = model_exe("level_vi", kLevel);
  const std::string level_data = scratch_path("level_vi_fix.csv");
  run_ok({level, "simulate", "--T", "20", "--seed", "2", "--out", level_data});
  const ProcessResult fixed = run_process(
      {level, "vi", "--data", level_data, "--fix", "q", "--iterations", "1", "--draws", "50"});
  CHECK(fixed.exit_code == 0);
  CHECK(fixed.err.find("warning: --fix q: its prior density at its value is a factor of the "
                       "target, so the ELBO and log_evidence estimate log p(y, q)") !=
        std::string::npos);
  // The parameters' flags on a plate model without --param-guide, whose parameters are then point
  // estimates; with it, each learned parameter needs a prior.
  const std::string& plate = model_exe("plate_vi_flags", R"(
model plate_vi_flags {
  param s ~ half_normal(1) = 1;
  latent z[n] ~ normal(0, 1);
  obs x[n] ~ normal(z[n], s);
}
)");
  const std::string items = scratch_path("plate_vi_flags.csv");
  run_ok({plate, "simulate", "--T", "10", "--seed", "1", "--out", items});
  for (const char* flag : {"--draws", "--psis-resample", "--item-guide"}) {
    std::vector<std::string> argv = {plate, "vi", "--data", items, "--iterations", "1", flag};
    if (std::string(flag) == "--draws")
      argv.push_back("10");
    if (std::string(flag) == "--item-guide")
      argv.push_back("linear");
    const ProcessResult r = run_process(argv);
    CAPTURE(r.err);
    CHECK(r.exit_code == 1);
    CHECK(r.err.find(std::string("vi: ") + flag +
                     " serves a density over the parameters; model 'plate_vi_flags' is over a "
                     "plate, whose parameters are point estimates unless --param-guide names a "
                     "family for them") != std::string::npos);
  }
  const std::string& no_prior = model_exe("plate_no_prior", R"(
model plate_no_prior {
  param s = 1;
  latent z[n] ~ normal(0, 1);
  obs x[n] ~ normal(z[n], s);
}
)");
  for (const auto& [argv, message] :
       {std::pair{std::vector<std::string>{no_prior, "vi", "--data", items, "--param-guide", "dif"},
                  "vi --param-guide: parameter 's' has no prior; give it one"},
        {{plate, "vi", "--data", items, "--param-guide", "meanfield", "--components", "3"},
         "vi: --components does not apply to --param-guide meanfield (it applies to gmm, dif, and "
         "--base dif)"},
        {{exe, "vi", "--data", data, "--fix", "phi", "--param-guide", "dif"},
         "vi: --param-guide serves the guides of a model over a plate"},
        {{exe, "vi", "--data", data, "--fix", "phi", "--layers", "3"},
         "vi: --layers does not apply to --method meanfield (it applies to maf, realnvp, dif with "
         "--maps maf or realnvp, and --base maf or realnvp)"},
        {{exe, "vi", "--data", data, "--fix", "phi", "--laplace-start", "--load-guide", "q.pt"},
         "vi: --laplace-start and --load-guide both choose where q starts; give one"},
        {{plate, "vi", "--data", items, "--param-guide", "meanfield", "--laplace-start"},
         "vi: --laplace-start needs the parameters' exact log posterior"},
        {{exe, "vi", "--data", data, "--fix", "phi", "--item-guide", "independent"},
         "vi: --item-guide serves the guides of a model over a plate"}}) {
    const ProcessResult r = run_process(argv);
    CAPTURE(r.err);
    CHECK(r.exit_code == 1);
    CHECK(r.err.find(message) != std::string::npos);
  }
  const std::string& nonlinear = model_exe("square_obs", R"(
model square_obs {
  param s ~ half_normal(1) = 1;
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ normal(0.5 * x[t-1], s);
  y[t] ~ normal(x[t] * x[t], 1);
}
)");
  const ProcessResult r = run_process({nonlinear, "vi", "--data", data});
  CAPTURE(r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("needs an exact likelihood and score: the likelihood is not exact") !=
        std::string::npos);
  CHECK(r.err.find("sample --method pmmh or smc2") != std::string::npos);
}
