// Unit tests of ssm/distributions.h: log-densities against high-precision reference values and
// Boost.Math, support and parameter conventions, normalisation, and the samplers' moments and
// goodness of fit against the exact distributions.
#include "ssm/distributions.h"
#include "stats.h"

#include <catch2/catch.hpp>

#include <boost/math/distributions/gamma.hpp>
#include <boost/math/distributions/lognormal.hpp>
#include <boost/math/distributions/normal.hpp>
#include <boost/math/distributions/poisson.hpp>
#include <boost/math/distributions/students_t.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

using namespace ssm;
using test::check_chi_square;
using test::check_ks;
using test::check_moments;

namespace {

constexpr uint64_t kSeed = 20240611;
constexpr uint32_t kT = 3;
constexpr uint32_t kSite = 5;
constexpr uint32_t kN = 100000;

using Sampler = std::function<double(uint64_t, uint32_t, uint32_t, uint32_t)>;

// kN draws over particle indices n = 0 .. kN-1, as a kernel would make them.
std::vector<double> draws(const Sampler& f, uint64_t seed = kSeed) {
  std::vector<double> xs(kN);
  for (uint32_t n = 0; n < kN; ++n)
    xs[n] = f(seed, n, kT, kSite);
  return xs;
}

bool all_in(const std::vector<double>& xs, double lo, double hi) {
  for (double x : xs)
    if (!(x >= lo && x <= hi))
      return false;
  return true;
}

bool all_integers(const std::vector<double>& xs) {
  for (double x : xs)
    if (std::floor(x) != x)
      return false;
  return true;
}

// Agreement up to a few ulps of the magnitudes involved.
void check_close(double actual, double expected, double rel = 1e-13) {
  INFO("actual " << actual << ", expected " << expected);
  CHECK(std::fabs(actual - expected) <= rel * std::max(1.0, std::fabs(expected)));
}

// Trapezoid rule for the integral of exp(lpdf) over the real line after x = c + s sinh(u), or over
// (0, inf) after x = exp(u). Both integrands decay exponentially or faster in u, where the
// trapezoid rule converges geometrically, so the result is accurate far beyond the tolerance used.
double integrate_real(const std::function<double(double)>& lpdf, double c, double s, double umax,
                      double h = 1e-3) {
  double sum = 0;
  for (double u = -umax; u <= umax; u += h)
    sum += std::exp(lpdf(c + s * std::sinh(u))) * s * std::cosh(u);
  return sum * h;
}

double integrate_positive(const std::function<double(double)>& lpdf, double umin, double umax,
                          double h = 1e-3) {
  double sum = 0;
  for (double u = umin; u <= umax; u += h)
    sum += std::exp(lpdf(std::exp(u)) + u);
  return sum * h;
}

// Every density's normalisation is checked to this absolute accuracy.
constexpr double kIntegralTol = 1e-9;

} // namespace

TEST_CASE("log_gamma matches high-precision values", "[distributions]") {
  // mpmath.loggamma at 50 digits.
  const std::vector<std::pair<double, double>> ref = {
      {0.5, 0.57236494292470008707},  {1, 0.0},
      {1.5, -0.12078223763524522235}, {2, 0.0},
      {2.5, 0.28468287047291915963},  {3.7, 1.4280723266653881292},
      {9.99, 12.77931521435019336},   {10, 12.801827480081469611},
      {10.01, 12.824350262448247282}, {123.456, 469.6055471299294835},
      {1e6, 12815504.56914761166}};
  for (auto [x, v] : ref) {
    INFO("x = " << x);
    check_close(log_gamma(x), v, 5e-15);
  }
  // Against the C library across the range, relative to max(1, |value|).
  for (double x = 1e-6; x < 1e8; x *= 1.01) {
    INFO("x = " << x);
    check_close(log_gamma(x), std::lgamma(x), 5e-15);
  }
  CHECK(log_gamma(0.0) == kInf);
  CHECK(log_gamma(kInf) == kInf);
  CHECK(std::isnan(log_gamma(kNaN)));
  CHECK(log_gamma(1.0) == 0); // exact, so that e.g. lpdf_poisson(0, lambda) == -lambda
  CHECK(log_gamma(2.0) == 0);
  // log Gamma(a + 1/2) - log Gamma(a) (mpmath), on both sides of the switch to the large-a form.
  const std::vector<std::pair<double, double>> ratio = {
      {0.05, -2.4888483449406047732},    {0.5, -0.57236494292470008707},
      {3.0, 0.5078264217871289154},      {9.99, 1.1382849922217505963},
      {10.0, 1.138797739322294022},      {10.5, 1.1637873536717516621},
      {517.679, 3.1244362171900852056},  {10000.0, 4.6051576859880965764},
      {500000.0, 6.5611814387021643974}, {1250000000.0, 10.473204694030310456}};
  for (auto [a, v] : ratio) {
    INFO("a = " << a);
    check_close(log_gamma_half_ratio(a), v, 5e-15);
  }
}

