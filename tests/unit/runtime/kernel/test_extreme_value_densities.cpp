// Unit tests of the log-densities of kernel/distributions.h's extreme-value laws, weibull and
// gumbel (as test_log_densities.cpp does for the others): against high-precision reference values
// and Boost.Math, support edges, invalid parameters and NaN, and normalisation by quadrature.
#include "distribution_checks.h"

using namespace ssm;
using namespace dist_test;

TEST_CASE("weibull log-density: reference values, Boost.Math, edges, normalisation",
          "[distributions]") {
  // mpmath at 50 digits; the last three have x / lambda outside the normal doubles (log z from
  // log x - log lambda) or the density's limit at x -> 0 with k < 1.
  const std::vector<std::array<double, 4>> ref = {{1.0, 1, 1, -1.0},
                                                  {0.5, 0.5, 2, -1.1931471805599453094},
                                                  {2.5, 1.5, 0.3, -21.386691535700262231},
                                                  {30, 3.7, 12, -28.376721390498461974},
                                                  {1.02, 25, 1, 2.0535328855117836537},
                                                  {7.5, 1, 2.5, -3.9162907318741550652},
                                                  {1e-5, 0.2, 4, 7.2478577589925841901},
                                                  {1e5, 0.2, 4, -18.67561998918625233},
                                                  {1e-300, 0.5, 1, 344.69461676854690728},
                                                  {1e300, 0.01, 1e-10, -1947.1680960900876525},
                                                  {1e-310, 2, 1e10, -759.15993350747513347}};
  for (auto [x, k, lambda, v] : ref) {
    INFO("weibull(" << k << ", " << lambda << ") at " << x);
    check_close(lpdf_weibull(x, k, lambda), v);
  }
  namespace bm = boost::math;
  for (auto [k, lambda] : {std::pair{0.5, 1.0}, {1.0, 2.0}, {1.5, 0.3}, {3.7, 12.0}, {25.0, 1.0}})
    for (double x = 1e-3 * lambda; x < 5 * lambda; x *= 1.15) {
      const double pdf = bm::pdf(bm::weibull_distribution(k, lambda), x);
      if (pdf < 1e-300)
        continue;
      INFO("weibull(" << k << ", " << lambda << ") at " << x);
      check_close(lpdf_weibull(x, k, lambda), std::log(pdf), 1e-12);
    }
  // At x = 0 the limit of the density: +inf, 1 / lambda, 0 for k below, at and above 1.
  CHECK(lpdf_weibull(0, 0.5, 2) == kInf);
  CHECK(lpdf_weibull(0, 1, 2) == -std::log(2.0));
  CHECK(lpdf_weibull(0, 3, 2) == -kInf);
  for (double x : {-1e-300, -1.0, -kInf, kInf})
    for (double k : {0.5, 1.0, 3.0})
      CHECK(lpdf_weibull(x, k, 2) == -kInf);
  for (double x : {0.01, 0.7, 9.0}) // k = 1 is the exponential with rate 1 / lambda
    check_close(lpdf_weibull(x, 1, 2.5), lpdf_exponential(x, 0.4), 1e-15);
  for (double bad : {0.0, -1.0, kNaN, kInf, -kInf}) {
    INFO("bad positive parameter " << bad);
    CHECK(std::isnan(lpdf_weibull(1, bad, 1)));
    CHECK(std::isnan(lpdf_weibull(1, 1, bad)));
    CHECK(std::isnan(lpdf_weibull(0, bad, 1)));
  }
  CHECK(std::isnan(lpdf_weibull(kNaN, 2, 1)));
  // In u = log x the integrand k z^k exp(-z^k) decays like exp(k u) below log lambda and doubly
  // exponentially above; the step resolves the peak, of width ~1 / k in u.
  for (auto [k, lambda] : {std::pair{0.3, 1.0}, {1.0, 0.01}, {2.0, 3.0}, {25.0, 1e4}}) {
    INFO("weibull " << k << " " << lambda);
    const double c = std::log(lambda);
    CHECK(std::fabs(integrate_positive([=](double x) { return lpdf_weibull(x, k, lambda); },
                                       c - 40 / k, c + 5 / k, std::min(1e-3, 0.02 / k)) -
                    1) < kIntegralTol);
  }
}

TEST_CASE("gumbel log-density: reference values, Boost.Math, edges, normalisation",
          "[distributions]") {
  // mpmath at 50 digits: -log beta - z - exp(-z), z = (x - mu) / beta.
  const std::vector<std::array<double, 4>> ref = {{0, 0, 1, -1.0},
                                                  {1.5, 0, 1, -1.7231301601484298289},
                                                  {-2, 0.5, 2, -2.9334901380217866855},
                                                  {10, 1, 0.1, -87.697414907005949375},
                                                  {-3, 2, 0.7, -1257.5380917175354338},
                                                  {1e-3, -1e-3, 1e-3, 4.7724199957455243393},
                                                  {50, 0, 1, -50.0},
                                                  {-30, 0, 5, -399.03823140516922298},
                                                  {1e10, -1e10, 1e9, -40.723265839007564779},
                                                  {-4, 3, 1, -1089.6331584284585993}};
  for (auto [x, mu, beta, v] : ref) {
    INFO("gumbel(" << mu << ", " << beta << ") at " << x);
    check_close(lpdf_gumbel(x, mu, beta), v);
  }
  namespace bm = boost::math;
  for (auto [mu, beta] : {std::pair{0.0, 1.0}, {-2.0, 0.3}, {5.0, 4.0}, {1e3, 1e-2}})
    for (double z = -3; z < 30; z += 0.37) {
      const double x = mu + beta * z;
      INFO("gumbel(" << mu << ", " << beta << ") at " << x);
      check_close(lpdf_gumbel(x, mu, beta),
                  std::log(bm::pdf(bm::extreme_value_distribution(mu, beta), x)), 1e-12);
    }
  // The density vanishes at both ends of the real line; below the mode, exp(-z) overflows early.
  for (double x : {-kInf, kInf, -1e300})
    CHECK(lpdf_gumbel(x, 0.3, 2) == -kInf);
  CHECK(lpdf_gumbel(0.25, 0.3, 1e-8) == -kInf);          // exp(-z) overflows: z = -5e6
  CHECK(lpdf_gumbel(0.3, 0.3, 2) == -std::log(2.0) - 1); // the mode
  for (double bad : {0.0, -1.0, kNaN, kInf, -kInf}) {
    INFO("bad scale " << bad);
    CHECK(std::isnan(lpdf_gumbel(1, 0, bad)));
  }
  for (double bad : {kNaN, kInf, -kInf}) {
    INFO("bad location " << bad);
    CHECK(std::isnan(lpdf_gumbel(1, bad, 1)));
  }
  CHECK(std::isnan(lpdf_gumbel(kNaN, 0, 1)));
  for (auto [mu, beta] : {std::pair{0.0, 1.0}, {-7.0, 0.01}, {3.0, 250.0}}) {
    INFO("gumbel " << mu << " " << beta);
    CHECK(std::fabs(
              integrate_real([=](double x) { return lpdf_gumbel(x, mu, beta); }, mu, beta, 6) - 1) <
          kIntegralTol);
  }
}
