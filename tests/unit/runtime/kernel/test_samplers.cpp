// Unit tests of kernel/distributions.h's samplers: deterministic functions of the counter, NaN on
// invalid parameters, and moments and goodness of fit (KS, chi-square) against the exact
// distributions, in every regime of each algorithm. The log-densities: test_log_densities.cpp.
#include "distribution_checks.h"

using namespace ssm;
using namespace dist_test;
using test::check_chi_square;
using test::check_ks;
using test::check_moments;

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
  CHECK(std::isnan(sample_bernoulli_logit(kSeed, n, t, s, kNaN)));
  // The draw of bernoulli(logistic(alpha)) from the same uniform.
  for (uint32_t i = 0; i < 200; ++i)
    for (double alpha : {-3.0, 0.4, 2.0})
      CHECK(sample_bernoulli_logit(kSeed, i, t, s, alpha) ==
            sample_bernoulli(kSeed, i, t, s, 1 / (1 + std::exp(-alpha))));
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
    CHECK(all_in(xs, -std::numeric_limits<double>::max(), std::numeric_limits<double>::max()));
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

// ---------------------------------------------------------------------------------------------
// beta, inverse_gamma, laplace, cauchy, truncated_normal, binomial, negative_binomial.

TEST_CASE("added samplers: counters and invalid parameters", "[distributions]") {
  const uint32_t n = 1, t = 2, s = 3;
  CHECK(sample_std_gamma(kSeed, n, t, s, 0.4) == sample_gamma(kSeed, n, t, s, 0.4, 1));
  CHECK(sample_std_gamma(kSeed, n, t, s, 7.5) == sample_gamma(kSeed, n, t, s, 7.5, 1));
  CHECK(sample_inverse_gamma(kSeed, n, t, s, 2.5, 3) == 3 / sample_std_gamma(kSeed, n, t, s, 2.5));
  // The beta sampler's two gamma variates: block 0 on and block kGammaBlocks on.
  for (auto [a, b] : {std::pair{2.0, 3.0}, {0.5, 0.25}}) {
    const double ga = detail::std_gamma(a, kSeed, n, t, s, 0);
    const double gb = detail::std_gamma(b, kSeed, n, t, s, kGammaBlocks);
    CHECK(sample_beta(kSeed, n, t, s, a, b) == Approx(ga / (ga + gb)).epsilon(1e-14));
  }
  // Negative binomial: Poisson(G mu / phi) with the Poisson from block kGammaBlocks on, for
  // rates on both sides of the Poisson algorithm switch.
  for (auto [mu, phi] : {std::pair{3.0, 2.0}, {300.0, 20.0}}) {
    const double g = detail::std_gamma(phi, kSeed, n, t, s, 0);
    CHECK(sample_negative_binomial(kSeed, n, t, s, mu, phi) ==
          detail::poisson_from(g * (mu / phi), kSeed, n, t, s, kGammaBlocks));
  }
  CHECK(detail::poisson_from(3.5, kSeed, n, t, s, 0) == sample_poisson(kSeed, n, t, s, 3.5));
  CHECK(detail::poisson_from(35, kSeed, n, t, s, 0) == sample_poisson(kSeed, n, t, s, 35));

  for (double bad : {0.0, -1.0, kNaN, kInf}) {
    INFO("bad positive parameter " << bad);
    CHECK(std::isnan(sample_std_gamma(kSeed, n, t, s, bad)));
    CHECK(std::isnan(sample_beta(kSeed, n, t, s, bad, 1)));
    CHECK(std::isnan(sample_beta(kSeed, n, t, s, 1, bad)));
    CHECK(std::isnan(sample_inverse_gamma(kSeed, n, t, s, bad, 1)));
    CHECK(std::isnan(sample_inverse_gamma(kSeed, n, t, s, 1, bad)));
    CHECK(std::isnan(sample_laplace(kSeed, n, t, s, 0, bad)));
    CHECK(std::isnan(sample_cauchy(kSeed, n, t, s, 0, bad)));
    CHECK(std::isnan(sample_truncated_normal(kSeed, n, t, s, 0, bad, -1, 1)));
    CHECK(std::isnan(sample_negative_binomial(kSeed, n, t, s, 2, bad)));
  }
  for (double bad_loc : {kNaN, kInf, -kInf}) {
    CHECK(std::isnan(sample_laplace(kSeed, n, t, s, bad_loc, 1)));
    CHECK(std::isnan(sample_cauchy(kSeed, n, t, s, bad_loc, 1)));
    CHECK(std::isnan(sample_truncated_normal(kSeed, n, t, s, bad_loc, 1, -1, 1)));
  }
  CHECK(std::isnan(sample_truncated_normal(kSeed, n, t, s, 0, 1, 1, 1)));
  CHECK(std::isnan(sample_truncated_normal(kSeed, n, t, s, 0, 1, 1, -1)));
  CHECK(std::isnan(sample_truncated_normal(kSeed, n, t, s, 0, 1, kNaN, 1)));
  CHECK(std::isnan(sample_truncated_normal(kSeed, n, t, s, 0, 1, kInf, kInf)));
  for (double bad_trials : {-1.0, 2.5, kNaN, kInf})
    CHECK(std::isnan(sample_binomial(kSeed, n, t, s, bad_trials, 0.5)));
  for (double bad_p : {-0.1, 1.1, kNaN})
    CHECK(std::isnan(sample_binomial(kSeed, n, t, s, 10, bad_p)));
  for (double bad_mu : {-1.0, kNaN, kInf})
    CHECK(std::isnan(sample_negative_binomial(kSeed, n, t, s, bad_mu, 2)));
}

