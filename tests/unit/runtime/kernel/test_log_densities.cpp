// Unit tests of kernel/distributions.h's log-densities: against high-precision reference values
// and Boost.Math, support edges and conventions, invalid parameters and NaN, and normalisation by
// quadrature. The extreme-value laws (weibull, gumbel): test_extreme_value_densities.cpp; the
// samplers: test_samplers.cpp.
#include "distribution_checks.h"

using namespace ssm;
using namespace dist_test;
using test::check_chi_square;
using test::check_ks;
using test::check_moments;

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
      {"bernoulli_logit", {1.0, 0.3}, -0.55435524446852712354},
      {"bernoulli_logit", {0.0, 0.3}, -0.85435524446852711244},
      {"bernoulli_logit", {1.0, 2.5}, -0.078889734292549623344},
      // Past alpha = 37 logistic(alpha) rounds to 1 and bernoulli(logistic) gives -inf at 0.
      {"bernoulli_logit", {0.0, 40.0}, -40.000000000000000004},
      {"bernoulli_logit", {1.0, -40.0}, -40.000000000000000004},
      {"bernoulli_logit", {0.0, 800.0}, -800.0},
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
    else if (c.dist == "bernoulli_logit")
      got = lpdf_bernoulli_logit(a[0], a[1]);
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
  CHECK(lpdf_bernoulli_logit(1, 800) == 0);
  CHECK(lpdf_bernoulli_logit(2, 0.5) == -kInf);
  CHECK(std::isnan(lpdf_bernoulli_logit(0.5, 0.5)));
  CHECK(std::isnan(lpdf_bernoulli_logit(1, kNaN)));
  CHECK(lpdf_bernoulli_logit(1, kInf) == 0);
  CHECK(lpdf_bernoulli_logit(0, kInf) == -kInf);
  // The same law as bernoulli(logistic(alpha)) where that is exact.
  for (double alpha : {-5.0, -0.7, 0.0, 1.3, 6.0})
    for (double k : {0.0, 1.0})
      CHECK(lpdf_bernoulli_logit(k, alpha) ==
            Approx(lpdf_bernoulli(k, 1 / (1 + std::exp(-alpha)))).epsilon(1e-13));
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
// beta, inverse_gamma, laplace, cauchy, truncated_normal, binomial, negative_binomial.

TEST_CASE("log_beta and the normal tail match high-precision values", "[distributions]") {
  // mpmath at 50 digits: log Gamma(a) + log Gamma(b) - log Gamma(a + b), on both sides of each
  // switch (max(a, b) = 10, min(a, b) = 10) and where the plain difference would cancel.
  const std::vector<std::array<double, 3>> lbeta = {
      {0.5, 0.5, 1.1447298858494001741},      {1, 1, 0.0},
      {2.5, 7, -4.8253993383142483279},       {0.3, 1e6, -3.0488550675711995173},
      {5, 1e6, -65.899508959458424934},       {9.99, 10.01, -13.736218710401053394},
      {10, 10, -13.736229227036554814},       {1e6, 1e6, -1386300.0033629211163},
      {123.4, 5678.9, -598.7171441524069559}, {0.001, 2, 6.906755778649053498},
      {1, 50, -3.9120230054281460586},        {12, 9.5, -14.660284594004006282},
      {0.02, 0.03, 4.4218963584890570658},    {3e8, 7.5, -138.86033358914483014}};
  for (auto [a, b, v] : lbeta) {
    INFO("log_beta(" << a << ", " << b << ")");
    check_close(log_beta(a, b), v, 5e-15);
    check_close(log_beta(b, a), v, 5e-15);
  }
  // log Q(z), Q the standard normal upper tail, across the switch to the asymptotic series.
  const std::vector<std::pair<double, double>> sf = {
      {-3, -0.0013508099647481937988}, {0, -0.69314718055994530942},
      {1.5, -2.705944400823889807},    {5, -15.064998393988725736},
      {10, -53.231285150512470578},    {20, -203.91715537109726394},
      {29.9, -451.32291245852863447},  {30, -454.32124395634319711},
      {30.1, -457.32956441638225788},  {40, -804.60844201375378817},
      {100, -5005.5242086942050886},   {1e4, -50000010.129278915181}};
  for (auto [z, v] : sf) {
    INFO("log Q(" << z << ")");
    check_close(detail::log_normal_sf(z), v, 5e-15);
  }
  CHECK(detail::log_normal_sf(kInf) == -kInf);
  CHECK(detail::log_normal_sf(-kInf) == 0);
}

