// The text of every diagnostic that the lowering raises (errors, warnings and notes), in one
// place: fmt format strings, whose {} the lowering fills with names, shapes and values. Grouped
// by the file that raises them, in the order it does; short words chosen by a condition ("row
// index" or "column index") stay next to their condition. The golden tests
// (tests/golden/diagnostics) and the catalogue of docs/language.md can be checked against these.
// The shape errors of a call of a built-in function are not here: they belong to the function
// (ir::builtin_shape_error, with the table of ir/builtins.h), so any front end says the same.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ssm::frontend::msg {

// ---- networks (lower_nets.cpp)

inline constexpr char net_in_simulator[] =
    "network '{}' in a simulator: networks are available in plate models (latent z[n], obs x[n]) "
    "and as the encoder of a state-space model's guide for now";
inline constexpr char net_in_state_space_relation[] =
    "not supported yet: network '{0}' called in {1}; a state-space model's networks serve its "
    "guide (guide x[t] ~ backward({0}(y[t])))";
inline constexpr char net_unknown_kind[] =
    "unknown kind of network '{}'; known: mlp, embedding, rnn, and the densities dif, maf, "
    "realnvp, rnn_lm";
inline constexpr char net_option_twice[] = "option '{}' is given twice for network '{}'";
inline constexpr char net_size_zero[] = "{} must be at least 1";
inline constexpr char net_unknown_activation[] = "unknown activation for network '{}'; known: {}";
inline constexpr char net_unknown_option[] = "unknown option '{}' of network '{}'; known: {}";
inline constexpr char net_option_missing[] = "network '{}' needs the option '{}'";
inline constexpr char net_without_arguments[] = "network '{}' takes {} inputs, but none were given";
inline constexpr char net_in_function[] =
    "network '{}' is called in a function: call it in the model's relations";
inline constexpr char net_argument_not_variable[] =
    "an argument of network '{}' must be a latent variable, a covariate, a parameter or a data "
    "item (in a guide: an observation, a covariate or a data item), not an expression: the "
    "runtime applies the network "
    "to values it holds";
inline constexpr char net_input_size[] =
    "network '{}' takes {} inputs, but its arguments have {} ({})";
inline constexpr char density_net_called[] =
    "network '{0}' is a density ({1}): it is the distribution of a latent variable, written "
    "z[n] ~ {0}(...), not a function";
inline constexpr char density_net_not_latent[] =
    "network '{}' is a density ({}): it is the distribution of a plate model's latent variable "
    "only, not of '{}'";
inline constexpr char density_net_named_argument[] =
    "the density network '{}' takes its context by position: it has no argument '{}'";
inline constexpr char density_net_target[] = "network '{}' is a density over {}, but {} is {}";
inline constexpr char density_net_in_guide[] =
    "network '{}' is a density (a latent's distribution in the model): a guide's families are "
    "normal, mvnormal_chol, dif, categorical, bernoulli and bernoulli_logit";
inline constexpr char net_components_too_many[] =
    "{} is at most {} (a dif's density costs components^2 network rows per point)";
inline constexpr char realnvp_one_dimension[] =
    "network '{}' is a realnvp over 1 dimension: its coupling layers split the dimensions in "
    "two, so it needs dim of at least 2 (a dif with one component is a Gaussian)";
inline constexpr char net_unknown_maps[] = "unknown maps for network '{}'; known: {}";
inline constexpr char dif_layers_without_maps[] =
    "network '{}': `layers` counts a dif's flow maps, which `maps = maf` or `maps = realnvp` "
    "asks for (its maps are location-scale without them)";
inline constexpr char flow_maps_one_dimension[] =
    "network '{}' is a dif over 1 dimension with flow maps: a flow layer over one dimension is "
    "an affine map of the component, which its location-scale maps already are; use maps = "
    "affine";
inline constexpr char net_layers_too_many[] = "{} is at most {}";
inline constexpr char net_base_not_density[] =
    "the base of network '{}' must name a density network declared before it (dif, maf or "
    "realnvp)";
inline constexpr char net_base_unfit[] = "network '{}' cannot cascade onto its base: {}";
inline constexpr char net_is_base[] =
    "network '{0}' is the base of '{1}', part of its cascade: write the distribution as "
    "{1}(...)";
inline constexpr char net_base_self[] = "network '{}' cannot be its own base";
inline constexpr char net_base_later[] =
    "network '{}' is declared after '{}': declare a cascade's base before it";
inline constexpr char dif_guide_layers_one_dimension[] =
    "the dif guide of {} has flow layers over 1 dimension: a flow layer over one dimension is an "
    "affine map of the component, which its location-scale maps already are; leave layers at 0";
inline constexpr char net_named_as_distribution[] =
    "network '{}' has a distribution's name: rename it";
inline constexpr char net_unknown_cell[] = "unknown cell for network '{}'; known: {}";
inline constexpr char embedding_argument[] =
    "network '{}' embeds the tokens of int[0..{}]: its one argument is an int variable within "
    "them, not {}";
