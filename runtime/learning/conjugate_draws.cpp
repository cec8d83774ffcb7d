// Draws from the conjugate full conditionals: see conjugate_draws.h.
#include "learning/conjugate_draws.h"
#include "core/error.h"
#include "kernel/sampler_algorithms.h"

#include <Eigen/Cholesky>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace ssm {

namespace {

// Random-number sites of the draws (kernel sites are 12-bit; pmmh's are 0x504d..0x504f), plus the
// theta component drawn, so that no two draws share Philox blocks.
constexpr uint32_t kSiteNoise = 0x47100000, kSiteCoefficients = 0x47200000,
                   kSiteProbabilities = 0x47300000, kSiteRate = 0x47400000;

// A measured form holds at a third point when its prediction agrees to this relative tolerance:
// exact forms agree to rounding, other priors miss by order one.
constexpr double kFormTolerance = 1e-6;

bool agrees(double a, double b, double scale) {
  return std::abs(a - b) <= kFormTolerance * (std::abs(a) + std::abs(b) + scale);
}

// log of a Gamma(shape, rate 1) draw: finite where the draw itself underflows (shape well below
// 1), so that ratios of draws (Dirichlet, beta) stay inside their supports.
double log_gamma_draw(double shape, uint64_t seed, uint32_t chain, uint32_t iteration,
                      uint32_t site, uint32_t first = 0) {
  const double g = detail::log_std_gamma(shape, seed, chain, iteration, site, first);
  if (std::isnan(g))
    throw Error(fmt::format("sample (gibbs): a Gamma({}) draw failed at iteration {} of chain {}",
                            shape, iteration, chain + 1));
  return g;
}

// The theta component of a normal piece's noise (its sd or variance) in noise group `grp`.
int64_t noise_slot(const EmPiece& piece, size_t grp) {
  return piece.noise_theta.size() > 1 ? piece.noise_theta[grp] : piece.noise_theta[0];
}

} // namespace