TEST_CASE("log-densities of the added distributions match high-precision values",
          "[distributions]") {
  // mpmath at 50 digits from the textbook formulas. `cond` is the size of the largest term that
  // cancels in double arithmetic (a rounding error of the inputs' logarithms alone moves the
  // result by ~1e-16 cond), which bounds the attainable accuracy.
  struct Case {
    std::string dist;
    std::vector<double> a;
    double v;
    double cond = 0;
  };
  const std::vector<Case> cases = {
      {"beta", {0.3, 2, 3}, 0.56758395758459955449},
      {"beta", {0.5, 0.5, 0.5}, -0.45158270528945486473},
      {"beta", {1e-05, 0.2, 4}, 7.9430427171279325385},
      {"beta", {0.999, 30, 0.7}, 4.1597909070906974705},
      {"beta", {0.5, 1e6, 1e6}, 7.0285373916173822744, 1.4e6},
      {"beta", {0.001, 5, 1e6}, -962.23084523967006064},
      {"inverse_gamma", {1.0, 1, 1}, -1.0},
      {"inverse_gamma", {0.5, 2.5, 3}, -1.1121370168428363482},
      {"inverse_gamma", {20.0, 0.3, 0.1}, -5.6860254783364776483},
      {"inverse_gamma", {0.001, 4, 0.01}, 4.3263361817302647665},
      {"laplace", {0, 0, 1}, -0.69314718055994530942},
      {"laplace", {2.5, -1, 0.5}, -7.0},
      {"laplace", {-30, 4, 7}, -7.4962001867581157574},
      {"cauchy", {0, 0, 1}, -1.1447298858494001741},
      {"cauchy", {2.5, -1, 0.5}, -4.3636057107176009233},
      {"cauchy", {1e200, 0, 1}, -922.17876708346767372},
      {"cauchy", {-3e7, 1, 0.002}, -41.792753930191116411},
      {"cauchy", {0.9, 1, 1}, -1.1546802167025682526},
      {"truncated_normal", {0.3, 0, 1, -kInf, kInf}, -0.96393853320467273845},
      {"truncated_normal", {0.5, 0, 1, 0, kInf}, -0.35079135264472743236},
      {"truncated_normal", {1.2, 0.5, 2, -1, 3}, -1.2694536628942888128},
      {"truncated_normal", {8.5, 0, 1, 8, kInf}, -2.0305013732901228463},
      {"truncated_normal", {41, 0, 1, 40, kInf}, -36.810496519450884575},
      {"truncated_normal", {-35.5, 0, 1, -kInf, -35}, -14.068837271282159269},
      {"truncated_normal", {10.2, 1, 0.5, 10, 11}, -3.6934181019305211652},
      {"truncated_normal", {0.2, 0, 1, 0.1, 0.3}, 1.6110368914079171368},
      {"truncated_normal", {2.2, 2, 1, -kInf, 2.5}, -0.56999211791601638424},
      {"truncated_normal", {1e-07, 0, 1, 0, 1e-06}, 13.815510557964435816},
      {"truncated_normal", {5.0001, 0, 1, 5, 5.001}, 6.9097543987737124819},
      {"truncated_normal", {-0.2, 0.0, 3.0, -0.7, 0.4}, -0.090707030986492054069},
      {"binomial", {0.0, 10.0, 0.3}, -3.5667494393873236305},
      {"binomial", {3.0, 10.0, 0.3}, -1.321151277766888636},
      {"binomial", {10.0, 10.0, 0.3}, -12.039728043259360296},
      {"binomial", {5e5, 1e6, 0.5}, -7.1335468816268644844, 1.4e6},
      {"binomial", {499000.0, 1e6, 0.5}, -9.1335462149596644836, 1.4e6},
      {"binomial", {3.0, 1e6, 2e-06}, -1.7123169275473857835},
      {"binomial", {17.0, 40.0, 0.999}, -133.68648922540391888},
      {"binomial", {7.0, 1e12, 1e-11}, -2.4070657101080943305},
      {"negative_binomial", {0.0, 2.0, 3.0}, -1.5324768712979720496},
      {"negative_binomial", {5.0, 2.0, 3.0}, -3.069408092945324379},
      {"negative_binomial", {40.0, 10.0, 0.5}, -5.8937973742557030838},
      {"negative_binomial", {3.0, 2.5, 1e10}, -1.5428872737430898052},
      {"negative_binomial", {1000.0, 900.0, 50.0}, -6.1696321772526640682},
      {"negative_binomial", {0.0, 0.001, 0.001}, -0.00069314718055994532385},
  };
  for (const Case& c : cases) {
    const auto& a = c.a;
    double got = kNaN;
    if (c.dist == "beta")
      got = lpdf_beta(a[0], a[1], a[2]);
    else if (c.dist == "inverse_gamma")
      got = lpdf_inverse_gamma(a[0], a[1], a[2]);
    else if (c.dist == "laplace")
      got = lpdf_laplace(a[0], a[1], a[2]);
    else if (c.dist == "cauchy")
      got = lpdf_cauchy(a[0], a[1], a[2]);
    else if (c.dist == "truncated_normal")
      got = lpdf_truncated_normal(a[0], a[1], a[2], a[3], a[4]);
    else if (c.dist == "binomial")
      got = lpdf_binomial(a[0], a[1], a[2]);
    else if (c.dist == "negative_binomial")
      got = lpdf_negative_binomial(a[0], a[1], a[2]);
    INFO(c.dist << " at x = " << a[0] << ", parameters " << a[1] << ", " << a[2]);
    INFO("actual " << got << ", expected " << c.v);
    CHECK(std::fabs(got - c.v) <= 1e-13 * std::max(1.0, std::fabs(c.v)) + 1e-15 * c.cond);
  }
}

