// Tests of the resampling schemes (smc/resample.h) on fixed weight vectors, each run with R
// seeds: offspring counts unbiased (mean n w_j / sum w within 5 standard errors of the sample
// mean); per-particle variances equal to each scheme's exact value and no larger than the
// multinomial one n p (1 - p); systematic and SSP counts always floor or ceil of n w_j / sum w;
// no offspring for zero weights; identical ancestors for the same seed.
#include "stats.h"

#include "kernel/rng.h"
#include "smc/filter.h"
#include "smc/resample.h"

#include <catch2/catch.hpp>

#include <boost/math/distributions/binomial.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

using ssm::Resampling;

namespace {

constexpr uint32_t kStep = 3; // any time step: the seeds vary

struct WeightCase {
  std::string name;
  std::vector<double> w;
};

std::vector<WeightCase> weight_cases() {
  std::vector<double> spread(50);
  for (int j = 0; j < 50; ++j) // zeros at multiples of 5, otherwise 0.1 .. 4.9
    spread[j] = j % 5 == 0 ? 0.0 : 0.1 + 0.3 * ((j * j) % 17);
  return {
      {"uneven with zeros", {0.13, 0.0, 2.4, 0.71, 0.05, 1.3, 0.0, 0.41, 0.9}},
      {"one dominant weight", {0.2, 30, 0.5, 0, 0.1, 0.2}},
      {"n = 1", {2.5}},
      {"equal weights", {1, 1, 1, 1, 1}},
      {"exact fractions", {1, 3, 0, 2, 2}}, // n w / sum w = 0.625, 1.875, 0, 1.25, 1.25
      {"leading and trailing zeros", {0, 0, 0.05, 5, 0}},
      {"n = 50, spread", spread},
  };
}

// x_j = n w_j / sum w, computed as resample.cpp does.
std::vector<double> expected_counts(const std::vector<double>& w) {
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  std::vector<double> x;
  for (double wj : w)
    x.push_back(wj / total * static_cast<double>(w.size()));
  return x;
}

std::vector<int64_t> offspring(const std::vector<int64_t>& anc, size_t n) {
  std::vector<int64_t> c(n, 0);
  for (int64_t a : anc) {
    if (a < 0 || a >= static_cast<int64_t>(n))
      FAIL("ancestor " << a << " out of range");
    ++c[a];
  }
  return c;
}

std::vector<int64_t> run(Resampling s, const std::vector<double>& w, uint64_t seed,
                         uint32_t t = kStep) {
  std::vector<int64_t> anc(w.size(), -1);
  ssm::resample(s, w.data(), static_cast<int64_t>(w.size()), seed, t, ssm::kSiteResample,
                anc.data());
  return anc;
}

// The exact per-particle variance of the offspring count where it has a closed form.
// Stratified: particle j's interval [a, b) (in units of 1/n of the total) meets stratum i in a
// length q_i, and stratum i's point falls in it independently with probability q_i.
double stratified_variance(const std::vector<double>& w, size_t j) {
  const double total = std::accumulate(w.begin(), w.end(), 0.0), n = double(w.size());
  const double a = std::accumulate(w.begin(), w.begin() + j, 0.0) / total * n;
  const double b = a + w[j] / total * n;
  double v = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const double q = std::max(0.0, std::min(b, double(i + 1)) - std::max(a, double(i)));
    v += q * (1 - q);
  }
  return v;
}

// Residual: floor(x_j) plus a Binomial(m, r_j / m) count, r_j = frac(x_j), m = sum of the r_j.
double residual_variance(const std::vector<double>& x, size_t j) {
  double m = 0;
  for (double xi : x)
    m += xi - std::floor(xi);
  const double r = x[j] - std::floor(x[j]);
  return m > 0.5 ? r * (1 - r / std::round(m)) : 0.0;
}

struct Moments {
  double mean, var, se_mean, se_var;
};

// Sample mean and variance with their standard errors, sqrt(s^2 / R) and sqrt((m4 - s^4) / R)
// from the sample central moments.
Moments moments(const std::vector<double>& v) {
  const double R = double(v.size());
  const double m = ssm::test::mean_of(v);
  double m2 = 0, m4 = 0;
  for (double x : v) {
    const double d = (x - m) * (x - m);
    m2 += d;
    m4 += d * d;
  }
  const double s2 = m2 / (R - 1);
  m4 /= R;
  return {m, s2, std::sqrt(s2 / R), std::sqrt(std::max(0.0, m4 - s2 * s2) / R)};
}