ConjugateDraws::ConjugateDraws(const ssm_model& model, const ModelInfo& info,
                               const ParameterSpace& space, const std::vector<double>& theta,
                               const std::vector<ObsData>& series)
    : model_(model), info_(info), stats_(info, space, false, series) {
  stats_.set_context("sample (gibbs)");
  if (!stats_.numeric().empty()) {
    // The parameter at the root: another one may be listed only because it shares a piece with
    // it ("... also reads s2, which is updated numerically").
    auto root = std::find_if(stats_.numeric().begin(), stats_.numeric().end(), [](const auto& p) {
      return p.second.find("updated numerically") == std::string::npos;
    });
    if (root == stats_.numeric().end())
      root = stats_.numeric().begin();
    throw Error(fmt::format("sample --method gibbs: parameter '{}' has no conjugate full "
                            "conditional: {} (--fix {} keeps it at its value)",
                            root->first, root->second, root->first));
  }
  const EmStepsInfo& em = info.em_steps;
  std::map<int64_t, bool> noise_kind; // slot -> sd
  for (int64_t k : stats_.active()) {
    const EmPiece& piece = em.pieces[k];
    if (piece.family == "normal") {
      normal_pieces_.push_back(k);
      bool learned_coefficient = false;
      for (int64_t c : stats_.gaussian(k).coefficients)
        if (stats_.updated(c)) {
          learned_coefficient = true;
          if (std::find(coefficients_.begin(), coefficients_.end(), c) == coefficients_.end())
            coefficients_.push_back(c);
        }
      if (learned_coefficient && piece.noise == "constant" && !(piece.noise_value > 0))
        throw Error(fmt::format("sample --method gibbs: {}: the model's metadata does not give "
                                "the value of this normal's constant sd (a model built by an "
                                "older ssmc: build it again)",
                                piece.relation));
      if (piece.noise == "sd" || piece.noise == "variance")
        for (int64_t c : piece.noise_theta) {
          if (!stats_.updated(c))
            continue;
          const bool sd = piece.noise == "sd";
          if (noise_kind.count(c) && noise_kind[c] != sd)
            throw Error(fmt::format("sample --method gibbs: {} is the sd of one normal and the "
                                    "variance of another; its conditional is not conjugate",
                                    component(c)));
          if (!noise_kind.count(c))
            noises_.push_back({c, sd});
          noise_kind[c] = sd;
        }
    } else if (piece.family == "mvnormal") {
      throw Error(fmt::format("sample --method gibbs: {}: the full conditionals of a mvnormal's "
                              "matrix and covariance are not drawn yet (--fix its parameters, or "
                              "sample by pmmh)",
                              piece.relation));
    } else if (piece.family == "categorical") {
      for (const std::vector<int64_t>& row : piece.probabilities)
        if (stats_.updated(row[0]) && info.param_of_component(row[0])->type != "simplex")
          throw Error(fmt::format("sample --method gibbs: {}: its probabilities '{}' are not a "
                                  "simplex, so their conditional is not Dirichlet (declare them "
                                  "`simplex[K]`)",
                                  piece.relation, info.param_of_component(row[0])->name));
        else if (stats_.updated(row[0]) &&
                 std::find(categorical_.begin(), categorical_.end(), row) == categorical_.end())
          categorical_.push_back(row);
    } else {
      auto& rates = piece.family == "bernoulli" ? bernoulli_ : poisson_;
      for (int64_t c : piece.rate)
        if (stats_.updated(c) && std::find(rates.begin(), rates.end(), c) == rates.end())
          rates.push_back(c);
    }
  }
  // Each form checked at the starting values, so that a model it does not fit is refused before
  // any chain runs; draw() checks them again wherever the chain goes.
  for (const Noise& n : noises_)
    inverse_gamma(theta, n);
  if (!coefficients_.empty()) {
    Eigen::MatrixXd P;
    Eigen::VectorXd linear;
    gaussian_prior(theta, P, linear);
  }
  for (const std::vector<int64_t>& row : categorical_)
    dirichlet(theta, row);
  for (int64_t c : bernoulli_)
    beta_or_gamma(theta, c, true);
  for (int64_t c : poisson_)
    beta_or_gamma(theta, c, false);
  std::map<int64_t, std::string> kind;
  std::vector<std::string> block; // the coefficients' parameters, in declaration order
  for (const ParamInfo& p : info.params)
    for (int64_t c : coefficients_)
      if (c >= p.offset && c < p.offset + p.size) {
        block.push_back(p.name);
        break;
      }
  for (int64_t c : coefficients_) {
    std::vector<std::string> others;
    for (const std::string& name : block)
      if (name != info.param_of_component(c)->name)
        others.push_back(name);
    kind[c] =
        others.empty() ? "normal" : fmt::format("normal, jointly with {}", fmt::join(others, ", "));
  }
  for (const Noise& n : noises_)
    kind[n.slot] = n.sd ? "inverse-gamma in its square" : "inverse-gamma";
  for (const std::vector<int64_t>& row : categorical_)
    for (int64_t c : row)
      kind[c] = "dirichlet";
  for (int64_t c : bernoulli_)
    kind[c] = "beta";
  for (int64_t c : poisson_)
    kind[c] = "gamma";
  for (const LearnedParam& lp : space.learned()) {
    const ParamInfo& p = info.params[lp.index];
    conditionals_.push_back({p.name, kind.count(p.offset) ? kind[p.offset] : "fixed"});
  }
}

std::vector<double> ConjugateDraws::prior_gradient(const std::vector<double>& theta) const {
  std::vector<double> out(1 + static_cast<size_t>(info_.n_theta));
  model_.prior_logpdf(theta.data(), out.data());
  out.erase(out.begin());
  return out;
}

std::string ConjugateDraws::component(int64_t c) const {
  const ParamInfo& p = *info_.param_of_component(c);
  return p.size > 1 ? fmt::format("'{}'", column_names(p.name, p.shape)[c - p.offset])
                    : fmt::format("'{}'", p.name);
}

// v^2 d/dv log p(v) = -(a + 1) v + b for an inverse-gamma(a, b) variance; for an sd s whose
// square is inverse-gamma, s^3 d/ds log p(s) = -(2a + 1) s^2 + 2b. Affine in the variance either
// way: two points give (a, b), a third checks.
std::pair<double, double> ConjugateDraws::inverse_gamma(const std::vector<double>& theta,
                                                        const Noise& noise) const {
  const double x = theta[noise.slot];
  if (!(x > 0) || !std::isfinite(x))
    throw Error(fmt::format("sample (gibbs): {} = {} is not positive", component(noise.slot), x));
  std::vector<double> at = theta;
  auto measure = [&](double value, double& variance) {
    at[noise.slot] = value;
    const double g = prior_gradient(at)[noise.slot];
    variance = noise.sd ? value * value : value;
    return noise.sd ? g * value * value * value : g * value * value;
  };
  double v1, v2, v3;
  const double h1 = measure(x, v1), h2 = measure(1.5 * x, v2), h3 = measure(0.6 * x, v3);
  const double slope = (h2 - h1) / (v2 - v1), intercept = h1 - slope * v1;
  const double a = noise.sd ? (-slope - 1) / 2 : -slope - 1,
               b = noise.sd ? intercept / 2 : intercept;
  if (!agrees(h3, slope * v3 + intercept, 1e-300) || !(b >= 0) || !std::isfinite(a))
    throw Error(fmt::format("sample --method gibbs: the prior of {} is not inverse-gamma in the "
                            "{} given the other parameters (at {}), so its full conditional is "
                            "not conjugate; --fix {} keeps it at its value",
                            component(noise.slot), noise.sd ? "square of this sd" : "variance", x,
                            info_.param_of_component(noise.slot)->name));
  return {a, b};
}

