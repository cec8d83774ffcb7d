// End-to-end tests of covariates per item in plate models (`input x[n]`): a regression whose
// items' latent means are linear in a covariate, y_n = z_n + N(0, 0.5²), z_n ~ N(a + b x_n, s²),
// so that y_n ~ N(a + b x_n, s² + 0.25). Against closed forms: the log-likelihood (`filter`, by
// Kalman), the maximum likelihood estimate (least squares, `optimize`, and EM's closed-form
// M-steps), each item's posterior
// mean (`smooth`), the ELBO of `vi`'s Gaussian guides, which hold the exact posterior, and of an
// amortized encoder and a network that read the covariate; gibbs against Bayesian regression.
// `simulate` reads the covariates from --inputs. (The declaration errors: golden/diagnostics.)
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

const char* kRegression = R"(
model plate_regression {
  param a ~ normal(0, 10) = 0;
  param b ~ normal(0, 10) = 0;
  param s ~ half_normal(2) = 1;
  input x[n];
  latent z[n] ~ normal(a + b * x[n], s);
  obs y[n] ~ normal(z[n], 0.5);
}
)";

struct Items {
  std::string exe, data;
  std::vector<double> x, y;
};

// 200 items at covariates spread over [-2, 2], simulated at a = 1, b = -0.7, s = 0.8.
const Items& items() {
  static const Items d = [] {
    Items d{model_exe("plate_regression", kRegression), scratch_path("plate_inputs.csv"), {}, {}};
    std::string xs = "x\n";
    for (int i = 0; i < 200; ++i)
      xs += fmt::format("{}\n", -2 + 4.0 * i / 199);
    const std::string inputs = scratch_path("plate_inputs_x.csv");
    write_file(inputs, xs);
    run_ok({d.exe, "simulate", "--T", "200", "--inputs", inputs, "--seed", "4", "--param", "a=1",
            "--param", "b=-0.7", "--param", "s=0.8", "--out", d.data});
    const Table t = read_table(d.data);
    d.x = t.column("x");
    d.y = t.column("y");
    return d;
  }();
  return d;
}

double exact_loglik(const Items& d, double a, double b, double s) {
  const double v = s * s + 0.25;
  double ll = 0;
  for (size_t i = 0; i < d.y.size(); ++i) {
    const double r = d.y[i] - a - b * d.x[i];
    ll += -0.5 * (std::log(2 * std::numbers::pi * v) + r * r / v);
  }
  return ll;
}

// `vi` with the parameters kept at the simulation's a = 1, b = -0.7, s = 0.8, and the exact
// log-likelihood per item there, which its bounds are compared with.
nlohmann::json vi_at_truth(const std::string& exe, const Items& d,
                           const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {exe,       "vi",     "--data",  d.data,  "--param", "a=1",
                                   "--param", "b=-0.7", "--param", "s=0.8", "--fix",   "a",
                                   "--fix",   "b",      "--fix",   "s",     "--json"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return run_json(argv);
}
double exact_at_truth(const Items& d) {
  return exact_loglik(d, 1, -0.7, 0.8) / static_cast<double>(d.y.size());
}

// The least-squares line of y on x, and the mean of y.
struct Line {
  double a = 0, b = 0, mean_y = 0;
};
Line least_squares(const Items& d) {
  const double n = static_cast<double>(d.x.size());
  double mx = 0, my = 0;
  for (size_t i = 0; i < d.x.size(); ++i) {
    mx += d.x[i] / n;
    my += d.y[i] / n;
  }
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < d.x.size(); ++i) {
    sxy += (d.x[i] - mx) * (d.y[i] - my);
    sxx += (d.x[i] - mx) * (d.x[i] - mx);
  }
  return {my - sxy / sxx * mx, sxy / sxx, my};
}

} // namespace