TEST_CASE("added log-densities match Boost.Math over a grid", "[distributions]") {
  namespace bm = boost::math;
  const auto close_to_log = [](double got, double pdf) {
    REQUIRE(pdf > 1e-300);
    check_close(got, std::log(pdf), 1e-12);
  };
  for (double x = 0.005; x < 1; x += 0.0173) {
    INFO("x = " << x);
    for (auto [a, b] : {std::pair{0.5, 0.5}, {2.0, 5.0}, {0.2, 1.0}, {1.0, 1.0}, {40.0, 7.5}})
      if (bm::pdf(bm::beta_distribution(a, b), x) > 1e-300)
        close_to_log(lpdf_beta(x, a, b), bm::pdf(bm::beta_distribution(a, b), x));
  }
  for (double x = 0.05; x <= 50; x *= 1.2) {
    INFO("x = " << x);
    close_to_log(lpdf_inverse_gamma(x, 2.5, 3),
                 bm::pdf(bm::inverse_gamma_distribution(2.5, 3.0), x));
    close_to_log(lpdf_inverse_gamma(x, 0.4, 0.7),
                 bm::pdf(bm::inverse_gamma_distribution(0.4, 0.7), x));
  }
  for (double x = -12; x <= 12; x += 0.37) {
    INFO("x = " << x);
    close_to_log(lpdf_laplace(x, 0.4, 1.7), bm::pdf(bm::laplace_distribution(0.4, 1.7), x));
    close_to_log(lpdf_cauchy(x, -0.4, 0.3), bm::pdf(bm::cauchy_distribution(-0.4, 0.3), x));
    // Normal(0.4, 1.7) truncated to [-1, 2.5] (x outside is checked elsewhere).
    if (x >= -1 && x <= 2.5) {
      const bm::normal nd(0.4, 1.7);
      close_to_log(lpdf_truncated_normal(x, 0.4, 1.7, -1, 2.5),
                   bm::pdf(nd, x) / (bm::cdf(nd, 2.5) - bm::cdf(nd, -1)));
    }
  }
  for (auto [trials, p] : {std::pair{1.0, 0.3}, {12.0, 0.5}, {40.0, 0.02}, {300.0, 0.77}})
    for (double k = 0; k <= trials; k += 1) {
      const double pmf = bm::pdf(bm::binomial_distribution(trials, p), k);
      if (pmf < 1e-300)
        continue;
      INFO("binomial(" << trials << ", " << p << ") at " << k);
      close_to_log(lpdf_binomial(k, trials, p), pmf);
    }
  // (Boost's own accuracy degrades as p = phi / (mu + phi) nears 1, e.g. at phi / mu = 1e4:
  // larger phi is checked against mpmath above.)
  for (auto [mu, phi] : {std::pair{2.0, 3.0}, {10.0, 0.5}, {250.0, 40.0}, {0.3, 40.0}})
    for (double k = 0; k < 20 * mu + 50; k += 1) {
      const double pmf = bm::pdf(bm::negative_binomial_distribution(phi, phi / (mu + phi)), k);
      if (pmf < 1e-300)
        break;
      INFO("negative_binomial(" << mu << ", " << phi << ") at " << k);
      close_to_log(lpdf_negative_binomial(k, mu, phi), pmf);
    }
}