TEST_CASE("log-densities match high-precision values", "[distributions]") {
  // mpmath at 50 digits from the textbook formulas (Stan's parameterisations).
  struct Case {
    std::string dist;
    std::vector<double> a;
    double v;
  };
  const std::vector<Case> cases = {
      {"normal", {0.0, 0.0, 1.0}, -0.91893853320467274178},
      {"normal", {1.5, -0.3, 2.5}, -2.0944292650788278038},
      {"normal", {-7.0, 1.0, 0.1}, -3198.6163534402102718},
      {"normal", {1000.0, 0.0, 3.0}, -55557.573106377428338},
      {"lognormal", {1.0, 0.0, 1.0}, -0.91893853320467274178},
      {"lognormal", {0.2, -1.0, 0.5}, 0.64081742156530463009},
      {"lognormal", {30.0, 2.0, 1.7}, -5.1904448064786317087},
      {"student_t", {0.0, 1.0, 0.0, 1.0}, -1.1447298858494001741},
      {"student_t", {2.5, 3.0, 0.5, 2.0}, -2.2694001750870168747},
      {"student_t", {-40.0, 0.7, 1.0, 0.3}, -8.6810726158379917697},
      {"student_t", {1.2, 1000000.0, 0.0, 1.0}, -1.6389389848046519524},
      {"student_t", {0.3, 2500000000.0, 0.1, 1.1}, -1.030777638735334676},
      {"half_normal", {0.0, 1.0}, -0.22579135264472743236},
      {"half_normal", {2.3, 0.7}, -5.2670755923794642289},
      {"half_normal", {10.0, 3.0}, -6.8799591968683926793},
      {"uniform", {0.3, 0.0, 1.0}, 0.0},
      {"uniform", {-2.0, -3.0, 4.5}, -2.0149030205422647566},
      {"gamma", {1.0, 1.0, 1.0}, -1.0},
      {"gamma", {0.5, 2.5, 3.0}, -0.07787291964256289527},
      {"gamma", {0.001, 0.3, 2.0}, 3.9455748546374040231},
      {"gamma", {40.0, 7.5, 0.2}, -3.6274321282738998239},
      {"exponential", {0.0, 1.0}, 0.0},
      {"exponential", {2.5, 0.4}, -1.9162907318741550652},
      {"exponential", {0.01, 30.0}, 3.1011973816621553692},
      {"poisson", {0.0, 0.5}, -0.5},
      {"poisson", {3.0, 2.5}, -1.5428872736055898053},
      {"poisson", {17.0, 10.0}, -4.3611268692381122557},
      {"poisson", {130.0, 123.4}, -3.5267808507675077741},
      {"poisson", {0.0, 20.0}, -20.0},
      {"bernoulli", {1.0, 0.3}, -1.2039728043259360296},
      {"bernoulli", {0.0, 0.3}, -0.35667494393873236305},
      {"bernoulli", {1.0, 1e-09}, -20.723265836946411094},
  };
  for (const Case& c : cases) {
    const auto& a = c.a;
    double got = kNaN;
    if (c.dist == "normal")
      got = lpdf_normal(a[0], a[1], a[2]);
    else if (c.dist == "lognormal")
      got = lpdf_lognormal(a[0], a[1], a[2]);
    else if (c.dist == "student_t")
      got = lpdf_student_t(a[0], a[1], a[2], a[3]);
    else if (c.dist == "half_normal")
      got = lpdf_half_normal(a[0], a[1]);
    else if (c.dist == "uniform")
      got = lpdf_uniform(a[0], a[1], a[2]);
    else if (c.dist == "gamma")
      got = lpdf_gamma(a[0], a[1], a[2]);
    else if (c.dist == "exponential")
      got = lpdf_exponential(a[0], a[1]);
    else if (c.dist == "poisson")
      got = lpdf_poisson(a[0], a[1]);
    else if (c.dist == "bernoulli")
      got = lpdf_bernoulli(a[0], a[1]);
    INFO(c.dist << " at x = " << a[0]);
    check_close(got, c.v);
  }
  CHECK(lpdf_std_normal(1.5) == lpdf_normal(1.5, 0, 1));
}

