// The classifier-based energy model (flows/energy.h) against exact answers: with a random
// classifier its density integrates to 1 on a quadrature grid (within the Monte Carlo error of its
// normaliser), and the draws of each sampler (accept-reject, independent Metropolis-Hastings,
// importance resampling) follow that density (chi-square on cells at the 0.1% level, fixed
// seeds); fitted to a two-component mixture it comes close to the true held-out log-likelihood,
// far above its instrumental Gaussian's; saved, it reads back identical.
#include "flows/density.h"
#include "flows/energy.h"
#include "flows/training.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <numbers>

using namespace ssm::flows;

namespace {

std::shared_ptr<EnergyImpl> random_energy(uint64_t seed) {
  torch::manual_seed(seed);
  DensitySpec spec;
  spec.kind = "energy";
  spec.dim = 2;
  spec.hidden = {16, 16};
  auto energy = std::dynamic_pointer_cast<EnergyImpl>(make_density(spec));
  {
    torch::NoGradGuard no_grad;
    for (auto& p : energy->parameters())
      p.add_(0.35 * torch::randn_like(p));
  }
  auto mean = torch::tensor({0.3, -0.2}, torch::kFloat64);
  auto cov = torch::tensor({{1.5, 0.4}, {0.4, 0.8}}, torch::kFloat64);
  energy->set_instrumental(mean, cov);
  energy->estimate_normaliser(int64_t(1) << 18);
  energy->set_bound(energy->instrumental_sample(int64_t(1) << 16));
  return energy;
}

// A midpoint grid of [-L, L]^2 with spacing h, and p at its points.
struct EnergyGrid {
  torch::Tensor points, p;
  double volume;
};

EnergyGrid density_grid(EnergyImpl& energy, double L, double h) {
  torch::NoGradGuard no_grad;
  auto axis = torch::arange(-L + h / 2, L, h, torch::kFloat64);
  auto mesh = torch::meshgrid({axis, axis}, "ij");
  auto points = torch::stack({mesh[0].reshape(-1), mesh[1].reshape(-1)}, 1);
  return {points, torch::exp(energy.log_prob(points)), h * h};
}

// 36 unit cells on [-3, 3]^2 and the rest of the plane.
torch::Tensor cell_of(const torch::Tensor& x) {
  auto inside = (x.abs() < 3.0).all(1);
  auto ij = (x + 3.0).floor().clamp(0, 5).to(torch::kInt64);
  return torch::where(inside, ij.select(1, 0) * 6 + ij.select(1, 1),
                      torch::full_like(inside, 36, torch::kInt64));
}

double chi_square(const EnergyGrid& g, const torch::Tensor& draws) {
  auto expected =
      torch::zeros({37}, torch::kFloat64).index_add_(0, cell_of(g.points), g.p * g.volume);
  expected = expected / expected.sum(); // the grid's mass, whatever the normaliser's error
  const double n = double(draws.size(0));
  auto counts = torch::bincount(cell_of(draws), {}, 37).to(torch::kFloat64);
  auto e = expected * n;
  return ((counts - e).pow(2) / e.clamp_min(1e-9)).sum().item<double>();
}

} // namespace

