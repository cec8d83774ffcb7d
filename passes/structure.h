// Results of the structure analyses (linear-gaussian, finite-state, density), kept in the
// PassContext next to the Markov structure. They say which exact or specialised algorithms a model
// admits (Kalman filter, forward-backward, rejection-based backward sampling) and, when it does
// not, why, in the user's terms. Symbolic results (matrices, density bounds) are IR expressions
// held in arena blocks of their own, outside the model: an analysis never changes the IR.
#pragma once

#include "ir/ir.h"

#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ssm::passes {

// Why an analysis answered no: which relation, which variable at which lag, where.
struct StructureReason {
  ir::BlockKind block = ir::BlockKind::Transition;
  std::string relation; // its target: "x[t]"
  std::string dist;     // "normal"
  std::string variable; // the variable at fault, "x"; empty when none is
  int lag = -1;         // of that variable: 0 for x[t], 1 for x[t-1]; -1 when none
  std::string message;  // "the mean is not affine in x[t-1]: exp(x[t-1])"
  ir::SourceLoc loc;
  std::string str() const; // "transition x[t] ~ normal: the mean ... (at 12:17)"
};

// A symbolic vector or matrix: node `node` of an arena block, in the model's own names.
struct SymbolicValue {
  std::string name; // "F"
  ir::BlockKind block = ir::BlockKind::Transition;
  int node = -1;
  ir::Shape shape;
  std::string text;                         // "A", "[[a]]", "sigma^2 * eye(3)"
  std::optional<std::vector<double>> value; // row-major, when it reads no parameter, t or data
};

// linear-gaussian: x[0] ~ N(m0, P0); x[t] = F x[t-1] + c + N(0, Q); y[t] = H x[t] + d + N(0, R),
// with x every state stacked in declaration order (the runtime's layout, Model::state_offset) and
// y every observation likewise. The matrices may depend on parameters, on t (time_varying) and,
// once the language has them, on inputs and past observations, never on a state.
struct LinearGaussian {
  bool is_linear_gaussian = false;
  bool time_varying = false; // some matrix reads t, past observations or inputs
  std::vector<std::string> state_names, obs_names;
  // Arenas of the matrices' expressions, one per model block (each prints with its time indices).
  ir::Block initial{ir::BlockKind::Initial, {}, {}, {}};
  ir::Block transition{ir::BlockKind::Transition, {}, {}, {}};
  ir::Block observation{ir::BlockKind::Observation, {}, {}, {}};
  // m0, P0, F, c, Q, H, d, R in that order; empty unless the model is linear-Gaussian.
  std::vector<SymbolicValue> matrices;
  std::vector<std::string> notes;       // decisions worth knowing, e.g. an observation with H = 0
  std::vector<StructureReason> reasons; // the first failure of each relation that fails

  const ir::Block& arena(ir::BlockKind kind) const;
  const SymbolicValue* find(std::string_view name) const; // nullptr unless linear-Gaussian
  std::string summary() const;                            // one line
  std::string report() const;                             // the summary line, then the details
};

// finite-state: every state takes finitely many values; the state space is their product.
struct StateSupport {
  std::string name;
  int components = 1;
  bool finite = false;
  double lo = 0, hi = 0; // the values of one component: the integers lo..hi, when finite
  std::string reason;    // when not finite: "state x is real-valued (normal at 12:3)"
  ir::SourceLoc loc;
  // When finite by its declared int[lo..hi]: a relation that can take values outside the range,
  // "z[t] ~ poisson at 7:3 can take values outside it"; empty when none can.
  std::string leaves;
};

struct FiniteState {
  bool is_finite = false;
  double size = 0; // joint values of the whole state, when finite
  std::vector<StateSupport> states;
  std::vector<StructureReason> reasons;
  std::string summary() const;
  std::string report() const;
};