TEST_CASE("beta sampler, including shapes far below 1", "[distributions][sampler]") {
  namespace bm = boost::math;
  for (auto [a, b] : {std::pair{0.5, 0.5},
                      {2.0, 5.0},
                      {1.0, 1.0},
                      {0.05, 0.1},
                      {0.003, 2.0},
                      {0.003, 0.004},
                      {1000.0, 3000.0}}) {
    INFO("beta(" << a << ", " << b << ")");
    const auto xs = draws([=](uint64_t k, uint32_t n, uint32_t t, uint32_t s) {
      return sample_beta(k, n, t, s, a, b);
    });
    // No NaN even where both gamma variates underflow (a, b = 0.003, 0.004).
    CHECK(all_in(xs, 0, 1));
    // Raw moments E X^j = prod_{i<j} (a + i) / (a + b + i).
    const auto raw = [=](int j) {
      double m = 1;
      for (int i = 0; i < j; ++i)
        m *= (a + i) / (a + b + i);
      return m;
    };
    const double var = raw(2) - raw(1) * raw(1);
    check_moments(xs, raw(1), var, test::central_mu4(raw(1), raw(2), raw(3), raw(4)));
    const auto cdf = [=](double x) { return bm::cdf(bm::beta_distribution(a, b), x); };
    if (std::min(a, b) >= 0.5) {
      check_ks(xs, cdf);
    } else {
      // Shapes far below 1 put mass within rounding of 0 and 1 (all of X < 5e-324 is drawn as
      // 0), atoms that KS does not allow for: bins between quantiles instead.
      std::vector<double> edges;
      for (int i = 1; i < 20; ++i) {
        const double q = bm::quantile(bm::beta_distribution(a, b), i / 20.0);
        if (q > 1e-300 && q < 1 - 1e-12 && (edges.empty() || q > edges.back()))
          edges.push_back(q);
      }
      check_binned(xs, edges, cdf);
    }
  }
}