bool sorted(const std::vector<int64_t>& a, size_t begin, size_t end) {
  return std::is_sorted(a.begin() + begin, a.begin() + end);
}

} // namespace

TEST_CASE("resampling scheme names", "[runtime][resample]") {
  for (Resampling s : ssm::kResamplingSchemes)
    CHECK(ssm::parse_resampling(ssm::resampling_name(s)) == s);
  CHECK(std::string(ssm::resampling_name(Resampling::Ssp)) == "ssp");
  CHECK(!ssm::parse_resampling("Systematic"));
  CHECK(!ssm::parse_resampling(""));
}

TEST_CASE("resampling schemes: unbiased counts and their variances over seeds",
          "[runtime][resample]") {
  const int R = 20000;
  // Expected values are computed in floating point; a deterministic count (zero sample variance)
  // may differ from them by rounding only.
  const double eps = 1e-9;
  for (const WeightCase& wc : weight_cases()) {
    const std::vector<double>& w = wc.w;
    const size_t n = w.size();
    const std::vector<double> x = expected_counts(w);
    const double total = std::accumulate(w.begin(), w.end(), 0.0);
    size_t floors = 0;
    for (double xj : x)
      floors += static_cast<size_t>(std::floor(xj));
    for (Resampling s : ssm::kResamplingSchemes) {
      DYNAMIC_SECTION(wc.name << ", " << ssm::resampling_name(s)) {
        std::vector<std::vector<double>> counts(n); // counts[j][r]
        // Exact properties, counted over all seeds (a REQUIRE per draw would dominate the run
        // time): ancestors sorted as documented, (c) zero weights without offspring, systematic
        // and SSP counts floor or ceil of x_j.
        int unsorted = 0, zero_weight_offspring = 0, not_floor_or_ceil = 0;
        for (int r = 0; r < R; ++r) {
          const std::vector<int64_t> anc = run(s, w, static_cast<uint64_t>(r) + 1);
          const std::vector<int64_t> c = offspring(anc, n);
          if (s == Resampling::Residual) // the deterministic copies, then the draws
            unsorted += !sorted(anc, 0, floors) || !sorted(anc, floors, n);
          else if (s != Resampling::Ssp)
            unsorted += !sorted(anc, 0, n);
          for (size_t j = 0; j < n; ++j) {
            counts[j].push_back(double(c[j]));
            zero_weight_offspring += w[j] == 0 && c[j] != 0;
            if (s == Resampling::Systematic || s == Resampling::Ssp)
              not_floor_or_ceil += c[j] < std::floor(x[j]) || c[j] > std::ceil(x[j]);
          }
        }
        CHECK(unsorted == 0);
        CHECK(zero_weight_offspring == 0);
        CHECK(not_floor_or_ceil == 0);
        for (size_t j = 0; j < n; ++j) {
          const Moments mo = moments(counts[j]);
          const double p = w[j] / total;
          const double v_multinomial = double(n) * p * (1 - p);
          const double frac = x[j] - std::floor(x[j]);
          INFO("particle " << j << ": n w / sum w = " << x[j] << ", sample mean " << mo.mean
                           << " (se " << mo.se_mean << "), sample variance " << mo.var << " (se "
                           << mo.se_var << "), multinomial variance " << v_multinomial);
          // (a) unbiasedness.
          CHECK(std::abs(mo.mean - x[j]) <= 5 * mo.se_mean + eps);
          // (b) the variance: the scheme's exact value where known, and the ordering.
          double exact = NAN;
          switch (s) {
          case Resampling::Multinomial:
            exact = v_multinomial;
            break;
          case Resampling::Stratified:
            exact = stratified_variance(w, j);
            break;
          case Resampling::Residual:
            exact = residual_variance(x, j);
            break;
          case Resampling::Systematic:
          case Resampling::Ssp:
            exact = frac * (1 - frac); // the least possible for an unbiased integer count
            break;
          }
          INFO("exact variance " << exact);
          CHECK(std::abs(mo.var - exact) <= 5 * mo.se_var + eps);
          CHECK(exact <= v_multinomial + eps);
          CHECK(mo.var <= v_multinomial + 5 * mo.se_var + eps);
        }
        if (s == Resampling::Multinomial && n >= 3) {
          // Multinomial counts are negatively correlated: Cov(N_0, N_j) = -n p_0 p_j. The
          // standard error is that of the mean of the products of centred counts.
          const double p0 = w[0] / total;
          for (size_t j = 1; j < n; ++j) {
            const double m0 = ssm::test::mean_of(counts[0]), mj = ssm::test::mean_of(counts[j]);
            std::vector<double> prod;
            for (int r = 0; r < R; ++r)
              prod.push_back((counts[0][r] - m0) * (counts[j][r] - mj));
            const Moments mp = moments(prod);
            const double cov = -double(n) * p0 * (w[j] / total);
            INFO("Cov(N_0, N_" << j << ") sample " << mp.mean * R / (R - 1) << ", exact " << cov);
            CHECK(std::abs(mp.mean * R / (R - 1) - cov) <= 5 * mp.se_mean + eps);
          }
        }
      }
    }
  }
}

