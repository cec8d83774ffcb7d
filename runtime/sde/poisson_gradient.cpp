// PoissonEstimator::gradient: unbiased estimates of d/dtheta log q for the score of an SDE
// transition (see poisson_estimator.h), with exact diffusion bridges drawn by the exact
// algorithm's rejection step (EA1).
#include "sde/poisson_estimator.h"

#include "core/error.h"
#include "kernel/distributions.h"
#include "kernel/rng.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ssm {

void PoissonEstimator::gradient(const double* frame, int64_t t, const double* prev,
                                const double* cur, int64_t P, uint64_t seed, uint64_t first_id,
                                double* out, EstimatorCounts* counts) {
  require_gradient(t);
  if (lamperti_ || terms_.coefficient_reads_theta())
    throw Error(fmt::format("the gradient estimator for {} at t={}: exact bridges are drawn for a "
                            "constant diffusion coefficient that does not read the parameters; "
                            "this one reads the {}",
                            relation_, t, lamperti_ ? "path" : "parameters"));
  const int K = gradient_size();
  check_ids(t, P, first_id);
  prepare(frame, t, prev, cur, P);
  if (!std::isfinite(upper_))
    throw Error(fmt::format("the gradient estimator for {} at t={}: psi has no finite upper bound "
                            "for these parameters ([{}, {}]); exact bridges need one",
                            relation_, t, lower_, upper_));
  std::fill(out, out + K * P, 0.0);
  // (1 / s^2) int_x^y d drift / d theta_k: the gradient of B(v) - B(u), on prepare()'s nodes.
  for (int64_t p : finite_pairs())
    for (int k = 0; k < K; ++k)
      out[k * P + p] = drift_integral_theta(p, k);

  // Exact bridge points at uniform times, every pending pair proposing once per round: the
  // Brownian bridge from u to v at the Poisson points of rate lambda = upper - lower and at the
  // uniform time, accepted when psi - lower < lambda * mark at every Poisson point.
  const double lambda = upper_ - lower_, rate = lambda * dt_;
  if (rate > kMaxPoissonRate)
    throw Error(fmt::format("the gradient estimator for {} at t={}: the Poisson rate lambda dt = "
                            "{:g} exceeds {:g} (psi's bounds are too far apart)",
                            relation_, t, rate, kMaxPoissonRate));
  const auto ut = static_cast<uint32_t>(t);
  std::vector<int64_t> pending = finite_pairs(), first(P + 1), uniform_at(P), next;
  std::vector<double> marks, when;
  std::vector<int64_t> order;
  for (int round = 0; !pending.empty(); ++round) {
    if (round == kMaxBridgeRounds) {
      const int64_t p = pending.front();
      throw Error(fmt::format("the gradient estimator for {} at t={}: no exact bridge from {} to "
                              "{} accepted in {} proposals (each accepted with probability at "
                              "least exp(-(upper - lower) dt) = {:.3g}: psi's bounds are too far "
                              "apart)",
                              relation_, t, x_[p], y_[p], kMaxBridgeRounds, std::exp(-rate)));
    }
    const uint32_t site = kSiteBridge + 5u * static_cast<uint32_t>(round);
    // Points of pair k of the round: its Poisson points (marks alongside), then the uniform time.
    bridge_.clear();
    marks.clear();
    for (size_t k = 0; k < pending.size(); ++k) {
      const int64_t p = pending[k];
      const auto id = static_cast<uint32_t>(first_id + static_cast<uint64_t>(p));
      const int64_t count =
          rate > 0 ? static_cast<int64_t>(sample_poisson(seed, id, ut, site, rate)) : 0;
      first[k] = static_cast<int64_t>(bridge_.size());
      when.resize(count + 1);
      for (int64_t j = 0; j < count; ++j) {
        when[j] = dt_ * philox_u01(seed, id, ut, site + 1, static_cast<uint32_t>(j));
        marks.push_back(lambda * philox_u01(seed, id, ut, site + 3, static_cast<uint32_t>(j)));
      }
      when[count] = dt_ * philox_u01(seed, id, ut, site + 4, 0);
      // The bridge visits the times in increasing order; the values go back to draw order.
      order.resize(count + 1);
      for (int64_t j = 0; j <= count; ++j)
        order[j] = j;
      std::sort(order.begin(), order.end(),
                [&](int64_t a, int64_t b) { return when[a] < when[b]; });
      bridge_.resize(bridge_.size() + count + 1);
      double at = 0, w = u_[p];
      for (int64_t j = 0; j <= count; ++j) {
        const double time = when[order[j]], step = time - at, rest = dt_ - at;
        const double var = step * (dt_ - time) / rest;
        w += (v_[p] - w) * step / rest +
             std::sqrt(std::max(var, 0.0)) *
                 sample_std_normal_k(seed, id, ut, site + 2, static_cast<uint32_t>(j));
        at = time;
        bridge_[first[k] + order[j]] = w * scale_;
      }
      uniform_at[k] = first[k] + count;
    }
    first[pending.size()] = static_cast<int64_t>(bridge_.size());
    terms_.evaluate(frame, t, bridge_.data(), static_cast<int64_t>(bridge_.size()));
    if (counts) {
      counts->bridge_proposals += static_cast<int64_t>(pending.size());
      counts->bridge_points += static_cast<int64_t>(bridge_.size());
    }
    next.clear();
    int64_t mark = 0;
    for (size_t k = 0; k < pending.size(); ++k) {
      const int64_t p = pending[k];
      bool accepted = true;
      for (int64_t j = first[k]; j < uniform_at[k]; ++j, ++mark) {
        const double phi = psi(j) - lower_;
        if (!std::isfinite(phi))
          throw Error(fmt::format("the gradient estimator for {} at t={}: psi is not finite at "
                                  "{} on a bridge from {} to {}",
                                  relation_, t, bridge_[j], x_[p], y_[p]));
        // The thinning is exact only for psi within its bounds: outside them the accepted
        // bridges would have another law, silently.
        check_psi(t, phi + lower_, bridge_[j]);
        accepted = accepted && phi < marks[mark];
      }
      if (!accepted) {
        next.push_back(p);
        continue;
      }
      // d psi / d theta_k at the accepted bridge's uniform time, psi = (a^2 / s^2 + a') / 2.
      const int64_t z = uniform_at[k];
      for (int k2 = 0; k2 < K; ++k2) {
        const double dpsi = psi_theta(z, k2);
        if (!std::isfinite(dpsi))
          throw Error(fmt::format("the gradient estimator for {} at t={}: d psi / d theta is not "
                                  "finite at {} on a bridge from {} to {}",
                                  relation_, t, bridge_[z], x_[p], y_[p]));
        out[k2 * P + p] -= dt_ * dpsi;
      }
    }
    pending.swap(next);
  }
}

} // namespace ssm
