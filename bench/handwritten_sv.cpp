// Hand-written bootstrap particle filter for examples/sv.ssm, the baseline of the benchmark. It is
// what the generated filter should match: the same model and parameters, the same Philox draws
// (ssm::sample_normal at the sites codegen assigns), the same log-density (ssm::lpdf_normal) and
// the same algorithm as runtime/smc/filter.cpp (systematic resampling when ESS < r N, log-weights
// kept shifted by their maximum, weighted mean and two-pass variance of the state at every t). With
// the same --seed it therefore computes the same log-likelihood as `./sv filter` up to the last
// bits of the vector math library. It is one single-threaded loop over all particles with the
// sampler and the log-density fused, compiled with the flags printed in its output.
#include "core/csv.h"
#include "core/error.h"
#include "kernel/distributions.h"
#include "kernel/rng.h"
#include "smc/resample.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <vector>

#ifndef HANDWRITTEN_FLAGS
#define HANDWRITTEN_FLAGS "unknown"
#endif

namespace {

// Sites as codegen numbers them (block << 24 | relation << 12 | component; initial = 1,
// transition = 2) and the runtime's resampling stream.
constexpr uint32_t kSiteInit = 1u << 24;
constexpr uint32_t kSiteTransition = 2u << 24;
constexpr uint32_t kSiteResample = 0xFFFF0001u;
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

struct Params {
  double mu = -1.02, rho = 0.9702, sigma = 0.178;
};

struct Result {
  double log_likelihood = 0;
  int64_t resample_count = 0;
  double elapsed_s = 0;
  std::vector<double> mean, var;
};

// 64-byte aligned buffer of doubles or indices.
template <class T> struct Buffer {
  struct Free {
    void operator()(T* p) const { ::operator delete[](p, std::align_val_t(64)); }
  };
  std::unique_ptr<T[], Free> p;
  explicit Buffer(size_t n)
      : p(static_cast<T*>(
            ::operator new[](std::max<size_t>(n, 1) * sizeof(T), std::align_val_t(64)))) {}
  T* get() { return p.get(); }
};

Result filter(const Params& p, const std::vector<double>& y, int64_t N, uint64_t seed,
              double ess_threshold) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t T = static_cast<int64_t>(y.size());
  Buffer<double> xa(N), xb(N), lwb(N), wb(N);
  Buffer<int64_t> ancb(N);
  double *prev = xa.get(), *cur = xb.get();
  double* __restrict lw = lwb.get();
  double* __restrict w = wb.get();
  int64_t* __restrict anc = ancb.get();
  const double sd0 = p.sigma / std::sqrt(1 - p.rho * p.rho);

  Result r;
  r.mean.resize(T);
  r.var.resize(T);
  double log_sum_prev = std::log(static_cast<double>(N));
  double ess = static_cast<double>(N);
  for (int64_t t = 0; t < T; ++t) {
    const uint32_t t32 = static_cast<uint32_t>(t);
    bool resampled = false;
    if (t > 0 && (ess_threshold >= 1 || ess < ess_threshold * N)) {
      double u0, u1;
      ssm::philox_u01x2(seed, 0, t32, kSiteResample, 0, u0, u1);
      ssm::systematic_resample(w, N, u0, anc);
      resampled = true;
      ++r.resample_count;
      log_sum_prev = std::log(static_cast<double>(N));
    }
    const bool flat = t == 0 || resampled; // previous log-weights all 0
    const double yt = y[t];
    const bool missing = std::isnan(yt);

    // Propagate and weight in one pass; `parent(n)` is the index of particle n's ancestor.
    double m = kNegInf;
    auto step = [&](auto parent) {
      const double* __restrict xp = prev;
      double* __restrict x = cur;
      for (int64_t n = 0; n < N; ++n) {
        const uint32_t n32 = static_cast<uint32_t>(n);
        const double xn = t == 0
                              ? ssm::sample_normal(seed, n32, 0, kSiteInit, p.mu, sd0)
                              : ssm::sample_normal(seed, n32, t32, kSiteTransition,
                                                   p.mu + p.rho * (xp[parent(n)] - p.mu), p.sigma);
        x[n] = xn;
        double v =
            (flat ? 0.0 : lw[n]) + (missing ? 0.0 : ssm::lpdf_normal(yt, 0.0, std::exp(xn / 2)));
        if (std::isnan(v))
          v = kNegInf;
        lw[n] = v;
        m = std::max(m, v);
      }
    };
    if (resampled)
      step([&](int64_t n) { return anc[n]; });
    else
      step([](int64_t n) { return n; });
    if (!(m > kNegInf && m < -kNegInf))
      throw ssm::Error(fmt::format("weights degenerate at t={}", t));

    // Normalise by the maximum, accumulate the weight sums and the weighted mean.
    double S = 0, S2 = 0, Sx = 0;
    for (int64_t n = 0; n < N; ++n) {
      lw[n] -= m;
      const double e = std::exp(lw[n]);
      w[n] = e;
      S += e;
      S2 += e * e;
      if (e > 0)
        Sx += e * cur[n];
    }
    const double mean = Sx / S;
    double Sv = 0;
    for (int64_t n = 0; n < N; ++n)
      if (w[n] > 0) {
        const double d = cur[n] - mean;
        Sv += w[n] * d * d;
      }
    r.mean[t] = mean;
    r.var[t] = Sv / S;
    r.log_likelihood += m + std::log(S) - log_sum_prev;
    log_sum_prev = std::log(S);
    ess = S * S / S2;
    std::swap(prev, cur);
  }
  r.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

// The `y` column of a data file written by `./sv simulate` (empty or NA = missing).
std::vector<double> read_y(const std::string& path) {
  ssm::CsvTable table = ssm::read_csv(path);
  auto col = std::find(table.header.begin(), table.header.end(), "y");
  if (col == table.header.end())
    throw ssm::Error(fmt::format("{}: no column 'y'", path));
  const size_t k = static_cast<size_t>(col - table.header.begin());
  std::vector<double> y(table.rows.size());
  for (size_t i = 0; i < y.size(); ++i)
    ssm::parse_cell(table.rows[i][k], y[i], path, table.lines[i], "y");
  return y;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Hand-written bootstrap particle filter for examples/sv.ssm (benchmark baseline)"};
  std::string data;
  int64_t particles = 1000;
  uint64_t seed = 1;
  double ess_threshold = 0.5;
  int reps = 1;
  Params p;
  app.add_option("--data", data, "CSV file with a column y")->required();
  app.add_option("--particles", particles, "Number of particles")->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "Random seed");
  app.add_option("--ess-threshold", ess_threshold, "Resample when ESS < r N")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--reps", reps, "Run the filter this many times (one JSON line each)")
      ->check(CLI::PositiveNumber);
  app.add_option("--mu", p.mu);
  app.add_option("--rho", p.rho);
  app.add_option("--sigma", p.sigma);
  CLI11_PARSE(app, argc, argv);
  try {
    const std::vector<double> y = read_y(data);
    for (int i = 0; i < reps; ++i) {
      const Result r = filter(p, y, particles, seed, ess_threshold);
      nlohmann::json j = {
          {"log_likelihood", r.log_likelihood},
          {"particles", particles},
          {"T", y.size()},
          {"resample_count", r.resample_count},
          {"elapsed_s", r.elapsed_s},
          {"compiler", fmt::format("{} {}", HANDWRITTEN_COMPILER, HANDWRITTEN_FLAGS)}};
      fmt::print("{}\n", j.dump());
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "handwritten_sv: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