TEST_CASE("log-densities match Boost.Math over a grid", "[distributions]") {
  namespace bm = boost::math;
  const auto close_to_log = [](double got, double pdf) {
    REQUIRE(pdf > 1e-300); // the grid stays where the density is representable
    check_close(got, std::log(pdf), 1e-12);
  };
  for (double x = -6; x <= 6; x += 0.37) {
    INFO("x = " << x);
    close_to_log(lpdf_normal(x, 0.4, 1.7), bm::pdf(bm::normal(0.4, 1.7), x));
    close_to_log(lpdf_student_t(x, 2.5, 0.4, 1.7),
                 bm::pdf(bm::students_t(2.5), (x - 0.4) / 1.7) / 1.7);
    close_to_log(lpdf_student_t(x, 0.3, -1, 0.2),
                 bm::pdf(bm::students_t(0.3), (x + 1) / 0.2) / 0.2);
  }
  for (double x = 0.01; x <= 20; x *= 1.3) {
    INFO("x = " << x);
    close_to_log(lpdf_lognormal(x, 0.5, 0.8), bm::pdf(bm::lognormal(0.5, 0.8), x));
    close_to_log(lpdf_gamma(x, 0.3, 2.0), bm::pdf(bm::gamma_distribution(0.3, 0.5), x));
    close_to_log(lpdf_gamma(x, 4.5, 0.7), bm::pdf(bm::gamma_distribution(4.5, 1 / 0.7), x));
    close_to_log(lpdf_half_normal(x, 2.5), 2 * bm::pdf(bm::normal(0, 2.5), x));
    close_to_log(lpdf_exponential(x, 0.6), 0.6 * std::exp(-0.6 * x));
  }
  for (double lambda : {0.1, 3.0, 9.5, 10.0, 57.3, 4000.0})
    for (double k = 0; k < 5 * lambda + 20; k += 1) {
      const double pmf = bm::pdf(bm::poisson(lambda), k);
      if (pmf < 1e-300)
        break;
      INFO("lambda = " << lambda << ", k = " << k);
      close_to_log(lpdf_poisson(k, lambda), pmf);
    }
}

TEST_CASE("outside the support the log-density is -inf", "[distributions]") {
  CHECK(lpdf_normal(kInf, 0, 1) == -kInf);
  CHECK(lpdf_normal(-kInf, 0, 1) == -kInf);
  CHECK(lpdf_lognormal(0, 0, 1) == -kInf);
  CHECK(lpdf_lognormal(-1, 0, 1) == -kInf);
  CHECK(lpdf_lognormal(kInf, 0, 1) == -kInf);
  CHECK(lpdf_student_t(kInf, 3, 0, 1) == -kInf);
  CHECK(lpdf_half_normal(-1e-300, 1) == -kInf);
  CHECK(lpdf_half_normal(kInf, 1) == -kInf);
  CHECK(lpdf_uniform(-0.001, 0, 1) == -kInf);
  CHECK(lpdf_uniform(1.001, 0, 1) == -kInf);
  CHECK(lpdf_uniform(0, 0, 1) == 0); // the support is closed
  CHECK(lpdf_uniform(1, 0, 1) == 0);
  CHECK(lpdf_gamma(-1, 2, 1) == -kInf);
  CHECK(lpdf_gamma(kInf, 2, 1) == -kInf);
  CHECK(lpdf_gamma(kInf, 1, 1) == -kInf);
  CHECK(lpdf_gamma(kInf, 0.5, 1) == -kInf);
  CHECK(lpdf_exponential(-1e-300, 1) == -kInf);
  CHECK(lpdf_exponential(kInf, 1) == -kInf);
  CHECK(lpdf_poisson(-1, 3) == -kInf);
  CHECK(lpdf_poisson(1, 0) == -kInf);
  CHECK(lpdf_bernoulli(2, 0.5) == -kInf);
  CHECK(lpdf_bernoulli(-1, 0.5) == -kInf);
  CHECK(lpdf_bernoulli(1, 0) == -kInf);
  CHECK(lpdf_bernoulli(0, 1) == -kInf);
}

