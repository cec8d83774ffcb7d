// `ssmc density` end to end: a mixture and a DIF fitted to data drawn from a known mixture reach
// its test log-likelihood, draws have its mean, and bad input (missing and infinite cells, a
// density asked about columns it does not have, an output that is an input, a file that is not a
// density) is refused with a message naming the row, the column or the file; the draws of a DIF
// (fitted by GEM), a MAF, a RealNVP and a cascade follow their own densities, which integrate to
// 1 (C2ST against draws from `logpdf --out` on a grid).
#include "support.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <random>

namespace {

// 0.4 N((-2, 0), diag(0.5², 1)) + 0.6 N((1.5, 2), diag(1, 0.3²)), and an unrelated column.
e2e::Table mixture_points(int64_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> uniform;
  e2e::Table t{{"label", "x", "y"}, {}};
  for (int64_t i = 0; i < n; ++i) {
    const bool first = uniform(rng) < 0.4;
    const double x = first ? -2 + 0.5 * normal(rng) : 1.5 + normal(rng);
    const double y = first ? normal(rng) : 2 + 0.3 * normal(rng);
    t.rows.push_back({first ? "a" : "b", std::to_string(x), std::to_string(y)});
  }
  return t;
}

double truth_log_prob(double x, double y) {
  auto n = [](double v, double m, double s) {
    return std::exp(-0.5 * (v - m) * (v - m) / (s * s)) / (s * std::sqrt(2 * M_PI));
  };
  return std::log(0.4 * n(x, -2, 0.5) * n(y, 0, 1) + 0.6 * n(x, 1.5, 1) * n(y, 2, 0.3));
}

std::vector<std::string> density(std::vector<std::string> args) {
  args.insert(args.begin(), {e2e::ssmc_path(), "density"});
  return args;
}

} // namespace

TEST_CASE("ssmc density fits, evaluates and samples", "[density]") {
  const auto train = e2e::scratch_path("density_train.csv");
  const auto test = e2e::scratch_path("density_test.csv");
  e2e::write_table(train, mixture_points(3000, 1));
  auto test_table = mixture_points(5000, 2);
  e2e::write_table(test, test_table);
  double truth = 0;
  auto xs = test_table.column("x"), ys = test_table.column("y");
  for (size_t i = 0; i < xs.size(); ++i)
    truth += truth_log_prob(xs[i], ys[i]) / double(xs.size());

  for (std::vector<std::string> model :
       {std::vector<std::string>{"--model", "gmm", "--covariance", "diagonal"},
        {"--model", "dif", "--epochs", "10", "--hidden", "16"}}) {
    const auto saved = e2e::scratch_path("density_" + model[1] + ".pt");
    std::vector<std::string> args = {"fit",          "--data", train,    "--columns", "x,y",
                                     "--components", "2",      "--save", saved};
    args.insert(args.end(), model.begin(), model.end());
    auto fit = e2e::run_ok(density(args));
    auto summary = nlohmann::json::parse(fit.out);
    CHECK(summary["columns"] == nlohmann::json({"x", "y"}));
    CHECK(summary["parameters"].get<int64_t>() > 0);

    auto eval = e2e::run_ok(density({"logpdf", "--load", saved, "--at", test, "--json"}));
    auto j = nlohmann::json::parse(eval.out);
    INFO(model[1] << ": test mean log p " << j["mean_logpdf"] << ", truth " << truth);
    CHECK(j["n"] == 5000);
    // Estimation error: about (parameters) / (2 · 3000) for the mixture's 9, 0.0015; the DIF's
    // weight network adds a few hundred weights, but starts at the mixture and barely moves
    // in 10 epochs. The test set's sampling error is shared by both (paired), below 0.005.
    CHECK(std::abs(j["mean_logpdf"].get<double>() - truth) < 0.03);

    const auto draws = e2e::scratch_path("density_draws.csv");
    e2e::run_ok(density({"sample", "--load", saved, "--n", "4000", "--out", draws}));
    auto t = e2e::read_table(draws);
    CHECK(t.header == std::vector<std::string>{"x", "y"});
    // The mixture's means: x 0.4·(-2) + 0.6·1.5 = 0.1 (sd about 1.9), y 1.2 (sd about 1.2);
    // 4 standard errors of 4000 draws.
    CHECK(std::abs(e2e::sample_mean(t.column("x")) - 0.1) < 4 * 1.9 / std::sqrt(4000.0));
    CHECK(std::abs(e2e::sample_mean(t.column("y")) - 1.2) < 4 * 1.2 / std::sqrt(4000.0));
  }
}

