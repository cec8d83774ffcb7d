// Approximate Bayesian computation, the baselines of likelihood-free inference: parameters whose
// simulations fall within a distance epsilon of the observation. The distance is Euclidean on the
// observations standardised by the prior predictive's standard deviation per component (estimated
// from the first simulations).
//   rejection  simulate N pairs from the prior, keep the fraction `quantile` closest (epsilon is
//              the largest distance kept);
//   smc        population Monte Carlo ABC (Beaumont, Cornuet, Marin & Robert 2009) with the
//              tolerance of each generation the `alpha` quantile of the previous one's distances:
//              ancestors drawn by weight and moved by a Gaussian of twice their weighted
//              covariance, accepted when their simulation is within epsilon; weights p(theta) /
//              sum_j w_j K(theta | theta_j). It stops when the simulation budget is spent or a
//              generation's acceptance rate falls below `min_acceptance`; the last population is
//              resampled into equally weighted draws.
#pragma once

#include "lfi/simulator.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ssm::lfi {

struct AbcOptions {
  std::string method = "rejection";
  int64_t simulations = 100000; // the budget
  double quantile = 0.01;       // rejection
  int64_t population = 1000;    // smc
  double alpha = 0.5;           // smc
  double min_acceptance = 0.02; // smc
  uint64_t seed = 1;
  int threads = 1;
};

struct AbcResult {
  int64_t n_params = 0;
  std::vector<double> theta, distance;  // the draws (row-major) and their simulations' distances
  double epsilon = 0;                   // the final tolerance
  int64_t simulations = 0, dropped = 0; // made; with a non-finite observation (never accepted)
  // smc: per generation, the tolerance, the simulations made and the acceptance rate; and the
  // last population's effective sample size before resampling.
  std::vector<double> epsilons, acceptance;
  std::vector<int64_t> generation_simulations;
  double ess = 0;
};

// Throws ssm::Error naming what failed.
AbcResult abc(const Simulator& sim, const std::vector<double>& x_obs, const AbcOptions& options);

} // namespace ssm::lfi