TEST_CASE("boundary values of the support", "[distributions]") {
  // Gamma at 0: the limit of the density, which depends on alpha.
  CHECK(lpdf_gamma(0, 0.5, 2) == kInf);
  CHECK(lpdf_gamma(0, 1, 2) == std::log(2.0));
  CHECK(lpdf_gamma(0, 3, 2) == -kInf);
  CHECK(lpdf_exponential(0, 2) == std::log(2.0));
  check_close(lpdf_half_normal(0, 2), lpdf_normal(0, 0, 2) + std::log(2.0));
  CHECK(lpdf_poisson(0, 0) == 0); // lambda = 0 puts all mass on 0
  CHECK(lpdf_poisson(0, 3.5) == -3.5);
  CHECK(lpdf_poisson(1, 1) == -1);
  CHECK(lpdf_bernoulli(1, 1) == 0);
  CHECK(lpdf_bernoulli(0, 0) == 0);
  CHECK(lpdf_gamma(1e-300, 2, 1) == Approx(std::log(1e-300) - 1e-300).epsilon(1e-14));
}

TEST_CASE("invalid parameters give NaN from log-densities", "[distributions]") {
  for (double bad_scale : {0.0, -1.0, kNaN, kInf, -kInf}) {
    INFO("scale " << bad_scale);
    CHECK(std::isnan(lpdf_normal(0, 0, bad_scale)));
    CHECK(std::isnan(lpdf_lognormal(1, 0, bad_scale)));
    CHECK(std::isnan(lpdf_student_t(0, 3, 0, bad_scale)));
    CHECK(std::isnan(lpdf_student_t(0, bad_scale, 0, 1))); // nu
    CHECK(std::isnan(lpdf_half_normal(1, bad_scale)));
    CHECK(std::isnan(lpdf_gamma(1, bad_scale, 1)));
    CHECK(std::isnan(lpdf_gamma(1, 1, bad_scale)));
    CHECK(std::isnan(lpdf_exponential(1, bad_scale)));
  }
  for (double bad_loc : {kNaN, kInf, -kInf}) {
    CHECK(std::isnan(lpdf_normal(0, bad_loc, 1)));
    CHECK(std::isnan(lpdf_lognormal(1, bad_loc, 1)));
    CHECK(std::isnan(lpdf_student_t(0, 3, bad_loc, 1)));
    CHECK(std::isnan(lpdf_uniform(0, bad_loc, 1)));
    CHECK(std::isnan(lpdf_uniform(0, -1, -bad_loc)));
  }
  CHECK(std::isnan(lpdf_uniform(0.5, 1, 1)));
  CHECK(std::isnan(lpdf_uniform(0.5, 1, 0)));
  for (double bad_lambda : {-1e-300, -1.0, kNaN, kInf})
    CHECK(std::isnan(lpdf_poisson(1, bad_lambda)));
  for (double bad_count : {0.5, -1.5, kNaN, kInf, -kInf}) {
    CHECK(std::isnan(lpdf_poisson(bad_count, 2)));
    CHECK(std::isnan(lpdf_bernoulli(bad_count, 0.5)));
  }
  for (double bad_p : {-1e-300, 1.0000001, kNaN, kInf})
    CHECK(std::isnan(lpdf_bernoulli(1, bad_p)));
}