TEST_CASE("plate inputs: simulate reads the covariates; filter's log-likelihood is exact",
          "[plate][inputs]") {
  const Items& d = items();
  REQUIRE(d.x.size() == 200);
  CHECK(d.x[0] == Approx(-2));
  CHECK(d.x[199] == Approx(2));
  // The simulated items follow the regression: the least-squares slope near -0.7.
  CHECK(least_squares(d).b == Approx(-0.7).margin(0.15));
  const nlohmann::json f =
      nlohmann::json::parse(run_ok({d.exe, "filter", "--data", d.data, "--param", "a=0.5",
                                    "--param", "b=0.3", "--param", "s=1.2", "--json"})
                                .out);
  CHECK(double(f["log_likelihood"]) == Approx(exact_loglik(d, 0.5, 0.3, 1.2)).epsilon(1e-10));
  // The covariate in what the model says of itself, and in what its relations read.
  CHECK(run_ok({d.exe, "info"}).out.find("covariates per item (columns of --data") !=
        std::string::npos);
  const std::string source = scratch_path("plate_regression.ssm");
  const std::string check = run_ok({ssmc_path(), "check", source}).out;
  CHECK(check.find("z[n]       ~ normal        reads input x[n]; params a, b, s") !=
        std::string::npos);
}

TEST_CASE("plate inputs: optimize gives least squares; smooth each item's posterior",
          "[plate][inputs]") {
  const Items& d = items();
  // Maximum likelihood: (a, b) by least squares, s² + 0.25 the mean squared residual.
  const double n = static_cast<double>(d.x.size());
  const auto [a, b, my] = least_squares(d);
  double rss = 0;
  for (size_t i = 0; i < d.x.size(); ++i)
    rss += std::pow(d.y[i] - a - b * d.x[i], 2);
  const double s = std::sqrt(rss / n - 0.25);
  const nlohmann::json o =
      nlohmann::json::parse(run_ok({d.exe, "optimize", "--data", d.data, "--json"}).out);
  CAPTURE(o.dump());
  CHECK(double(o["params"]["a"]) == Approx(a).epsilon(1e-5));
  CHECK(double(o["params"]["b"]) == Approx(b).epsilon(1e-5));
  CHECK(double(o["params"]["s"]) == Approx(s).epsilon(1e-5));
  CHECK(double(o["log_likelihood"]) == Approx(exact_loglik(d, a, b, s)).epsilon(1e-9));
  // EM: the coefficients of the covariate in closed form (least squares on the smoothed
  // latents), to the same estimate.
  const nlohmann::json em =
      nlohmann::json::parse(run_ok({d.exe, "optimize", "--method", "em", "--data", d.data, "--json",
                                    "--max-iterations", "500", "--tolerance", "1e-12"})
                                .out);
  CAPTURE(em.dump());
  for (const char* p : {"a", "b", "s"})
    CHECK(std::string(em["m_step"][p]).starts_with("closed form"));
  CHECK(double(em["params"]["a"]) == Approx(a).epsilon(1e-4));
  CHECK(double(em["params"]["b"]) == Approx(b).epsilon(1e-4));
  CHECK(double(em["params"]["s"]) == Approx(s).epsilon(1e-4));
  // Gibbs, each free item drawn from its own conditional (its prior reads x_n), s kept at 0.8:
  // (a, b) is Bayesian linear regression with known variance v = 0.89 and prior N(0, 100 I),
  // precision Λ = XᵀX / v + I / 100, mean Λ⁻¹ Xᵀy / v; z_n's posterior mean is w y_n + (1 - w)
  // (E[a] + E[b] x_n). The data without its z column, so that every item's latent is drawn.
  std::string unlabelled = "x,y\n";
  double sx = 0, sxx_ = 0, sy = 0, sxy_ = 0;
  for (size_t i = 0; i < d.x.size(); ++i) {
    unlabelled += fmt::format("{:.17g},{:.17g}\n", d.x[i], d.y[i]);
    sx += d.x[i];
    sxx_ += d.x[i] * d.x[i];
    sy += d.y[i];
    sxy_ += d.x[i] * d.y[i];
  }
  const std::string xy = scratch_path("plate_inputs_xy.csv");
  write_file(xy, unlabelled);
  const double v = 0.89, l00 = n / v + 0.01, l01 = sx / v, l11 = sxx_ / v + 0.01;
  const double det = l00 * l11 - l01 * l01, r0 = sy / v, r1 = sxy_ / v;
  const double post_a = (l11 * r0 - l01 * r1) / det, post_b = (l00 * r1 - l01 * r0) / det;
  const double sd_a = std::sqrt(l11 / det), sd_b = std::sqrt(l00 / det);
  const nlohmann::json g = nlohmann::json::parse(
      run_ok({d.exe, "sample", "--method", "gibbs", "--data", xy, "--fix", "s", "--param", "s=0.8",
              "--iterations", "4000", "--json", "--seed", "1"})
          .out);
  const nlohmann::json& gs = g["summary"];
  CAPTURE(gs["a"].dump(), gs["b"].dump(), post_a, post_b, sd_a, sd_b);
  CHECK(g["details"]["items_drawn"] == 200);
  for (const auto& [name, mean, sd] : {std::tuple{"a", post_a, sd_a}, {"b", post_b, sd_b}}) {
    CHECK(std::abs(double(gs[name]["mean"]) - mean) < 4 * double(gs[name]["mcse_mean"]));
    CHECK(double(gs[name]["sd"]) == Approx(sd).epsilon(0.05));
  }
  const double w0 = 0.64 / 0.89;
  for (int i : {1, 100, 200}) {
    const nlohmann::json& z = gs[fmt::format("z.{}", i)];
    const double expected = w0 * d.y[i - 1] + (1 - w0) * (post_a + post_b * d.x[i - 1]);
    CHECK(std::abs(double(z["mean"]) - expected) < 4 * double(z["mcse_mean"]));
  }

  // Each item's posterior mean: the prior mean a + b x and y weighted by their precisions.
  const std::string out = scratch_path("plate_inputs_smooth.csv");
  run_ok({d.exe, "smooth", "--data", d.data, "--param", "a=1", "--param", "b=-0.7", "--param",
          "s=0.8", "--out", out});
  const std::vector<double> mean = read_table(out).column("mean_z");
  REQUIRE(mean.size() == d.y.size());
  const double w = 0.64 / (0.64 + 0.25);
  for (size_t i = 0; i < d.y.size(); i += 37)
    CHECK(mean[i] == Approx(w * d.y[i] + (1 - w) * (1 - 0.7 * d.x[i])).epsilon(1e-9));
}

