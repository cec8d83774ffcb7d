// The C ABI between a compiled model and the ssmc runtime.
//
// A compiled model object exports one symbol, `ssm_model_table`, of type ssm_model. Everything the
// runtime needs to know about the model (names, shapes, parameter layout and defaults, the
// structure report) is in `metadata_json`; the kernels are plain functions over a batch of
// particles.
//
// Layout conventions shared by every kernel:
//   - particles are stored structure-of-arrays: component c of particle n is at x[c * stride + n];
//   - a kernel handles particles n in [begin, end) and allocates nothing;
//   - theta is the frame: the flat parameter vector (scalars, then vector / row-major matrix
//     elements, in the order and at the offsets given by the metadata), followed by the data
//     items, the inputs at time t and the observation at t-1 (see docs/abi.md); the runtime fills
//     the time-dependent part before each step;
//   - y is the observation at time t as a dense vector of n_obs doubles shared by all particles
//     (the item layout's kernels, below, read one per particle); a NaN component is a missing
//     observation and contributes nothing to the log-density;
//   - random draws come from Philox4x32-10 keyed by `seed` with counter (n, t, site, draw) (see
//     kernel/rng.h), so results do not depend on how particles are split across threads.
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SSM_ABI_VERSION 12

// x[c*stride+n] ~ p(x_0)
typedef void (*ssm_init_sample_fn)(const double* theta, uint64_t seed, int64_t begin, int64_t end,
                                   int64_t stride, double* x);
// out[n] = log p(x_0 = x_n)
typedef void (*ssm_init_logpdf_fn)(const double* theta, int64_t begin, int64_t end, int64_t stride,
                                   const double* x, double* out);
// x_n ~ p(x_t | x_{t-1} = x_prev[a_n]) with a_n = ancestors ? ancestors[n] : n.
typedef void (*ssm_transition_sample_fn)(const double* theta, uint64_t seed, int64_t t,
                                         int64_t begin, int64_t end, int64_t stride,
                                         const double* x_prev, const int64_t* ancestors, double* x);
// out[n] = log p(x_t = x_n | x_{t-1} = x_prev[a_n]) with a_n = ancestors ? ancestors[n] : n.
typedef void (*ssm_transition_logpdf_fn)(const double* theta, int64_t t, int64_t begin, int64_t end,
                                         int64_t stride, const double* x_prev,
                                         const int64_t* ancestors, const double* x, double* out);
// out[n] = log p(y_t = y | x_t = x_n); NaN components of y are skipped.
typedef void (*ssm_obs_logpdf_fn)(const double* theta, int64_t t, int64_t begin, int64_t end,
                                  int64_t stride, const double* x, const double* y, double* out);
// y[k*stride+n] ~ p(y_t | x_t = x_n)
typedef void (*ssm_obs_sample_fn)(const double* theta, uint64_t seed, int64_t t, int64_t begin,
                                  int64_t end, int64_t stride, const double* x, double* y);

// out[k*stride+n] = component k of the model's functional terms (functionals in declaration order,
// vectors flattened) at time t for the pair (x_prev[a_n], x_n), a_n = ancestors ? ancestors[n] : n.
// At t = 0 the runtime passes x_prev filled with NaN, so a term that reads x[t-1] is NaN there
// unless it is guarded (t == 0 ? ... : ...).
typedef void (*ssm_functional_terms_fn)(const double* theta, int64_t t, int64_t begin, int64_t end,
                                        int64_t stride, const double* x_prev,
                                        const int64_t* ancestors, const double* x, const double* y,
                                        double* out);

// Optional kernels, null when the model's structure does not provide them:

// out[n] = log sup_x p(x_t = x | x_{t-1} = x_prev[n]), the log of the density bound that the
// compiler's density analysis derived (the density at its mode); NaN where the bound's condition
// fails for these parameters (e.g. a gamma shape below 1). Present when the bound exists and does
// not read x_t; it may read x_{t-1}, so a bound over all particles is the maximum of out.
typedef void (*ssm_transition_log_bound_fn)(const double* theta, int64_t t, int64_t begin,
                                            int64_t end, int64_t stride, const double* x_prev,
                                            double* out);

// For a linear-Gaussian model (x stacked states, n of them; y stacked observations, m):
//   x_0 ~ N(m0, P0),  x_t = F x_{t-1} + c + N(0, Q),  y_t = H x_t + d + N(0, R),
// writes m0 (n), P0 (n*n), F (n*n), c (n), Q (n*n), H (m*n), d (m), R (m*m), matrices row-major,
// one after another into out, for time t (the frame of step t: some may depend on t, inputs or
// y_{t-1}).
typedef void (*ssm_linear_gaussian_fn)(const double* theta, int64_t t, double* out);

// For a model whose every relation is normal or mvnormal with parameters that read no variable of
// their own step: the mean and covariance (row-major) of block `block` given one state x_in
// (n doubles): block 0 the initial distribution (x_in unused), 1 the transition given
// x_{t-1} = x_in, 2 the observation given x_t = x_in (mean m, covariance m*m). What the unscented
// Kalman filter propagates its sigma points through.
typedef void (*ssm_gaussian_moments_fn)(const double* theta, int64_t t, int32_t block,
                                        const double* x_in, double* mean, double* cov);