TEST_CASE("a NaN argument gives NaN", "[distributions]") {
  CHECK(std::isnan(lpdf_std_normal(kNaN)));
  CHECK(std::isnan(lpdf_normal(kNaN, 0, 1)));
  CHECK(std::isnan(lpdf_lognormal(kNaN, 0, 1)));
  CHECK(std::isnan(lpdf_student_t(kNaN, 3, 0, 1)));
  CHECK(std::isnan(lpdf_half_normal(kNaN, 1)));
  CHECK(std::isnan(lpdf_uniform(kNaN, 0, 1)));
  CHECK(std::isnan(lpdf_gamma(kNaN, 2, 1)));
  CHECK(std::isnan(lpdf_exponential(kNaN, 1)));
  CHECK(std::isnan(lpdf_poisson(kNaN, 1)));
  CHECK(std::isnan(lpdf_bernoulli(kNaN, 0.5)));
}

TEST_CASE("densities integrate to 1 and masses sum to 1", "[distributions]") {
  for (auto [mu, sigma] : {std::pair{0.0, 1.0}, {-3.0, 0.01}, {100.0, 30.0}}) {
    INFO("normal " << mu << " " << sigma);
    CHECK(std::fabs(
              integrate_real([=](double x) { return lpdf_normal(x, mu, sigma); }, mu, sigma, 8) -
              1) < kIntegralTol);
  }
  for (auto [nu, sigma] : {std::pair{0.8, 1.0}, {3.0, 0.5}, {50.0, 2.0}}) {
    INFO("student_t " << nu << " " << sigma);
    // Tails decay like exp(-nu u) in u; umax puts the truncation error below 1e-15.
    CHECK(std::fabs(integrate_real([=](double x) { return lpdf_student_t(x, nu, 0.7, sigma); }, 0.7,
                                   sigma, 36 / nu + 5) -
                    1) < kIntegralTol);
  }
  for (auto [mu, sigma] : {std::pair{0.0, 1.0}, {2.0, 0.1}, {-1.0, 2.5}}) {
    INFO("lognormal " << mu << " " << sigma);
    CHECK(std::fabs(integrate_positive([=](double x) { return lpdf_lognormal(x, mu, sigma); },
                                       mu - 10 * sigma, mu + 10 * sigma) -
                    1) < kIntegralTol);
  }
  for (auto [alpha, beta] : {std::pair{0.2, 1.0}, {1.0, 3.0}, {7.5, 0.5}}) {
    INFO("gamma " << alpha << " " << beta);
    // Near 0 the integrand decays like exp(alpha u).
    CHECK(std::fabs(integrate_positive([=](double x) { return lpdf_gamma(x, alpha, beta); },
                                       -36 / alpha - std::log(beta), 6 - std::log(beta)) -
                    1) < kIntegralTol);
  }
  for (double sigma : {0.3, 4.0}) {
    INFO("half_normal " << sigma);
    CHECK(std::fabs(integrate_positive([=](double x) { return lpdf_half_normal(x, sigma); },
                                       std::log(sigma) - 40, std::log(sigma) + 3) -
                    1) < kIntegralTol);
  }
  for (double beta : {0.1, 5.0}) {
    INFO("exponential " << beta);
    CHECK(std::fabs(integrate_positive([=](double x) { return lpdf_exponential(x, beta); },
                                       -std::log(beta) - 40, -std::log(beta) + 4) -
                    1) < kIntegralTol);
  }
  // The uniform density is constant on [lo, hi].
  CHECK(std::exp(lpdf_uniform(0.3, -2, 5.5)) * 7.5 == Approx(1).epsilon(1e-15));
  for (double lambda : {0.0, 0.7, 9.99, 10.0, 250.0}) {
    double sum = 0;
    for (double k = 0; k < 10 * lambda + 50; k += 1)
      sum += std::exp(lpdf_poisson(k, lambda));
    INFO("poisson " << lambda);
    CHECK(std::fabs(sum - 1) < 1e-12);
  }
  for (double p : {0.0, 0.25, 1.0})
    CHECK(std::exp(lpdf_bernoulli(0, p)) + std::exp(lpdf_bernoulli(1, p)) ==
          Approx(1).epsilon(1e-15));
}

// ---------------------------------------------------------------------------------------------
// Samplers.

