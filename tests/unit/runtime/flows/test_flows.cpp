// The flows room against exact answers: every density (location-scale DIF, MAF, RealNVP,
// cascades, the Gaussian and the mixture) integrates to 1 on a quadrature grid in 1-D and 2-D, with
// random weights; its draws follow its density (a Kolmogorov-Smirnov test in 1-D, a chi-square test
// on cells in 2-D, each at the 0.1% level with fixed seeds); the flow layers' log-determinants
// equal autograd's Jacobians and their inverses invert; a DIF initialised from a diagonal mixture
// has the mixture's density; EM and GEM never decrease the likelihood; a fitted DIF reaches the
// true density's test log-likelihood; a saved density reads back identical; the Rao-Blackwellised
// KL's gradient is unbiased (the DIFs', the mixture's, the Gaussian's reparameterised one); the
// scale watch names each collapsed component once.
#include "flows/density.h"
#include "flows/dif.h"
#include "flows/flows.h"
#include "flows/gmm.h"
#include "flows/scale_watch.h"
#include "flows/training.h"
#include "flows/variational.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>

using namespace ssm::flows;

namespace {

// Random weights, so that no layer is the identity and no DIF weight is constant.
void perturb(torch::nn::Module& module, double sd) {
  torch::NoGradGuard no_grad;
  for (auto& p : module.parameters())
    p.add_(sd * torch::randn_like(p));
}

std::shared_ptr<DensityImpl> random_density(const std::vector<std::string>& chain, int64_t dim,
                                            uint64_t seed, int64_t context = 0) {
  torch::manual_seed(seed);
  std::shared_ptr<DensitySpec> inner;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    auto spec = std::make_shared<DensitySpec>();
    spec->kind = *it;
    if (it->rfind("dif/", 0) == 0) { // a DIF whose maps are flow layers: dif/maf, dif/realnvp
      spec->kind = "dif";
      spec->maps = it->substr(4);
    }
    spec->dim = dim;
    spec->components = 3;
    spec->layers = 3;
    spec->hidden = {16};
    spec->context = context;
    spec->base = inner;
    inner = spec;
  }
  auto density = make_density(*inner);
  perturb(*density, 0.15);
  return density;
}

// A spec by its fields' names.
DensitySpec spec_of(const std::string& kind, int64_t dim, int64_t components,
                    std::vector<int64_t> hidden, int64_t layers = 5) {
  DensitySpec spec;
  spec.kind = kind;
  spec.dim = dim;
  spec.components = components;
  spec.hidden = std::move(hidden);
  spec.layers = layers;
  return spec;
}

// A midpoint grid of [-L, L]^dim with spacing h: the points and each one's cell volume.
struct Grid {
  torch::Tensor points;
  double volume;
};

Grid grid(int64_t dim, double L, double h) {
  auto axis = torch::arange(-L + h / 2, L, h, torch::kFloat64);
  if (dim == 1)
    return {axis.unsqueeze(1), h};
  auto mesh = torch::meshgrid({axis, axis}, "ij");
  return {torch::stack({mesh[0].reshape(-1), mesh[1].reshape(-1)}, 1), h * h};
}

// p at the points, given one context row ([1, c]) for all or none.
torch::Tensor density_on(DensityImpl& density, const torch::Tensor& points,
                         const torch::Tensor& context = {}) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> parts;
  for (int64_t start = 0; start < points.size(0); start += 8192) {
    auto chunk = points.slice(0, start, start + 8192);
    auto c = context.defined() ? context.expand({chunk.size(0), context.size(1)}) : context;
    parts.push_back(torch::exp(density.log_prob(chunk, c)));
  }
  return torch::cat(parts);
}

// The Kolmogorov-Smirnov statistic of 1-D draws ([n, 1]) against the density p on the grid g of
// [-L, L]: the CDF at each draw is the grid's cumulative mass up to its cell.
double ks_statistic(const torch::Tensor& p, const Grid& g, double L, const torch::Tensor& draws) {
  auto cdf = torch::cumsum(p, 0) * g.volume;
  auto sorted = std::get<0>(draws.squeeze(1).sort());
  const int64_t n = sorted.size(0);
  const double h = g.volume;
  auto cell = ((sorted + L) / h).floor().clamp(0, double(cdf.size(0) - 1)).to(torch::kInt64);
  auto F = cdf.index_select(0, cell);
  auto i = torch::arange(1, n + 1, torch::kFloat64);
  return torch::maximum((i / double(n) - F).abs(), ((i - 1) / double(n) - F).abs())
      .max()
      .item<double>();
}

