// Resampling schemes over (unnormalised, non-negative) weights: each turns n weights into n
// ancestor indices such that particle j gets, in expectation, n w_j / sum(w) offspring.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ssm {

enum class Resampling { Multinomial, Stratified, Systematic, Residual, Ssp };

inline constexpr std::array<Resampling, 5> kResamplingSchemes = {
    Resampling::Multinomial, Resampling::Stratified, Resampling::Systematic, Resampling::Residual,
    Resampling::Ssp};

// The command-line name of a scheme ("multinomial", ...), and back; nullopt for an unknown name.
const char* resampling_name(Resampling scheme);
std::optional<Resampling> parse_resampling(std::string_view name);

// Writes n ancestor indices for the weights w[0..n) with the given scheme. x_j = n w_j / sum(w)
// is particle j's expected number of offspring; a zero-weight particle never gets any.
//
// Randomness: uniform number k of a call is component k % 2 of the Philox block with counter
// (k / 2, t, site, 0) (ssm/rng.h), so the result depends only on (seed, t, site) and the weights.
// Schemes use uniforms 0, 1, ... as follows:
// - multinomial: n iid draws, as the order statistics of n uniforms obtained from the partial sums
//   of n + 1 exponentials -log U_0 .. -log U_n (O(n), no search). Ancestors come out sorted.
// - stratified: point (i + U_i) / n for i in [0, n), located in the cumulative weights. Sorted.
// - systematic: point (U_0 + i) / n (systematic_resample below). Sorted. Offspring counts are
//   floor(x_j) or ceil(x_j).
// - residual: floor(x_j) copies of each j, in index order, then the remaining m = n - sum floor
//   ancestors drawn multinomially (as above, with U_0 .. U_m) from the residuals x_j - floor(x_j),
//   sorted among themselves.
// - ssp: the Srinivasan sampling process (pivotal sampling; Gerber, Chopin & Whiteley 2019, Ann.
//   Statist. 47, 2236-2260): the fractional parts of x are resolved in index order, each pairing of
//   the pending particle with particle j drawing on U_j. Offspring counts are floor(x_j) or
//   ceil(x_j), and the counts are negatively associated. Ancestors are grouped by particle, in
//   the order in which particles are resolved (nearly sorted).
// Throws std::invalid_argument unless every weight is finite and >= 0 with a positive sum, or if n
// exceeds 2^32 (the counters are 32-bit).
void resample(Resampling scheme, const double* w, int64_t n, uint64_t seed, uint32_t t,
              uint32_t site, int64_t* ancestors);

// Systematic resampling: ancestors[i] = the index j whose cumulative-weight interval contains
// (u + i) / n * sum(w), for i in [0, n). u in [0, 1). Particle j gets floor(n w_j / sum w) or
// ceil(n w_j / sum w) offspring; ancestors come out sorted. Requires sum(w) > 0 and finite.
void systematic_resample(const double* w, int64_t n, double u, int64_t* ancestors);

} // namespace ssm
