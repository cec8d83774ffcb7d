// The plan of a plate model's default guide: which latent component the guide treats how
// (Gaussian, categorical, a declared dif), and the gradient estimator of each latent variable.
// Torch-free; guide.h builds the guide from it.
#pragma once

#include "core/metadata.h"
#include "kernel/abi.h"
#include "vi/variational.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace ssm {

// Which latent components the guide treats how.
struct GuidePlan {
  std::vector<int64_t> continuous; // state components
  std::vector<std::string> continuous_columns;
  std::vector<bool> continuous_score; // estimated by the score function rather than reparam
  // The support of each continuous component ([-inf, inf] when unbounded): the guide's Gaussian
  // is on the unconstrained scale u, and z = lower + exp(u), upper - exp(u) or lower + (upper -
  // lower) logistic(u), with the log-Jacobian in log q.
  std::vector<double> continuous_lower, continuous_upper;
  // Whether a component's mean and sd come from the model's guide (`guide z[n] ~ normal(m, s)`,
  // its arguments on the unconstrained scale), rather than from the guide's own parameters.
  std::vector<bool> continuous_declared;
  // A declared `dif(context, components, width, layers)` guide: a conditional Discretely Indexed
  // Flow over its latent's continuous components (on the unconstrained scale), drawn
  // Rao-Blackwellised (Argouarc'h 2024, 4.76): one base draw eps per draw k, carried by each of its
  // maps, each image weighted by w_j(eps). Its maps fill the enumeration axis E, above the discrete
  // values: map j of the point e is (e / radix) % components.
  struct Dif {
    std::string latent;
    std::vector<int64_t> columns; // among the continuous components
    int64_t components = 0, width = 0, radix = 1;
    int64_t layers = 0; // MAF layers before each location-scale map (0: none)
  };
  std::vector<Dif> difs;
  std::vector<int> continuous_dif; // per continuous component: its dif's index, or -1
  struct Discrete {
    int64_t component = 0;
    std::string column;
    int64_t lower = 0, values = 0;
    bool enumerate = false; // summed over exactly; else sampled (score function)
    bool gumbel = false;    // enumerated too, but weighted by a relaxed draw while training
    bool declared = false;  // its probabilities come from the model's guide (`guide z[n] ~ ...`)
  };
  std::vector<Discrete> discrete;
  int64_t enumeration = 1; // points per draw: joint values of the enumerated components, times
                           // each dif's maps
  int64_t discrete_enumeration = 1; // joint values of the enumerated discrete components
  // A Cholesky factor couples the continuous components (--method fullrank, or a guide's
  // mvnormal_chol): one Gaussian over all of them, with one estimator.
  bool dense = false;
  std::vector<VariationalFit::Estimator> estimators;
};

// Resolves --estimator per latent variable (auto: enumerate a discrete latent while the joint
// enumeration stays within kMaxEnumeration values, else the score function; reparameterise a
// continuous one). Throws ssm::Error for an estimator that cannot apply, naming those that can.
GuidePlan plan_guide(const ssm_model& model, const ModelInfo& info,
                     const VariationalOptions& options);
// plan_guide's part for dif guides: a latent's (its estimator must be reparam, the family
// meanfield), then their maps' places on the enumeration axis and the objective (the ELBO).
void plan_dif(GuidePlan& plan, const VarInfo& v, const GuideInfo::Relation& rel,
              const VariationalOptions& options);
void place_difs(GuidePlan& plan, const VariationalOptions& options);

} // namespace ssm