TEST_CASE("added log-densities: support edges, outside the support, NaN", "[distributions]") {
  // Beta at the ends of [0, 1]: the limit of the density, which depends on the shape there.
  CHECK(lpdf_beta(0, 0.5, 2) == kInf);
  check_close(lpdf_beta(0, 1, 2), std::log(2.0)); // density b (1 - x)^(b-1)
  CHECK(lpdf_beta(0, 3, 2) == -kInf);
  CHECK(lpdf_beta(1, 2, 0.5) == kInf);
  check_close(lpdf_beta(1, 3, 1), std::log(3.0));
  CHECK(lpdf_beta(1, 2, 3) == -kInf);
  CHECK(lpdf_beta(0, 1, 1) == 0);
  CHECK(lpdf_beta(0.3, 1, 1) == 0);
  CHECK(lpdf_beta(-1e-300, 0.5, 0.5) == -kInf);
  CHECK(lpdf_beta(1.0000001, 0.5, 0.5) == -kInf);
  CHECK(lpdf_beta(kInf, 2, 2) == -kInf);
  CHECK(lpdf_inverse_gamma(0, 2, 1) == -kInf);
  CHECK(lpdf_inverse_gamma(-1, 2, 1) == -kInf);
  CHECK(lpdf_inverse_gamma(kInf, 2, 1) == -kInf);
  CHECK(lpdf_inverse_gamma(1e-300, 0.5, 1) == Approx(-1e300)); // finite: beta / x dominates
  CHECK(lpdf_laplace(kInf, 0, 1) == -kInf);
  CHECK(lpdf_laplace(-kInf, 0, 1) == -kInf);
  CHECK(lpdf_laplace(1, 1, 2) == -std::log(4.0));
  CHECK(lpdf_cauchy(kInf, 0, 1) == -kInf);
  CHECK(lpdf_cauchy(-kInf, 0, 1) == -kInf);
  check_close(lpdf_cauchy(1e300, 0, 1), -kLogPi - 2 * std::log(1e300)); // no overflow of z^2
  // Truncated normal: a closed support, -inf outside.
  check_close(lpdf_truncated_normal(0, 0, 1, 0, kInf), kLogSqrtTwoOverPi);
  CHECK(lpdf_truncated_normal(-1e-300, 0, 1, 0, kInf) == -kInf);
  CHECK(lpdf_truncated_normal(2.5000001, 0, 1, -1, 2.5) == -kInf);
  CHECK(lpdf_truncated_normal(-1.0000001, 0, 1, -1, 2.5) == -kInf);
  CHECK(lpdf_truncated_normal(kInf, 0, 1, -1, kInf) == -kInf);
  CHECK(lpdf_truncated_normal(7.9, 0, 1, 8, kInf) == -kInf);
  CHECK(std::isfinite(lpdf_truncated_normal(8, 0, 1, 8, kInf)));
  CHECK(std::isfinite(lpdf_truncated_normal(1e3, 0, 1, 1e3, kInf)));
  // Binomial: counts 0..N, and p = 0 or 1 put all mass on one end.
  CHECK(lpdf_binomial(0, 0, 0.3) == 0);
  CHECK(lpdf_binomial(1, 0, 0.3) == -kInf);
  CHECK(lpdf_binomial(0, 10, 0) == 0);
  CHECK(lpdf_binomial(1, 10, 0) == -kInf);
  CHECK(lpdf_binomial(10, 10, 1) == 0);
  CHECK(lpdf_binomial(9, 10, 1) == -kInf);
  CHECK(lpdf_binomial(11, 10, 0.5) == -kInf);
  CHECK(lpdf_binomial(-1, 10, 0.5) == -kInf);
  check_close(lpdf_binomial(10, 10, 0.5), 10 * std::log(0.5));
  check_close(lpdf_binomial(1, 1e6, 1e-6),
              std::log(1e6) + std::log(1e-6) + (1e6 - 1) * std::log1p(-1e-6));
  // Negative binomial: mu = 0 puts all mass on 0.
  CHECK(lpdf_negative_binomial(0, 0, 2) == 0);
  CHECK(lpdf_negative_binomial(1, 0, 2) == -kInf);
  CHECK(lpdf_negative_binomial(-1, 3, 2) == -kInf);
  check_close(lpdf_negative_binomial(0, 3, 2), 2 * std::log(2.0 / 5));
  // The Poisson limit phi -> inf.
  check_close(lpdf_negative_binomial(4, 3.5, 1e13), lpdf_poisson(4, 3.5), 1e-12);

  for (double bad : {0.0, -1.0, kNaN, kInf, -kInf}) {
    INFO("bad positive parameter " << bad);
    CHECK(std::isnan(lpdf_beta(0.5, bad, 1)));
    CHECK(std::isnan(lpdf_beta(0.5, 1, bad)));
    CHECK(std::isnan(lpdf_inverse_gamma(1, bad, 1)));
    CHECK(std::isnan(lpdf_inverse_gamma(1, 1, bad)));
    CHECK(std::isnan(lpdf_laplace(0, 0, bad)));
    CHECK(std::isnan(lpdf_cauchy(0, 0, bad)));
    CHECK(std::isnan(lpdf_truncated_normal(0, 0, bad, -1, 1)));
    CHECK(std::isnan(lpdf_negative_binomial(1, 2, bad)));
  }
  for (double bad_loc : {kNaN, kInf, -kInf}) {
    CHECK(std::isnan(lpdf_laplace(0, bad_loc, 1)));
    CHECK(std::isnan(lpdf_cauchy(0, bad_loc, 1)));
    CHECK(std::isnan(lpdf_truncated_normal(0, bad_loc, 1, -1, 1)));
  }
  // Bounds: lo < hi is required; NaN, or lo = +inf, or hi = -inf are invalid.
  CHECK(std::isnan(lpdf_truncated_normal(0, 0, 1, 1, 1)));
  CHECK(std::isnan(lpdf_truncated_normal(0, 0, 1, 2, 1)));
  CHECK(std::isnan(lpdf_truncated_normal(0, 0, 1, kNaN, 1)));
  CHECK(std::isnan(lpdf_truncated_normal(0, 0, 1, -1, kNaN)));
  CHECK(std::isnan(lpdf_truncated_normal(0, 0, 1, kInf, kInf)));
  CHECK(std::isnan(lpdf_truncated_normal(0, 0, 1, -kInf, -kInf)));
  for (double bad_trials : {-1.0, 2.5, kNaN, kInf})
    CHECK(std::isnan(lpdf_binomial(0, bad_trials, 0.5)));
  for (double bad_p : {-1e-300, 1.0000001, kNaN, kInf})
    CHECK(std::isnan(lpdf_binomial(1, 3, bad_p)));
  for (double bad_mu : {-1e-300, kNaN, kInf})
    CHECK(std::isnan(lpdf_negative_binomial(1, bad_mu, 2)));
  for (double bad_count : {0.5, -1.5, kNaN, kInf, -kInf}) {
    CHECK(std::isnan(lpdf_binomial(bad_count, 10, 0.5)));
    CHECK(std::isnan(lpdf_negative_binomial(bad_count, 2, 3)));
  }
  CHECK(std::isnan(lpdf_beta(kNaN, 2, 2)));
  CHECK(std::isnan(lpdf_inverse_gamma(kNaN, 2, 2)));
  CHECK(std::isnan(lpdf_laplace(kNaN, 0, 1)));
  CHECK(std::isnan(lpdf_cauchy(kNaN, 0, 1)));
  CHECK(std::isnan(lpdf_truncated_normal(kNaN, 0, 1, -1, 1)));
}