TEST_CASE("multinomial and residual counts have the binomial distribution", "[runtime][resample]") {
  // The marginal count of particle j is Binomial(n, p_j) for multinomial resampling and
  // floor(x_j) + Binomial(m, r_j / m) for residual resampling: chi-square goodness of fit.
  std::vector<double> w = weight_cases().back().w;
  const size_t n = w.size();
  const std::vector<double> x = expected_counts(w);
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  double m = 0;
  for (double xi : x)
    m += xi - std::floor(xi);
  m = std::round(m);
  const int R = 20000;
  for (size_t j : {size_t(2), size_t(11), size_t(13)}) {
    std::vector<double> multi, resid;
    for (int r = 1; r <= R; ++r) {
      multi.push_back(double(offspring(run(Resampling::Multinomial, w, r), n)[j]));
      resid.push_back(double(offspring(run(Resampling::Residual, w, r), n)[j]) - std::floor(x[j]));
    }
    INFO("particle " << j << ", p = " << w[j] / total);
    const boost::math::binomial bm(double(n), w[j] / total);
    ssm::test::check_chi_square(multi, [&](double k) { return boost::math::cdf(bm, k); });
    const boost::math::binomial br(m, (x[j] - std::floor(x[j])) / m);
    ssm::test::check_chi_square(resid, [&](double k) { return boost::math::cdf(br, k); });
  }
}

TEST_CASE("resampling: n = 1, reproducibility and the systematic default", "[runtime][resample]") {
  const std::vector<double> one = {0.7};
  for (Resampling s : ssm::kResamplingSchemes)
    CHECK(run(s, one, 5) == std::vector<int64_t>{0});

  const std::vector<double> w = weight_cases().back().w;
  for (Resampling s : ssm::kResamplingSchemes) {
    INFO(ssm::resampling_name(s));
    // (d) the same (seed, t, site) gives the same ancestors; another seed or time step does not.
    CHECK(run(s, w, 42) == run(s, w, 42));
    CHECK(run(s, w, 42) != run(s, w, 43));
    CHECK(run(s, w, 42, 1) != run(s, w, 42, 2));
  }
  // The filter's default stream: the first uniform of block (0, t, kSiteResample, 0) into
  // systematic_resample, as before the other schemes existed.
  for (uint64_t seed : {1, 2, 99}) {
    std::vector<int64_t> expected(w.size());
    ssm::systematic_resample(w.data(), int64_t(w.size()),
                             ssm::philox_u01(seed, 0, kStep, ssm::kSiteResample, 0),
                             expected.data());
    CHECK(run(Resampling::Systematic, w, seed) == expected);
  }
}