const std::vector<std::vector<std::string>> kChains = {
    {"dif"},        {"maf"},     {"realnvp"},     {"dif", "maf"}, {"maf", "dif"},
    {"dif", "dif"}, {"dif/maf"}, {"dif/realnvp"}, {"gaussian"},   {"gmm"}};

bool has_coupling(const std::vector<std::string>& chain) {
  for (const auto& stage : chain)
    if (stage.find("realnvp") != std::string::npos)
      return true;
  return false;
}

} // namespace

TEST_CASE("every density integrates to 1 in 1-D and 2-D", "[flows]") {
  for (int64_t dim : {1, 2})
    for (const auto& chain : kChains) {
      if (dim == 1 && has_coupling(chain))
        continue; // a coupling layer needs two coordinates
      auto density = random_density(chain, dim, 7);
      Grid g = grid(dim, 14.0, dim == 1 ? 0.005 : 0.04);
      // The tails beyond 14 hold < 1e-6 for these scales; the midpoint rule on a smooth density
      // is far more accurate than the 1e-3 asked.
      const double mass = density_on(*density, g.points).sum().item<double>() * g.volume;
      INFO(describe(density->spec()) << " in " << dim << "-D: mass " << mass);
      CHECK(std::abs(mass - 1.0) < 1e-3);
    }
}

TEST_CASE("draws follow the density: Kolmogorov-Smirnov in 1-D", "[flows]") {
  for (const auto& chain : kChains) {
    if (has_coupling(chain))
      continue;
    auto density = random_density(chain, 1, 11);
    Grid g = grid(1, 14.0, 0.002);
    torch::manual_seed(12);
    const int64_t n = 20000;
    const double D = ks_statistic(density_on(*density, g.points), g, 14.0, density->sample(n));
    INFO(describe(density->spec()) << ": D = " << D);
    CHECK(D < 1.949 / std::sqrt(double(n))); // the 0.1% critical value
  }
}

TEST_CASE("draws follow the density: chi-square on cells in 2-D", "[flows]") {
  for (const auto& chain : kChains) {
    auto density = random_density(chain, 2, 21);
    Grid g = grid(2, 14.0, 0.04);
    auto p = density_on(*density, g.points) * g.volume;
    // 36 unit cells on [-3, 3]^2 and the rest of the plane.
    auto cell_of = [](const torch::Tensor& x) {
      auto inside = (x.abs() < 3.0).all(1);
      auto ij = (x + 3.0).floor().clamp(0, 5).to(torch::kInt64);
      return torch::where(inside, ij.select(1, 0) * 6 + ij.select(1, 1),
                          torch::full_like(inside, 36, torch::kInt64));
    };
    auto expected = torch::zeros({37}, torch::kFloat64).index_add_(0, cell_of(g.points), p);
    torch::manual_seed(22);
    const int64_t n = 20000;
    auto counts = torch::bincount(cell_of(density->sample(n)), {}, 37).to(torch::kFloat64);
    auto e = expected * double(n);
    const double chi2 = ((counts - e).pow(2) / e.clamp_min(1e-9)).sum().item<double>();
    INFO(describe(density->spec()) << ": chi-square " << chi2 << " on 36 degrees of freedom");
    CHECK(chi2 < 67.985); // the 0.1% critical value of chi-square(36)
  }
}

