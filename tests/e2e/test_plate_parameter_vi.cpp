// End-to-end tests of `vi --param-guide` on plate models: the parameters' density q(θ) trained
// jointly with the items' guides, against closed forms and quadrature. A Gaussian hierarchy whose
// mean-field optimum has a closed form (--item-guide independent), and whose posterior the items'
// guides given θ hold (--item-guide linear: the ELBO reaches log p(x), per-item, full-rank and
// amortized); a scale whose conditional sd moves with the draw; --prior files and sequential
// updating; the eight schools against quadrature, by a full-rank Gaussian and by a DIF.
#include "support.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

using namespace e2e;

// z_n ~ N(mu, 1), x_n ~ N(z_n, 0.5^2), mu ~ N(0, 10^2): the joint of (mu, z) is Gaussian with
// precision Λ (Λ_mu,mu = 0.01 + N, Λ_mu,z_n = -1, Λ_z_n,z_n = 5). A fully factorised Gaussian's
// optimum (--item-guide independent) has the exact means and variances 1 / Λ_ii, and KL(q || p) =
// (Σ log Λ_ii - log det Λ) / 2 = log((0.01 + N) / (0.01 + 0.8 N)) / 2; the marginal posterior of
// mu has precision 0.01 + 0.8 N. The items' guides given mu (--item-guide linear, the default)
// hold the exact posterior, z_n | mu, x ~ N((mu + 4 x_n) / 5, 1 / 5): KL 0 (checked below on a
// model with noisier items, where the factorised fit is far off).
TEST_CASE("vi --param-guide: a plate model's parameter with its items' latents, against the "
          "closed form",
          "[vi][params]") {
  const std::string& exe = model_exe("plate_mean", R"(
model plate_mean {
  param mu ~ normal(0, 10) = 0;
  latent z[n] ~ normal(mu, 1);
  obs x[n] ~ normal(z[n], 0.5);
}
)");
  const std::string data = scratch_path("plate_mean.csv");
  constexpr int kItems = 50;
  run_ok({exe, "simulate", "--T", std::to_string(kItems), "--seed", "4", "--param", "mu=2", "--out",
          data});
  const std::vector<double> x = read_table(data).column("x");
  const double n = kItems, precision = 0.01 + 0.8 * n;
  double sum = 0;
  for (double v : x)
    sum += v;
  const double mean = sum / 1.25 / precision;
  auto log_normal = [](double v, double m, double var) {
    return -0.5 * std::log(2 * M_PI * var) - (v - m) * (v - m) / (2 * var);
  };
  // log p(x) = log p(x | m) + log p(m) - log p(m | x) at m = the posterior mean.
  double log_z = log_normal(mean, 0, 100) + 0.5 * std::log(2 * M_PI / precision);
  for (double v : x)
    log_z += log_normal(v, mean, 1.25);
  const double kl = 0.5 * std::log((0.01 + n) / precision);

  const std::string draws = scratch_path("plate_mean_draws.csv"),
                    items = scratch_path("plate_mean_items.csv"),
                    saved = scratch_path("plate_mean_params.json");
  const nlohmann::json j = run_json({exe,
                                     "vi",
                                     "--data",
                                     data,
                                     "--param-guide",
                                     "meanfield",
                                     "--item-guide",
                                     "independent",
                                     "--samples",
                                     "4",
                                     "--iterations",
                                     "1500",
                                     "--schedule",
                                     "cosine",
                                     "--param-draws",
                                     draws,
                                     "--out",
                                     items,
                                     "--save",
                                     saved,
                                     "--json",
                                     "--seed",
                                     "2"});
  const nlohmann::json& p = j["parameters"];
  CAPTURE(p.dump(), log_z, mean, kl);
  CHECK(p["learned"] == nlohmann::json({"mu"}));
  CHECK(p["family"] == "gaussian(diagonal covariance)");
  CHECK(p["item_guide"] == "independent");
  const double elbo = p["elbo"], elbo_se = p["elbo_se"];
  CHECK(elbo <= log_z + 4 * elbo_se);
  CHECK(std::abs(elbo - (log_z - kl)) < 4 * elbo_se + 0.05);
  // The importance-weighted draws: log p(x) whatever q's shape (each weight's p(x | θ) an
  // unbiased estimate from the items' guides).
  CHECK(std::abs(double(p["log_evidence"]) - log_z) < 4 * double(p["log_evidence_se"]) + 0.02);
  const nlohmann::json& mu = p["summary"]["mu"];
  const double sd_q = 1 / std::sqrt(0.01 + n); // narrower than the posterior's, as mean-field is
  // The draws' mean: Monte Carlo se sd_q / sqrt(1000) = 0.03 sd_q, plus the optimiser's error.
  CHECK(std::abs(double(mu["mean"]) - mean) < 0.2 * sd_q);
  CHECK(double(mu["sd"]) == Approx(sd_q).epsilon(0.1));
  // The draws in CmdStan's layout; the items' guides at the draws' mean; --save that mean.
  const Table t = read_stan_csv(draws);
  CHECK(t.header == std::vector<std::string>{"lp__", "log_p__", "log_g__", "mu"});
  REQUIRE(t.rows.size() == 1001);
  const Table per_item = read_table(items);
  REQUIRE(per_item.rows.size() == kItems);
  const std::vector<double> z_mean = per_item.column("mean_z");
  for (int i = 0; i < kItems; i += 10) // E[z_n | x] = (E[mu] + 4 x_n) / 5
    CHECK(std::abs(z_mean[i] - (mean + 4 * x[i]) / 5) < 0.05);
  const nlohmann::json params = nlohmann::json::parse(read_file(saved));
  CHECK(double(params["mu"]) == Approx(double(mu["mean"])).margin(1e-9));

  // The items' guides given mu (the default) on the same model with noise sd 3, where the items
  // say little each and z_n leans on mu: z_n | mu, x ~ N(0.9 mu + 0.1 x_n, 0.9), and mu's
  // posterior has precision 0.01 + N / 10. The family holds the posterior, so the ELBO reaches
  // log p(x) and q(mu) the posterior's sd (the mean-field fit is 1.2 nats short and 3 times too
  // narrow); the reported items' moments are marginal over mu: Var(z_n | x) = 0.9 + 0.81 Var(mu
  // | x), 9% above the conditional guide's own.
  const std::string& wide = model_exe("plate_wide", R"(
model plate_wide {
  param mu ~ normal(0, 10) = 0;
  latent z[n] ~ normal(mu, 1);
  obs x[n] ~ normal(z[n], 3);
}
)");
  const std::string wide_data = scratch_path("plate_wide.csv"),
                    wide_items = scratch_path("plate_wide_items.csv");
  run_ok({wide, "simulate", "--T", std::to_string(kItems), "--seed", "4", "--param", "mu=2",
          "--out", wide_data});
  const std::vector<double> xw = read_table(wide_data).column("x");
  double sum_w = 0;
  for (double v : xw)
    sum_w += v;
  const double precision_w = 0.01 + n / 10, mean_w = sum_w / 10 / precision_w,
               sd_w = 1 / std::sqrt(precision_w);
  double log_zw = log_normal(mean_w, 0, 100) + 0.5 * std::log(2 * M_PI / precision_w);
  for (double v : xw)
    log_zw += log_normal(v, mean_w, 10);
  const nlohmann::json linear =
      run_json({wide, "vi", "--data", wide_data, "--param-guide", "meanfield", "--samples", "4",
                "--iterations", "3000", "--schedule", "cosine", "--out", wide_items, "--json",
                "--seed", "2"});
  const nlohmann::json& pl = linear["parameters"];
  CAPTURE(pl.dump(), log_zw, mean_w, sd_w);
  CHECK(pl["item_guide"] == "linear");
  CHECK(double(pl["elbo"]) <= log_zw + 4 * double(pl["elbo_se"]));
  CHECK(std::abs(double(pl["elbo"]) - log_zw) < 4 * double(pl["elbo_se"]) + 0.02);
  CHECK(std::abs(double(pl["summary"]["mu"]["mean"]) - mean_w) < 0.2 * sd_w);
  CHECK(double(pl["summary"]["mu"]["sd"]) == Approx(sd_w).epsilon(0.05));
  const Table wide_per_item = read_table(wide_items);
  const std::vector<double> wz_mean = wide_per_item.column("mean_z"),
                            wz_sd = wide_per_item.column("sd_z");
  for (int i = 0; i < kItems; i += 5) {
    // Monte Carlo: 4000 draws of sd 1 (se 0.016), plus q(mu)'s own error.
    CHECK(std::abs(wz_mean[i] - (0.9 * mean_w + 0.1 * xw[i])) < 0.1);
    CHECK(wz_sd[i] == Approx(std::sqrt(0.9 + 0.81 * sd_w * sd_w)).epsilon(0.03));
  }
  // The amortized encoder outputs the gains too when asked: a linear one (--hidden "") of x_n can
  // give every item its exact conditional, so it reaches the same.
  const nlohmann::json encoder = run_json({wide,
                                           "vi",
                                           "--data",
                                           wide_data,
                                           "--method",
                                           "amortized",
                                           "--hidden",
                                           "",
                                           "--param-guide",
                                           "meanfield",
                                           "--item-guide",
                                           "linear",
                                           "--samples",
                                           "4",
                                           "--iterations",
                                           "3000",
                                           "--schedule",
                                           "cosine",
                                           "--json",
                                           "--seed",
                                           "2"});
  const nlohmann::json& pe = encoder["parameters"];
  CAPTURE(pe.dump());
  CHECK(pe["item_guide"] == "linear");
  CHECK(std::abs(double(pe["elbo"]) - log_zw) < 4 * double(pe["elbo_se"]) + 0.02);
  CHECK(double(pe["summary"]["mu"]["sd"]) == Approx(sd_w).epsilon(0.05));

  // A scale: z_n ~ N(0, s), x_n ~ N(z_n, s), s ~ lognormal(0, 1). Given s, z_n | x ~ N(x_n / 2,
  // s² / 2): its log sd is affine in u = log s, so the linear guide holds the posterior again
  // (q(u) Gaussian up to the skew of p(u | x), negligible at 50 items), which the path of the sd
  // through the draw must carry (the full-rank guides' held Cholesky factor without it diverges:
  // 60 nats short, checked). log p(x) and s's moments by quadrature over u.
  const std::string& scale = model_exe("plate_scale", R"(
model plate_scale {
  param s ~ lognormal(0, 1) = 1;
  latent z[n] ~ normal(0, s);
  obs x[n] ~ normal(z[n], s);
}
)");
  const std::string scale_data = scratch_path("plate_scale.csv");
  run_ok({scale, "simulate", "--T", std::to_string(kItems), "--seed", "3", "--param", "s=2",
          "--out", scale_data});
  double sum_sq = 0;
  for (double v : read_table(scale_data).column("x"))
    sum_sq += v * v;
  std::vector<double> log_f;
  constexpr double kLow = -3, kStep = 7.0 / 20000;
  for (int k = 0; k <= 20000; ++k) {
    const double u = kLow + k * kStep;
    log_f.push_back(log_normal(u, 0, 1) - 0.5 * n * std::log(2 * M_PI * 2) - n * u -
                    sum_sq / (4 * std::exp(2 * u)));
  }
  const double top = *std::max_element(log_f.begin(), log_f.end());
  double mass = 0, m1 = 0, m2 = 0;
  for (int k = 0; k <= 20000; ++k) {
    const double f = std::exp(log_f[k] - top), s_k = std::exp(kLow + k * kStep);
    mass += f;
    m1 += f * s_k;
    m2 += f * s_k * s_k;
  }
  const double log_zs = top + std::log(mass * kStep), mean_s = m1 / mass,
               sd_s = std::sqrt(m2 / mass - mean_s * mean_s);
  for (const char* method : {"meanfield", "fullrank"}) {
    const nlohmann::json r =
        run_json({scale, "vi", "--data", scale_data, "--method", method, "--param-guide",
                  "meanfield", "--samples", "4", "--iterations", "3000", "--schedule", "cosine",
                  "--json", "--seed", "2"});
    const nlohmann::json& ps = r["parameters"];
    CAPTURE(method, ps.dump(), log_zs, mean_s, sd_s);
    CHECK(std::abs(double(ps["elbo"]) - log_zs) < 4 * double(ps["elbo_se"]) + 0.02);
    CHECK(std::abs(double(ps["summary"]["s"]["mean"]) - mean_s) < 0.1 * sd_s);
    CHECK(double(ps["summary"]["s"]["sd"]) == Approx(sd_s).epsilon(0.1));
  }
  // Nothing to condition: the only latent estimated by the score function.
  const ProcessResult none =
      run_process({wide, "vi", "--data", wide_data, "--param-guide", "meanfield", "--estimator",
                   "score", "--item-guide", "linear", "--iterations", "1"});
  CAPTURE(none.err);
  CHECK(none.exit_code == 1);
  CHECK(none.err.find("vi --item-guide linear: no latent has a Gaussian of the guide's own") !=
        std::string::npos);

  // --prior: a density of mu from a file replaces the model's N(0, 10^2). `ssmc density fit
  // --model normal` on points 2.5 and 3.5 alternating is N(3, 0.5^2) (to 1e-4 in the sd); the
  // closed form is the one above with prior precision 4 about 3.
  std::string points = "mu\n";
  for (int i = 0; i < 10000; ++i)
    points += i % 2 == 0 ? "2.5\n" : "3.5\n";
  const std::string prior_points = scratch_path("plate_mean_prior.csv"),
                    prior_file = scratch_path("plate_mean_prior.pt");
  write_file(prior_points, points);
  run_ok({ssmc_path(), "density", "fit", "--data", prior_points, "--model", "normal", "--save",
          prior_file});
  const double precision4 = 4 + 0.8 * n, mean4 = (4 * 3 + sum / 1.25) / precision4;
  double log_z4 = log_normal(mean4, 3, 0.25) + 0.5 * std::log(2 * M_PI / precision4);
  for (double v : x)
    log_z4 += log_normal(v, mean4, 1.25);
  const double kl4 = 0.5 * std::log((4 + n) / precision4);
  const nlohmann::json with_prior =
      run_json({exe, "vi", "--data", data, "--param-guide", "meanfield", "--item-guide",
                "independent", "--samples", "4", "--iterations", "1500", "--schedule", "cosine",
                "--prior", prior_file, "--json", "--seed", "2"});
  const nlohmann::json& p4 = with_prior["parameters"];
  CAPTURE(p4.dump(), log_z4, mean4, kl4);
  CHECK(std::abs(double(p4["elbo"]) - (log_z4 - kl4)) < 4 * double(p4["elbo_se"]) + 0.05);
  CHECK(std::abs(double(p4["log_evidence"]) - log_z4) < 4 * double(p4["log_evidence_se"]) + 0.02);
  const double sd_q4 = 1 / std::sqrt(4 + n);
  CHECK(std::abs(double(p4["summary"]["mu"]["mean"]) - mean4) < 0.2 * sd_q4);
  CHECK(double(p4["summary"]["mu"]["sd"]) == Approx(sd_q4).epsilon(0.1));
  // Sequential updating: the posterior of the first 25 items, saved, is the prior of the last 25.
  // Given q_A = N(m_A, s_A^2) (its draws' moments), the mean-field fit of the last 25 has the
  // closed form above with that prior: mean (m_A / s_A^2 + Σ x / 1.25) / (1 / s_A^2 + 0.8 · 25),
  // sd 1 / sqrt(1 / s_A^2 + 25).
  std::string first = "x\n", last = "x\n";
  double sum_last = 0;
  for (int i = 0; i < kItems; ++i) {
    (i < kItems / 2 ? first : last) += fmt::format("{:.17g}\n", x[i]);
    if (i >= kItems / 2)
      sum_last += x[i];
  }
  const std::string first_file = scratch_path("plate_mean_a.csv"),
                    last_file = scratch_path("plate_mean_b.csv"),
                    posterior_a = scratch_path("plate_mean_a.pt");
  write_file(first_file, first);
  write_file(last_file, last);
  const std::vector<std::string> fit = {"--param-guide",
                                        "meanfield",
                                        "--item-guide",
                                        "independent",
                                        "--samples",
                                        "4",
                                        "--iterations",
                                        "1500",
                                        "--schedule",
                                        "cosine",
                                        "--json",
                                        "--seed",
                                        "3"};
  std::vector<std::string> fit_a = {exe,        "vi", "--data", first_file, "--save-param-guide",
                                    posterior_a};
  fit_a.insert(fit_a.end(), fit.begin(), fit.end());
  std::vector<std::string> fit_b = {exe, "vi", "--data", last_file, "--prior", posterior_a};
  fit_b.insert(fit_b.end(), fit.begin(), fit.end());
  const nlohmann::json a = run_json(fit_a)["parameters"], b = run_json(fit_b)["parameters"];
  const double m_a = a["summary"]["mu"]["mean"], s_a = a["summary"]["mu"]["sd"];
  const double half = kItems / 2, precision_b = 1 / (s_a * s_a) + 0.8 * half;
  const double mean_b = (m_a / (s_a * s_a) + sum_last / 1.25) / precision_b,
               sd_b = 1 / std::sqrt(1 / (s_a * s_a) + half);
  CAPTURE(a.dump(), b.dump(), mean_b, sd_b);
  CHECK(std::abs(double(b["summary"]["mu"]["mean"]) - mean_b) < 0.25 * sd_b);
  CHECK(double(b["summary"]["mu"]["sd"]) == Approx(sd_b).epsilon(0.1));

  // A density over other coordinates is refused, naming both.
  const std::string other = scratch_path("plate_mean_other.csv"),
                    other_file = scratch_path("plate_mean_other.pt");
  write_file(other, "sigma\n1\n2\n3\n");
  run_ok(
      {ssmc_path(), "density", "fit", "--data", other, "--model", "normal", "--save", other_file});
  const ProcessResult wrong = run_process({exe, "vi", "--data", data, "--param-guide", "meanfield",
                                           "--prior", other_file, "--iterations", "1"});
  CAPTURE(wrong.err);
  CHECK(wrong.exit_code == 1);
  CHECK(wrong.err.find("--prior " + other_file +
                       ": its columns are sigma, and the learned parameters' unconstrained "
                       "coordinates are mu") != std::string::npos);
}

