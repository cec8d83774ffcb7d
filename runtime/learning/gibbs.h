// Gibbs sampling of a plate model's parameters and unknown values (Argouarc'h 2024, ch. 3,
// Algorithm 3; Geman & Geman 1984): each sweep draws the latent variables of the items the data
// does not give from their exact conditional (the Kalman or forward filter of each item, given
// the parameters), each missing observation from its relation, then every parameter from its
// conjugate full conditional given the completed data (conjugate_draws.h).
//
// The data's latent columns make the semi-supervised setting: an item whose latent values are
// given (a labelled item) enters with them; the others' are drawn at every sweep, and so are its
// missing observations. Their draws are the posterior predictive of what was not observed: a
// label to predict is a latent left empty (a generative model), or an observation left empty
// (a discriminative one, whose covariates are latents given on every row).
#pragma once

#include "core/method_registry.h"
#include "learning/pmmh.h"

namespace ssm {

// Why gibbs does not apply to the model (not a plate model, networks, no conjugate pieces).
Refusal gibbs_refusal(const ssm_model& model, const ModelInfo& info);

// `options.particles` and `options.filter` are not used.
Posterior sample_gibbs(const MethodRun& run, const SampleOptions& options);

} // namespace ssm
