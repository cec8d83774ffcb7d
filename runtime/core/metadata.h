// The model description carried by ssm_model::metadata_json, parsed once into plain structs, and
// the CSV column names derived from variable shapes (`x`, `x[0]`, `A[0,1]`).
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ssm {

// A state or observation variable: components [offset, offset + size) of the state (or
// observation) vector.
struct VarInfo {
  std::string name;
  std::vector<int64_t> shape; // [] scalar, [n] vector, [r, c] matrix (row-major)
  int64_t offset = 0;
  int64_t size = 1;
  bool joint = false; // observations only: components are jointly distributed (e.g. mvnormal)
  // Integer-valued variables (`int`, `int[lo..hi]`): the bounds of each component, infinite for
  // an open side.
  bool integer = false;
  double lower = -INFINITY, upper = INFINITY;
  // Data only: the declared type, real | vector | matrix | int | simplex | cov_matrix (empty in
  // metadata that does not give it). A real(lo, hi) data item has lower and upper, not integer.
  std::string type;
  // States only: a copy the compiler added to carry x[t-k], k >= 2 (named `x@lagK`); after the
  // model's own states, and never shown.
  bool hidden = false;
  // A plate model's observations only: a sequence of tokens in [lower, upper] (`sequence[V]`),
  // one per row of its item (the rows a `series` column groups: core/sequence_items.h); its one
  // slot holds the sequence's length, and networks read the tokens.
  bool sequence = false;
};

// A `functional` of the model: components [offset, offset + size) of the functional_terms
// kernel's output. `sum` is a `sum_t` functional (one value for the whole series); otherwise it is
// a quantity at each t. `additive` is the compiler's verdict that the term reads at most x[t-1],
// x[t], y[t] and inputs (online smoothers can carry it); `why_not` and `methods` say why not and
// which smoothers can estimate it.
struct FunctionalInfo {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0, size = 1;
  bool sum = false, additive = false;
  std::string why_not;
  std::vector<std::string> methods;
};

struct ParamInfo {
  std::string name;
  std::string type; // real | vector | matrix | cov_matrix | simplex (and int, for data)
  std::vector<int64_t> shape;
  int64_t offset = 0; // into theta
  int64_t size = 1;
  std::optional<std::vector<double>> default_value; // flat, row-major
  std::optional<double> lower, upper;               // support of the prior
  std::string prior;                                // source text, may be empty
};

// A `net` declaration (a multilayer perceptron), and a call of it: the runtime applies network
// `net` to the arguments (gathered in order from the state, or from the frame for parameters and
// data) and writes the output into state components [offset, offset + size) before it runs a
// kernel (the compiler's passes/net_outputs.cpp).
struct NetInfo {
  std::string name, kind = "mlp";
  int64_t inputs = 0, outputs = 0;
  std::vector<int64_t> hidden;
  std::string activation;
  // A density (dif, maf, realnvp): over vector[dim], given inputs - dim context values; its one
  // output is log p(target | context).
  int64_t dim = 0, components = 0, layers = 0;
  std::string maps = "affine"; // a dif's: affine, or maf or realnvp layers
  // A cascade: the density (an index into ModelInfo::nets) this one transports onto instead of
  // N(0, I); and the one whose base this is, of which it is then a part, with no weights of its
  // own. -1: none.
  int64_t base = -1, base_of = -1;
  // rnn (an encoder) and rnn_lm (a density, log p(sequence | context)) read a sequence of tokens
  // 0..vocab-1, their first input, then inputs - 1 context values: `layers` recurrent layers of
  // hidden[0] units of a `cell` (lstm or gru) over `embedding`-wide token vectors.
  int64_t vocab = 0, embedding = 0;
  std::string cell = "lstm";
  bool density() const { return kind == "dif" || kind == "maf" || kind == "realnvp"; }
  bool over_sequences() const { return kind == "rnn" || kind == "rnn_lm"; }
  // `embedding`: a learned vector of `outputs` values per token 0..vocab-1 (its one input).
};
// "mlp(inputs = 2, outputs = 3, hidden = [8], activation = tanh)" (`hidden = none` without a
// hidden layer), as the language writes the declaration.
std::string net_declaration(const NetInfo& net);
// The same with a cascade's bases (`base = maf(...)`), which `nets` holds.
std::string net_declaration(const NetInfo& net, const std::vector<NetInfo>& nets);
struct NetCallInfo {
  struct Argument {
    std::string kind; // state | param | data | obs (a guide's network: an offset into y) |
                      // input (a covariate: an offset into the item's inputs) | sequence (an
                      // observation's tokens; offset: its slot in y)
    std::string name;
    int64_t offset = 0, size = 0;
  };
  int64_t net = 0;
  std::string state;
  int64_t offset = 0, size = 0;
  std::vector<Argument> arguments;
  bool guide = false; // only the model's guide reads its output (the model's density does not)
  bool for_guide() const { return guide; }
};

// EM's closed-form M-steps (the compiler's em-m-steps analysis; docs/compiler.md): the pieces
// of the model whose parameters have a closed-form update, read at the E-step's weighted points
// (a state component at t or t-1, an observation component at t), and each parameter's verdict.
struct EmRead {
  bool obs = false;   // an observation component at t
  bool input = false; // else an input component at t (a covariate), else a state component
  int64_t offset = 0; // into the state, the observation or the input vector
  int lag = 0;        // states: 0 for x[t], 1 for x[t-1]
};
struct EmReadSum { // constant + sum of coefficient * read
  double constant = 0;
  std::vector<std::pair<double, EmRead>> terms;
};
struct EmPiece {
  std::string relation, block, family, noise; // family: categorical | poisson | bernoulli |
                                              // normal | mvnormal; noise: constant | sd |
                                              // variance | cov
  std::vector<EmRead> target;
  std::optional<EmRead> group; // an integer read that picks per-group theta slots
  int64_t groups = 1;
  std::vector<std::vector<int64_t>> probabilities; // categorical: per group, the K components
  std::vector<int64_t> rate;                       // poisson, bernoulli: per group (or one)
  EmReadSum exposure;                              // poisson: what the rate multiplies
  std::vector<EmReadSum> offset;                   // normal, mvnormal: per target component
  struct Coefficient {
    std::vector<int64_t> theta; // per group (or one)
    EmReadSum feature;
  };
  std::vector<Coefficient> coefficients;    // normal
  std::vector<std::vector<int64_t>> matrix; // mvnormal: per target, each feature's coefficient
  std::vector<EmReadSum> features;          // mvnormal
  std::vector<int64_t> noise_theta;         // sd / variance per group (or one); cov: its first
  double noise_value = 0;                   // constant: the sd (0 in older metadata)
};
struct EmStepsInfo {
  struct Verdict {
    std::string name;
    bool closed_form = false;
    std::vector<int64_t> pieces;
    std::string reason;         // when not closed-form
    bool read_by_prior = false; // another parameter's prior reads it
  };
  std::vector<EmPiece> pieces;
  std::vector<Verdict> params;            // empty when the metadata has no em_steps analysis
  std::vector<int64_t> observations_read; // components relations read besides their target
  const Verdict* find(std::string_view name) const;
};

// A plate model's guide (`guide z[n] ~ ...`): its relations, where each argument lies in the
// guide_args kernel's output (kernel/abi.h), and the network outputs the guide reads, whose
// components are the columns of the arguments' Jacobian that follows them.
struct GuideInfo {
  struct Relation {
    // normal, mvnormal_chol, dif, categorical, bernoulli, bernoulli_logit
    std::string latent, dist;
    int64_t offset = 0, size = 0;      // the latent's components in the state
    int64_t components = 0, width = 0; // dif: its maps, and its networks' hidden units
    int64_t layers = 0;                // dif: the MAF layers of each map (0: location-scale)
    struct Argument {
      int64_t offset = 0, size = 0;
    };
    std::vector<Argument> arguments;
  };
  struct Input {
    std::string state;
    int64_t offset = 0, size = 0;
  };
  struct Observation { // one the guide reads, directly or through its networks
    std::string name;
    int64_t offset = 0, size = 0;
  };
  std::vector<Relation> relations;
  std::vector<Input> inputs;
  std::vector<Observation> observations;
  int64_t n_arguments = 0, n_inputs = 0;
  // The Jacobian's entries the kernel writes after the arguments (the others are zero): the
  // (argument component, input component) of each; `why_not` when the kernel is missing.
  std::vector<std::pair<int64_t, int64_t>> jacobian;
  std::string why_not;
  bool empty() const { return relations.empty(); }
};

// A state-space model's guide (`guide x[t] ~ backward(...)`, smooth --method variational): the
// encoder of its backward Gaussian family, a network (`net`, an index into ModelInfo::nets) or
// linear, and the observations it reads, in order.
struct BackwardGuideInfo {
  std::string state, encoder; // encoder: "mlp" or "linear"
  int64_t net = -1;
  struct Observation {
    std::string name;
    int64_t offset = 0, size = 0; // in y
  };
  std::vector<Observation> observations;
  std::string where; // "file:line:col" of the guide statement
};

struct ModelInfo {
  std::string name, source;
  int64_t n_state = 0, n_obs = 0, n_theta = 0;
  std::vector<VarInfo> state, obs;
  // The frame kernels read as theta (docs/abi.md): [params | data | inputs(t) | y(t-1)].
  // Data and input offsets are relative to data_offset and input_offset.
  int64_t n_frame = 0, data_offset = 0, n_data = 0, input_offset = 0, n_inputs = 0;
  int64_t previous_obs_offset = 0;
  bool reads_previous_obs = false;
  std::vector<VarInfo> data, inputs;
  std::vector<ParamInfo> params;
  std::string structure; // the compiler's structure report, as text
  // The index of the steps: "t", or "n" for a plate model, whose steps are its items
  // (passes/plate_items.cpp); it heads the CSV outputs' first column.
  std::string step = "t";
  // A simulator (passes/simulator_draws.cpp): each simulation is one step whose state is its
  // parameters (the first `params` state variables) then its latent variables; `likelihood`: the
  // observation kernel's log-density is p(x | parameters), else why not.
  struct Simulation {
    int params = 0;
    bool likelihood = false;
    std::string no_likelihood_reason;
  };
  std::optional<Simulation> simulation;
  // Verdicts of the compiler's structure analyses (false when the metadata has none): the Kalman
  // filter, resp. the forward-backward algorithm, is exact for the model.
  bool linear_gaussian = false;
  bool finite_state = false;
  // density: whether the transition has a log-density the kernels evaluate (false: sample-only,
  // with the reason), and the text of an upper bound of it that is constant in the state (empty:
  // none, with the reason).
  bool transition_tractable = true;
  std::string sample_only_reason;
  std::string transition_bound, no_bound_reason;
  // An SDE transition (metadata "structure"."sde"): what its density estimators (sde/) evaluate
  // through the diffusion_terms kernel, and which of them apply, else why not.
  struct Sde {
    int state = -1, dim = 0, steps = 0;
    int coefficient_size = 1; // the diffusion coefficient as written: 1, dim or dim * dim
    bool coefficient_constant = false;
    std::string why_not;    // no estimator applies (and no kernel)
    std::string gpe_reason; // empty: the General Poisson estimator applies
    // The compiler bounded its psi above: its estimates are positive by construction (Wald's
    // identity is not needed), which the random-weight filter requires.
    bool gpe_positive = false;
    // ... and the drift bounded: the estimates have a bound (paris's rejection sampling).
    bool gpe_bounded = false;
    // The model gave psi_lower, resp. psi_upper (diffusion(..., psi_lower = ...)): a value of psi
    // outside them is the model's error, which the estimator reports as such.
    bool psi_lower_given = false, psi_upper_given = false;
    // The score's SDE term can be estimated with exact bridges (EA1): psi bounded above by the
    // compiler alone (the rejection step needs psi within its bounds along the whole path, which
    // the runtime checks only where it evaluates psi), and a constant coefficient. Else the
    // estimate's own derivative, weighed by bis. False for an older ssmc's metadata.
    bool exact_bridges = false;
    // The estimator of d/dtheta log q (the score's SDE term): empty reason when it applies; then
    // the diffusion_terms kernel has gradient_rows ((dim + 1) x theta size) more rows.
    std::string gradient_reason = "not described (a model built by an older ssmc)";
    int gradient_rows = 0;
    // A scalar coefficient s(theta) constant in the path: d s / d theta_k and drift'' (theta
    // size + 1 rows after the gradient rows), for the General Poisson estimate's derivative.
    int coefficient_gradient_rows = 0;
    // The parametrix estimator (any SDE in scope): empty reason when it applies; then the kernel
    // has parametrix_rows (dim + 1) more rows, after the gradient rows.
    std::string parametrix_reason = "not described (a model built by an older ssmc)";
    int parametrix_rows = 0;
    // The estimator a run uses, "gpe" or "parametrix": the General Poisson estimator where it
    // applies, else the parametrix one, unless --estimator chose; empty when none applies.
    std::string estimator;
    std::string relation; // "x[t]"
  };
  std::optional<Sde> sde;
  // Why the model has no gaussian_moments kernel (the unscented Kalman filter needs it).
  std::string not_gaussian_reason;
  // Why the model has no score_terms kernel (a relation without a log-density formula); empty
  // when it has one (or has no parameters).
  std::string no_score_reason;
  // The score_terms kernel leaves out the SDE transition's term, d/dtheta log q: a smoother that
  // estimates it (bis) must add it.
  bool score_lacks_sde_term = false;
  // Set on a copy whose functional terms are the score terms (learning/score.h's ScoreModel) when
  // those lack the SDE term: only a smoother that adds its estimate may smooth them.
  bool functionals_lack_sde_term = false;
  // Why the model has no prior_logpdf kernel (a prior without a log-density formula).
  std::string no_prior_reason;
  // Why the model has no state_gradient kernel; empty when it has one.
  std::string no_state_gradient_reason;
  // Where the runtime the model was linked with lives (`vi` loads its module from there); may be
  // empty.
  std::string runtime_dir;
  std::vector<FunctionalInfo> functionals;
  int64_t n_functional = 0; // components of the functional_terms output
  std::vector<NetInfo> nets;
  std::vector<NetCallInfo> net_calls;
  GuideInfo guide;
  std::optional<BackwardGuideInfo> backward_guide;
  EmStepsInfo em_steps;

  const ParamInfo* find_param(std::string_view name) const;
  const ParamInfo* param_of_component(int64_t theta) const; // the parameter holding theta[c]
  // Whether state `v` holds the output of a guide's network call, which the model's density never
  // reads (exact methods leave it out of the state space).
  bool guide_only(const VarInfo& v) const {
    for (const NetCallInfo& c : net_calls)
      if (c.state == v.name)
        return c.for_guide();
    return false;
  }
  // Whether the model's density reads network outputs (calls other than its guide's).
  bool density_calls_networks() const {
    for (const NetCallInfo& c : net_calls)
      if (!c.for_guide())
        return true;
    return false;
  }
};

// Parses and checks the metadata JSON emitted by the compiler (layout consistency included).
// Throws ssm::Error.
ModelInfo parse_metadata(std::string_view json);

// Column names of one variable: `x` for a scalar, `x[i]` for a vector, `A[i,j]` for a matrix.
std::vector<std::string> column_names(const std::string& name, const std::vector<int64_t>& shape);
// Column names of the whole state (resp. observation) vector, indexed by component. The state's
// hidden components come last and have no column: state_columns(info).size() <= n_state.
std::vector<std::string> state_columns(const ModelInfo& info);
std::vector<std::string> obs_columns(const ModelInfo& info);
std::vector<std::string> input_columns(const ModelInfo& info);
// Column names of the functionals' components (`score`, `m[0]`), indexed by component.
std::vector<std::string> functional_columns(const ModelInfo& info);

// `real`, `vector[3]`, `matrix[2,2]`, `cov_matrix[2]`: how a parameter's type reads in a model.
std::string type_string(const ParamInfo& p);

// `int`, or `int[0..1]`, `int[0..inf]`: how an integer variable's type reads in a model.
std::string integer_type(const VarInfo& v);

// A component of a variable declared int[lo..hi] with a finite bound: the values drawn for it
// (or read from data) must be integers in [lower, upper].
struct IntegerRange {
  int64_t component = 0; // into the state, observation or input vector
  double lower = -INFINITY, upper = INFINITY;
  std::string name; // its column: `z`, `k[1]`
  std::string type; // `int[0..1]`
};
// The bounded integer components of `vars`, hidden copies (x@lagK) left out: they copy values
// that were checked when drawn.
std::vector<IntegerRange> integer_ranges(const std::vector<VarInfo>& vars);
// "simulate: at t=3 the model drew z = 4, outside its declared range int[0..1]; ...": `who`
// names the method, `where` what drew it ("particle 17 of the proposal"; empty: the model).
std::string out_of_range_message(const std::string& who, const IntegerRange& range, double value,
                                 int64_t t, const std::string& where = "",
                                 const std::string& step = "t"); // `step`: the index's name
// The first of particles [begin, end) of `x` (structure of arrays, component c of particle n at
// x[c * stride + n]) whose value of some range's component is outside it or NaN: {n, index into
// ranges}, or {-1, -1} when none is.
std::pair<int64_t, int> first_outside(const std::vector<IntegerRange>& ranges, const double* x,
                                      int64_t begin, int64_t end, int64_t stride);

} // namespace ssm