TEST_CASE("samplers are deterministic functions of the counter", "[distributions]") {
  CHECK(sample_gamma(kSeed, 1, 2, 3, 0.4, 1) == sample_gamma(kSeed, 1, 2, 3, 0.4, 1));
  CHECK(sample_gamma(kSeed, 1, 2, 3, 0.4, 1) != sample_gamma(kSeed, 2, 2, 3, 0.4, 1));
  CHECK(sample_poisson(kSeed, 1, 2, 3, 1e5) == sample_poisson(kSeed, 1, 2, 3, 1e5));
  // Normals use block 0; sample_std_normal_k pairs components on blocks.
  CHECK(sample_normal(kSeed, 1, 2, 3, 1, 2) == 1 + 2 * sample_std_normal(kSeed, 1, 2, 3));
  CHECK(sample_std_normal_k(kSeed, 1, 2, 3, 0) == sample_std_normal(kSeed, 1, 2, 3));
  CHECK(sample_half_normal(kSeed, 1, 2, 3, 2) == 2 * std::fabs(sample_std_normal(kSeed, 1, 2, 3)));
  CHECK(sample_lognormal(kSeed, 1, 2, 3, 1, 2) ==
        std::exp(1 + 2 * sample_std_normal(kSeed, 1, 2, 3)));
  double u0, u1;
  philox_u01x2(kSeed, 1, 2, 3, 0, u0, u1);
  CHECK(sample_uniform(kSeed, 1, 2, 3, 0, 1) == u0);
  CHECK(sample_exponential(kSeed, 1, 2, 3, 1) == -std::log(u0));
}

TEST_CASE("invalid parameters give NaN from samplers", "[distributions]") {
  const uint32_t n = 1, t = 2, s = 3;
  for (double bad_scale : {0.0, -1.0, kNaN, kInf}) {
    INFO("scale " << bad_scale);
    CHECK(std::isnan(sample_normal(kSeed, n, t, s, 0, bad_scale)));
    CHECK(std::isnan(sample_lognormal(kSeed, n, t, s, 0, bad_scale)));
    CHECK(std::isnan(sample_student_t(kSeed, n, t, s, 3, 0, bad_scale)));
    CHECK(std::isnan(sample_student_t(kSeed, n, t, s, bad_scale, 0, 1)));
    CHECK(std::isnan(sample_half_normal(kSeed, n, t, s, bad_scale)));
    CHECK(std::isnan(sample_gamma(kSeed, n, t, s, bad_scale, 1)));
    CHECK(std::isnan(sample_gamma(kSeed, n, t, s, 1, bad_scale)));
    CHECK(std::isnan(sample_exponential(kSeed, n, t, s, bad_scale)));
  }
  CHECK(std::isnan(sample_normal(kSeed, n, t, s, kNaN, 1)));
  CHECK(std::isnan(sample_uniform(kSeed, n, t, s, 1, 1)));
  CHECK(std::isnan(sample_uniform(kSeed, n, t, s, 1, 0)));
  CHECK(std::isnan(sample_uniform(kSeed, n, t, s, 0, kInf)));
  for (double bad_lambda : {-1.0, kNaN, kInf})
    CHECK(std::isnan(sample_poisson(kSeed, n, t, s, bad_lambda)));
  for (double bad_p : {-0.1, 1.1, kNaN})
    CHECK(std::isnan(sample_bernoulli(kSeed, n, t, s, bad_p)));
}

TEST_CASE("normal and std_normal samplers", "[distributions][sampler]") {
  namespace bm = boost::math;
  for (auto [mu, sigma] : {std::pair{0.0, 1.0}, {-3.0, 0.01}, {1e3, 50.0}}) {
    INFO("normal(" << mu << ", " << sigma << ")");
    const auto xs = draws([=](uint64_t k, uint32_t n, uint32_t t, uint32_t s) {
      return sample_normal(k, n, t, s, mu, sigma);
    });
    check_moments(xs, mu, sigma * sigma, 3 * std::pow(sigma, 4));
    check_ks(xs, [=](double x) { return bm::cdf(bm::normal(mu, sigma), x); });
  }
  // The components of sample_std_normal_k: each standard normal, and the two halves of one block
  // (k = 2j, 2j+1) as well as neighbouring blocks uncorrelated.
  std::vector<std::vector<double>> z(4);
  for (uint32_t k = 0; k < 4; ++k) {
    INFO("component " << k);
    z[k] = draws([=](uint64_t seed, uint32_t n, uint32_t t, uint32_t s) {
      return sample_std_normal_k(seed, n, t, s, k);
    });
    check_moments(z[k], 0, 1, 3);
    check_ks(z[k], [](double x) { return bm::cdf(bm::normal(), x); });
  }
  for (auto [a, b] : {std::pair{0, 1}, {2, 3}, {1, 2}, {0, 3}}) {
    double r = 0;
    for (uint32_t n = 0; n < kN; ++n)
      r += z[a][n] * z[b][n];
    INFO("components " << a << ", " << b);
    CHECK(std::fabs(r / kN) < 4 / std::sqrt(double(kN))); // E z_a z_b = 0, Var = 1
  }
}