// Beta(a, b): p (1 - p) d/dp log p = (a - 1) - (a + b - 2) p. Gamma(a, rate b): l d/dl log p =
// (a - 1) - b l. Both affine in the value.
std::pair<double, double> ConjugateDraws::beta_or_gamma(const std::vector<double>& theta, int64_t c,
                                                        bool beta) const {
  const double x = theta[c];
  if (!(x > 0) || (beta && !(x < 1)))
    throw Error(fmt::format("sample (gibbs): {} = {} is outside its support", component(c), x));
  std::vector<double> at = theta;
  auto measure = [&](double value) {
    at[c] = value;
    const double g = prior_gradient(at)[c];
    return beta ? value * (1 - value) * g : value * g;
  };
  const double x2 = beta ? (x < 0.5 ? x + (1 - x) / 2 : x / 2) : 1.5 * x,
               x3 = beta ? (x < 0.5 ? x + (1 - x) / 4 : 0.75 * x) : 0.6 * x;
  const double h1 = measure(x), h2 = measure(x2), h3 = measure(x3);
  const double slope = (h2 - h1) / (x2 - x), intercept = h1 - slope * x;
  const double a = intercept + 1, b = beta ? -slope - a + 2 : -slope;
  if (!agrees(h3, slope * x3 + intercept, 1e-300) || !std::isfinite(a) || !(b >= 0))
    throw Error(fmt::format("sample --method gibbs: the prior of {} is not {} given the other "
                            "parameters (at {}), so its full conditional is not conjugate; --fix "
                            "{} keeps it at its value",
                            component(c), beta ? "beta" : "gamma", x,
                            info_.param_of_component(c)->name));
  return {a, b};
}

// Dirichlet(alpha): p_k d/dp_k log p = alpha_k - 1, the same at every point of the simplex.
std::vector<double> ConjugateDraws::dirichlet(const std::vector<double>& theta,
                                              const std::vector<int64_t>& row) const {
  const double K = static_cast<double>(row.size());
  std::vector<double> at = theta;
  auto measure = [&]() {
    const std::vector<double> g = prior_gradient(at);
    std::vector<double> h;
    for (int64_t c : row)
      h.push_back(at[c] * g[c]);
    return h;
  };
  const std::vector<double> h1 = measure();
  for (int64_t c : row)
    at[c] = (theta[c] + 1 / K) / 2;
  const std::vector<double> h2 = measure();
  std::vector<double> alpha;
  for (size_t k = 0; k < row.size(); ++k) {
    if (!agrees(h1[k], h2[k], 1e-300) || !std::isfinite(h1[k]))
      throw Error(fmt::format("sample --method gibbs: the prior of '{}' is not Dirichlet given "
                              "the other parameters, so its full conditional is not conjugate; "
                              "--fix {} keeps it at its value",
                              info_.param_of_component(row[0])->name,
                              info_.param_of_component(row[0])->name));
    alpha.push_back(h1[k] + 1);
  }
  return alpha;
}