TEST_CASE("resampling a large weight vector", "[runtime][resample]") {
  // Weights over twelve orders of magnitude with runs of zeros: every scheme gives n valid
  // ancestors, none to a zero weight; systematic and SSP counts are floor or ceil of x_j, and
  // stratified counts within one of them (an interval of length x_j meets at most ceil(x_j) + 1
  // strata and contains at least floor(x_j) - 1).
  const int64_t n = 100003;
  std::vector<double> w(n);
  for (int64_t j = 0; j < n; ++j) {
    const double u = ssm::philox_u01(7, uint32_t(j), 0, 0, 0);
    w[j] = (j / 100) % 7 == 3 ? 0.0 : std::exp(-27.6 * u * u);
  }
  w[0] = w[n - 1] = 0;
  const std::vector<double> x = expected_counts(w);
  for (Resampling s : ssm::kResamplingSchemes) {
    INFO(ssm::resampling_name(s));
    const std::vector<int64_t> c = offspring(run(s, w, 11), size_t(n));
    int64_t bad = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double f = std::floor(x[j]), cl = std::ceil(x[j]);
      if (w[j] == 0 && c[j] != 0)
        ++bad;
      if ((s == Resampling::Systematic || s == Resampling::Ssp) && (c[j] < f || c[j] > cl))
        ++bad;
      if (s == Resampling::Stratified && (c[j] < f - 1 || c[j] > cl + 1))
        ++bad;
      if (s == Resampling::Residual && c[j] < f)
        ++bad;
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("resampling rejects invalid weights", "[runtime][resample]") {
  std::vector<int64_t> anc(3);
  for (std::vector<double> w :
       {std::vector<double>{0, 0, 0}, {1, -1, 1}, {1, NAN, 1}, {1, INFINITY, 1}})
    for (Resampling s : ssm::kResamplingSchemes)
      CHECK_THROWS_AS(ssm::resample(s, w.data(), 3, 1, 1, ssm::kSiteResample, anc.data()),
                      std::invalid_argument);
}

namespace {

// The systematic scheme as a walk of the points (u + i) * step against the running sum: the
// definition the branch-free implementation must reproduce exactly.
std::vector<int64_t> systematic_walk(const std::vector<double>& w, double u) {
  const auto n = static_cast<int64_t>(w.size());
  double total = 0;
  int64_t last = 0;
  for (int64_t j = 0; j < n; ++j) {
    total += w[j];
    if (w[j] > 0)
      last = j;
  }
  const double step = total / static_cast<double>(n);
  std::vector<int64_t> a(n);
  double cum = w[0];
  int64_t j = 0;
  for (int64_t i = 0; i < n; ++i) {
    while (cum <= (u + static_cast<double>(i)) * step && j < last)
      cum += w[++j];
    a[i] = j;
  }
  return a;
}

} // namespace

TEST_CASE("systematic resampling equals the walk of its points, bit for bit",
          "[runtime][resample]") {
  // Random weights spanning many orders of magnitude, runs of zeros (also at both ends), ties,
  // a single positive weight, and points that fall exactly on a cumulative sum (equal weights
  // with u = 0), each with several u including the extremes.
  // Also weights at the bottom of the double range: normal weights whose step is subnormal,
  // subnormal weights, a single subnormal weight (a step of 0).
  std::vector<std::vector<double>> cases = {{1, 1, 1, 1},
                                            {0, 0, 1, 0},
                                            {1, 0, 0, 0},
                                            {0, 0, 0, 1},
                                            {0.5, 0, 0, 0.5, 0},
                                            {0, 2.3e-308, 2.3e-308},
                                            {std::ldexp(1.0, -1074), std::ldexp(1.0, -1074)},
                                            {0, 5e-324, 0},
                                            {1e-300, 0, 1e-300, 3e-300}};
  for (uint32_t c = 0; c < 200; ++c) {
    const auto n = static_cast<size_t>(1 + c % 37 + (c % 5 == 0 ? 300 : 0));
    std::vector<double> w(n);
    for (size_t j = 0; j < n; ++j) {
      const double v = ssm::philox_u01(99, static_cast<uint32_t>(j), c, 1, 0);
      w[j] = v < 0.3 ? 0.0 : std::exp(-40 * ssm::philox_u01(99, static_cast<uint32_t>(j), c, 2, 0));
    }
    w[n / 2] = 1; // at least one positive weight
    cases.push_back(w);
  }
  for (size_t c = 0; c < cases.size(); ++c)
    for (double u : {0.0, 1e-300, 0.25, 0.5, 0.75, 0.999, std::nextafter(1.0, 0.0)}) {
      const std::vector<double>& w = cases[c];
      std::vector<int64_t> a(w.size(), -1);
      ssm::systematic_resample(w.data(), static_cast<int64_t>(w.size()), u, a.data());
      INFO("case " << c << ", u = " << u);
      REQUIRE(a == systematic_walk(w, u));
    }
}