// The eight schools (examples/schools.ssm, non-centred): two parameters, tau's on the log scale
// (the Jacobian's term in the target), against p(y | mu, tau) = Π N(y_n; mu, sigma_n² + tau²) on a
// grid. A mean-field guide of the effects narrows the posterior somewhat: the full-rank Gaussian's
// draws' moments stay within a third of an sd.
TEST_CASE("vi --param-guide: the eight schools against quadrature", "[vi][params]") {
  const std::string& exe = example_exe("schools");
  const std::string data = example_path("data/schools.csv");
  const Table t = read_table(data);
  const std::vector<double> y = t.column("y"), sigma = t.column("sigma");
  const GridPosterior g = grid_posterior(
      [&](double mu, double tau) {
        double lp = -0.5 * std::log(2 * M_PI * 25) - mu * mu / 50 + std::log(2) -
                    0.5 * std::log(2 * M_PI * 25) - tau * tau / 50;
        for (size_t n = 0; n < y.size(); ++n) {
          const double v = sigma[n] * sigma[n] + tau * tau;
          lp += -0.5 * std::log(2 * M_PI * v) - (y[n] - mu) * (y[n] - mu) / (2 * v);
        }
        return lp;
      },
      -30, 40, 0, 30, 600);
  // A full-rank Gaussian, and a DIF, whose mixture of maps follows the funnel towards tau = 0
  // closer (0.05 nats short of log p(x) in 2000 iterations, against the Gaussian's 0.2).
  for (const auto& [family, iterations, gap] :
       {std::tuple{"fullrank", "3000", 0.5}, std::tuple{"dif", "2000", 0.15}}) {
    SECTION(family) {
      const nlohmann::json j =
          run_json({exe, "vi", "--data", data, "--param-guide", family, "--samples", "4",
                    "--iterations", iterations, "--schedule", "cosine", "--json", "--seed", "1"});
      const nlohmann::json& p = j["parameters"];
      CAPTURE(family, p.dump(), g.log_integral, g.mean_a, g.sd_a, g.mean_b, g.sd_b);
      CHECK(p["learned"] == nlohmann::json({"mu", "tau"}));
      // A bound, short by the KL of q (about 0.2 nats for the Gaussian with the schools' guides
      // given θ, 0.3 with independent ones: bench/README.md). The importance weights' tail is
      // heavy here (k-hat 0.4 to 0.95 across seeds: the funnel towards tau = 0), so their
      // evidence is not checked: the closed-form test above does.
      CHECK(double(p["elbo"]) <= g.log_integral + 4 * double(p["elbo_se"]));
      CHECK(g.log_integral - double(p["elbo"]) < gap);
      const nlohmann::json& s = p["summary"];
      CHECK(std::abs(double(s["mu"]["mean"]) - g.mean_a) < 0.2 * g.sd_a);
      CHECK(std::abs(double(s["tau"]["mean"]) - g.mean_b) < 0.3 * g.sd_b);
      CHECK(double(s["mu"]["sd"]) == Approx(g.sd_a).epsilon(0.25));
      CHECK(double(s["tau"]["sd"]) == Approx(g.sd_b).epsilon(0.25));
    }
  }
}