// The coefficients' conditional prior: its precision P0 and linear term P0 theta + g from the
// prior's gradient g (a quadratic log-density has an affine gradient, so differences give P0
// exactly).
void ConjugateDraws::gaussian_prior(const std::vector<double>& theta, Eigen::MatrixXd& P,
                                    Eigen::VectorXd& linear) const {
  const auto J = static_cast<Eigen::Index>(coefficients_.size());
  const std::vector<double> g = prior_gradient(theta);
  P.resize(J, J);
  linear.resize(J);
  Eigen::VectorXd step(J), current(J);
  std::vector<double> at = theta;
  for (Eigen::Index j = 0; j < J; ++j) {
    current[j] = theta[coefficients_[j]];
    step[j] = 1 + std::abs(current[j]);
    at[coefficients_[j]] = current[j] + step[j];
    const std::vector<double> moved = prior_gradient(at);
    at[coefficients_[j]] = current[j];
    for (Eigen::Index i = 0; i < J; ++i)
      P(i, j) = -(moved[coefficients_[i]] - g[coefficients_[i]]) / step[j];
  }
  // The form's check: symmetric, and the gradient at another point is the affine prediction.
  Eigen::VectorXd offset(J);
  for (Eigen::Index j = 0; j < J; ++j) {
    offset[j] = (j % 2 ? -0.37 : 0.61) * step[j];
    at[coefficients_[j]] = current[j] + offset[j];
  }
  const std::vector<double> far = prior_gradient(at);
  const Eigen::VectorXd predicted = -P * offset;
  bool quadratic = P.allFinite();
  for (Eigen::Index i = 0; i < J && quadratic; ++i) {
    quadratic = agrees(far[coefficients_[i]] - g[coefficients_[i]], predicted[i],
                       1e-12 * (1 + std::abs(g[coefficients_[i]])));
    for (Eigen::Index j = 0; j < i && quadratic; ++j)
      quadratic = agrees(P(i, j), P(j, i), 1e-300);
  }
  if (!quadratic) {
    std::vector<std::string> names;
    for (int64_t c : coefficients_)
      names.push_back(component(c));
    throw Error(fmt::format("sample --method gibbs: the prior of {} is not Gaussian given the "
                            "other parameters (its log-density is not quadratic in them), so "
                            "their full conditional is not conjugate",
                            fmt::join(names, ", ")));
  }
  for (Eigen::Index j = 0; j < J; ++j)
    linear[j] = g[coefficients_[j]];
  linear += P * current;
}

// Then each normal piece's moments over its noise variance.
void ConjugateDraws::draw_coefficients(std::vector<double>& theta, const ClosedFormMStep& stats,
                                       uint64_t seed, uint32_t chain, uint32_t iteration) const {
  const auto J = static_cast<Eigen::Index>(coefficients_.size());
  Eigen::MatrixXd P;
  Eigen::VectorXd linear;
  gaussian_prior(theta, P, linear);
  for (int64_t k : normal_pieces_) {
    const EmPiece& piece = info_.em_steps.pieces[k];
    const ClosedFormMStep::Gaussian& gs = stats.gaussian(k);
    const auto Jk = static_cast<Eigen::Index>(gs.coefficients.size());
    std::vector<Eigen::Index> index(Jk, -1); // into the block; -1: a fixed coefficient
    for (Eigen::Index a = 0; a < Jk; ++a) {
      const auto it = std::find(coefficients_.begin(), coefficients_.end(), gs.coefficients[a]);
      if (it != coefficients_.end())
        index[a] = it - coefficients_.begin();
    }
    if (std::all_of(index.begin(), index.end(), [](Eigen::Index i) { return i < 0; }))
      continue;
    for (size_t grp = 0; grp < gs.moments.size(); ++grp) {
      double variance = piece.noise_value * piece.noise_value; // a constant sd
      if (piece.noise == "sd" || piece.noise == "variance") {
        const double v = theta[noise_slot(piece, grp)];
        variance = piece.noise == "sd" ? v * v : v;
      }
      const Eigen::MatrixXd M(gs.moments[grp].selfadjointView<Eigen::Lower>());
      for (Eigen::Index a = 0; a < Jk; ++a) {
        if (index[a] < 0)
          continue;
        double r = M(a, Jk);
        for (Eigen::Index x = 0; x < Jk; ++x)
          if (index[x] < 0)
            r -= M(a, x) * theta[gs.coefficients[x]];
          else
            P(index[a], index[x]) += M(a, x) / variance;
        linear[index[a]] += r / variance;
      }
    }
  }
  const Eigen::LLT<Eigen::MatrixXd> llt(P);
  if (llt.info() != Eigen::Success || !P.allFinite())
    throw Error(fmt::format("sample (gibbs): the conditional precision of the coefficients is "
                            "not positive definite at iteration {} of chain {} (a noise variance "
                            "of 0, or no data informs a coefficient with a flat prior)",
                            iteration, chain + 1));
  Eigen::VectorXd z(J);
  for (Eigen::Index j = 0; j < J; ++j)
    z[j] =
        detail::std_normal_at(seed, chain, iteration, kSiteCoefficients, static_cast<uint32_t>(j));
  const Eigen::VectorXd draw =
      llt.solve(linear) + Eigen::MatrixXd(llt.matrixU()).triangularView<Eigen::Upper>().solve(z);
  for (Eigen::Index j = 0; j < J; ++j)
    theta[coefficients_[j]] = draw[j];
}