TEST_CASE("plate inputs: vi's Gaussian guides reach the exact log-likelihood",
          "[plate][inputs][vi]") {
  const Items& d = items();
  // One scalar latent per item with a Gaussian posterior: the mean-field guide holds it, so the
  // trained ELBO (per item, as the log-likelihood vi reports) is the log-likelihood but for the
  // Monte Carlo error of its estimate and the guides' last steps.
  const nlohmann::json v =
      vi_at_truth(d.exe, d, {"--iterations", "1500", "--learning-rate", "0.05", "--seed", "3"});
  CAPTURE(v.dump());
  const double exact = exact_at_truth(d);
  CHECK(double(v["log_likelihood"]) == Approx(exact).epsilon(1e-9));
  CHECK(std::abs(double(v["elbo"]) - exact) < 0.01 + 4 * double(v["elbo_se"]));
}

TEST_CASE("plate inputs: the amortized encoder reads the covariate", "[plate][inputs][vi]") {
  const Items& d = items();
  // The posterior mean of z_n, w y_n + (1 - w)(1 - 0.7 x_n), moves with x_n at a given y_n: an
  // encoder of [y_n, x_n] can follow it, and its ELBO reaches the log-likelihood but for the
  // encoder's approximation (one tanh layer; measured 3e-5 nats per item). Reading y_n alone
  // (as before covariates reached it) leaves (1 - w) 0.7 (x_n - E[x | y_n]) of the mean out:
  // 0.075 nats per item short, measured.
  const nlohmann::json v = vi_at_truth(d.exe, d,
                                       {"--method", "amortized", "--iterations", "2000",
                                        "--samples", "4", "--schedule", "cosine", "--seed", "3"});
  CAPTURE(v.dump());
  const double exact = exact_at_truth(d);
  CHECK(double(v["elbo"]) <= exact + 4 * double(v["elbo_se"]));
  CHECK(std::abs(double(v["elbo"]) - exact) < 0.01 + 4 * double(v["elbo_se"]));
}