TEST_CASE("ssmc density refuses bad input", "[density][bad-input]") {
  const auto data = e2e::scratch_path("density_bad.csv");
  const auto saved = e2e::scratch_path("density_bad.pt");
  auto fails = [](const std::vector<std::string>& args, int code, const std::string& message) {
    auto r = e2e::run_process(density(args));
    INFO(r.describe());
    CHECK(r.exit_code == code);
    CHECK(r.err.find(message) != std::string::npos);
  };
  e2e::write_file(data, "x,y\n1,2\n3,4\n5,NA\n");
  fails({"fit", "--data", data, "--model", "gmm", "--save", saved}, 1,
        "density_bad.csv:4: column 'y': a missing value");
  e2e::write_file(data, "x,y\n1,2\n3,inf\n5,6\n");
  fails({"fit", "--data", data, "--model", "gmm", "--save", saved}, 1,
        "density_bad.csv:3: column 'y': 'inf' is not a finite number");
  e2e::write_file(data, "x,y\n1,2\n3,2\n5,2\n");
  fails({"fit", "--data", data, "--model", "gmm", "--save", saved}, 1, "column 'y' is constant");
  fails({"fit", "--data", data, "--model", "gmm", "--save", data}, 1,
        "refusing to write '" + data + "': it is the same file as the input");
  CHECK(e2e::read_file(data) == "x,y\n1,2\n3,2\n5,2\n"); // the input is untouched
  fails({"fit", "--data", data, "--model", "kde", "--save", saved}, 2, "kde");
  fails({"fit", "--data", data, "--columns", "x,y", "--context", "y", "--save", saved}, 1,
        "column 'y' is both modelled (--columns) and a context");
  fails({"fit", "--data", data, "--model", "gmm", "--method", "ml", "--save", saved}, 1,
        "a gmm is fitted by em");
  fails({"fit", "--data", data, "--columns", "x,x", "--save", saved}, 1,
        "column 'x' is named twice");
  e2e::write_file(data, "x,x\n1,2\n3,4\n");
  fails({"fit", "--data", data, "--model", "gmm", "--save", saved}, 1,
        "column 'x' appears twice in the header");

  // Half the rows one repeated point: a component collapses onto it (its scale towards 0, the
  // likelihood without bound), which is a warning naming the component and the step, by maximum
  // likelihood and by GEM.
  std::string repeated = "x,y\n";
  for (int i = 0; i < 100; ++i)
    repeated += "0.5,0.5\n" + std::to_string(std::sin(i) * 2) + "," +
                std::to_string(std::cos(3 * i) * 2) + "\n";
  e2e::write_file(data, repeated);
  auto collapse = e2e::run_ok(density({"fit", "--data", data, "--model", "dif", "--components", "2",
                                       "--hidden", "8", "--epochs", "5", "--save", saved}));
  CHECK(collapse.err.find("warning: DIF component") != std::string::npos);
  CHECK(collapse.err.find("its scale fell to") != std::string::npos);
  CHECK(collapse.err.find("at step 1 (epoch 1)") != std::string::npos);
  auto gem =
      e2e::run_ok(density({"fit", "--data", data, "--model", "dif", "--components", "2", "--hidden",
                           "8", "--epochs", "5", "--method", "gem", "--save", saved}));
  CHECK(gem.err.find("warning: DIF component") != std::string::npos);
  CHECK(gem.err.find("at GEM iteration") != std::string::npos);

  e2e::write_file(data, "x,y\n1,2\n3,1\n5,7\n0,0\n");
  e2e::run_ok(
      density({"fit", "--data", data, "--model", "gmm", "--components", "1", "--save", saved}));
  const auto points = e2e::scratch_path("density_points.csv");
  e2e::write_file(points, "x,z\n1,2\n");
  fails({"logpdf", "--load", saved, "--at", points}, 1, "no column 'y'");
  fails({"logpdf", "--load", saved, "--at", points}, 1, "density_bad.pt reads the columns x, y");
  fails({"logpdf", "--load", data, "--at", points}, 1, "is not a density saved by ssmc");
  // The energy model: it stands alone, is fitted by classification, and only it takes a sampler.
  fails({"fit", "--data", data, "--model", "maf,energy", "--save", saved}, 1,
        "an energy model cannot be the base of a flow or a DIF");
  fails({"fit", "--data", data, "--model", "energy", "--method", "ml", "--save", saved}, 1,
        "an energy model is fitted by classify");
  fails({"sample", "--load", saved, "--sampler", "ar"}, 1, "samplers are for an energy model");
}

