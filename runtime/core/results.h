// The results inference methods return, whatever the method (particle or exact): the filtering
// moments (FilterResult) and the smoothing estimates (SmoothResult), and the layout of the
// statistics the smoothers accumulate into them. They live below smc, exact and smoothing so
// that every room can produce them without depending on another.
#pragma once

#include "core/csv.h"
#include "core/metadata.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ssm {

struct FilterResult {
  double log_likelihood = 0;
  int64_t T = 0, particles = 0, n_state = 0;
  int64_t resample_count = 0;
  double ess_min = 0;
  double elapsed_s = 0;
  // Per time step, after the update at t: filtering mean and variance of each state component
  // ([t * n_state + c]), ESS and log-likelihood increment (the last step only, at index 0, when
  // FilterOptions::history is off).
  std::vector<double> mean, var, ess, loglik_increment;
  std::vector<uint8_t> resampled; // whether resampling happened before propagating to t
  SeriesLayout series;            // several series, one after another (core/series.h)
  // Non-empty when log_likelihood is not an unbiased estimate of the likelihood: why.
  std::string likelihood_caveat;
};

// CSV `t,mean_<col>,var_<col>...,ess,loglik_increment`, one row per time step (no ess column for
// an exact filter, whose result has none).
std::string filter_csv(const ModelInfo& info, const FilterResult& result);

// A decoding: the most probable state path given all the data, [t * n_state + c], and its log
// joint density log p(x_0..x_{T-1}, y_0..y_{T-1}).
struct Decoding {
  std::vector<double> path;
  // log p(path, y): -inf when the path is impossible (posterior decoding can give one).
  double log_joint = 0, log_likelihood = 0;
  int64_t states = 0; // the size of the joint state space searched
  // Per t, the smoothing probability of the decoded state; empty when the method gives none.
  std::vector<double> probability;
  SeriesLayout series; // several series, one after another (core/series.h)
};

// A fit by `optimize` (maximum likelihood, or the posterior mode with --map): the parameters
// found, the path that led there and the verdict.
struct Optimum {
  std::vector<double> theta; // the whole parameter vector at the optimum (fixed ones too)
  double log_likelihood = 0;
  bool map = false;     // the objective is the log-likelihood plus the log prior density
  double objective = 0; // at theta
  bool converged = false;
  std::string message; // why it stopped
  int64_t iterations = 0, evaluations = 0;
  // The Monte Carlo standard error of log_likelihood when a particle filter estimated it (adam);
  // 0 when exact.
  double log_likelihood_se = 0;
  double gradient_norm = 0; // of the objective in the unconstrained coordinates
  // Per theta component: the standard error of a learned one from the observed information at
  // theta (exact methods only; NaN for the others); empty when not computed or not positive
  // definite there.
  std::vector<double> standard_errors;
  std::vector<std::string> learned; // the parameters moved (the others were fixed)
  // EM: how its M-step updated each learned parameter, {name, "closed form: RELATIONS"} or
  // {name, "numerical (L-BFGS): WHY"}; empty for other methods.
  std::vector<std::pair<std::string, std::string>> m_steps;
  // EM: its E-step ("exact", or the particle smoother whose trajectories it took: "ffbsi",
  // "paris", "bis"), and for an SDE transition the density estimates per pair in Q (else 0).
  std::string e_step;
  int64_t sde_estimates = 0;
  struct Start {
    double initial_objective = 0, objective = 0, log_likelihood = 0;
    bool converged = false;
  };
  std::vector<Start> starts; // --inits: each start's outcome; theta is the best one's
  struct Evaluation {        // one evaluation of the objective, in order, all starts
    int64_t start = 0;
    double log_likelihood = 0, gradient_norm = 0;
    std::vector<double> theta;
    double objective = 0;
  };
  std::vector<Evaluation> path;
};