TEST_CASE("flow layers: log-determinants are autograd's and inverses invert", "[flows]") {
  torch::manual_seed(3);
  const int64_t d = 3;
  // The last two read a context of 2 columns (as a DIF's flow maps read their index).
  std::vector<std::shared_ptr<FlowLayerImpl>> layers = {
      std::make_shared<MafLayerImpl>(d, std::vector<int64_t>{8, 8}, false),
      std::make_shared<MafLayerImpl>(d, std::vector<int64_t>{8}, true),
      std::make_shared<CouplingLayerImpl>(d, std::vector<int64_t>{8}, 0),
      std::make_shared<CouplingLayerImpl>(d, std::vector<int64_t>{8}, 1),
      std::make_shared<MafLayerImpl>(d, std::vector<int64_t>{8}, false, 2),
      std::make_shared<CouplingLayerImpl>(d, std::vector<int64_t>{8}, 0, 2)};
  for (size_t index = 0; index < layers.size(); ++index) {
    auto& layer = layers[index];
    perturb(*layer, 0.5);
    auto x = torch::randn({4, d}, torch::kFloat64);
    auto context = index >= 4 ? torch::randn({4, 2}, torch::kFloat64) : torch::Tensor();
    auto [z, log_det] = layer->forward(x, context);
    CHECK(torch::allclose(layer->inverse(z.detach(), context), x, 1e-9, 1e-9));
    if (index == 4) { // a MAF layer's every coordinate reads the context, the first one's too
      auto other = layer->forward(x, context + 1.0).first;
      CHECK(((other - z).abs() > 1e-6).all().item<bool>());
    }
    for (int64_t r = 0; r < x.size(0); ++r) {
      auto xr = x[r].clone().requires_grad_(true);
      auto cr = context.defined() ? context.slice(0, r, r + 1) : context;
      auto zr = layer->forward(xr.unsqueeze(0), cr).first.squeeze(0);
      auto J = torch::zeros({d, d}, torch::kFloat64);
      for (int64_t i = 0; i < d; ++i)
        J[i] = torch::autograd::grad({zr[i]}, {xr}, {}, true)[0];
      CHECK(std::abs(torch::logdet(J).item<double>() - log_det[r].item<double>()) < 1e-10);
    }
  }
}

TEST_CASE("a DIF initialised from a diagonal mixture has the mixture's density", "[flows]") {
  torch::manual_seed(5);
  DensitySpec spec;
  spec.kind = "gmm";
  spec.dim = 2;
  spec.components = 4;
  spec.covariance = "diagonal";
  GaussianMixtureImpl mixture(spec);
  auto x = torch::cat({torch::randn({300, 2}, torch::kFloat64) * 0.5 + 2.0,
                       torch::randn({300, 2}, torch::kFloat64) - 1.0});
  fit_gmm_em(mixture, x);
  for (std::vector<std::string> chain : {std::vector<std::string>{"dif"}, {"dif", "maf"}}) {
    DensitySpec dif_spec = spec;
    dif_spec.kind = "dif";
    dif_spec.hidden = {16};
    if (chain.size() > 1)
      dif_spec.base = std::make_shared<DensitySpec>(spec_of("maf", 2, 1, {8}, 2));
    auto dif = std::dynamic_pointer_cast<DifImpl>(make_density(dif_spec));
    dif->init_from_mixture(mixture);
    auto points = torch::randn({200, 2}, torch::kFloat64) * 3.0;
    torch::NoGradGuard no_grad;
    CHECK(torch::allclose(dif->log_prob(points), mixture.log_prob(points), 0, 1e-10));
  }
}

TEST_CASE("EM fits a known mixture and never decreases the likelihood", "[flows]") {
  torch::manual_seed(9);
  const int64_t n = 4000;
  auto which = torch::rand({n}, torch::kFloat64) < 0.3;
  auto a =
      torch::randn({n, 2}, torch::kFloat64) * 0.5 + torch::tensor({-2.0, 0.0}, torch::kFloat64);
  auto b = torch::randn({n, 2}, torch::kFloat64) + torch::tensor({2.0, 1.0}, torch::kFloat64);
  auto x = torch::where(which.unsqueeze(1), a, b);
  DensitySpec spec = spec_of("gmm", 2, 2, {});
  GaussianMixtureImpl gmm(spec);
  auto report = fit_gmm_em(gmm, x);
  for (size_t i = 1; i < report.trace.size(); ++i)
    CHECK(report.trace[i] >= report.trace[i - 1] - 1e-12);
  auto pi = torch::softmax(gmm.log_weights, 0);
  const int64_t small = gmm.means[0][0].item<double>() < 0 ? 0 : 1;
  // Standard errors: sqrt(0.21 / n) = 0.0072 for the weight, about 0.5 / sqrt(1200) and
  // 1 / sqrt(2800) for the means; 4 of them.
  CHECK(std::abs(pi[small].item<double>() - 0.3) < 0.03);
  CHECK(torch::allclose(gmm.means[small], torch::tensor({-2.0, 0.0}, torch::kFloat64), 0, 0.06));
  CHECK(torch::allclose(gmm.means[1 - small], torch::tensor({2.0, 1.0}, torch::kFloat64), 0, 0.08));
}