// density: per transition relation, whether its log-density can be evaluated and an upper bound of
// the density over its target given everything else (the value at the mode): what rejection-based
// backward sampling needs.
enum class DensityKind {
  Tractable,  // a distribution with a density the kernels evaluate
  SampleOnly, // a deterministic transform of noise or a simulator: sampling only
};

struct DensityBound {
  int node = -1; // in TransitionDensity::arena
  std::string text;
  bool exact = true;                   // the supremum itself, not only an upper bound of it
  std::string condition;               // when it holds for some parameter values only: "alpha >= 1"
  std::vector<std::string> depends_on; // states it reads ("x[t-1]"); empty: constant in the state
  bool reads_next_state = false;       // reads a state at t: then not a bound over the next state
  bool constant_in_state() const { return depends_on.empty(); }
};

struct RelationDensity {
  std::string relation; // "x[t]"
  std::string dist;
  ir::SourceLoc loc;
  DensityKind kind = DensityKind::Tractable;
  std::string sample_only_reason;
  std::optional<DensityBound> bound;
  std::string no_bound_reason; // when bound is empty
};

struct TransitionDensity {
  ir::Block arena{ir::BlockKind::Transition, {}, {}, {}};
  std::vector<RelationDensity> relations;
  bool tractable = true;             // every relation has a log-density
  std::optional<DensityBound> bound; // of the whole transition: the product over relations
  std::string no_bound_reason;
  std::string summary() const;
  std::string report() const;
};

// sde-estimators: for a transition that is an SDE, x[t] ~ diffusion(...), what the unbiased
// estimators of its transition density evaluate (the kernel ssm_diffusion_terms: at a point x of
// the path, the drift, its Jacobian in the path, the diffusion coefficient and dt), and which
// estimators apply, with the reasons for those that do not.
enum class SdeCoefficient { Scalar, Vector, Matrix }; // the diffusion's shape, as written

struct SdeEstimators {
  ir::Block arena{ir::BlockKind::Transition, {}, {}, {}};
  std::string relation; // "x[t]"
  ir::SourceLoc loc;
  int state = -1; // the model's state the SDE moves
  int dim = 0;    // its components
  int steps = 0;  // Euler-Maruyama substeps of the sampler
  SdeCoefficient coefficient = SdeCoefficient::Scalar;
  bool coefficient_constant = false; // the diffusion coefficient does not read the path
  // Arena nodes, evaluated at the path's value x (the state at lag 0): drift (dim), Jacobian
  // d drift_i / d x_j (dim * dim, row-major), diffusion (1, dim or dim * dim), dt (1), the
  // bounds of psi (2) and of the drift (2) below, then the gradient rows, then the parametrix
  // rows.
  std::vector<int> outputs;
  std::string why_not; // no estimator can run (then no kernel): the model outside their scope
  // The General Poisson estimator: a scalar SDE whose psi is bounded below. With a coefficient
  // sigma that does not read the path, the Lamperti transform is a scaling u = x / sigma and
  // psi(u) = (a(u)^2 + a'(u)) / 2, a(u) = drift(sigma u) / sigma, whose bounds over the real line
  // come by interval arithmetic, as arena expressions of the parameters (and t, data, inputs):
  // constants -inf / inf where unbounded. With one that reads the path, the runtime works in
  // Lamperti's coordinate numerically, and psi's bounds are the model's alone.
  std::string gpe_why_not;
  int psi_lower = -1, psi_upper = -1;
  // The drift's bounds over the real line (constants -inf / inf where unbounded): with psi's,
  // a bound of the estimates, for rejection sampling from the backward kernel.
  int drift_lower = -1, drift_upper = -1;
  std::string psi_lower_text, psi_upper_text;
  // The model gave psi_lower, resp. psi_upper (the bounds above are then the tighter of the
  // model's and the compiler's): the runtime checks psi against them where it evaluates it.
  bool psi_lower_given = false, psi_upper_given = false;
  std::string psi_given_note() const; // " (... from the model, ...)" or empty
  // The parametrix estimator (Andersson & Kohatsu-Higa 2017; Fearnhead, Latuszynski, Roberts &
  // Sermaidis 2017): any SDE in scope. Its rows, last in `outputs`: sum_i d gamma_il / dx_i for
  // each l, then sum_il d^2 gamma_il / dx_i dx_l, gamma = sigma sigma^T (parametrix_rows = dim +
  // 1); else the reason.
  std::string parametrix_why_not;
  int parametrix_rows = 0;
  // The estimators of d/dtheta log q, for the score of a model whose transition is the SDE (the
  // General Poisson one's exact bridges, Martin 2022, appendix C.1, Proposition 2, or the
  // derivative of either estimate itself): with the coefficient and dt free of the parameters,
  // `outputs` end with d drift_i / d theta_k (row i K + k, K the theta size), then
  // d (div drift) / d theta_k (gradient_rows = (dim + 1) K); else the reason. A scalar
  // coefficient s(theta) that does not read the path adds d s / d theta_k and drift''
  // (coefficient_gradient_rows = K + 1, before the parametrix rows), for the General Poisson
  // estimate's derivative only (no exact bridges, no parametrix gradient).
  std::string gradient_why_not;
  int gradient_rows = 0, coefficient_gradient_rows = 0;
  // Whether the compiler found psi bounded above: the General Poisson estimates are then positive
  // by construction (no Wald's identity), which the random-weight filter needs for an unbiased
  // likelihood.
  bool psi_bounded_above() const;
  // ... and both bounds the compiler's: the gradient's exact bridges (EA1) need psi within them
  // along the whole path, which the runtime checks only where it evaluates psi, so a bound the
  // model gives is not relied on there.
  bool exact_bridges() const;
  // ... and the drift bounded too: the estimates have a bound (psi's and the drift's), which
  // paris's rejection sampling from the backward kernel needs.
  bool estimates_bounded() const;
  std::string summary() const;
  std::string report() const;
};