inline constexpr char rnn_hidden_one_width[] =
    "network '{}' is an {}: its hidden is one width (`layers` stacks recurrent layers of it)";
inline constexpr char sequence_net_called[] =
    "network '{0}' is a density over sequences ({1}): it is the distribution of an observation "
    "that is a sequence, written c[n] ~ {0}(...), not a function";
inline constexpr char sequence_net_misplaced[] =
    "network '{}' is a density over sequences ({}): it is the distribution of an observation "
    "that is a sequence (obs c[n] : sequence[V]) only, not of '{}'";
inline constexpr char sequence_argument[] =
    "network '{}' is an {}: it cannot read the sequence {} (an rnn reads one, as its first "
    "argument)";
inline constexpr char rnn_first_argument[] =
    "network '{}' is an rnn: its first argument is an observation that is a sequence (obs c[n] : "
    "sequence[V], read in a guide or an observation's relation), then {} context values";
inline constexpr char sequence_vocabulary[] =
    "network '{}' reads sequences of {} tokens, but {} is a {}";
inline constexpr char density_net_context_size[] =
    "network '{}' reads a context of {} values, but its arguments have {} ({})";

// ---- guides (lower_guides.cpp)

// A state-space model's guide: the backward family of smooth --method variational.
inline constexpr char state_guide_for_non_state[] =
    "'{}' is not a state: a state-space model's guide gives the variational family of its state "
    "(guide x[t] ~ backward(...))";
inline constexpr char state_guide_target_form[] =
    "the target of a state-space model's guide is written {}[t]";
inline constexpr char state_guide_family[] =
    "a state-space model's guide is backward(ENCODER), the backward-factorised Gaussian family of "
    "smooth --method variational, not {}: 'guide {}[t] ~ backward(NET(y[t]))' with a network "
    "encoder, 'guide {}[t] ~ backward(y[t])' with a linear one (a particle filter's own "
    "distribution for a state is a 'proposal')";
inline constexpr char state_guide_several_states[] =
    "not supported yet: a guide in a model with several states ({}); the backward guide covers "
    "the whole state jointly and is declared for a model with one state";
inline constexpr char state_guide_integer[] =
    "the backward guide of {} is Gaussian, but {} is {}: it is for a real or vector state";
inline constexpr char state_guide_encoder[] =
    "the encoder of a backward guide is a network applied to observations at t "
    "(backward(NET(y[t]))) or one observation at t (backward(y[t])), not this expression";
inline constexpr char state_guide_reads[] =
    "the encoder of the guide of {} reads {} this way: it reads observations at t (y[t]), which "
    "q_t adds to what it predicts from the step before";
inline constexpr char net_declared_here[] = "network '{}' is declared here";
inline constexpr char state_guide_net_kind[] =
    "network '{}' is a {}: the encoder of a backward guide is an mlp";
inline constexpr char state_guide_net_outputs[] =
    "network '{}' gives {} outputs, but the backward guide of {} ({}) needs {}: a natural mean and "
    "a precision for each of the state's {} components";
inline constexpr char guide_in_simulator[] =
    "a guide gives the variational family of a latent variable of a plate model (latent z[n]); "
    "a simulator's latent variables are only drawn, never inferred";
inline constexpr char guide_for_non_latent[] =
    "'{}' is not a latent variable: a guide gives the variational family of a latent variable "
    "(guide z[n] ~ normal(...))";
inline constexpr char guide_target_form[] = "the target of a guide is written {}[n]";
inline constexpr char guide_subject[] = "the guide of {}";
inline constexpr char guide_family[] =
    "a guide cannot be {} for {}: its family is {} (the distributions whose draws vi can "
    "differentiate or enumerate)";
inline constexpr char guide_only_family[] =
    "{} is a variational family: only a guide can be one ('guide z[n] ~ {}(...)'), not {}";
inline constexpr char dif_guide_target[] =
    "a dif guide is for a continuous latent (real or a vector), but {} is {}";
inline constexpr char dif_context_shape[] =
    "the context of a dif guide is real or a vector (what q(z[n] | context) reads), but it is {}";
inline constexpr char dif_option_constant[] =
    "the {} of a dif guide must be a constant whole number from {} to {}{}";
inline constexpr char guide_discrete_values[] =
    "the guide of {0} gives probabilities to the values 0..{2} ({3}), but {0} is {1}: a discrete "
    "guide gives every value of its latent variable a probability";
inline constexpr char guide_reads_latent[] =
    "{} reads latent variable {}: a guide reads the item's observations, data, constants and "
    "networks of them, not other latent variables (not supported yet)";
inline constexpr char guide_reads_parameter[] =
    "{} reads parameter '{}': a guide is a family of its own, fitted with its networks; it does "
    "not read the model's parameters";

// ---- slices (lower_indexing.cpp)

inline constexpr char slice_of_non_vector[] =
    "a range a:b selects components of a vector, alone in its bracket (v[a:b]), or of a matrix "
    "with a range or index for each dimension (A[a:b, j]), but {} is {}";
inline constexpr char slice_out_of_range[] =
    "the range {}:{} of {} ({}) must satisfy 0 <= start < end <= {}";
