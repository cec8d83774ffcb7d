// Unit tests of the log-densities of kernel/distributions.h's extreme-value laws, weibull (as
// test_log_densities.cpp does for the others): against high-precision reference values
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