// Why a model whose score terms leave out its SDE's term has no score: the estimator of that
// term does not apply (sde-estimators' gradient); then the score terms are cleared, so that no
// kernel without that term is emitted. Empty when it applies or nothing is left out.
struct Derivatives;
std::string settle_sde_score(Derivatives& derivatives, const std::optional<SdeEstimators>& sde);

// derivatives: for each initial, transition and observation relation, the Jacobian of its location
// (the mean of a normal or mvnormal, the location of lognormal, student_t, laplace, cauchy) with
// respect to the state it conditions on (x[t-1], resp. x[t]), and the gradient of its
// log-density with respect to that state and to the parameters; arena nodes, -1 for zero.
struct RelationDerivatives {
  ir::BlockKind block = ir::BlockKind::Transition;
  std::string relation;               // "x[t] ~ normal"
  std::vector<int> location_jacobian; // target size x n_state, row-major; empty: no location
  int log_density = -1;               // the log-density itself
  std::vector<int> grad_state;        // n_state
  std::vector<int> grad_params;       // theta size (Model::param_offset)
  std::string why_not;                // when there is no log-density formula
};
// The largest score terms and state gradients compiled: element-by-element code past this size
// costs LLVM more time than the kernel is worth (the 10-D linear-Gaussian example's score terms
// were 44,000 operations, 8 s more to build, through forward mode in mvnormal's factorisation;
// through its closed-form gradient they are under this limit, about 0.7 s of LLVM's time).
inline constexpr int64_t kMaxScoreOperations = 5000;
// Forward mode derives the score one parameter component at a time, so its cost is the
// components times the log-densities' size: past this many steps (Differentiator::work) the
// analysis stops deriving and the model has no score terms. Measured on the examples: 6,700
// steps at most for a score that is compiled through forward mode; the 10-D linear-Gaussian
// example's took 10^6 through mvnormal's factorisation, and now goes through its closed-form
// gradient (15 ms), which counts the nodes it builds and a tenth of the arguments' forward steps
// (derivatives.cpp); a 40 x 30 matrix parameter's, 10^8 and ten seconds.
inline constexpr int64_t kMaxScoreDerivationWork = 100 * kMaxScoreOperations;