inline constexpr char slice_outside_index[] =
    "a range a:b selects components of a vector, as in v[0:2]; it is not a value, a time index "
    "or an item";

// ---- names and declarations (lower_names.cpp)

inline constexpr char name_declared_by_importing_model[] =
    "'{}' is declared by the model that imports this module ({}); a module can only use "
    "its own names and those of the modules it imports";
inline constexpr char name_declared_in_unimported_module[] =
    "'{}' is declared in {}, which {} does not import: add 'import \"{}\";' to it";
inline constexpr char unknown_name[] = "unknown name '{}'";
inline constexpr char did_you_mean[] = "; did you mean '{}'?";
inline constexpr char t_declared[] = "'t' is reserved for the time index and cannot be declared";
inline constexpr char builtin_constant_declared[] =
    "'{}' is a built-in constant and cannot be declared";
inline constexpr char n_declared_in_plate_model[] =
    "'n' is the index of the plate's items in this model and cannot be declared";
inline constexpr char redeclaration[] = "redeclaration of '{}'";
inline constexpr char first_declared_here[] = "'{}' was first declared here";
inline constexpr char unused_declaration[] = "{} '{}' is never used";

// ---- constants (lower_constants.cpp)

inline constexpr char not_a_constant_expression[] = "{} must be a constant expression";
inline constexpr char not_a_single_integer[] = "{} must be a single integer, but it is {}";
inline constexpr char not_an_integer[] = "{} must be an integer, but it is {}";
inline constexpr char negative_integer[] = "{} must be a non-negative integer, but it is {}";
inline constexpr char dimension_too_large[] = "{} of {} is too large (the limit is {})";
inline constexpr char not_a_real_number[] = "{} must be a real number, but it is {}";
inline constexpr char what_constant_value[] = "the value of constant '{}'";

// ---- declarations (lower_declarations.cpp)

inline constexpr char time_series_in_plate_model[] =
    "{} belongs to a time series, but this model is over the i.i.d. plate n: a model "
    "cannot have both";
inline constexpr char time_series_in_simulator[] =
    "{} belongs to a time series, but simulator '{}' has no time";
inline constexpr char simulator_matrix_parameter[] =
    "parameter '{}' of a simulator is a matrix: a simulator's parameters are reals and vectors "
    "(write its entries as a vector)";
inline constexpr char simulator_parameter_without_prior[] =
    "parameter '{0}' of simulator '{1}' needs a prior, as in 'param {0} ~ uniform(0, "
    "1);', since likelihood-free inference draws the parameters from it; a fixed value "
    "is a constant: 'const {0} = ...;'";
inline constexpr char plate_index_not_n[] = "the items of a plate are indexed by 'n': write {}[n]";
inline constexpr char plate_index_in_simulator[] =
    "a simulator draws one sample and has no plate: write '{} {} ~ ...;'";
inline constexpr char plate_index_missing[] =
    "{} '{}' in a model over the plate n needs the plate index: write '{} {}[n] ~ ...;'";
inline constexpr char plate_input_index_missing[] =
    "input '{}' in a model over the plate n is a covariate per item: write 'input {}[n] : TYPE;'";
inline constexpr char time_series_input_with_plate_index[] =
    "an input of a time series has one value per step, read as {0}[t]: declare it 'input {0} : "
    "TYPE;'";
inline constexpr char plate_input_without_index[] =
    "input '{0}' is the item's covariate here: write {0}[n]";
inline constexpr char time_series_obs_with_relation[] =
    "an observation of a time series is declared as 'obs {0} : TYPE;' with a relation "
    "'{0}[t] ~ ...;'; 'obs {0} ~ ...' and 'obs {0} = ...' are for plate models (obs "
    "{0}[n] ~ ...) and simulators";
inline constexpr char obs_without_type[] = "observation '{}' needs a type, as in 'obs {} : real;'";
inline constexpr char obs_with_distribution_and_value[] =
    "observation '{}' has both a distribution and a value: give one";
inline constexpr char deterministic_obs_in_plate_model[] =
    "a deterministic observation ('obs {0} = ...') is only for simulators; in a model "
    "over a plate, give its distribution: 'obs {0}[n] ~ ...;'";
inline constexpr char obs_without_distribution[] =
    "observation '{0}' needs a distribution{1}, as in 'obs {0}{2} ~ normal(...);'";
inline constexpr char type_too_large[] = "this type has {} elements, more than the limit of {}";
inline constexpr char empty_simplex[] = "a simplex needs at least one component";
inline constexpr char bound_not_integer[] = "{} must be an integer or inf, but it is {}";
inline constexpr char bounds_out_of_order[] =
    "the lower bound ({}) must be {} the upper bound ({})";
inline constexpr char cov_matrix_misplaced[] =
    "cov_matrix is a parameter or data type; use matrix[n, n] for {}";
inline constexpr char empty_vocabulary[] = "a sequence needs a vocabulary of at least one token";
inline constexpr char sequence_misplaced[] =
    "sequence is the type of a plate model's observation (obs c[n] : sequence[V], its tokens "
    "0..V-1), not of {}";
