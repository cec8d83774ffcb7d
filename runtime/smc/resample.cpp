// Resampling schemes: multinomial, stratified, systematic, residual and SSP (see resample.h for
// what each draws and which uniforms it uses). All run in O(n) without scratch memory.
//
// Every scheme but SSP locates increasing points in the cumulative weights with one forward walk
// that advances while cum <= point. A particle with zero weight leaves cum unchanged, so the walk
// can never stop on it; and the walk never passes the last positive weight, so a point pushed
// beyond the computed total by rounding still lands on a particle with positive weight.
#include "smc/resample.h"
#include "kernel/rng.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace ssm {

namespace {

// Uniform k of one call: component k % 2 of the Philox block (k / 2, t, site, 0). Callers read
// them in increasing k, so each block is computed once.
class Uniforms {
public:
  Uniforms(uint64_t seed, uint32_t t, uint32_t site) : seed_(seed), t_(t), site_(site) {}
  double operator()(int64_t k) {
    const int64_t block = k >> 1;
    if (block != block_) {
      philox_u01x2(seed_, static_cast<uint32_t>(block), t_, site_, 0, u_[0], u_[1]);
      block_ = block;
    }
    return u_[k & 1];
  }

private:
  uint64_t seed_;
  uint32_t t_, site_;
  int64_t block_ = -1;
  double u_[2] = {0, 0};
};

struct Scan {
  double total = 0;
  int64_t last = 0; // the last particle with positive weight
};

Scan scan_weights(const double* w, int64_t n) {
  Scan s;
  for (int64_t j = 0; j < n; ++j) {
    if (!std::isfinite(w[j]) || w[j] < 0)
      throw std::invalid_argument("resample: weight " + std::to_string(j) +
                                  " is negative or not finite");
    s.total += w[j];
    if (w[j] > 0)
      s.last = j;
  }
  if (!(s.total > 0) || !std::isfinite(s.total))
    throw std::invalid_argument("resample: the weights must have a positive finite sum");
  return s;
}

// x_j = n w_j / total, the expected offspring count. Dividing first cannot overflow.
inline double expected_count(double wj, double total, int64_t n) {
  return wj / total * static_cast<double>(n);
}

// m sorted iid draws from the weights weight(0 .. last), which sum to `total`, into out[0..m).
// The sorted points are U_(k) = S_k / S_{m+1}, k = 1..m, with S_k the partial sums of the m + 1
// exponentials -log U_0 .. -log U_m: the order statistics of m iid uniforms (Devroye 1986, V.2).
// Each S_k waits, bit-cast, in out[k-1] until it is located, so no scratch memory is needed.
template <class Weight>
void sorted_multinomial(const Weight& weight, double total, int64_t last, int64_t m, Uniforms& u,
                        int64_t* out) {
  if (m <= 0)
    return;
  double s = 0;
  for (int64_t k = 0; k < m; ++k) {
    s -= std::log(u(k));
    out[k] = std::bit_cast<int64_t>(s);
  }
  s -= std::log(u(m));
  // Scale the points rather than the weights: a tiny total must not make the scale infinite.
  const double ratio = total / s;
  double cum = weight(0);
  int64_t j = 0;
  for (int64_t k = 0; k < m; ++k) {
    const double point = std::bit_cast<double>(out[k]) * ratio;
    while (cum <= point && j < last)
      cum += weight(++j);
    out[k] = j;
  }
}

void stratified(const double* w, int64_t n, const Scan& s, Uniforms& u, int64_t* ancestors) {
  const double step = s.total / static_cast<double>(n);
  double cum = w[0];
  int64_t j = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double point = (static_cast<double>(i) + u(i)) * step;
    while (cum <= point && j < s.last)
      cum += w[++j];
    ancestors[i] = j;
  }
}