// The score terms: per theta component, the arena node of d/dtheta of log p(x[0]) + log p(y[0] |
// x[0]) at t = 0, of log p(x[t] | x[t-1]) + log p(y[t] | x[t]) after (a missing observation adds
// 0), whose smoothed sum over t is the score by Fisher's identity; -1 for zero. Empty with
// `score_why_not` when a relation has no log-density formula, or a deterministic one reads a
// parameter.
struct Derivatives {
  ir::Block arena{ir::BlockKind::Transition, {}, {}, {}};
  std::vector<RelationDerivatives> relations; // initial, transition, then observation
  std::vector<int> score_terms;
  std::string score_why_not;
  // The score terms leave out an SDE transition's term, d/dtheta log q, which has no closed
  // form: the runtime adds unbiased estimates of it (sde-estimators' gradient rows).
  bool score_lacks_sde_term = false;
  // The log prior density of the parameters that have one (0 for none) and then its gradient
  // per theta component (-1 for zero); empty with `prior_why_not` when a prior has no formula.
  std::vector<int> prior_terms;
  std::string prior_why_not;
  // The state gradient: per state component, the arena node of d/dx[t] of the same step
  // log-densities as the score terms (-1 for zero): what gradient-based proposals and
  // reparameterised variational objectives need. Empty with `state_gradient_why_not` when a
  // relation has no log-density formula or is deterministic (a dirac has no density in x[t]).
  std::vector<int> state_gradient;
  std::string state_gradient_why_not;
  // A model over time's gradient of the same step log-densities in x[t-1] (0 at t = 0), beside
  // the state gradient and present with it: with it, the gradient of log p(x_{0:T}, y_{0:T}) in
  // every x[t], which pathwise gradients through trajectories need. Empty for a plate model.
  std::vector<int> prev_state_gradient;
  // A plate model's guide (its `guide` relations, in order): the scalar components of every
  // argument of every relation, row-major, then the entries of their Jacobian with respect to
  // the components of the network outputs the guide reads that are not identically zero, at
  // (argument component, input) `guide_jacobian`: what `vi` evaluates per item, and
  // differentiates the guide's networks through. Empty when the model has no guide.
  std::vector<int> guide_arguments;
  std::vector<std::pair<int, int>> guide_jacobian;
  // (state, component) of the hidden states (network outputs), read at lag 0
  std::vector<std::pair<int, int>> guide_inputs;
  // The arena operations that `outputs` read (what their kernel computes per particle).
  int64_t size(const std::vector<int>& outputs) const;
  // The arena operations the score terms read (what their kernel computes per particle).
  int64_t score_size() const;
};

// additive-functionals: per `functional`, whether it is additive over time (a sum_t of terms in
// x[t-1], x[t], y[t]) and so can be smoothed online, and which smoothers apply.
struct FunctionalStructure {
  std::string name;
  bool declared_sum = false; // written `sum_t ...`
  bool additive = false;
  int max_state_lag = 0;          // the largest lag of a state its term reads
  std::vector<std::string> reads; // "x[t-1]", "x[t]", "y[t]", "u[t]"
  std::string why_not;            // when not additive
  std::vector<std::string> methods;
  std::string methods_note; // why smoothers are missing from `methods` beyond additivity
  ir::SourceLoc loc;
};
struct AdditiveFunctionals {
  std::vector<FunctionalStructure> functionals;
  std::string summary() const;
  std::string report() const;
};