TEST_CASE("GEM never decreases a DIF's likelihood; ML reaches the true density", "[flows]") {
  torch::manual_seed(13);
  // Two elongated clusters: a diagonal mixture of 2 is the true law.
  auto sample_truth = [](int64_t n) {
    auto which = torch::rand({n}, torch::kFloat64) < 0.5;
    auto a = torch::randn({n, 2}, torch::kFloat64) * torch::tensor({1.5, 0.3}, torch::kFloat64);
    auto b = torch::randn({n, 2}, torch::kFloat64) * torch::tensor({0.3, 1.0}, torch::kFloat64) +
             torch::tensor({3.0, 2.0}, torch::kFloat64);
    return torch::where(which.unsqueeze(1), a, b);
  };
  auto truth_log_prob = [](const torch::Tensor& x) {
    auto lp = [&](std::vector<double> m, std::vector<double> s) {
      auto mt = torch::tensor(m, torch::kFloat64), st = torch::tensor(s, torch::kFloat64);
      return (-0.5 * ((x - mt) / st).pow(2) - torch::log(st) - 0.5 * std::log(2 * M_PI)).sum(1);
    };
    return torch::logsumexp(torch::stack({lp({0, 0}, {1.5, 0.3}), lp({3, 2}, {0.3, 1.0})}, 1), 1) -
           std::log(2.0);
  };
  auto train = sample_truth(3000), test = sample_truth(20000);
  const double truth = truth_log_prob(test).mean().item<double>();

  for (std::string method : {"gem", "ml"}) {
    DensityModel model;
    model.columns = {"a", "b"};
    model.density = make_density(spec_of("dif", 2, 2, {16}));
    FitOptions options;
    options.method = method;
    options.epochs = method == "gem" ? 20 : 15;
    options.learning_rate = 3e-3;
    auto report = fit_density(model, train, {}, options);
    if (method == "gem")
      for (size_t i = 1; i < report.train_trace.size(); ++i)
        CHECK(report.train_trace[i] >= report.train_trace[i - 1] - 1e-10);
    const double fitted = mean_log_prob(model, test);
    INFO(method << ": test mean log p " << fitted << ", true density's " << truth);
    // The paired difference's sampling error on 20000 points is below 0.005; the estimation
    // error of a few dozen parameters from 3000 points about params / (2 n) = 0.01.
    CHECK(std::abs(fitted - truth) < 0.05);
  }
}

TEST_CASE("a saved density reads back identical", "[flows]") {
  auto path = std::filesystem::temp_directory_path() / "ssmc_test_density.pt";
  DensityModel model;
  model.columns = {"x", "y[0]"};
  model.density = random_density({"dif", "maf"}, 2, 17);
  model.shift = torch::tensor({1.0, -2.0}, torch::kFloat64);
  model.scale = torch::tensor({0.5, 3.0}, torch::kFloat64);
  save_density_model(model, path.string());
  auto back = load_density_model(path.string());
  std::filesystem::remove(path);
  CHECK(back.columns == model.columns);
  CHECK(back.parameter_count() == model.parameter_count());
  auto points = torch::randn({50, 2}, torch::kFloat64);
  torch::NoGradGuard no_grad;
  CHECK(torch::equal(back.log_prob(points), model.log_prob(points)));
}