void residual(const double* w, int64_t n, const Scan& s, Uniforms& u, int64_t* ancestors) {
  auto frac = [&](int64_t j) {
    const double x = expected_count(w[j], s.total, n);
    return x - std::floor(x);
  };
  int64_t pos = 0, rlast = 0;
  double rtotal = 0;
  for (int64_t j = 0; j < n; ++j) {
    const double x = expected_count(w[j], s.total, n);
    // The floors sum to at most n in exact arithmetic; the bound only guards against rounding.
    const int64_t copies = std::min(static_cast<int64_t>(std::floor(x)), n - pos);
    for (int64_t c = 0; c < copies; ++c)
      ancestors[pos++] = j;
    const double r = frac(j);
    rtotal += r;
    if (r > 0)
      rlast = j;
  }
  const int64_t m = n - pos;
  if (m == 0)
    return;
  if (rtotal > 0)
    sorted_multinomial(frac, rtotal, rlast, m, u, ancestors + pos);
  else // every x_j rounded to an integer, yet they sum to less than n: draw from the weights
    sorted_multinomial([&](int64_t j) { return w[j]; }, s.total, s.last, m, u, ancestors + pos);
}

// Pivotal sampling. The pending particle has fractional part a in (0, 1); particle j with
// fractional part p in (0, 1) meets it, and each keeps its fractional part in expectation: if
// a + p < 1, one of the two drops to its floor and the other carries a + p (the pending one keeps
// it with probability a / (a + p)); if a + p >= 1, one rises to its ceiling and the other carries
// a + p - 1 (the pending one rises with probability (1 - p) / (2 - a - p)). The carrier becomes the
// pending particle. A particle is written out as soon as its count is decided.
void ssp(const double* w, int64_t n, const Scan& s, Uniforms& u, int64_t* ancestors) {
  int64_t pos = 0;
  auto emit = [&](int64_t j, int64_t count) {
    count = std::min(count, n - pos); // counts sum to n in exact arithmetic
    for (int64_t c = 0; c < count; ++c)
      ancestors[pos++] = j;
  };
  int64_t pending = -1, pending_floor = 0;
  double a = 0;
  for (int64_t j = 0; j < n; ++j) {
    const double x = expected_count(w[j], s.total, n);
    const double f = std::floor(x), p = x - f;
    const int64_t fj = static_cast<int64_t>(f);
    if (p == 0) {
      emit(j, fj);
      continue;
    }
    if (pending < 0) {
      pending = j;
      pending_floor = fj;
      a = p;
      continue;
    }
    const double uj = u(j), sum = a + p;
    bool j_carries; // otherwise the pending particle carries on and j is decided
    if (sum < 1) {
      j_carries = !(uj * sum < a);
      if (j_carries)
        emit(pending, pending_floor);
      else
        emit(j, fj);
      a = sum;
    } else {
      j_carries = uj * (2 - sum) < 1 - p;
      if (j_carries)
        emit(pending, pending_floor + 1);
      else
        emit(j, fj + 1);
      a = sum - 1;
    }
    if (j_carries) {
      pending = j;
      pending_floor = fj;
    }
    if (a <= 0) { // sum == 1 exactly: the carrier ends at its floor
      emit(pending, pending_floor);
      pending = -1;
    }
  }
  // The fractional parts sum to an integer, so the last pending particle ends at 0 or 1 up to
  // rounding: it takes whatever remains.
  if (pending >= 0)
    emit(pending, n - pos);
  else if (pos < n)
    emit(s.last, n - pos);
}

} // namespace

const char* resampling_name(Resampling scheme) {
  switch (scheme) {
  case Resampling::Multinomial:
    return "multinomial";
  case Resampling::Stratified:
    return "stratified";
  case Resampling::Systematic:
    return "systematic";
  case Resampling::Residual:
    return "residual";
  case Resampling::Ssp:
    return "ssp";
  }
  return "?";
}

std::optional<Resampling> parse_resampling(std::string_view name) {
  for (Resampling r : kResamplingSchemes)
    if (name == resampling_name(r))
      return r;
  return std::nullopt;
}