TEST_CASE("ssmc density fits a conditional density with --context", "[density]") {
  // x | w is N(w, 0.3²) or N(-w, 0.3²) with equal probability; w ~ U(0.5, 2).
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> uniform;
  auto draw = [&](int64_t n) {
    e2e::Table t{{"x", "w"}, {}};
    for (int64_t i = 0; i < n; ++i) {
      const double w = 0.5 + 1.5 * uniform(rng);
      const double x = (uniform(rng) < 0.5 ? w : -w) + 0.3 * normal(rng);
      t.rows.push_back({std::to_string(x), std::to_string(w)});
    }
    return t;
  };
  const auto train = e2e::scratch_path("conditional_train.csv");
  const auto test = e2e::scratch_path("conditional_test.csv");
  const auto saved = e2e::scratch_path("conditional.pt");
  e2e::write_table(train, draw(4000));
  auto test_table = draw(5000);
  e2e::write_table(test, test_table);
  double truth = 0;
  auto xs = test_table.column("x"), ws = test_table.column("w");
  for (size_t i = 0; i < xs.size(); ++i) {
    auto n = [](double v, double m) {
      return std::exp(-0.5 * (v - m) * (v - m) / 0.09) / (0.3 * std::sqrt(2 * M_PI));
    };
    truth += std::log(0.5 * n(xs[i], ws[i]) + 0.5 * n(xs[i], -ws[i])) / double(xs.size());
  }
  auto fit = e2e::run_ok(
      density({"fit", "--data", train, "--context", "w", "--model", "dif", "--components", "2",
               "--hidden", "32", "--epochs", "60", "--lr", "3e-3", "--save", saved}));
  auto summary = nlohmann::json::parse(fit.out);
  CHECK(summary["columns"] == nlohmann::json({"x"}));
  CHECK(summary["context"] == nlohmann::json({"w"}));
  auto eval = e2e::run_ok(density({"logpdf", "--load", saved, "--at", test, "--json"}));
  const double fitted = nlohmann::json::parse(eval.out)["mean_logpdf"].get<double>();
  INFO("test mean log p(x | w): fitted " << fitted << ", truth " << truth);
  CHECK(std::abs(fitted - truth) < 0.05);

  const auto contexts = e2e::scratch_path("conditional_contexts.csv");
  const auto draws = e2e::scratch_path("conditional_draws.csv");
  e2e::write_file(contexts, "w\n1.5\n");
  e2e::run_ok(
      density({"sample", "--load", saved, "--context", contexts, "--n", "4000", "--out", draws}));
  auto t = e2e::read_table(draws);
  CHECK(t.header == std::vector<std::string>{"w", "x"});
  REQUIRE(t.rows.size() == 4000);
  // Given w = 1.5: E|x| is 1.5 (sd 0.3), and half the draws are positive (4 standard errors).
  double abs_mean = 0, positive = 0;
  for (double x : t.column("x")) {
    abs_mean += std::abs(x) / 4000;
    positive += (x > 0) / 4000.0;
  }
  CHECK(std::abs(abs_mean - 1.5) < 0.05);
  CHECK(std::abs(positive - 0.5) < 4 * 0.5 / std::sqrt(4000.0));

  auto r = e2e::run_process(density({"sample", "--load", saved, "--n", "10"}));
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("is conditional on w: give their values with --context") != std::string::npos);
}