TEST_CASE("inverse_gamma sampler", "[distributions][sampler]") {
  namespace bm = boost::math;
  for (auto [alpha, beta] : {std::pair{0.5, 1.0}, {3.0, 2.0}, {5.5, 1.0}, {60.0, 0.1}}) {
    INFO("inverse_gamma(" << alpha << ", " << beta << ")");
    const auto xs = draws([=](uint64_t k, uint32_t n, uint32_t t, uint32_t s) {
      return sample_inverse_gamma(k, n, t, s, alpha, beta);
    });
    CHECK(all_in(xs, 0, kInf));
    // E X^j = beta^j Gamma(alpha - j) / Gamma(alpha), for j < alpha.
    const auto raw = [=](int j) {
      return std::pow(beta, j) * std::exp(std::lgamma(alpha - j) - std::lgamma(alpha));
    };
    if (alpha > 4)
      check_moments(xs, raw(1), raw(2) - raw(1) * raw(1),
                    test::central_mu4(raw(1), raw(2), raw(3), raw(4)));
    else if (alpha > 2)
      check_moments(xs, raw(1), raw(2) - raw(1) * raw(1));
    check_ks(xs, [=](double x) { return bm::cdf(bm::inverse_gamma_distribution(alpha, beta), x); });
  }
}

TEST_CASE("laplace sampler", "[distributions][sampler]") {
  for (auto [mu, b] : {std::pair{0.0, 1.0}, {-3.0, 0.2}, {1e3, 40.0}}) {
    INFO("laplace(" << mu << ", " << b << ")");
    const auto xs = draws([=](uint64_t k, uint32_t n, uint32_t t, uint32_t s) {
      return sample_laplace(k, n, t, s, mu, b);
    });
    check_moments(xs, mu, 2 * b * b, 24 * std::pow(b, 4));
    check_ks(xs, [=](double x) {
      return x < mu ? 0.5 * std::exp((x - mu) / b) : 1 - 0.5 * std::exp(-(x - mu) / b);
    });
  }
}

TEST_CASE("cauchy sampler", "[distributions][sampler]") {
  for (auto [mu, sigma] : {std::pair{0.0, 1.0}, {-3.0, 0.2}, {1e3, 40.0}}) {
    INFO("cauchy(" << mu << ", " << sigma << ")");
    auto xs = draws([=](uint64_t k, uint32_t n, uint32_t t, uint32_t s) {
      return sample_cauchy(k, n, t, s, mu, sigma);
    });
    CHECK(all_in(xs, -std::numeric_limits<double>::max(), std::numeric_limits<double>::max()));
    check_ks(xs, [=](double x) { return 0.5 + std::atan((x - mu) / sigma) / kPi; });
    // No moments; the sample median instead, whose standard error is 1 / (2 f(mu) sqrt(N)) =
    // pi sigma / (2 sqrt(N)).
    std::nth_element(xs.begin(), xs.begin() + kN / 2, xs.end());
    CHECK(std::fabs(xs[kN / 2] - mu) <= 5 * kPi * sigma / (2 * std::sqrt(double(kN))));
  }
}