inline constexpr char sequence_distribution[] =
    "{0} is a sequence: its distribution is a network over sequences (net NAME : "
    "rnn_lm(vocab = {1}, ...), then {0} ~ NAME(...)), not '{2}'";
inline constexpr char sequence_outside_network[] =
    "{} is a sequence: only networks read it (an rnn's first argument, in a guide or in an "
    "observation's relation; its distribution, an rnn_lm)";
inline constexpr char simplex_misplaced[] =
    "simplex is a parameter or data type; use vector[n] for {}";
inline constexpr char integer_parameter[] =
    "a parameter cannot be an integer: parameters are continuous (use a constant, or "
    "data, for a fixed integer)";
inline constexpr char real_bounds_misplaced[] =
    "bounds real(lo, hi) are for parameters and data; {} '{}' {}";
inline constexpr char prior_reads_later_parameter[] =
    "the prior of '{0}' reads '{1}', which is declared after it: declare '{1}' first (a prior "
    "reads the parameters declared before it, so that the priors are one joint law)";
inline constexpr char prior_reads_itself[] = "the prior of '{0}' reads '{0}' itself";
inline constexpr char prior_reads_variable[] =
    "the prior of '{}' reads '{}', {}: a prior reads constants and the parameters declared "
    "before it";
inline constexpr char prior_calls_function[] =
    "the prior of '{}' calls '{}': a prior cannot call functions or networks yet";
inline constexpr char prior_argument_domain_unknown[] =
    "the {} of the {} prior of '{}' must be {}, and it reads parameters: write it as a product of "
    "positive constants and parameters whose values are {} by their declared bounds or their "
    "priors (`real(0, inf)`, `~ half_normal(1)`)";
inline constexpr char prior_truncated_reads_parameters[] =
    "the {} prior of '{}' reaches outside its declared bounds [{}, {}] and reads parameters: the "
    "truncation's normalising constant would depend on them; give '{}' a prior within its bounds";
inline constexpr char prior_support_not_constant[] =
    "the bounds of the {1} prior of '{0}' must be constants: they are the support of '{0}', "
    "on which its unconstrained scale is built";
inline constexpr char cov_matrix_prior_unsupported[] =
    "a prior on a cov_matrix parameter is not supported yet (there is no distribution "
    "over covariance matrices)";
inline constexpr char what_default_value[] = "the default value of '{}'";
inline constexpr char default_shape_mismatch[] = "the default value of '{}' is {}, but '{}' is {}";
inline constexpr char default_not_finite[] = "the default value of '{}' is not finite ({})";
inline constexpr char default_outside_bounds[] =
    "the default value of '{}' ({}) is outside its bounds [{}, {}]";
inline constexpr char default_not_on_simplex[] =
    "the default value of simplex '{}' must be non-negative and sum to 1, but {}";
inline constexpr char simplex_component_negative[] = "component {} is negative ({})";
inline constexpr char simplex_sum[] = "it sums to {}";
inline constexpr char default_cov_matrix_not_symmetric[] =
    "the default value of cov_matrix '{}' is not symmetric";
inline constexpr char default_cov_matrix_not_positive_definite[] =
    "the default value of cov_matrix '{}' is not positive definite";

// ---- SDE transitions (lower_diffusion.cpp)

inline constexpr char diffusion_not_transition[] =
    "diffusion(...) is a transition: it moves a state from x[t-1] to x[t]; {} cannot be one "
    "(write the transition 'x[t] ~ diffusion(drift, diffusion, dt)')";
inline constexpr char diffusion_state_type[] = "an SDE's state is real or a vector, but '{}' is {}";
inline constexpr char diffusion_argument_count[] =
    "diffusion takes 3 to 6 arguments (drift, diffusion, dt[, steps, psi_lower, psi_upper]), but "
    "{} given";
inline constexpr char diffusion_drift_shape[] =
    "the drift of {} must be {} (the state's shape), but it is {}";
inline constexpr char diffusion_coefficient_shape[] =
    "the diffusion coefficient of {} must be {}, but it is {}";
inline constexpr char diffusion_coefficient_not_positive[] =
    "the diffusion coefficient of {} must be positive, but {} {}";
inline constexpr char diffusion_matrix_singular[] =
    "the diffusion matrix of {} must be invertible (sigma sigma^T dt is the noise's covariance "
    "over dt), but it has rank {} of {}";
inline constexpr char diffusion_matrix_not_finite[] =
    "the diffusion matrix of {} must be finite, but its component [{}, {}] is {}";
inline constexpr char diffusion_dt_shape[] = "dt of {} must be real, but it is {}";
inline constexpr char diffusion_fixed_reads_path[] = "{} of {} reads {}, the path: {}";
inline constexpr char diffusion_dt_reads_path[] = "the time between steps cannot depend on it";
inline constexpr char diffusion_bound_reads_path[] =
    "a bound over every value of the path cannot depend on it";