// Posterior draws (`sample`): per chain, the parameters (whole theta) and Stan's lp__ and
// accept_stat__ of each kept draw, with how the likelihood was computed.
struct Posterior {
  struct Chain {
    std::vector<std::vector<double>> theta; // per draw after warmup, n_theta values
    std::vector<double> lp, accept_stat;    // log target on the unconstrained scale (gibbs: the log
                                            // posterior, no Jacobian); min(1, ratio)
    double acceptance_rate = 0;             // after warmup
    std::vector<std::vector<double>> imputed; // per draw, as imputed_names (gibbs)
  };
  std::vector<Chain> chains;
  std::vector<std::string> learned; // the parameters sampled (the others were fixed)
  // Gibbs: the values drawn with the parameters besides them (the latent variables of items the
  // data does not give, missing observations), named as Stan names generated quantities
  // (`x.52`: item 52, 1-based; `z.3.2`: component 2 of item 3's vector z).
  std::vector<std::string> imputed_names;
  std::string likelihood; // the filter: "kalman", "bootstrap", ...
  bool exact_likelihood = false;
  int64_t particles = 0;         // of a particle filter
  double pilot_loglik_sd = 0;    // at the start, with `particles` (0: exact)
  bool particles_chosen = false; // by the pilot rather than --particles
  int64_t warmup = 0, iterations = 0;
  std::vector<std::string> warnings;
  // SMC^2: the log evidence log p(y) over the independent runs (the chains) and its standard
  // error, and the method's own diagnostics.
  std::optional<double> log_evidence, log_evidence_se;
  nlohmann::json details;
};

// Recursive maximum likelihood (`rml`): one pass over the observations as a stream, the
// parameters moved after each one by a step along its score increment (runtime/learning/rml.h).
struct RecursiveFit {
  std::vector<double> theta;        // the whole parameter vector after the last observation
  std::vector<double> averaged;     // its Polyak average from `average_from` on (the estimate)
  std::vector<std::string> learned; // the parameters moved (the others were fixed)
  std::string smoother, filter;     // what estimated the score increments
  int64_t particles = 0, backward_samples = 0;
  int64_t observations = 0;  // steps taken, all series
  int64_t average_from = 0;  // the first observation (1-based) in the average
  int64_t averaged_over = 0; // observations in it (0: `averaged` is the last iterate)
  int64_t clipped = 0;       // steps whose move was clipped
  // sum_k log p(y_k | y_{0:k-1}) as the filter estimated it under the moving parameters (a
  // prequential log-likelihood: each observation predicted by the parameters learned before it).
  double log_likelihood = 0;
  double elapsed_s = 0, filter_s = 0;
};

// The parameters after observation k (1-based, over all series), for rml's --out: the series and
// step t within it, the step size used, and theta (n_theta values).
using ParameterTrace =
    std::function<void(int64_t k, int64_t series, int64_t t, double step, const double* theta)>;

// Variational inference of the parameters (`vi` on a state-space model with an exact likelihood,
// or on a plate model with --param-guide): a density q(u) fitted to the posterior of the learned
// parameters on their unconstrained space (runtime/vi/parameter_vi.h), and draws from it, as
// CmdStan's `variational` gives them.
struct ParameterVariationalFit {
  std::string family;                   // what q is: "dif(K = 8, hidden = [64]) over normal"
  int64_t family_parameters = 0;        // q's trained weights
  std::vector<std::string> learned;     // the parameters q is over (the others fixed)
  std::vector<std::string> coordinates; // q's coordinates: the unconstrained parameters
  std::string likelihood; // the exact smoother behind the likelihood (rts, ...), or its estimate
  // A plate model's (--param-guide): its items' guides, "linear" (q(z_n | θ)) or "independent".
  std::string item_guide;
  // ELBO = E_q[log p(y, θ(u)) |J(u)| - log q(u)] = log p(y) - KL(q || posterior), on
  // eval_samples fresh base draws (Rao-Blackwellised over a mixture's or a DIF's components).
  double elbo = 0, elbo_se = 0;
  int64_t eval_samples = 0;
  // The draws: the whole parameter vector per draw (n_theta values), and log p(y, θ) |J| and
  // log q at each, as CmdStan's log_p__ and log_g__; mean_theta the parameters at the mean of
  // the unconstrained draws (CmdStan's first row).
  std::vector<std::vector<double>> theta;
  std::vector<double> log_p, log_q;
  std::vector<double> mean_theta;
  struct TracePoint {
    int64_t iteration = 0;
    double elbo = 0; // the training objective, averaged since the last point
  };
  std::vector<TracePoint> trace;
  int64_t iterations = 0;
  double train_seconds = 0;
  std::string guide_state; // q as `ssmc density` saves a density (--save-guide)
  std::vector<std::string> warnings;
};