void ConjugateDraws::draw(std::vector<double>& theta, const ClosedFormMStep& stats, uint64_t seed,
                          uint32_t chain, uint32_t iteration) const {
  // Noises given the coefficients: the residual sums of squares of every piece that shares one.
  for (const Noise& noise : noises_) {
    double ssr = 0, n = 0;
    for (int64_t k : normal_pieces_) {
      const EmPiece& piece = info_.em_steps.pieces[k];
      if (piece.noise != "sd" && piece.noise != "variance")
        continue;
      const ClosedFormMStep::Gaussian& gs = stats.gaussian(k);
      Eigen::VectorXd c(gs.coefficients.size() + 1); // (-beta, 1)
      for (size_t a = 0; a < gs.coefficients.size(); ++a)
        c[static_cast<Eigen::Index>(a)] = -theta[gs.coefficients[a]];
      c[c.size() - 1] = 1;
      for (size_t grp = 0; grp < gs.moments.size(); ++grp) {
        if (noise_slot(piece, grp) != noise.slot)
          continue;
        ssr += c.dot(Eigen::MatrixXd(gs.moments[grp].selfadjointView<Eigen::Lower>()) * c);
        n += gs.weight[grp];
      }
    }
    const auto [a, b] = inverse_gamma(theta, noise);
    const double shape = a + n / 2, scale = b + std::max(ssr, 0.0) / 2;
    if (!(shape > 0) || !(scale > 0))
      throw Error(fmt::format("sample (gibbs): the conditional of {} is improper at iteration {} "
                              "of chain {} (inverse-gamma({}, {}))",
                              component(noise.slot), iteration, chain + 1, shape, scale));
    const double variance =
        scale * std::exp(-log_gamma_draw(shape, seed, chain, iteration,
                                         kSiteNoise + static_cast<uint32_t>(noise.slot)));
    theta[noise.slot] = noise.sd ? std::sqrt(variance) : variance;
  }
  if (!coefficients_.empty())
    draw_coefficients(theta, stats, seed, chain, iteration);
  for (const std::vector<int64_t>& row : categorical_) {
    const std::vector<double> alpha = dirichlet(theta, row);
    std::vector<double> g(row.size());
    double top = -std::numeric_limits<double>::infinity();
    for (size_t k = 0; k < row.size(); ++k) {
      const double shape = alpha[k] + stats.count(row[k]);
      if (!(shape > 0))
        throw Error(fmt::format("sample (gibbs): the conditional of '{}' is improper (a "
                                "Dirichlet with parameter {})",
                                info_.param_of_component(row[0])->name, shape));
      g[k] = log_gamma_draw(shape, seed, chain, iteration,
                            kSiteProbabilities + static_cast<uint32_t>(row[k]));
      top = std::max(top, g[k]);
    }
    double total = 0;
    for (double& v : g)
      total += (v = std::exp(v - top));
    for (size_t k = 0; k < row.size(); ++k) // at least the largest component is 1 / total
      theta[row[k]] = std::max(g[k] / total, std::numeric_limits<double>::min());
  }
  for (bool beta : {true, false})
    for (int64_t c : beta ? bernoulli_ : poisson_) {
      const auto [a, b] = beta_or_gamma(theta, c, beta);
      const double y = stats.numerator(c), n = stats.denominator(c);
      const double shape = a + y, other = beta ? b + n - y : b + n;
      if (!(shape > 0) || !(other > 0))
        throw Error(fmt::format("sample (gibbs): the conditional of {} is improper at iteration "
                                "{} of chain {}",
                                component(c), iteration, chain + 1));
      const auto site = kSiteRate + static_cast<uint32_t>(c);
      const double la = log_gamma_draw(shape, seed, chain, iteration, site);
      if (beta) { // Ga / (Ga + Gb), kept inside (0, 1)
        const double lb = log_gamma_draw(other, seed, chain, iteration, site, kGammaBlocks);
        const double p = 1 / (1 + std::exp(lb - la));
        theta[c] = std::clamp(p, std::numeric_limits<double>::min(),
                              1 - std::numeric_limits<double>::epsilon() / 2);
      } else {
        theta[c] = std::max(std::exp(la) / other, std::numeric_limits<double>::min());
      }
    }
}

} // namespace ssm