TEST_CASE("lognormal sampler", "[distributions][sampler]") {
  namespace bm = boost::math;
  for (auto [mu, sigma] : {std::pair{0.0, 0.5}, {1.0, 0.25}, {-2.0, 1.5}}) {
    INFO("lognormal(" << mu << ", " << sigma << ")");
    const auto xs = draws([=](uint64_t k, uint32_t n, uint32_t t, uint32_t s) {
      return sample_lognormal(k, n, t, s, mu, sigma);
    });
    CHECK(all_in(xs, 0, kInf));
    // Raw moments E X^j = exp(j mu + j^2 sigma^2 / 2).
    const auto raw = [=](double j) { return std::exp(j * mu + 0.5 * j * j * sigma * sigma); };
    const double var = raw(2) - raw(1) * raw(1);
    if (sigma <= 0.5)
      check_moments(xs, raw(1), var, test::central_mu4(raw(1), raw(2), raw(3), raw(4)));
    else
      check_moments(xs, raw(1), var);
    check_ks(xs, [=](double x) { return bm::cdf(bm::lognormal(mu, sigma), x); });
  }
}

TEST_CASE("student_t sampler", "[distributions][sampler]") {
  namespace bm = boost::math;
  struct P {
    double nu, mu, sigma;
  };
  for (P p : {P{0.5, 0, 1}, P{1, 2, 3}, P{3, 1, 2}, P{10, -1, 0.5}, P{200, 0, 1}}) {
    INFO("student_t(" << p.nu << ", " << p.mu << ", " << p.sigma << ")");
    const auto xs = draws([=](uint64_t k, uint32_t n, uint32_t t, uint32_t s) {
      return sample_student_t(k, n, t, s, p.nu, p.mu, p.sigma);
    });
    CHECK(all_in(xs, -kInf, kInf));
    if (p.nu > 4) {
      const double var = p.sigma * p.sigma * p.nu / (p.nu - 2);
      const double mu4 = 3 * std::pow(p.sigma, 4) * p.nu * p.nu / ((p.nu - 2) * (p.nu - 4));
      check_moments(xs, p.mu, var, mu4);
    } else if (p.nu > 2) {
      check_moments(xs, p.mu, p.sigma * p.sigma * p.nu / (p.nu - 2));
    }
    check_ks(xs, [=](double x) { return bm::cdf(bm::students_t(p.nu), (x - p.mu) / p.sigma); });
  }
}

TEST_CASE("half_normal sampler", "[distributions][sampler]") {
  namespace bm = boost::math;
  for (double sigma : {0.5, 3.0}) {
    INFO("half_normal(" << sigma << ")");
    const auto xs = draws([=](uint64_t k, uint32_t n, uint32_t t, uint32_t s) {
      return sample_half_normal(k, n, t, s, sigma);
    });
    CHECK(all_in(xs, 0, kInf));
    // Raw moments: sigma sqrt(2/pi), sigma^2, 2 sigma^3 sqrt(2/pi), 3 sigma^4.
    const double c = std::sqrt(2 / kPi);
    const double m1 = sigma * c, m2 = sigma * sigma, m3 = 2 * std::pow(sigma, 3) * c,
                 m4 = 3 * std::pow(sigma, 4);
    check_moments(xs, m1, m2 - m1 * m1, test::central_mu4(m1, m2, m3, m4));
    check_ks(xs, [=](double x) { return std::erf(x / (sigma * std::sqrt(2.0))); });
  }
}