TEST_CASE("added densities integrate to 1 and masses sum to 1", "[distributions]") {
  // Beta: near 1 the mass beyond the last double below 1 is ~(1e-16)^b, so b stays >= 0.7 here.
  for (auto [a, b] : {std::pair{0.2, 1.0}, {0.5, 3.0}, {2.0, 5.0}, {30.0, 0.8}, {1e3, 2e3}}) {
    INFO("beta " << a << " " << b);
    // Around the logit of the mean, out to where the tails (which decay like exp(a u) and
    // exp(-b u)) are below 1e-16, but short of x rounding to 1; the step resolves the peak, whose
    // width in u is ~sqrt(1/a + 1/b).
    const double c = std::log(a / b);
    const double h = 1e-3 * std::min(1.0, 10 * std::sqrt(1 / a + 1 / b));
    CHECK(std::fabs(integrate_unit([=](double x) { return lpdf_beta(x, a, b); },
                                   c - 40 / std::min(a, 1.0) - 10,
                                   std::min(36.0, c + 40 / std::min(b, 1.0) + 10), h) -
                    1) < kIntegralTol);
  }
  for (auto [alpha, beta] : {std::pair{0.5, 1.0}, {3.0, 0.2}, {40.0, 10.0}}) {
    INFO("inverse_gamma " << alpha << " " << beta);
    // In u = log x the integrand decays like exp(-alpha u) above and doubly exponentially below.
    const double c = std::log(beta / alpha);
    CHECK(std::fabs(integrate_positive([=](double x) { return lpdf_inverse_gamma(x, alpha, beta); },
                                       c - 8, c + 36 / alpha + 8) -
                    1) < kIntegralTol);
  }
  for (auto [mu, b] : {std::pair{0.0, 1.0}, {-3.0, 0.01}, {100.0, 30.0}}) {
    INFO("laplace " << mu << " " << b);
    // Each side of the kink at mu separately, in u = log |x - mu|.
    const auto side = [=](double s) {
      return integrate_positive([=](double y) { return lpdf_laplace(mu + s * y, mu, b); },
                                std::log(b) - 40, std::log(b) + 4);
    };
    CHECK(std::fabs(side(1) + side(-1) - 1) < kIntegralTol);
  }
  for (auto [mu, sigma] : {std::pair{0.0, 1.0}, {5.0, 0.02}, {-1.0, 300.0}}) {
    INFO("cauchy " << mu << " " << sigma);
    // After x = mu + sigma sinh(u) the integrand decays like exp(-|u|).
    CHECK(std::fabs(
              integrate_real([=](double x) { return lpdf_cauchy(x, mu, sigma); }, mu, sigma, 40) -
              1) < kIntegralTol);
  }
  struct TN {
    double mu, sigma, lo, hi;
  };
  for (TN c : {TN{0, 1, -kInf, kInf}, TN{0, 1, 0, kInf}, TN{1, 2, -kInf, -3}, TN{0, 1, 8, kInf},
               TN{0, 1, 40, kInf}, TN{0, 1, -kInf, -35}, TN{0.5, 2, -1, 3}, TN{1, 0.5, 10, 11},
               TN{0, 1, 5, 5.001}, TN{0, 1, -0.01, 0.02}, TN{3, 1, 2.5, 100}}) {
    INFO("truncated_normal " << c.mu << " " << c.sigma << " [" << c.lo << ", " << c.hi << "]");
    const auto lpdf = [=](double x) { return lpdf_truncated_normal(x, c.mu, c.sigma, c.lo, c.hi); };
    double integral;
    if (std::isinf(c.lo) && std::isinf(c.hi))
      integral = integrate_real(lpdf, c.mu, c.sigma, 8);
    else if (std::isinf(c.hi)) // (lo, inf): in u = log(x - lo)
      integral = integrate_positive([&](double y) { return lpdf(c.lo + y); },
                                    std::log(c.sigma) - 50, std::log(c.sigma) + 3);
    else if (std::isinf(c.lo))
      integral = integrate_positive([&](double y) { return lpdf(c.hi - y); },
                                    std::log(c.sigma) - 50, std::log(c.sigma) + 3);
    else
      integral = simpson([&](double x) { return std::exp(lpdf(x)); }, c.lo,
                         std::min(c.hi, std::max(c.lo, c.mu) + 12 * c.sigma));
    CHECK(std::fabs(integral - 1) < kIntegralTol);
  }
  for (auto [trials, p] : {std::pair{0.0, 0.4},
                           {1.0, 0.3},
                           {10.0, 0.0},
                           {10.0, 1.0},
                           {25.0, 0.5},
                           {1000.0, 0.01},
                           {1e6, 0.3}}) {
    double sum = 0;
    // All of the support, or for 1e6 trials mean +- 40 standard deviations (the rest is < 1e-300).
    const double sd = std::sqrt(trials * p * (1 - p));
    const double k0 = trials > 1e4 ? std::floor(trials * p - 40 * sd) : 0;
    const double k1 = trials > 1e4 ? std::ceil(trials * p + 40 * sd) : trials;
    for (double k = k0; k <= k1; k += 1)
      sum += std::exp(lpdf_binomial(k, trials, p));
    INFO("binomial " << trials << " " << p << ": sum - 1 = " << sum - 1);
    // Each of the ~2000 terms at 1e6 trials carries the ~1e-10 relative error of its lpdf.
    CHECK(std::fabs(sum - 1) < (trials > 1e4 ? 1e-9 : 1e-12));
  }
  for (auto [mu, phi] : {std::pair{0.0, 1.0}, {2.0, 3.0}, {10.0, 0.5}, {300.0, 20.0}, {4.0, 1e8}}) {
    double sum = 0, term = 1;
    // Terms decrease geometrically (ratio -> mu / (mu + phi)) past the mode.
    for (double k = 0; k < 10 * mu + 60 || term > 1e-20; k += 1) {
      term = std::exp(lpdf_negative_binomial(k, mu, phi));
      sum += term;
    }
    INFO("negative_binomial " << mu << " " << phi << ": sum - 1 = " << sum - 1);
    CHECK(std::fabs(sum - 1) < 1e-12);
  }
}