// Draws that follow a fitted density: from `density logpdf --out` on a grid of [-7, 7]^2 (cells
// of 0.05), a cell with probability proportional to its density, then a uniform point in it; the
// mass the grid holds, which should be 1.
namespace {
std::pair<e2e::Table, double> grid_draws(const std::string& saved, int64_t n, uint32_t seed) {
  const double L = 7, h = 0.05;
  const auto grid = e2e::scratch_path("density_grid.csv");
  const auto values = e2e::scratch_path("density_grid_logpdf.csv");
  e2e::Table points{{"x", "y"}, {}};
  std::vector<double> xs, ys;
  for (double x = -L + h / 2; x < L; x += h)
    for (double y = -L + h / 2; y < L; y += h) {
      points.rows.push_back({std::to_string(x), std::to_string(y)});
      xs.push_back(x);
      ys.push_back(y);
    }
  e2e::write_table(grid, points);
  e2e::run_ok(density({"logpdf", "--load", saved, "--at", grid, "--out", values}));
  const std::vector<double> logp = e2e::read_table(values).column("logpdf");
  REQUIRE(logp.size() == xs.size());
  std::vector<double> mass(logp.size());
  double total = 0;
  for (size_t i = 0; i < logp.size(); ++i)
    total += mass[i] = std::exp(logp[i]) * h * h;
  std::mt19937_64 rng(seed);
  std::discrete_distribution<size_t> cell(mass.begin(), mass.end());
  std::uniform_real_distribution<double> jitter(-h / 2, h / 2);
  e2e::Table draws{{"x", "y"}, {}};
  for (int64_t i = 0; i < n; ++i) {
    const size_t c = cell(rng);
    draws.rows.push_back(
        {std::to_string(xs[c] + jitter(rng)), std::to_string(ys[c] + jitter(rng))});
  }
  return {draws, total};
}
} // namespace

TEST_CASE("ssmc density's draws follow its own density: C2ST near 0.5 for a DIF (GEM), MAF, "
          "RealNVP and a cascade",
          "[density]") {
  const auto train = e2e::scratch_path("density_c2st_train.csv");
  e2e::write_table(train, mixture_points(3000, 3));
  for (const char* model : {"dif", "maf", "realnvp", "dif,maf"}) {
    SECTION(model) {
      const std::string tag = std::string(model) == "dif,maf" ? "cascade" : model;
      const auto saved = e2e::scratch_path("density_c2st_" + tag + ".pt");
      std::vector<std::string> args = {"fit",     "--data",   train,    "--columns", "x,y",
                                       "--model", model,      "--save", saved,       "--hidden",
                                       "16",      "--epochs", "10",     "--layers",  "2"};
      if (tag == "dif")
        args.insert(args.end(), {"--method", "gem"});
      e2e::run_ok(density(args));
      const auto sampled = e2e::scratch_path("density_c2st_sampled.csv");
      const auto exact = e2e::scratch_path("density_c2st_exact.csv");
      e2e::run_ok(density({"sample", "--load", saved, "--n", "2000", "--out", sampled}));
      const auto [draws, mass] = grid_draws(saved, 2000, 4);
      e2e::write_table(exact, draws);
      // The grid holds all but the far tails of a density fitted to data within [-5, 5]^2, and
      // the midpoint rule is accurate to far less than 0.01 on cells of 0.05.
      INFO(model << ": mass on the grid " << mass);
      CHECK(std::abs(mass - 1) < 0.01);
      // 5 folds of 400 + 400 draws: the mean accuracy has sd about 0.011 under the null, plus
      // the classifiers' own variation.
      const auto c2st = e2e::run_json({e2e::ssmc_path(), "c2st", sampled, exact, "--json"});
      INFO(model << ": c2st " << c2st["c2st"] << ", mean error " << c2st["mean_error"]);
      CHECK(std::abs(c2st["c2st"].get<double>() - 0.5) < 0.06);
    }
  }
}