namespace {

// 0.3 N(-2, 0.5²) + 0.7 N(1.5, 1), in 1-D.
torch::Tensor mixture_log_density(const torch::Tensor& x) {
  auto v = x.squeeze(1);
  auto a = -0.5 * ((v + 2.0) / 0.5).pow(2) - std::log(0.5) + std::log(0.3);
  auto b = -0.5 * (v - 1.5).pow(2) + std::log(0.7);
  return torch::logsumexp(torch::stack({a, b}, 1), 1) - 0.5 * std::log(2 * M_PI);
}

// KL(p_θ ‖ p) by quadrature on a fine grid, differentiable in the weights.
torch::Tensor quadrature_kl(DensityImpl& density, const DensityImpl::Integrand& log_target) {
  Grid g = grid(1, 14.0, 0.002);
  auto lp = density.log_prob(g.points);
  return (torch::exp(lp) * (lp - log_target(g.points))).sum() * g.volume;
}

} // namespace

TEST_CASE("the Rao-Blackwellised KL's gradient is unbiased", "[flows][vi]") {
  for (const auto& chain : std::vector<std::vector<std::string>>{
           {"dif"}, {"dif", "maf"}, {"dif", "dif"}, {"dif/maf"}, {"gmm"}, {"gaussian"}}) {
    auto density = random_density(chain, 1, 31);
    auto params = density->parameters();
    auto exact = torch::autograd::grad({quadrature_kl(*density, mixture_log_density)}, params);
    // R independent estimates of the gradient, each from M draws.
    const int64_t R = 400, M = 32;
    std::vector<std::vector<torch::Tensor>> draws(params.size());
    torch::manual_seed(32);
    for (int64_t r = 0; r < R; ++r) {
      auto g = torch::autograd::grad({reverse_kl_terms(*density, mixture_log_density, M).mean()},
                                     params);
      for (size_t p = 0; p < params.size(); ++p)
        draws[p].push_back(g[p].reshape(-1));
    }
    int64_t compared = 0;
    for (size_t p = 0; p < params.size(); ++p) {
      auto stack = torch::stack(draws[p]);
      auto mean = stack.mean(0), se = stack.std(0) / std::sqrt(double(R));
      auto target = exact[p].reshape(-1);
      for (int64_t i = 0; i < mean.numel(); ++i) {
        const double m = mean[i].item<double>(), s = se[i].item<double>(),
                     e = target[i].item<double>();
        if (s < 1e-12 && std::abs(e) < 1e-12)
          continue; // a weight the KL does not depend on
        INFO(describe(density->spec()) << ": parameter " << p << "[" << i << "]: exact " << e
                                       << ", estimate " << m << " ± " << s);
        CHECK(std::abs(m - e) < 4.5 * s + 1e-9);
        ++compared;
      }
    }
    // Every weight of a DIF; the mixture's 3 weights, means and scales; the Gaussian's mean and
    // log-scale (in 1-D its factor has no lower triangle).
    CHECK(compared >= (chain[0] == "gaussian" ? 2 : chain[0] == "gmm" ? 9 : 11));
  }
}

TEST_CASE("VI with the Rao-Blackwellised KL recovers a two-component mixture", "[flows][vi]") {
  torch::manual_seed(41);
  auto density = make_density(spec_of("dif", 1, 2, {16}));
  ReverseKlOptions options;
  options.iterations = 1500;
  options.draws = 128;
  options.learning_rate = 2e-2;
  auto report = fit_reverse_kl(*density, mixture_log_density, options);
  torch::NoGradGuard no_grad;
  const double kl = quadrature_kl(*density, mixture_log_density).item<double>();
  INFO("KL by quadrature " << kl << ", the estimate's ELBO " << report.elbo << " ± "
                           << report.elbo_se);
  CHECK(kl < 0.01);
  // The estimate is -KL without bias: within 4 standard errors of the quadrature.
  CHECK(std::abs(report.elbo + kl) < 4 * report.elbo_se + 1e-6);
}

