// The backward draws of an online pass (paris, bis) kept for trajectories: at every step t > 0,
// each particle's Ñ indices into the particles at t-1 with their weights (uniform for paris's
// draws, bis's self-normalised ones), and every step's particles. Picking one of particle j's
// draws by its weight is a draw from the backward kernel B(j, .) as the method approximates it
// (exactly, for paris's exact or accept-reject draws), independently of the other steps' draws;
// so a path J_{T-1} ~ W_{T-1}, J_{t-1} picked among J_t's draws, has the law of an FFBSi
// trajectory, at O(T) per path after the pass instead of ffbsi's backward pass. EM's particle
// E-step through paris or bis (learning/monte_carlo_em.h) uses it: where the transition density
// is only estimated (an SDE), these are the backward draws there are. Memory O(N Ñ T).
#pragma once

#include "exact/weighted_points.h"

#include <cstdint>
#include <vector>

namespace ssm {

struct BackwardTrace {
  int64_t N = 0, Nt = 0, ns = 0;
  // Step t's draws (t >= 1), particle j's k-th at [j * Nt + k]; step 0's are empty.
  std::vector<std::vector<int32_t>> idx;
  std::vector<std::vector<double>> w;
  std::vector<std::vector<double>> x; // step t's particles, component c of n at [c * N + n]
  std::vector<double> last_weights;   // the filter weights at T - 1

  BackwardTrace(int64_t N, int64_t Nt, int64_t ns, int64_t T);
  // Particles [jb, je)'s draws at step t, idx and w at [(j - jb) * Nt + k] (w null: uniform).
  // Blocks of one step write apart: safe from the pool's threads.
  void record(int64_t t, int64_t jb, int64_t je, const int64_t* draws, const double* w);
  // Step t's particles, from the filter's layout (component c of n at [c * stride + n]).
  void keep_particles(int64_t t, const double* x, int64_t stride);
};

// M trajectories through the trace as each step's points of weight 1 / M (the Monte Carlo
// E-step's points), the path m's draws keyed by (seed, m, t).
std::vector<StepPoints> trace_trajectories(const BackwardTrace& trace, int64_t M, uint64_t seed);

} // namespace ssm