void resample(Resampling scheme, const double* w, int64_t n, uint64_t seed, uint32_t t,
              uint32_t site, int64_t* ancestors) {
  if (n <= 0)
    return;
  if (n > (int64_t(1) << 32))
    throw std::invalid_argument("resample: at most 2^32 particles");
  const Scan s = scan_weights(w, n);
  Uniforms u(seed, t, site);
  switch (scheme) {
  case Resampling::Multinomial:
    sorted_multinomial([&](int64_t j) { return w[j]; }, s.total, s.last, n, u, ancestors);
    return;
  case Resampling::Stratified:
    stratified(w, n, s, u, ancestors);
    return;
  case Resampling::Systematic:
    systematic_resample(w, n, u(0), ancestors);
    return;
  case Resampling::Residual:
    residual(w, n, s, u, ancestors);
    return;
  case Resampling::Ssp:
    ssp(w, n, s, u, ancestors);
    return;
  }
}

namespace {

// Systematic resampling by walking the points (u + i) * step against the running sum: the
// definition, used where the step is too small for systematic_resample's arithmetic.
void systematic_walk(const double* w, int64_t n, double u, double step, int64_t last,
                     int64_t* ancestors) {
  double cum = w[0];
  int64_t j = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double point = (u + static_cast<double>(i)) * step;
    while (cum <= point && j < last)
      cum += w[++j];
    ancestors[i] = j;
  }
}

} // namespace

void systematic_resample(const double* w, int64_t n, double u, int64_t* ancestors) {
  if (n <= 0)
    return;
  double total = 0;
  int64_t last = 0; // last particle with positive weight: rounding must never select past it
  for (int64_t j = 0; j < n; ++j) {
    total += w[j];
    last = w[j] > 0 ? j : last;
  }
  // Point i is (u + i) * step: scaling by the computed total (instead of normalising w) keeps
  // the last point inside the last interval despite rounding. Particle j's offspring fill
  // [N_{j-1}, N_j), N_j = #{i < n : point i < cum_j} (cum_j the running sum), which is what the
  // walk gives. Each N_j comes from a guess corrected by exact comparisons (the points are
  // monotone in i), so that nothing branches on the weights: the walk mispredicts a branch about
  // once per particle, its larger cost at small n. A subnormal step (weights summing to under
  // n * 2.2e-308) would overflow 1 / step: the walk then.
  const double step = total / static_cast<double>(n), inv = 1 / step;
  if (!(step >= std::numeric_limits<double>::min()))
    return systematic_walk(w, n, u, step, last, ancestors);
  const auto dn = static_cast<double>(n);
  std::fill(ancestors, ancestors + n, 0);
  int64_t unused = 0, before = 0; // N_{j-1}
  double cum = 0;
  for (int64_t j = 0; j < n; ++j) {
    cum += w[j];
    // x = cum_j / step - u is a few roundings from the real threshold, so N_j lies in
    // [base, base + 3] with base = max(floor(x) - 1, 0): base plus the number of the points
    // base, base + 1, base + 2 that lie below cum_j.
    const double x = std::min(std::max(0.0, cum * inv - u), dn);
    const int64_t base = std::max<int64_t>(static_cast<int64_t>(x) - 1, 0);
    int64_t k = base;
    for (int64_t d = 0; d < 3; ++d)
      k += static_cast<int64_t>((u + static_cast<double>(base + d)) * step < cum);
    k = std::min(k, n);
    k = j >= last ? n : k;
    // The first slot of j's run; a particle without offspring writes the start of the next
    // one's, which that one overwrites (or a slot past the end, `unused`).
    *(before < n ? ancestors + before : &unused) = j;
    before = k;
  }
  for (int64_t i = 1; i < n; ++i) // every slot of a run: its first slot's particle
    ancestors[i] = std::max(ancestors[i], ancestors[i - 1]);
}

} // namespace ssm