// Neural posterior estimation (NPE, the likelihood-free alternative to a ratio): a conditional DIF
// q(theta | x) fitted to simulated pairs of a 3-D gaussian_linear, whose posterior is
// N(x / 2, 0.05 I). On fresh pairs, the mean of log p(theta | x) - log q(theta | x) estimates
// E_x KL(p(. | x) || q(. | x)) >= 0 (paired, so its standard error is small); for Gaussians of
// one covariance the KL bounds a mean's error by sqrt(2 KL) sd, and a variance ratio rho costs
// (rho - 1 - log rho) / 2, about (rho - 1)^2 / 4, of it. Draws given an observation then have the
// posterior's moments within what the KL (at most its estimate plus 4 se) allows, and the C2ST
// against exact draws is near 0.5.
TEST_CASE("density fit --context as neural posterior estimation: q(theta | x) near the exact "
          "posterior on simulated pairs",
          "[lfi]") {
  const std::string exe = e2e::model_exe("gaussian_linear_npe", R"(simulator gaussian_linear {
  param theta : vector[3] ~ normal(0, sqrt(0.1));
  obs x : vector[3] ~ normal(theta, sqrt(0.1));
}
)");
  const auto pairs = e2e::scratch_path("npe_pairs.csv"), fresh = e2e::scratch_path("npe_test.csv");
  const auto saved = e2e::scratch_path("npe.pt"), values = e2e::scratch_path("npe_logq.csv");
  e2e::run_ok({exe, "simulate", "--n", "10000", "--seed", "2", "--out", pairs});
  e2e::run_ok({exe, "simulate", "--n", "4000", "--seed", "9", "--out", fresh});
  e2e::run_ok(density({"fit",      "--data",   pairs,      "--model",      "dif",  "--columns",
                       "theta[0]", "theta[1]", "theta[2]", "--context",    "x[0]", "x[1]",
                       "x[2]",     "--hidden", "32",       "--components", "4",    "--epochs",
                       "60",       "--seed",   "3",        "--save",       saved}));
  e2e::run_ok(density({"logpdf", "--load", saved, "--at", fresh, "--out", values}));
  const e2e::Table t = e2e::read_table(fresh);
  const std::vector<double> log_q = e2e::read_table(values).column("logpdf");
  std::vector<double> gap(log_q.size(), 0.0);
  for (int k = 0; k < 3; ++k) {
    const std::vector<double> theta = t.column(fmt::format("theta[{}]", k)),
                              x = t.column(fmt::format("x[{}]", k));
    for (size_t i = 0; i < gap.size(); ++i)
      gap[i] += -0.5 * std::log(2 * M_PI * 0.05) - std::pow(theta[i] - x[i] / 2, 2) / 0.1;
  }
  for (size_t i = 0; i < gap.size(); ++i)
    gap[i] -= log_q[i];
  const double kl = e2e::sample_mean(gap),
               se = std::sqrt(e2e::sample_variance(gap) / static_cast<double>(gap.size()));
  // 10^4 pairs leave a KL of about 0.017 (se 0.003); 0.05 would be a clearly worse fit.
  INFO("E KL(p || q) " << kl << " (se " << se << ")");
  CHECK(kl > -4 * se);
  CHECK(kl < 0.05);
  const double kl_bound = std::max(kl, 0.0) + 4 * se;

  const std::vector<double> x_o = {0.5, -0.3, 0.1};
  const auto context = e2e::scratch_path("npe_context.csv");
  const auto draws = e2e::scratch_path("npe_draws.csv"), exact = e2e::scratch_path("npe_exact.csv");
  e2e::write_file(context, fmt::format("x[0],x[1],x[2]\n{},{},{}\n", x_o[0], x_o[1], x_o[2]));
  e2e::run_ok(density({"sample", "--load", saved, "--context", context, "--n", "2000", "--seed",
                       "5", "--out", draws}));
  const e2e::Table q = e2e::read_table(draws);
  std::mt19937_64 rng(6);
  std::normal_distribution<double> normal;
  e2e::Table reference{{"theta[0]", "theta[1]", "theta[2]"}, {}};
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::string> row;
    for (double x : x_o)
      row.push_back(std::to_string(x / 2 + std::sqrt(0.05) * normal(rng)));
    reference.rows.push_back(row);
  }
  e2e::write_table(exact, reference);
  for (int k = 0; k < 3; ++k) {
    const std::vector<double> v = q.column(fmt::format("theta[{}]", k));
    const double sd = std::sqrt(0.05), allowed = std::sqrt(2 * kl_bound) + 4 / std::sqrt(2000.0);
    INFO("theta[" << k << "]: mean " << e2e::sample_mean(v) << " (exact " << x_o[k] / 2 << "), sd "
                  << std::sqrt(e2e::sample_variance(v)) << " (exact " << sd << ")");
    CHECK(std::abs(e2e::sample_mean(v) - x_o[k] / 2) < allowed * sd);
    CHECK(std::abs(e2e::sample_variance(v) / 0.05 - 1) <
          2 * std::sqrt(kl_bound) + 4 * std::sqrt(2 / 2000.0));
  }
  // The draws' file repeats the context's columns: the parameters' alone for the C2ST.
  e2e::Table theta_only{reference.header, {}};
  for (size_t i = 0; i < q.rows.size(); ++i) {
    std::vector<std::string> row;
    for (const std::string& name : reference.header)
      row.push_back(q.rows[i][q.column_index(name)]);
    theta_only.rows.push_back(row);
  }
  const auto q_draws = e2e::scratch_path("npe_theta.csv");
  e2e::write_table(q_draws, theta_only);
  const auto c2st = e2e::run_json({e2e::ssmc_path(), "c2st", q_draws, exact, "--json"});
  INFO("c2st " << c2st["c2st"]);
  CHECK(std::abs(c2st["c2st"].get<double>() - 0.5) < 0.06);
}