// A variational fit (`vi`): the model's parameters after training and, per item, the bounds on
// log p(x_n) that the trained guide gives, with the guide's moments (runtime/vi).
struct VariationalFit {
  std::vector<double> theta;        // the whole parameter vector after training
  std::vector<std::string> learned; // the parameters trained with the guide (the others fixed)
  struct Estimator {                // the gradient estimator of one latent variable, and why
    std::string latent, estimator, why;
  };
  std::vector<Estimator> estimators;
  // Per item: the ELBO, its KL term KL(q(z | x_n) || p(z)) and the IWAE bound with `samples`
  // draws (each a Monte Carlo estimate, exact where the latents are enumerated), and the guide's
  // moments (`guide_columns`: a mean and an sd per continuous component, a probability per value
  // of a discrete one).
  struct Bounds {
    int64_t samples = 0;
    std::vector<double> elbo, kl, iwae;
    std::vector<double> elbo_se, iwae_se; // their Monte Carlo standard errors
    std::vector<std::string> guide_columns;
    std::vector<std::vector<double>> guide; // [item][column]
  };
  Bounds train;
  // --test: the held-out items' bounds, theta kept (their own guides fitted, or the amortized
  // guide's encoder applied to them).
  std::optional<Bounds> test;
  struct TracePoint {
    int64_t iteration = 0;
    double objective = 0; // the training objective per item, averaged since the last point
  };
  std::vector<TracePoint> trace;
  int64_t iterations = 0;
  double train_seconds = 0; // the training loop's wall time
  std::string guide_state;  // an amortized guide's encoder or a model's dif guides (--save-guide)
  // The model's networks (`net` declarations) by name, as bytes for --save-nets: after a failure,
  // those of the last finite iteration.
  std::string nets_state;
  std::string objective;             // elbo | iwae
  int64_t samples = 0;               // of the training objective
  std::vector<std::string> warnings; // of the training (a DIF's component collapsing)
  // The model's networks (`net`) and their numbers of weights, in declaration order.
  std::vector<std::pair<std::string, int64_t>> network_weights;
  // The gumbel estimator's relaxation temperature at the last iteration (its annealing's end).
  double temperature = NAN;
  // Not empty when training stopped at a non-finite objective: the message naming the iteration;
  // theta then holds the parameters of the last finite one, and the bounds are empty.
  std::string failure;
  // Not empty when fitting the held-out items' guides failed (the training's results stand).
  std::string test_failure;
  // --param-guide: q over the learned parameters, fitted jointly with the items' guides; its
  // draws' log_p is an estimate of log p(x, θ) |J| (each item's IWAE weight with `samples`
  // draws), and theta above is the parameters at q's mean.
  std::optional<ParameterVariationalFit> parameters;
};

// The smoothing methods; their names and applicability are registered by smoothing/methods.cpp
// (variational by vsmooth/methods.cpp).
enum class SmoothMethod {
  Rts,             // Kalman filter + Rauch-Tung-Striebel (linear-Gaussian models, exact)
  ForwardBackward, // finite-state models, exact
  Genealogy,       // the filter's surviving paths ("poor man's" smoother)
  FixedLag,        // each term estimated `lag` steps later through the genealogy
  Ffbsm,           // marginal forward-filtering backward-smoothing, O(N^2) per step
  Ffbsi,           // backward simulation of M trajectories
  Online,          // forward-only O(N^2) additive smoothing (Del Moral, Doucet & Singh)
  Paris,           // PaRIS (Olsson & Westerborn 2017)
  Bis,             // backward importance sampling (Martin, Le Corff et al. 2022)
  Variational,     // a fitted backward Gaussian guide (Chagneux 2023, ch. 4; vsmooth/)
};