// em-m-steps: the relations whose parameters EM's M-step updates in closed form, from expected
// sufficient statistics, and for each parameter whether it is one of them and why not. A piece
// is read by the runtime (runtime/learning/closed_form.h) at the E-step's weighted points: the
// state at t and t-1, the observation and the inputs at t, so every quantity it needs is a
// `ReadSum` of them.
struct PointRead {
  bool obs = false;   // an observation component (at t)
  int offset = 0;     // the component: Model::state_offset / obs_offset / the input's position
                      // among the inputs, plus its position
  int lag = 0;        // states: 0 for x[t], 1 for x[t-1]
  bool input = false; // an input component (at t: a covariate); neither: a state component
  bool operator==(const PointRead&) const = default;
};
// constant + sum of coefficient * read.
struct ReadSum {
  double constant = 0;
  std::vector<std::pair<double, PointRead>> terms;
};
// A parameter's theta components as a piece uses them: one (shared by every value of the
// piece's group read) or one per group (`mu[z[t]]`: mu's component g where z[t] = g).
using ThetaSlots = std::vector<int>;

struct ConjugatePiece {
  enum class Family {
    Categorical, // target ~ categorical(p), p a vector parameter or a row P[g]: counts
    Poisson,     // target ~ poisson(exposure * rate): rate = sum w y / sum w exposure
    Bernoulli,   // target ~ bernoulli(p): p = sum w y / sum w
    Normal,      // target ~ normal(offset + sum_j beta_j feature_j, noise): least squares
    MvNormal,    // target ~ mvnormal(offset + M features, Sigma): multivariate least squares
  };
  enum class Noise { Constant, Sd, Variance, Cov };
  Family family = Family::Normal;
  ir::BlockKind block = ir::BlockKind::Transition;
  std::string relation; // "z[t] ~ categorical"
  ir::SourceLoc loc;
  std::vector<PointRead> target;  // one read per component
  std::optional<PointRead> group; // the integer read that indexes per-group slots
  int groups = 1;
  // categorical: per group (or one), the K theta components of the probabilities
  std::vector<ThetaSlots> probabilities;
  // poisson, bernoulli: the rate or probability, and (poisson) the exposure it multiplies
  ThetaSlots rate;
  ReadSum exposure;
  // normal, mvnormal: the part of the mean without parameters, per target component; normal:
  // the coefficients beta_j and their features; mvnormal: the features f and, per target
  // component i, the theta component of each feature's coefficient: mean_i = offset_i +
  // sum_j theta[matrix[i][j]] f_j (`A * x[t-1] + b`: the features x[t-1] and 1).
  std::vector<ReadSum> offset;
  struct Coefficient {
    ThetaSlots theta;
    ReadSum feature;
  };
  std::vector<Coefficient> coefficients;
  std::vector<ThetaSlots> matrix;
  std::vector<ReadSum> features;
  Noise noise = Noise::Constant;
  ThetaSlots noise_theta;  // sd, variance (per group or one), or the cov matrix's first component
  double noise_value = 0;  // Constant: the sd
  std::vector<int> params; // the model parameters it reads
};

struct EmSteps {
  std::vector<ConjugatePiece> pieces;
  struct Verdict {
    std::string param;
    bool closed_form = false;
    std::vector<int> pieces;    // the pieces that read it (closed form: all of them are)
    std::string reason;         // when not
    bool read_by_prior = false; // another parameter's prior reads it (then, with --map, the
                                // prior enters its M-step)
  };
  std::vector<Verdict> params; // one per model parameter, in declaration order
  // The observation components that relations read at t besides their own target (`y2[t] ~
  // normal(2 * y1[t], 1)`): where one is missing, EM's points do not hold its posterior.
  std::vector<int> observations_read;
  // Why EM does not apply to the model at all, whatever its M-steps: a model that is neither
  // linear-Gaussian nor finite-state has FFBSi's E-step, which evaluates the transition density,
  // and a sample-only transition other than an SDE's lacks one. Empty when it applies.
  std::string unavailable;
  // An SDE transition ("x[t]"), whose density EM estimates (the runtime checks that an
  // estimator and its gradient apply); empty otherwise.
  std::string sde_relation;
  std::string summary() const;
  std::string report() const;
};

} // namespace ssm::passes
