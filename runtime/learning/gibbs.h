// Gibbs sampling of a model's parameters and unknown values (Argouarc'h 2024, ch. 3,
// Algorithm 3; Geman & Geman 1984), with the parameters drawn from their conjugate full
// conditionals given completed data (conjugate_draws.h).
//
// A plate model: each sweep draws the latent variables of the items the data does not give from
// their exact conditional (a Kalman update or an enumeration per item, given the parameters) and
// each missing observation from its relation. The data's latent columns make the semi-supervised
// setting: an item whose latent values are given (a labelled item) enters with them. The draws
// are the posterior predictive of what was not observed: a label to predict is a latent left
// empty (a generative model), or an observation left empty (a discriminative one, whose
// covariates are latents given on every row).
//
// A time series (finite or linear-Gaussian states): each sweep draws every series' state path by
// forward filtering and backward sampling (Carter & Kohn 1994; Frühwirth-Schnatter 1994), the
// data-augmentation Gibbs sampler of dynamic linear models and hidden Markov models.
#pragma once

#include "core/method_registry.h"
#include "learning/pmmh.h"

namespace ssm {

// Why gibbs does not apply to the model (networks, no conjugate pieces analysis, no prior).
Refusal gibbs_refusal(const ssm_model& model, const ModelInfo& info);

// `options.particles` and `options.filter` are not used.
Posterior sample_gibbs(const MethodRun& run, const SampleOptions& options);

} // namespace ssm