inline constexpr char diffusion_dt_not_positive[] =
    "dt of {} (the time between x[t-1] and x[t]) must be positive, but it is {}";
inline constexpr char diffusion_psi_bound_shape[] = "{} of {} must be real, but it is {}";
inline constexpr char diffusion_psi_bound_reads[] =
    "{} of {} reads {}: a bound of psi holds for every particle, so it may read parameters, "
    "data, inputs and t only";
inline constexpr char diffusion_psi_bounds_vector[] =
    "psi's bounds of {} are for the General Poisson estimator, which needs a real state, but '{}' "
    "is {}";
inline constexpr char diffusion_psi_bound_infinite[] =
    "{} of {} is {}, which no value of psi is within";
inline constexpr char diffusion_psi_bounds_order[] =
    "psi_lower of {} is {}, above its psi_upper {}";
inline constexpr char diffusion_steps_range[] =
    "the number of Euler-Maruyama substeps of {} must be from 1 to {}, but it is {}";

// ---- distributions (lower_distributions.cpp)

inline constexpr char unknown_distribution[] = "unknown distribution '{}'";
// ---- named arguments of distributions (named_arguments.cpp)
inline constexpr char positional_after_named[] =
    "a positional argument of {} cannot follow a named one: name it too";
inline constexpr char unknown_argument[] = "{} has no argument '{}'";
inline constexpr char argument_twice[] = "the argument '{}' of {} is given twice{}";
inline constexpr char argument_missing[] = "{} needs the argument '{}'";
inline constexpr char dist_argument_count[] = "{} takes {}, but {} given";
inline constexpr char categorical_target_not_scalar[] =
    "categorical needs a single integer target, but '{}' is {}";
inline constexpr char categorical_weights_not_vector[] =
    "argument 'p' of categorical must be a vector of probabilities, but it is {}";
inline constexpr char vector_target_needed[] = "{} needs a vector target, but '{}' is {}";
inline constexpr char weights_shape_mismatch[] =
    "argument '{}' of {} must be {}{}, like its target '{}', but it is {}";
inline constexpr char multinomial_n_not_real[] =
    "argument 'n' of multinomial must be real (the number of draws), but it is {}";
inline constexpr char mvnormal_mean_shape_mismatch[] =
    "argument 'mu' of {} must be {}, like its target '{}', but it is {}";
inline constexpr char mvnormal_matrix_shape_mismatch[] =
    "argument '{}' of {} must be {} for a target of shape {}, but it is {}";
inline constexpr char dist_argument_shape_mismatch[] =
    "argument '{}' of {} must be {}, like its target '{}', but it is {}";
inline constexpr char dist_argument_outside_domain[] =
    "the argument '{}' of {} must be {}, but {} {}";
inline constexpr char its_component_is[] = "its component {} is";
inline constexpr char lag_too_large[] =
    "a lag of {} steps is beyond the limit of {}: each step back is a hidden copy of the state "
    "that every particle carries";
inline constexpr char inlining_too_large[] =
    "calling '{}' here would make the model too large: its body is {} operations once its own "
    "calls are inlined, this block of relations has {} already, and the limit is {} (every call "
    "copies the body, so calls of calls multiply: compute the value once, in a state)";
inline constexpr char let_expansion_too_large[] =
    "using let '{}' here would make the model too large: this block of relations has {} "
    "operations already, and the limit is {} (a let is expanded where it is used, so lets that "
    "use a let twice multiply: compute the value once, in a state)";
inline constexpr char in_a_branch[] =
    " (a warning, not an error, in a branch of a conditional, which may never be taken)";
inline constexpr char proposal_for_deterministic[] =
    "'{}' is a deterministic state (its transition is a value): it has nothing to propose";
inline constexpr char number_out_of_range[] = "this number {}";
inline constexpr char division_by_zero[] = "division by zero: the {} is a constant 0";
inline constexpr char division_by_zero_component[] =
    "division by zero: component {1} of the {0} is a constant 0";
inline constexpr char dist_matrix_argument[] = "the argument '{}' of {} must be {}, but {}";
inline constexpr char dist_weights_all_zero[] = "the weights '{}' of {} must not all be 0";
inline constexpr char dist_interval_empty[] =
    "the interval of {} is empty: lo = {} must be below hi = {}";
inline constexpr char continuous_dist_for_integer[] =
    "'{}' is an integer, but {} is a continuous distribution; use one of {}";
inline constexpr char support_from[] = "can take any value >= {}";
inline constexpr char support_one_value[] = "takes the value {}";
inline constexpr char support_two_values[] = "takes the values {} and {}";
inline constexpr char support_range[] = "takes the values {}..{}";
inline constexpr char support_outside_int_range[] =
    "{}, but '{}' is declared {}, which holds none of them";
inline constexpr char int_range_consequence_proposal[] =
    "the guided filter stops with an error when the proposal draws a value outside {}";
inline constexpr char int_range_consequence_obs[] =
    "simulate stops with an error when it draws a value outside {}";