// One functional's estimate: `total` (its components) for a `sum_t` functional, `per_t`
// ([t * size + k]) for a quantity at each t; `se`, when the method gives one, is the Monte Carlo
// standard error of `total` (empty otherwise).
struct FunctionalEstimate {
  std::string name;
  bool sum = false;
  int64_t size = 1;
  std::vector<double> total, per_t, se;
};

struct SmoothResult {
  SmoothMethod method = SmoothMethod::Ffbsm;
  int64_t T = 0, n_state = 0, particles = 0;
  double log_likelihood = 0; // of the filter the method ran (exact for rts / forward-backward)
  bool has_marginals = false;
  // E[x_t | y_{0:T-1}] and Var[x_t | y_{0:T-1}] per component: [t * n_state + c].
  std::vector<double> mean, var;
  // rts only: Cov[x_t, x_{t-1} | y] as n_state x n_state row-major blocks per t (t >= 1; block 0
  // is zero).
  std::vector<double> lag_one_cov;
  std::vector<FunctionalEstimate> functionals;
  double filter_s = 0, smooth_s = 0; // wall time of the forward pass and of the rest
  nlohmann::json details;            // method-specific diagnostics (acceptance rates, ...)
  SeriesLayout series;               // several series, one after another (core/series.h)
};

// The frame of every time step (inputs and previous observation filled in), for methods that
// revisit past steps. n_frame * T doubles.
std::vector<double> all_frames(const ModelInfo& info, const std::vector<double>& fixed,
                               const ObsData& data);

// Empty result with the model's functionals listed and sized (totals zero, per_t zero when
// marginals are computed).
SmoothResult make_result(const ModelInfo& info, SmoothMethod method, int64_t T, int64_t particles,
                         bool marginals);

// The statistics a smoother carries per particle, laid out as components: first the `sum_t`
// functionals' components (`nsum`), then, with marginals, `per_step` components per time step:
// the state (ns), its square (ns) and the per-t functionals' components. Functional components
// are picked out of the functional_terms kernel's output by sum_comp and per_t_comp.
struct StatLayout {
  int64_t ns = 0, nf = 0, nsum = 0, per_step = 0;
  bool marginals = false;
  std::vector<int64_t> sum_comp, per_t_comp;
  StatLayout(const ModelInfo& info, bool marginals);
  // Writes the per-step quantities of particle n (state x, SoA with `stride`; the functional terms
  // of its pair at `term_index` in `terms`, SoA with `term_stride`) to out[k * out_stride].
  void step_quantities(const double* x, int64_t n, int64_t stride, const double* terms,
                       int64_t term_index, int64_t term_stride, double* out,
                       int64_t out_stride) const;
  // The state and its square (the first 2 ns per-step quantities) of particle n, to out[0, 2 ns).
  void state_quantities(const double* x, int64_t n, int64_t stride, double* out) const {
    if (!marginals)
      return;
    for (int64_t c = 0; c < ns; ++c) {
      out[c] = x[c * stride + n];
      out[ns + c] = out[c] * out[c];
    }
  }
  // From the expectation `q` of one step's quantities: mean, variance and per-t functionals at t.
  void store_estimates(int64_t t, const double* q, SmoothResult& r, const ModelInfo& info) const;
  // From the expectation of the `sum_t` components: the functionals' totals.
  void store_sums(const double* s, SmoothResult& r, const ModelInfo& info) const;
};

// Throws a clear error when a particle of positive weight has a non-finite functional term (the
// usual cause: a term reading x[t-1] at t = 0).
void check_terms(const double* terms, int64_t nf, int64_t stride, const double* w, int64_t begin,
                 int64_t end, int64_t t, const ModelInfo& info);

} // namespace ssm