// For the same models: the Jacobian (row-major, dim x n) of the block's stacked means with respect
// to the state it conditions on, at x_in: block 1 the transition (n x n, d mean(x_t) / d x_{t-1}),
// 2 the observation (m x n). What the extended Kalman filter linearises with.
typedef void (*ssm_gaussian_jacobian_fn)(const double* theta, int64_t t, int32_t block,
                                         const double* x_in, double* jac);

// For a model with a `proposal`: x_n ~ q(x_t | x_{t-1} = x_prev[a_n], y_t = y) with
// a_n = ancestors ? ancestors[n] : n, and out[n] = log q(x_t = x_n | ...). What the guided filter
// proposes with (it weights by p(y_t | x_t) p(x_t | x_{t-1}) / q).
typedef void (*ssm_proposal_sample_fn)(const double* theta, uint64_t seed, int64_t t, int64_t begin,
                                       int64_t end, int64_t stride, const double* x_prev,
                                       const int64_t* ancestors, const double* y, double* x,
                                       double* out);

// For a model with `lookahead` statements: x_pred[c*stride+n] = the prediction of component c of
// x_t from x_{t-1} = x_prev[n] (and y_t = y). The auxiliary particle filter's first-stage weights
// are p(y_t | x_t = x_pred[n]).
typedef void (*ssm_lookahead_fn)(const double* theta, int64_t t, int64_t begin, int64_t end,
                                 int64_t stride, const double* x_prev, const double* y,
                                 double* x_pred);

typedef void (*ssm_prior_logpdf_fn)(const double* theta, double* out);

// A plate model's kernel in the item layout: particle n is an item of its own, item items[n] (the
// step t it stands for), with its state x[c*stride+n], its observation y[k*stride+n] and its
// inputs inputs[k*stride+n] (null when the model has none); x_prev is x (items are
// independent: passes/plate_items.cpp). It computes what the kernel of the same name without
// `item_` computes at t = items[n], into out as that kernel lays it out (out[n], or
// out[k*stride+n]). One call covers a batch of items, vectorised across them, where the step
// layout takes a call per item whose draws share its observation.
typedef void (*ssm_item_kernel_fn)(const double* theta, const int64_t* items, int64_t begin,
                                   int64_t end, int64_t stride, const double* x, const double* y,
                                   const double* inputs, double* out);

typedef struct ssm_model {
  uint32_t abi_version;      // SSM_ABI_VERSION
  const char* metadata_json; // see docs/abi.md
  ssm_init_sample_fn init_sample;
  ssm_init_logpdf_fn init_logpdf;
  ssm_transition_sample_fn transition_sample;
  ssm_transition_logpdf_fn transition_logpdf;
  ssm_obs_logpdf_fn obs_logpdf;
  ssm_obs_sample_fn obs_sample;
  ssm_functional_terms_fn functional_terms;
  ssm_transition_log_bound_fn transition_log_bound; // may be null
  ssm_linear_gaussian_fn linear_gaussian;           // may be null
  ssm_gaussian_moments_fn gaussian_moments;         // may be null
  ssm_gaussian_jacobian_fn gaussian_jacobian;       // may be null
  ssm_proposal_sample_fn proposal_sample;           // may be null
  ssm_lookahead_fn lookahead;                       // may be null
  // The score terms, one per theta component (metadata "structure"."score"): the gradient of the
  // step's log-densities with respect to the parameters; may be null.
  ssm_functional_terms_fn score_terms;
  // The log prior density of the parameters that have a prior (metadata "structure"."prior"),
  // then its gradient per theta component: out[0], out[1 .. n_theta]; may be null.
  ssm_prior_logpdf_fn prior_logpdf;
  // The state gradient, one per state component (metadata "structure"."state_gradient"): the
  // gradient of the same step log-densities as score_terms with respect to x_t; may be null.
  ssm_functional_terms_fn state_gradient;
  // A plate model's guide (metadata "guide"): per item (t = the item, y its observations, x the
  // state with the network outputs the guide reads in their slots), the guide's arguments and
  // the entries of their Jacobian in those outputs that are not identically zero (metadata
  // "structure"."guide"."jacobian" says where each belongs); may be null.
  ssm_functional_terms_fn guide_args;
  // An SDE transition's terms at points x of its path (metadata "structure"."sde"), for the
  // unbiased estimators of its density: the drift (dim), its Jacobian in the path (dim x dim,
  // row-major), the diffusion coefficient (1, dim or dim x dim, as written) and dt; x_prev and y
  // unused; may be null.
  ssm_functional_terms_fn diffusion_terms;
  // A plate model's kernels in the item layout (ssm_item_kernel_fn), null for a model over time
  // or where the step layout's kernel is null: the latents' prior log p(x_n) (the transition
  // block), log p(y_n | x_n), and the state gradient, score terms and guide arguments as above.
  ssm_item_kernel_fn item_prior_logpdf;
  ssm_item_kernel_fn item_obs_logpdf;
  ssm_item_kernel_fn item_state_gradient;
  ssm_item_kernel_fn item_score_terms;
  ssm_item_kernel_fn item_guide_args;
  // A model over time's gradient of the same step log-densities as state_gradient in x_{t-1}
  // (0 at t = 0), present with state_gradient: with it, the gradient of log p(x_{0:T}, y_{0:T})
  // in every x_t (pathwise variational gradients through trajectories); null for a plate model.
  ssm_functional_terms_fn prev_state_gradient;
} ssm_model;

// Runs the generated executable's command line against a model table. Returns the exit code.
int ssm_main(const ssm_model* model, int argc, char** argv);

#ifdef __cplusplus
}
#endif