TEST_CASE("truncated_normal sampler in every regime, including far tails",
          "[distributions][sampler]") {
  // Each proposal regime of detail::truncated_std_normal, mirrored cases, and tails out to 40
  // standard deviations, with the exact CDF and moments in long double.
  for (TruncatedNormal c : {TruncatedNormal{0, 1, -kInf, kInf}, // normal proposals
                            TruncatedNormal{1, 2, -1, 7},       // normal proposals, contains mu
                            TruncatedNormal{0, 1, -0.5, 1},     // uniform, contains mu
                            TruncatedNormal{0, 1, -1, 0.3},     // same, mirrored
                            TruncatedNormal{0, 1, 3, 3.1},      // uniform, narrow, right of mu
                            TruncatedNormal{0, 1, 0.2, 0.5},    // uniform, narrow, near mu
                            TruncatedNormal{0, 1, 0, kInf},     // exponential, half-normal
                            TruncatedNormal{0, 1, 1, 2},        // exponential, two-sided
                            TruncatedNormal{5, 3, -kInf, 2},    // exponential, one-sided, mirrored
                            TruncatedNormal{0, 1, 8, kInf},     // far tail, lo = mu + 8 sigma
                            TruncatedNormal{0, 1, -kInf, -8},   // far left tail
                            TruncatedNormal{-2, 0.5, 18, kInf}, // lo = mu + 40 sigma
                            TruncatedNormal{0, 1, 12, 12.5}}) { // exponential, far, two-sided
    INFO("truncated_normal(" << c.mu << ", " << c.sigma << ", " << c.lo << ", " << c.hi << ")");
    const auto xs = draws([=](uint64_t k, uint32_t n, uint32_t t, uint32_t s) {
      return sample_truncated_normal(k, n, t, s, c.mu, c.sigma, c.lo, c.hi);
    });
    CHECK(all_in(xs, c.lo, c.hi)); // also: no NaN
    const auto m = c.raw_moments();
    const long double var = m[2] - m[1] * m[1];
    const long double mu4 = m[4] - 4 * m[1] * m[3] + 6 * m[1] * m[1] * m[2] - 3 * std::pow(m[1], 4);
    check_moments(xs, double(c.mu + c.sigma * m[1]), double(c.sigma * c.sigma * var),
                  double(std::pow(c.sigma, 4) * mu4));
    check_ks(xs, [=](double x) { return c.cdf(x); });
  }
  // Beyond long double's reach of Q: lo = mu + 1000 sigma. Then z - lo is very nearly
  // Exp(rate lo) (density ~ exp(-lo y - y^2 / 2)), mean and sd ~ 1 / lo.
  const auto xs = draws([=](uint64_t k, uint32_t n, uint32_t t, uint32_t s) {
    return sample_truncated_normal(k, n, t, s, 0, 1, 1000, kInf) - 1000;
  });
  CHECK(all_in(xs, 0, kInf));
  // Moments of y from exp(-a y - y^2 / 2), to O(a^-5): E y = 1/a - 2/a^3, Var y = 1/a^2 - 6/a^4.
  const double a = 1000;
  check_moments(xs, 1 / a - 2 / std::pow(a, 3), 1 / (a * a) - 6 / std::pow(a, 4),
                9 / std::pow(a, 4));
}

TEST_CASE("binomial sampler: edge cases, both algorithms, large n", "[distributions][sampler]") {
  namespace bm = boost::math;
  for (uint32_t n = 0; n < 1000; ++n) {
    REQUIRE(sample_binomial(kSeed, n, 0, 0, 0, 0.4) == 0);
    REQUIRE(sample_binomial(kSeed, n, 0, 0, 17, 0) == 0);
    REQUIRE(sample_binomial(kSeed, n, 0, 0, 17, 1) == 17);
    REQUIRE(sample_binomial(kSeed, n, 0, 0, 1e6, 1) == 1e6);
  }
  // Inversion while trials * min(p, 1-p) < 10, BTRS from 10 on; p > 1/2 by symmetry.
  for (auto [trials, p] : {std::pair{1.0, 0.3},
                           {20.0, 0.3},
                           {33.0, 0.3},
                           {34.0, 0.3},
                           {50.0, 0.7},
                           {1000.0, 0.2},
                           {1e6, 0.5},
                           {1e6, 0.999},
                           {1e6, 3e-6},
                           {1e9, 0.25}}) {
    INFO("binomial(" << trials << ", " << p << ")");
    const auto xs = draws([=](uint64_t k, uint32_t n, uint32_t t, uint32_t s) {
      return sample_binomial(k, n, t, s, trials, p);
    });
    CHECK(all_in(xs, 0, trials));
    CHECK(all_integers(xs));
    const double var = trials * p * (1 - p);
    check_moments(xs, trials * p, var, var * (1 + 3 * (trials - 2) * p * (1 - p)));
    const double start = std::max(0.0, std::floor(trials * p - 8 * std::sqrt(var)));
    check_chi_square(
        xs, [=](double k) { return bm::cdf(bm::binomial_distribution(trials, p), k); }, start);
  }
}