TEST_CASE("uniform sampler", "[distributions][sampler]") {
  for (auto [lo, hi] : {std::pair{0.0, 1.0}, {-3.0, 4.5}, {1e6, 1e6 + 1e-3}}) {
    INFO("uniform(" << lo << ", " << hi << ")");
    const auto xs = draws([=](uint64_t k, uint32_t n, uint32_t t, uint32_t s) {
      return sample_uniform(k, n, t, s, lo, hi);
    });
    CHECK(all_in(xs, lo, hi));
    const double w = hi - lo;
    check_moments(xs, 0.5 * (lo + hi), w * w / 12, std::pow(w, 4) / 80);
    check_ks(xs, [=](double x) { return (x - lo) / w; });
  }
}

TEST_CASE("gamma sampler, including alpha < 1", "[distributions][sampler]") {
  namespace bm = boost::math;
  for (auto [alpha, beta] :
       {std::pair{0.05, 1.0}, {0.3, 2.0}, {0.999, 1.0}, {1.0, 0.5}, {2.5, 4.0}, {40.0, 0.1}}) {
    INFO("gamma(" << alpha << ", " << beta << ")");
    const auto xs = draws([=](uint64_t k, uint32_t n, uint32_t t, uint32_t s) {
      return sample_gamma(k, n, t, s, alpha, beta);
    });
    // 0 is allowed: for alpha = 0.05 a draw below the smallest subnormal (probability ~1e-16)
    // rounds to 0.
    CHECK(all_in(xs, 0, kInf));
    const double var = alpha / (beta * beta);
    check_moments(xs, alpha / beta, var, (3 * alpha * alpha + 6 * alpha) / std::pow(beta, 4));
    check_ks(xs, [=](double x) { return bm::cdf(bm::gamma_distribution(alpha, 1 / beta), x); });
  }
}

TEST_CASE("exponential sampler", "[distributions][sampler]") {
  for (double beta : {0.4, 30.0}) {
    INFO("exponential(" << beta << ")");
    const auto xs = draws([=](uint64_t k, uint32_t n, uint32_t t, uint32_t s) {
      return sample_exponential(k, n, t, s, beta);
    });
    CHECK(all_in(xs, 0, kInf));
    check_moments(xs, 1 / beta, 1 / (beta * beta), 9 / std::pow(beta, 4));
    check_ks(xs, [=](double x) { return -std::expm1(-beta * x); });
  }
}

TEST_CASE("poisson sampler on both sides of the algorithm switch", "[distributions][sampler]") {
  namespace bm = boost::math;
  // Inversion below lambda = 10, PTRS from 10 on.
  for (double lambda : {0.02, 1.0, 4.5, 9.999, 10.0, 10.5, 33.3, 1000.0, 1e6}) {
    INFO("poisson(" << lambda << ")");
    const auto xs = draws([=](uint64_t k, uint32_t n, uint32_t t, uint32_t s) {
      return sample_poisson(k, n, t, s, lambda);
    });
    CHECK(all_in(xs, 0, kInf));
    CHECK(all_integers(xs));
    check_moments(xs, lambda, lambda, lambda * (1 + 3 * lambda));
    const double start = std::max(0.0, std::floor(lambda - 8 * std::sqrt(lambda)));
    check_chi_square(
        xs, [=](double k) { return bm::cdf(bm::poisson(lambda), k); }, start);
  }
  CHECK(sample_poisson(kSeed, 1, 2, 3, 0) == 0);
}

TEST_CASE("bernoulli sampler", "[distributions][sampler]") {
  for (double p : {0.3, 0.999}) {
    INFO("bernoulli(" << p << ")");
    const auto xs = draws([=](uint64_t k, uint32_t n, uint32_t t, uint32_t s) {
      return sample_bernoulli(k, n, t, s, p);
    });
    CHECK(all_in(xs, 0, 1));
    CHECK(all_integers(xs));
    // With two outcomes the mean is the whole distribution (a binomial test).
    check_moments(xs, p, p * (1 - p), p * (1 - p) * (1 - 3 * p + 3 * p * p));
  }
  for (uint32_t n = 0; n < 1000; ++n) {
    REQUIRE(sample_bernoulli(kSeed, n, 0, 0, 0) == 0);
    REQUIRE(sample_bernoulli(kSeed, n, 0, 0, 1) == 1);
  }
}