TEST_CASE("plate inputs: a network reads the covariate", "[plate][inputs][vi][networks]") {
  const Items& d = items();
  // The regression's mean a + b x_n as an affine network of the covariate (hidden = none), s at
  // 0.8: vi trains the network with the items' guides (which hold each item's posterior), and
  // the trained ELBO reaches the log-likelihood at least squares' (a, b), the maximum over the
  // network's weights (measured: within 3e-6 nats per item). A network that did not see x_n
  // could only fit the mean of y: 0.48 nats per item short.
  const std::string& exe = model_exe("plate_neural_regression", R"(
model plate_neural_regression {
  net mean_of : mlp(inputs = 1, outputs = 1, hidden = none);
  input x[n];
  latent z[n] ~ normal(mean_of(x[n])[0], 0.8);
  obs y[n] ~ normal(z[n], 0.5);
}
)");
  const double n = static_cast<double>(d.x.size());
  const auto [a, b, my] = least_squares(d);
  const double best = exact_loglik(d, a, b, 0.8) / n, flat = exact_loglik(d, my, 0, 0.8) / n;
  const nlohmann::json v = nlohmann::json::parse(
      run_ok({exe, "vi", "--data", d.data, "--iterations", "3000", "--net-learning-rate", "0.02",
              "--samples", "4", "--schedule", "cosine", "--json", "--seed", "3"})
          .out);
  CAPTURE(v.dump(), best, flat, a, b);
  CHECK(best - flat > 0.2); // what the covariate is worth
  CHECK(double(v["elbo"]) <= best + 4 * double(v["elbo_se"]));
  CHECK(std::abs(double(v["elbo"]) - best) < 0.01 + 4 * double(v["elbo_se"]));
}

TEST_CASE("plate inputs: a guide's network reads the covariate", "[plate][inputs][vi][networks]") {
  const Items& d = items();
  // The posterior mean w y_n + (1 - w)(1 - 0.7 x_n) is affine in (y_n, x_n): a guide whose mean
  // is an affine network of both, at the posterior's sd, holds it once trained, and the ELBO
  // reaches the log-likelihood (at a = 1, b = -0.7, s = 0.8, fixed).
  const double sd = std::sqrt(0.64 * 0.25 / 0.89);
  const std::string& exe = model_exe("plate_regression_guide_net", fmt::format(R"(
model plate_regression_guide_net {{
  param a ~ normal(0, 10) = 1;
  param b ~ normal(0, 10) = -0.7;
  param s ~ half_normal(2) = 0.8;
  net posterior_mean : mlp(inputs = 2, outputs = 1, hidden = none);
  input x[n];
  latent z[n] ~ normal(a + b * x[n], s);
  obs y[n] ~ normal(z[n], 0.5);
  guide z[n] ~ normal(posterior_mean(y[n], x[n])[0], {:.17g});
}}
)",
                                                                               sd));
  const nlohmann::json v = vi_at_truth(exe, d,
                                       {"--iterations", "3000", "--net-learning-rate", "0.02",
                                        "--samples", "4", "--schedule", "cosine", "--seed", "3"});
  CAPTURE(v.dump());
  const double exact = exact_at_truth(d);
  CHECK(std::abs(double(v["elbo"]) - exact) < 0.005 + 4 * double(v["elbo_se"]));
}

TEST_CASE("plate inputs: a guide reads the covariate; the exact posterior's ELBO is log p(y)",
          "[plate][inputs][vi]") {
  const Items& d = items();
  // The posterior of z_n given y_n: N(w y_n + (1 - w)(a + b x_n), 0.8² 0.5² / 0.89) with
  // w = 0.8² / 0.89 at a = 1, b = -0.7, s = 0.8. With it as the guide every draw's weight is
  // p(y_n): the ELBO is the log-likelihood, without Monte Carlo error.
  const double w = 0.64 / 0.89, sd = std::sqrt(0.64 * 0.25 / 0.89);
  const std::string source = fmt::format(R"(
model plate_regression_guided {{
  param a ~ normal(0, 10) = 1;
  param b ~ normal(0, 10) = -0.7;
  param s ~ half_normal(2) = 0.8;
  input x[n];
  latent z[n] ~ normal(a + b * x[n], s);
  obs y[n] ~ normal(z[n], 0.5);
  guide z[n] ~ normal({0:.17g} * y[n] + {1:.17g} * (1 - 0.7 * x[n]), {2:.17g});
}}
)",
                                         w, 1 - w, sd);
  const std::string& exe = model_exe("plate_regression_guided", source);
  const nlohmann::json v = vi_at_truth(exe, d, {"--iterations", "0"});
  CAPTURE(v.dump());
  const double exact = exact_at_truth(d);
  CHECK(double(v["elbo"]) == Approx(exact).epsilon(1e-9));
  CHECK(double(v["elbo_se"]) < 1e-9);
}