TEST_CASE("negative_binomial sampler", "[distributions][sampler]") {
  namespace bm = boost::math;
  for (auto [mu, phi] :
       {std::pair{2.0, 3.0}, {10.0, 0.5}, {0.5, 0.05}, {1000.0, 50.0}, {5.0, 1e6}}) {
    INFO("negative_binomial(" << mu << ", " << phi << ")");
    const auto xs = draws([=](uint64_t k, uint32_t n, uint32_t t, uint32_t s) {
      return sample_negative_binomial(k, n, t, s, mu, phi);
    });
    CHECK(all_in(xs, 0, kInf));
    CHECK(all_integers(xs));
    // NB(r = phi, p = phi / (mu + phi)): excess kurtosis 6 / r + p^2 / (r (1 - p)).
    const double var = mu + mu * mu / phi;
    const double p = phi / (mu + phi);
    const double mu4 = var * var * (3 + 6 / phi + p * p / (phi * (1 - p)));
    check_moments(xs, mu, var, mu4);
    const double start = std::max(0.0, std::floor(mu - 8 * std::sqrt(var)));
    check_chi_square(
        xs, [=](double k) { return bm::cdf(bm::negative_binomial_distribution(phi, p), k); },
        start);
  }
  for (uint32_t n = 0; n < 1000; ++n)
    REQUIRE(sample_negative_binomial(kSeed, n, 0, 0, 0, 2) == 0);
}

TEST_CASE("weibull sampler", "[distributions][sampler]") {
  const uint32_t n = 1, t = 2, s = 3;
  // Inversion of u0 of block 0.
  CHECK(sample_weibull(kSeed, n, t, s, 1.5, 2) ==
        2 * std::pow(-std::log(philox_u01(kSeed, n, t, s, 0)), 1 / 1.5));
  for (double bad : {0.0, -1.0, kNaN, kInf}) {
    INFO("bad positive parameter " << bad);
    CHECK(std::isnan(sample_weibull(kSeed, n, t, s, bad, 1)));
    CHECK(std::isnan(sample_weibull(kSeed, n, t, s, 1, bad)));
  }
  for (auto [k, lambda] : {std::pair{0.5, 1.0}, {1.0, 2.0}, {1.5, 0.3}, {3.7, 12.0}, {25.0, 1e3}}) {
    INFO("weibull(" << k << ", " << lambda << ")");
    const auto xs = draws([=](uint64_t key, uint32_t n, uint32_t t, uint32_t s) {
      return sample_weibull(key, n, t, s, k, lambda);
    });
    CHECK(all_in(xs, 0, kInf));
    // E X^j = lambda^j Gamma(1 + j / k).
    const auto raw = [=](int j) { return std::pow(lambda, j) * std::tgamma(1 + j / k); };
    check_moments(xs, raw(1), raw(2) - raw(1) * raw(1),
                  test::central_mu4(raw(1), raw(2), raw(3), raw(4)));
    check_ks(xs, [=](double x) { return -std::expm1(-std::pow(x / lambda, k)); });
  }
}

TEST_CASE("gumbel sampler", "[distributions][sampler]") {
  const uint32_t n = 1, t = 2, s = 3;
  // Inversion of u0 of block 0.
  CHECK(sample_gumbel(kSeed, n, t, s, 0.5, 2) ==
        0.5 - 2 * std::log(-std::log(philox_u01(kSeed, n, t, s, 0))));
  for (double bad : {kNaN, kInf, -kInf}) {
    INFO("bad location " << bad);
    CHECK(std::isnan(sample_gumbel(kSeed, n, t, s, bad, 1)));
  }
  for (double bad : {0.0, -1.0, kNaN, kInf}) {
    INFO("bad scale " << bad);
    CHECK(std::isnan(sample_gumbel(kSeed, n, t, s, 0, bad)));
  }
  for (auto [mu, beta] : {std::pair{0.0, 1.0}, {-3.0, 0.2}, {40.0, 7.5}}) {
    INFO("gumbel(" << mu << ", " << beta << ")");
    const auto xs = draws([=](uint64_t key, uint32_t n, uint32_t t, uint32_t s) {
      return sample_gumbel(key, n, t, s, mu, beta);
    });
    CHECK(all_in(xs, -std::numeric_limits<double>::max(), std::numeric_limits<double>::max()));
    // Mean mu + beta gamma_E, variance (pi beta)^2 / 6, kurtosis 27 / 5.
    const double var = kPi * kPi * beta * beta / 6;
    check_moments(xs, mu + beta * 0.57721566490153286061, var, 5.4 * var * var);
    check_ks(xs, [=](double x) { return std::exp(-std::exp(-(x - mu) / beta)); });
  }
}