inline constexpr char int_range_consequence_state[] =
    "simulate and the particle methods stop with an error when they draw a value outside "
    "{}, and the exact methods (forward-backward, Viterbi) when more than 1e-9 of the "
    "probability falls outside it";
inline constexpr char support_reaches_outside_int_range[] = "{}, but '{}' is declared {}: {}";

// ---- expressions (lower_expressions.cpp, lowering.h)

inline constexpr char conditional_branch_shapes[] =
    "the two branches of a conditional must have the same shape, or one must be real, "
    "but they are {} and {}";
inline constexpr char conditional_condition_shape[] =
    "the condition is {}, but the branches are {}: a condition is real, or has the shape "
    "of the branches to choose between them component by component";
inline constexpr char not_constant_because[] = "{} must be a constant expression, but {}";
inline constexpr char function_reads_outside[] =
    "function '{}' cannot read {}: pass it as an argument";
inline constexpr char let_self_reference[] = "let '{}' is defined in terms of itself";
inline constexpr char t_in_plate_model[] =
    "'t' is the time index, but this model is over the i.i.d. plate n and has no time";
inline constexpr char t_in_simulator[] = "'t' is the time index, but simulator '{}' has no time";
inline constexpr char n_as_value[] =
    "'n' only indexes the latent variables and observations of the plate, as in z[n]; it "
    "is not a value";
inline constexpr char is_a_latent_variable[] = "'{}' is a latent variable";
inline constexpr char what_latent_variable[] = "latent variable '{}'";
inline constexpr char latent_without_plate_index[] =
    "latent variable '{0}' needs the plate index here: write {0}[n]";
inline constexpr char is_a_let_binding[] = "'{}' is a let binding";
inline constexpr char what_let_binding[] = "let binding '{}'";
inline constexpr char function_not_called[] = "'{0}' is a function: call it, as in {0}(...)";
inline constexpr char net_not_called[] = "'{0}' is a network: call it, as in {0}(z[n])";
inline constexpr char functional_in_expression[] =
    "'{}' is a functional: it is estimated by the runtime and cannot be used in an "
    "expression";
inline constexpr char is_data[] = "'{}' is data, known only when the program runs";
inline constexpr char constant_self_reference[] = "constant '{}' is defined in terms of itself";
inline constexpr char constant_used_before_declared[] =
    "constant '{}' is declared after '{}'; a constant can only use constants declared "
    "before it";
inline constexpr char is_a_parameter[] = "'{}' is a parameter";
inline constexpr char obs_without_plate_index[] =
    "observation '{0}' needs the plate index here: write {0}[n]";
inline constexpr char state_time_index_forms[] = "{0}[t-1] for the previous value or {0}[t]";
inline constexpr char needs_time_index[] = "{} '{}' needs a time index here: write {}";
inline constexpr char operand_shape_mismatch[] =
    "shape mismatch: {} (the operands of '{}' must have the same shape, or one must be "
    "real)";
inline constexpr char vector_times_vector[] =
    "cannot multiply two vectors with '*' ({}); use dot(a, b) for their inner product";
inline constexpr char vector_times_matrix[] =
    "cannot multiply {}: vectors are columns, so only matrix * vector is defined";
inline constexpr char matvec_size_mismatch[] =
    "the matrix has {} columns but the vector has {} elements";
inline constexpr char matmul_size_mismatch[] =
    "the left matrix has {} columns but the right one has {} rows";
inline constexpr char product_shape_mismatch[] = "shape mismatch: {} ({})";
inline constexpr char exponent_not_real[] =
    "the exponent of '^' must be real, but it is {}; use pow(a, b) for elementwise powers";
inline constexpr char matrix_row_element_not_real[] =
    "the elements of a matrix row must be real, but this is {}";
inline constexpr char literal_element_not_number_or_row[] =
    "the elements of a literal must be numbers or rows, but this is {}";
inline constexpr char literal_mixes_numbers_and_rows[] =
    "a literal must hold only numbers (a vector) or only rows of the same length (a "
    "matrix)";
inline constexpr char literal_row_length_mismatch[] = "row {} has {}, but row 0 has {}";

// ---- calls of built-in functions (lower_calls.cpp); a wrong argument count says
// fn_argument_count, as for a user function

inline constexpr char distribution_called[] =
    "'{}' is a distribution, not a function; distributions appear only after '~'";
inline constexpr char not_a_function[] = "'{}' is {}, not a function";
inline constexpr char unknown_function_did_you_mean[] = "unknown function '{}'; did you mean '{}'?";
inline constexpr char unknown_function[] = "unknown function '{}'; the functions are: {}";

// ---- ODE integration (lower_ode.cpp)

inline constexpr char ode_in_constant[] =
    "ode_rk4 is solved when the model runs, so it cannot give {}";
inline constexpr char ode_inside_rate[] =
    "ode_rk4 inside the rate of another ode_rk4: integrate the two systems as one";
inline constexpr char ode_rate_not_a_function[] =
    "the first argument of ode_rk4 is the name of a function fn f(t : real, y : vector[n], ...) "
    "-> vector[n], the rate dy/dt";
