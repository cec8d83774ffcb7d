// Lamperti's coordinate: see lamperti.h.
#include "sde/lamperti.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace ssm {

bool in_lamperti_coordinate(const ModelInfo& info) {
  return info.sde && info.sde->dim == 1 && !info.sde->coefficient_constant &&
         info.sde->estimator == "gpe";
}

UnitDrift lamperti_drift(const DiffusionTerms& terms, int64_t p) {
  // |s| = sqrt(g), g = s^2: |s|' = g' / (2 |s|), |s| |s|'' = g'' / 2 - |s|'^2.
  const double a = terms.drift(p), da = terms.jacobian(p);
  const double s = std::fabs(terms.coefficient(p));
  const double ds = terms.gamma_divergence(p, 0) / (2 * s);
  const double s_dds = 0.5 * terms.gamma_second_divergence(p) - ds * ds;
  return {a / s - 0.5 * ds, da - a * ds / s - 0.5 * s_dds};
}

void lamperti_inverse(DiffusionTerms& terms, const double* frame, int64_t t,
                      const std::vector<double>& start, const std::vector<int64_t>& group,
                      const double* w, int64_t n, double* out, const CoefficientCheck& check) {
  // Walkers: per group, one up from w = 0 through its targets above 0 in increasing order, one
  // down through those below; each iteration takes an RK4 step of every walker, shortened to
  // land on its next target.
  struct Walker {
    int64_t group;
    std::vector<std::pair<double, int64_t>> targets; // (w, j), outward
    size_t next = 0;
    double w = 0, x = 0;
  };
  std::vector<std::vector<int64_t>> members(start.size());
  for (int64_t j = 0; j < n; ++j)
    members[group[j]].push_back(j);
  std::vector<Walker> walkers;
  for (size_t g = 0; g < start.size(); ++g) {
    Walker up{static_cast<int64_t>(g), {}, 0, 0, start[g]}, down = up;
    for (int64_t j : members[g])
      (w[j] >= 0 ? up : down).targets.emplace_back(w[j], j);
    std::sort(up.targets.begin(), up.targets.end());
    std::sort(down.targets.begin(), down.targets.end(), std::greater<>());
    for (Walker* k : {&up, &down})
      if (!k->targets.empty())
        walkers.push_back(std::move(*k));
  }
  std::vector<double> h, x0, stage, slope[4];
  std::vector<size_t> active;
  static constexpr double kAt[4] = {0, 0.5, 0.5, 1};
  for (;;) {
    active.clear();
    h.clear();
    for (size_t i = 0; i < walkers.size(); ++i) {
      Walker& k = walkers[i];
      while (k.next < k.targets.size() && k.targets[k.next].first == k.w)
        out[k.targets[k.next++].second] = k.x;
      if (k.next == k.targets.size())
        continue;
      const double to = k.targets[k.next].first - k.w;
      active.push_back(i);
      h.push_back(std::fabs(to) <= kLampertiStep ? to : std::copysign(kLampertiStep, to));
    }
    if (active.empty())
      return;
    const size_t m = active.size();
    x0.resize(m);
    stage.resize(m);
    for (size_t a = 0; a < m; ++a)
      x0[a] = walkers[active[a]].x;
    for (int r = 0; r < 4; ++r) {
      for (size_t a = 0; a < m; ++a)
        stage[a] = x0[a] + (r == 0 ? 0.0 : kAt[r] * h[a] * slope[r - 1][a]);
      terms.evaluate(frame, t, stage.data(), static_cast<int64_t>(m));
      slope[r].resize(m);
      for (size_t a = 0; a < m; ++a)
        slope[r][a] =
            check(walkers[active[a]].group, stage[a], terms.coefficient(static_cast<int64_t>(a)));
    }
    for (size_t a = 0; a < m; ++a) {
      Walker& k = walkers[active[a]];
      k.x = x0[a] + h[a] / 6 * (slope[0][a] + 2 * slope[1][a] + 2 * slope[2][a] + slope[3][a]);
      k.w += h[a];
      if (std::fabs(k.targets[k.next].first - k.w) < 1e-12 * (1 + std::fabs(k.w)))
        k.w = k.targets[k.next].first; // landed
    }
  }
}

} // namespace ssm