TEST_CASE("a conditional DIF is a density for every context, and its draws follow it",
          "[flows][conditional]") {
  for (const auto& chain : std::vector<std::vector<std::string>>{
           {"dif"}, {"dif", "maf"}, {"maf", "dif"}, {"dif/maf"}}) {
    auto density = random_density(chain, 1, 51, 2);
    // A context of a few units moves and stretches the maps a lot: a wide grid.
    Grid g = grid(1, 40.0, 0.002);
    for (auto omega : {std::vector<double>{0.0, 0.0}, {1.5, -0.7}, {-2.0, 3.0}}) {
      auto context = torch::tensor(omega, torch::kFloat64).unsqueeze(0);
      auto p = density_on(*density, g.points, context);
      const double mass = p.sum().item<double>() * g.volume;
      INFO(describe(density->spec())
           << " given (" << omega[0] << ", " << omega[1] << "): mass " << mass);
      CHECK(std::abs(mass - 1.0) < 1e-3);
      // Kolmogorov-Smirnov at the 0.1% level, as for the unconditional densities.
      const int64_t n = 20000;
      torch::manual_seed(52);
      const double D = ks_statistic(p, g, 40.0, density->sample(n, context.expand({n, 2})));
      CHECK(D < 1.949 / std::sqrt(double(n)));
    }
  }
}

TEST_CASE("a conditional DIF fitted to x | w ~ N(w, 0.3²) or N(-w, 0.3²) reaches the truth",
          "[flows][conditional]") {
  torch::manual_seed(61);
  auto draw = [](int64_t n) {
    auto w = torch::rand({n, 1}, torch::kFloat64) * 1.5 + 0.5;
    auto sign = torch::where(torch::rand({n, 1}, torch::kFloat64) < 0.5, 1.0, -1.0);
    return std::pair{sign * w + 0.3 * torch::randn({n, 1}, torch::kFloat64), w};
  };
  auto truth = [](const torch::Tensor& x, const torch::Tensor& w) {
    auto lp = [&](const torch::Tensor& m) {
      return -0.5 * ((x - m) / 0.3).pow(2) - std::log(0.3) - 0.5 * std::log(2 * M_PI);
    };
    return (torch::logsumexp(torch::cat({lp(w), lp(-w)}, 1), 1) - std::log(2.0)).mean();
  };
  auto [x, w] = draw(4000);
  auto [x_test, w_test] = draw(20000);
  DensityModel model;
  model.columns = {"x"};
  model.context_columns = {"w"};
  DensitySpec spec = spec_of("dif", 1, 2, {32});
  spec.context = 1;
  model.density = make_density(spec);
  FitOptions options;
  options.epochs = 60;
  options.learning_rate = 3e-3;
  fit_density(model, x, w, options);
  const double fitted = mean_log_prob(model, x_test, w_test);
  const double exact = truth(x_test, w_test).item<double>();
  INFO("test mean log p(x | w): fitted " << fitted << ", truth " << exact);
  CHECK(std::abs(fitted - exact) < 0.05);
}

TEST_CASE("the scale watch names each collapsed DIF component once, absolute or relative",
          "[flows]") {
  auto cascade = random_density({"dif", "dif"}, 2, 31);
  auto& outer = dynamic_cast<DifImpl&>(*cascade);
  auto& inner = dynamic_cast<DifImpl&>(outer.base());
  torch::NoGradGuard no_grad;
  outer.log_scales.fill_(std::log(1e-4)); // every component narrow alike
  inner.log_scales.zero_();
  inner.log_scales[2][1] = std::log(5e-4); // one component, in one coordinate
  ScaleWatch absolute(false), relative(true);
  auto names = [](const std::vector<Collapse>& cs) {
    std::vector<std::string> out;
    for (const Collapse& c : cs)
      out.push_back(c.component);
    return out;
  };
  CHECK(names(absolute.check(*cascade)) ==
        std::vector<std::string>{"component 0", "component 1", "component 2",
                                 "component 2 of the cascade's stage 1"});
  CHECK(absolute.check(*cascade).empty()); // each once
  // Relative to the widest component: the outer stage's are all alike, none collapsed.
  const std::vector<Collapse> r = relative.check(*cascade);
  REQUIRE(names(r) == std::vector<std::string>{"component 2 of the cascade's stage 1"});
  CHECK(r[0].scale == Approx(5e-4));
  CHECK(collapse_warning("q", r[0], "iteration 7", "advice") ==
        "q's DIF component 2 of the cascade's stage 1: its scale fell to 0.0005 of the widest "
        "component's at iteration 7; it is collapsing onto a point (advice)");
}