inline constexpr char ode_start_not_vector[] =
    "the start value of ode_rk4 must be a vector (vector[1] for one equation), but it is {}";
inline constexpr char ode_times_shape[] =
    "the times of ode_rk4 must be a real or a vector of reals, but they are {}";
inline constexpr char ode_times_not_increasing[] =
    "the times of ode_rk4 must be finite and increase strictly from the start time {} (here: "
    "{})";
inline constexpr char ode_step_not_positive[] =
    "the step of ode_rk4 must be a positive finite number, but it is {}";
inline constexpr char ode_too_many_steps[] =
    "ode_rk4 would take {} steps of at most {}; at most {} are allowed";
inline constexpr char ode_rate_signature[] =
    "function '{}' must take ({}) and return {} to be the rate of this ode_rk4, but it takes "
    "({}) and returns {}";

// ---- user functions (lower_functions.cpp)

inline constexpr char fn_duplicate_parameter[] = "function '{}' has two parameters named '{}'";
inline constexpr char fn_parameter_reserved[] = "'{}' is {} and cannot name a function parameter";
inline constexpr char fn_type_not_plain[] =
    "the parameters and result of a function take plain types (real, int, vector[n] or "
    "matrix[r, c]); {} {} only for the declarations of variables";
inline constexpr char fn_let_reserved[] = "'{}' is {} and cannot name a let";
inline constexpr char fn_let_redeclared[] =
    "'{}' is already {} of function '{}': give this let another name";
inline constexpr char fn_result_shape_mismatch[] = "function '{}' returns {}, but this is {}";
inline constexpr char fn_recursion[] = "function '{}' calls itself; recursion is not supported";
inline constexpr char fn_calls_later_fn[] =
    "function '{}' is declared after '{}'; a function can only call functions declared "
    "before it";
inline constexpr char fn_argument_count[] = "{}({}) takes {}, but {} given";
inline constexpr char constructor_argument_count[] =
    "{0}(n) and {0}(rows, columns) take 1 or 2 arguments, but {1} were given";
inline constexpr char fn_argument_shape_mismatch[] = "argument '{}' of {} must be {}, but it is {}";

// ---- indexing and time indices (lower_indexing.cpp)

inline constexpr char real_indexed[] = "{} is real and cannot be indexed";
inline constexpr char too_many_indices[] = "{} is {}, which takes at most {}, but {} given";
inline constexpr char valid_indices[] = "valid indices are 0 to {}";
inline constexpr char index_out_of_range[] = "{} {} is out of range for {}, which is {} ({})";
inline constexpr char index_range_out_of_range[] =
    "{} {} can be out of range: '{}' is declared {}, but {} is {} ({})";
inline constexpr char dynamic_index_not_scalar[] =
    "an index must be a single integer, but this is {}";
inline constexpr char time_index_on_timeless[] =
    "{} '{}' does not depend on time: write '{}', not '{}[t]'";
inline constexpr char plate_index_with_components[] =
    "the first index of '{0}' is the item n alone; index its components in a second "
    "bracket, as in {0}[n][0]";
inline constexpr char plate_reads_other_item[] =
    "the items of a plate are independent: a relation reads the current item only, {}[n]";
inline constexpr char what_time_index[] = "the time index of '{}'";
inline constexpr char unsupported_time_index[] =
    "unsupported time index for '{}': write {}[t], {}[t-1] or {}[0]";
inline constexpr char time_index_with_components[] =
    "the first index of '{0}' is the time alone; index its components in a second "
    "bracket, as in {0}[t][0]";
inline constexpr char fixed_time_step[] =
    "reading a fixed time step ({}) is not supported: {} can read {}";
inline constexpr char reads_future[] =
    "{} reads {}, a future value; {} can only read the present and the past";
inline constexpr char before_time_zero[] =
    "{} does not exist: the initial relation for {} is at t = 0";
inline constexpr char past_input[] =
    "not supported yet: reading a past input ({}); {} can read {}[t]";
inline constexpr char initial_reads_obs[] =
    "not supported yet: an initial relation that reads an observation ({})";
inline constexpr char transition_reads_current_obs[] =
    "a transition cannot read {}: the observation at time t depends on the state at t; a "
    "transition can read {}[t-1]";
inline constexpr char obs_lag_beyond_1[] = "not supported yet: lags beyond 1 ({}); {}";
inline constexpr char proposal_obs_reads[] = "a proposal can read {0}[t-1] and {0}[t]";
inline constexpr char transition_obs_reads[] = "a transition can read {}[t-1]";
inline constexpr char past_obs[] =
    "not supported yet: {} that reads a past observation ({}); it can read observations "
    "at time t";
inline constexpr char reads_own_target[] = "{} reads {} itself";
inline constexpr char lookahead_reads_current_state[] =
    "{} reads {}: a look-ahead predicts the states at t from those at t-1, so it can "
    "read {}[t-1]";

// ---- relations (lower_relations.cpp)

inline constexpr char relation_on_constant[] =
    "'{}' is a constant; only states and observations can be the target of a relation";