TEST_CASE("an energy model integrates to 1, and its samplers' draws follow its density",
          "[flows][energy]") {
  auto energy = random_energy(31);
  const EnergyGrid g = density_grid(*energy, 14.0, 0.04);
  const double mass = g.p.sum().item<double>() * g.volume;
  // Z is a mean of exp(logit) over 2^18 instrumental draws: its relative standard error, from a
  // fresh pool of the same size.
  double relative_se = 0;
  {
    torch::NoGradGuard no_grad;
    auto w = torch::exp(energy->logit(energy->instrumental_sample(int64_t(1) << 18)));
    relative_se = (w.std() / w.mean()).item<double>() / std::sqrt(double(int64_t(1) << 18));
  }
  INFO("mass " << mass << ", relative se of Z " << relative_se);
  CHECK(std::abs(mass - 1.0) < 4 * relative_se + 1e-3);
  REQUIRE(relative_se > 1e-4); // the classifier is far from constant: the test sees the ratio

  // The control: the instrumental Gaussian's own draws are far from the energy model's density,
  // so a sampler that ignored the ratio would fail.
  torch::manual_seed(30);
  const double control = chi_square(g, energy->instrumental_sample(20000));
  INFO("the instrumental draws' chi-square: " << control);
  CHECK(control > 300);
  for (const std::string& sampler : energy_samplers()) {
    energy->sampler = sampler;
    torch::manual_seed(32);
    std::vector<torch::Tensor> draws;
    if (sampler == "imh") // independent chains (100 warm-up steps each), so that cells count
      for (int i = 0; i < 4000; ++i)
        draws.push_back(energy->sample(1));
    else
      for (int i = 0; i < 10; ++i)
        draws.push_back(energy->sample(2000));
    // Resampling 2000 draws from a pool whose effective size is E repeats draws: the counts'
    // variance grows by about 1 + 2000 / E, and so does the statistic.
    const double inflation = sampler == "sir" ? 1 + 2000.0 / energy->last.accepted : 1.0;
    const double chi2 = chi_square(g, torch::cat(draws)) / inflation;
    INFO(sampler << ": chi-square " << chi2 << " on 36 degrees of freedom (divided by " << inflation
                 << "); last call " << energy->last.accepted << " accepted of "
                 << energy->last.proposals);
    CHECK(chi2 < 67.985); // the 0.1% critical value of chi-square(36)
  }
}

TEST_CASE("an energy model fitted to a two-component mixture nears its true log-likelihood",
          "[flows][energy]") {
  // 1/2 N((-2, 0), 0.5^2 I) + 1/2 N((2, 0), 0.5^2 I): the Gaussian with its moments is far from
  // it; the classifier has to carve the two modes out of it.
  torch::manual_seed(41);
  auto draw = [](int64_t n) {
    auto side = torch::where(torch::rand({n, 1}, torch::kFloat64) < 0.5, -2.0, 2.0);
    return torch::cat({side, torch::zeros({n, 1}, torch::kFloat64)}, 1) +
           0.5 * torch::randn({n, 2}, torch::kFloat64);
  };
  auto true_log_p = [](const torch::Tensor& x) {
    auto component = [&](double m) {
      return -((x.select(1, 0) - m).pow(2) + x.select(1, 1).pow(2)) / (2 * 0.25) -
             std::log(2 * std::numbers::pi * 0.25);
    };
    return torch::logaddexp(component(-2), component(2)) - std::log(2.0);
  };
  auto train = draw(6000), test = draw(4000);
  DensityModel model;
  model.columns = {"a", "b"};
  DensitySpec spec;
  spec.kind = "energy";
  spec.dim = 2;
  spec.hidden = {32, 32};
  model.density = make_density(spec);
  FitOptions options;
  options.method = "classify";
  options.epochs = 40;
  options.batch_size = 256;
  options.learning_rate = 3e-3;
  options.seed = 42;
  const FitReport report = fit_density(model, train, {}, options);
  const double truth = true_log_p(test).mean().item<double>();
  const double fitted = mean_log_prob(model, test);
  auto& energy = dynamic_cast<EnergyImpl&>(*model.density);
  double gaussian = 0;
  {
    torch::NoGradGuard no_grad;
    gaussian = (energy.instrumental_log_prob((test - model.shift) / model.scale) -
                torch::log(model.scale).sum())
                   .mean()
                   .item<double>();
  }
  INFO("held-out mean log p: true " << truth << ", energy model " << fitted << ", its Gaussian "
                                    << gaussian << " (" << report.epochs << " epochs)");
  CHECK(gaussian < truth - 0.5);
  CHECK(fitted > truth - 0.15);
  CHECK(fitted < truth + 0.05); // a density: it cannot beat the truth by more than noise

  const std::string path = (std::filesystem::temp_directory_path() / "ssm_test_energy.pt").string();
  save_density_model(model, path);
  DensityModel back = load_density_model(path);
  std::filesystem::remove(path);
  torch::NoGradGuard no_grad;
  CHECK(torch::equal(back.log_prob(test), model.log_prob(test)));
  CHECK(dynamic_cast<EnergyImpl&>(*back.density).log_normaliser() == energy.log_normaliser());

  // It stands alone: not the base of a flow (whose likelihood would climb with its logit).
  DensitySpec flow = spec;
  flow.kind = "maf";
  flow.base = std::make_shared<DensitySpec>(spec);
  CHECK_THROWS_WITH(make_density(flow), Catch::Matchers::Contains("cannot be the base"));
}