inline constexpr char relation_on_parameter[] =
    "cannot assign to parameter '{0}': give its prior in its declaration, as in 'param "
    "{0} ~ {1}(...);'";
inline constexpr char value_of_parameter[] =
    "cannot assign to parameter '{0}': give its value in its declaration, as in 'param {0} = "
    "...;'";
inline constexpr char deterministic_observation[] =
    "observation '{0}' needs a distribution, as in '{0}[t] ~ normal(...)': its density is the "
    "likelihood; only a state can be given by a value ('x[t] = ...')";
inline constexpr char deterministic_integer_state[] =
    "not supported yet: a deterministic relation for '{}', which is declared {}; declare it real "
    "(or a vector) or give it a discrete distribution";
inline constexpr char deterministic_value_shape[] = "the value of {} is {}, but '{}' is {}";
inline constexpr char relation_on_other[] =
    "'{}' is not a state or an observation; only those can be the target of a relation";
inline constexpr char state_relation_forms[] = "{0}[0] (initial) or {0}[t] (transition)";
inline constexpr char relation_target_without_time[] =
    "the target of a relation needs a time index: write {}";
inline constexpr char relation_target_component[] =
    "a relation must target a whole variable, as in {}; relations for single components "
    "are not supported";
inline constexpr char relation_target_bad_time[] =
    "the target of a relation must be {}, not {}[{}]";
inline constexpr char proposal_for_obs[] = "a proposal draws a state, but '{}' is an observation";
inline constexpr char proposal_for_initial_state[] =
    "not supported yet: a proposal for the initial state ({0}[0]); the guided filter "
    "draws {0}[0] from its initial relation";
inline constexpr char second_relation[] = "{} has a second {}";
inline constexpr char first_relation_here[] = "the first {} for {} is here";
inline constexpr char relation_subject[] = "the {} for {}";
inline constexpr char discrete_proposal_for_continuous[] =
    "'{}' is continuous, but {} is a discrete distribution; its proposal must have a "
    "density with respect to the same measure as its transition";
inline constexpr char static_relation_subject[] = "the {} of {}";
inline constexpr char obs_value_shape_mismatch[] =
    "the value of observation '{}' is {}, but '{}' is {}";
inline constexpr char latent_reads_obs[] =
    "{} reads observation {}: latent variables are drawn before the observations and "
    "cannot read them";
inline constexpr char lookahead_target_not_state[] =
    "a look-ahead predicts a state: write lookahead x[t] = ...; for a state x";
inline constexpr char lookahead_target_not_whole[] =
    "a look-ahead predicts the whole state at t: write lookahead {}[t] = ...;";
inline constexpr char second_lookahead[] = "{}[t] has a second look-ahead";
inline constexpr char first_lookahead_here[] = "the first look-ahead for {}[t] is here";
inline constexpr char lookahead_subject[] = "the look-ahead for {}[t]";
inline constexpr char lookahead_shape_mismatch[] = "the look-ahead for {}[t] is {}, but '{}' is {}";
inline constexpr char lookahead_missing[] =
    "the auxiliary filter predicts every state, and state '{0}' has no look-ahead: add "
    "one, as in lookahead {0}[t] = ...;";
inline constexpr char functional_shape[] = "a functional must be real or a vector, but this is {}";

// ---- completeness and order (lower_ordering.cpp)

inline constexpr char static_model_without_obs[] =
    "{} '{}' declares no observation: add one, as in '{}'";
inline constexpr char model_without_state[] = "model '{}' declares no state";
inline constexpr char model_without_obs[] =
    "model '{}' declares no observation: it can be simulated but not filtered";
inline constexpr char missing_initial_relation[] =
    "state '{0}' has no initial relation: add one, as in '{0}[0] ~ normal(0, 1);'";
inline constexpr char missing_transition_relation[] =
    "state '{0}' has no transition relation: add one, as in '{0}[t] ~ normal({0}[t-1], "
    "1);'";
inline constexpr char missing_obs_relation[] =
    "observation '{0}' has no relation: add one that depends on a state, as in '{0}[t] ~ "
    "normal(x[t], 1);'";
inline constexpr char obs_independent_of_states[] =
    "observation '{}' does not depend on any state: its relation reads no state, "
    "directly or through other observations";
inline constexpr char circular_dependency[] = "circular dependency between relations: {}";

// ---- expressions (lower_expressions.cpp, lowering.h)

inline constexpr char expanded_here[] = "in {}, used here";

// ---- warnings over the IR (warn_*.cpp)

inline constexpr char state_without_influence[] =
    "state '{}' does not influence any observation, directly or through other states: "
    "the data say nothing about it";
inline constexpr char latent_without_influence[] =
    "latent variable '{}' does not influence any observation, directly or through other "
    "latent variables: the data say nothing about it";
inline constexpr char prior_outside_bounds[] =
    "the prior {} of '{}' has support [{}, {}], which reaches outside its declared "
    "bounds [{}, {}]";

// "1 argument", "2 arguments", "3 indices".
std::string plural(std::size_t n, std::string_view word);

} // namespace ssm::frontend::msg
