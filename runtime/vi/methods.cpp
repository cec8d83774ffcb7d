// The variational methods' registration: see methods.h.
#include "vi/methods.h"
#include "core/error.h"
#include "learning/log_posterior.h"
#include "vi/loader.h"
#include "vi/parameter_vi.h"
#include "vi/variational.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace ssm {

namespace {

constexpr const char* kDefaultHidden = "64";

ParameterVariationalOptions parameter_options(const MethodRun& run, const std::string& family);

VariationalOptions variational_options(const MethodRun& run, const std::string& family) {
  VariationalOptions o;
  o.family = family;
  o.objective = run.options.word("--objective");
  o.samples = run.options.integer("--samples");
  o.estimators = run.options.names("--estimator");
  if (o.estimators.empty())
    o.estimators = {"auto"};
  o.iterations = run.options.integer("--iterations");
  o.learning_rate = run.options.real("--learning-rate");
  o.batch_size = run.options.integer("--batch-size");
  o.clip = run.options.real("--clip");
  o.schedule = run.options.word("--schedule");
  o.baseline = run.options.word("--baseline");
  o.temperature = run.options.real("--temperature");
  o.temperature_decay = run.options.real("--temperature-decay");
  o.temperature_min = run.options.real("--temperature-min");
  o.straight_through = run.options.toggle("--straight-through").value_or(false);
  o.kl_warmup = run.options.integer("--kl-warmup");
  o.fixed = run.options.names("--fix");
  o.eval_samples = run.options.integer("--eval-samples");
  o.test_file = run.options.word("--test");
  o.hidden = parse_layer_widths(run.options.word("--hidden"), "vi");
  o.activation = run.options.word("--activation");
  o.load_guide = run.options.word("--load-guide");
  o.net_learning_rate = run.options.real("--net-learning-rate");
  o.load_nets = run.options.word("--load-nets");
  o.save_density = run.options.word("--save-density");
  o.single = run.options.word("--precision") == "single";
  o.item_guide = run.options.word("--item-guide");
  if (const std::string q = run.options.word("--param-guide"); q != "none") {
    o.parameter_guide = parameter_options(run, q);
    o.parameter_guide->samples = 1; // --samples is each item's draws
    if (family == kAmortizedName)   // --hidden is the encoder's
      o.parameter_guide->hidden = ParameterVariationalOptions{}.hidden;
    o.parameter_guide->load_guide.clear(); // --load-guide is the items' guides'
  }
  return o;
}

ParameterVariationalOptions parameter_options(const MethodRun& run, const std::string& family) {
  ParameterVariationalOptions o;
  o.family = family;
  o.components = run.options.integer("--components");
  o.layers = run.options.integer("--layers");
  o.maps = run.options.word("--maps");
  o.base = run.options.word("--base");
  o.hidden = parse_layer_widths(run.options.word("--hidden"), "vi");
  o.samples = run.options.integer("--samples");
  o.iterations = run.options.integer("--iterations");
  o.learning_rate = run.options.real("--learning-rate");
  o.net_learning_rate = run.options.real("--net-learning-rate");
  o.clip = run.options.real("--clip");
  o.schedule = run.options.word("--schedule");
  o.eval_samples = run.options.integer("--eval-samples");
  o.draws = run.options.integer("--draws");
  o.fixed = run.options.names("--fix");
  o.load_guide = run.options.word("--load-guide");
  o.single = run.options.word("--precision") == "single";
  o.prior = run.options.word("--prior");
  o.laplace_start = run.options.toggle("--laplace-start").value_or(false);
  return o;
}

// The flag of a plate model's fit that means nothing for the parameters' (given a value other
// than its default), or nullptr.
const char* plate_flag_given(const OptionValues& options) {
  const VariationalOptions d;
  if (options.word("--objective") != d.objective)
    return "--objective";
  if (!options.names("--estimator").empty())
    return "--estimator";
  if (options.integer("--batch-size") != d.batch_size)
    return "--batch-size";
  if (options.integer("--kl-warmup") != d.kl_warmup)
    return "--kl-warmup";
  if (options.word("--baseline") != d.baseline)
    return "--baseline";
  if (options.real("--temperature") != d.temperature)
    return "--temperature";
  if (options.real("--temperature-decay") != d.temperature_decay)
    return "--temperature-decay";
  if (options.real("--temperature-min") != d.temperature_min)
    return "--temperature-min";
  if (options.toggle("--straight-through").value_or(false))
    return "--straight-through";
  for (const char* flag : {"--test", "--test-out", "--save-nets", "--load-nets", "--save-density",
                           "--param-draws", "--save-param-guide"})
    if (!options.word(flag).empty())
      return flag;
  if (options.word("--item-guide") != d.item_guide)
    return "--item-guide";
  if (options.word("--param-guide") != "none")
    return "--param-guide";
  return nullptr;
}

// --components, --layers and --hidden given to a family of the parameters' density that has no
// such size (`via` names the flag that chose it). Every family lists the three, so that this says
// which families read each (--hidden also sizes amortized's encoder: `encoder`).
void check_family_sizes(const OptionValues& options, const std::string& family, const char* via,
                        bool encoder = false) {
  const ParameterVariationalOptions d;
  const std::string base = options.word("--base");
  if (base != d.base && family != "dif" && family != "maf" && family != "realnvp")
    throw Error(fmt::format("vi: --base does not apply to {} {} (it applies to dif, maf, realnvp)",
                            via, family));
  if (options.integer("--components") != d.components && family != "gmm" && family != "dif" &&
      base != "dif")
    throw Error(fmt::format("vi: --components does not apply to {} {} (it applies to gmm, dif, "
                            "and --base dif)",
                            via, family));
  if (options.word("--maps") != d.maps && family != "dif")
    throw Error(fmt::format("vi: --maps does not apply to {} {} (it applies to dif)", via, family));
  const bool dif_layers = family == "dif" && options.word("--maps") != "affine";
  if (options.integer("--layers") != d.layers && family != "maf" && family != "realnvp" &&
      !dif_layers && base != "maf" && base != "realnvp")
    throw Error(fmt::format("vi: --layers does not apply to {} {} (it applies to maf, realnvp, "
                            "dif with --maps maf or realnvp, and --base maf or realnvp)",
                            via, family));
  if (options.word("--hidden") != kDefaultHidden && !encoder && family != "dif" &&
      family != "maf" && family != "realnvp")
    throw Error(fmt::format("vi: --hidden does not apply to {} {} (it applies to dif, maf, "
                            "realnvp, and to --method amortized's encoder)",
                            via, family));
}

// The checks of a run on a state-space model's parameters, once the family applies: the step
// count, and the flags of a plate model's fit refused by name.
void check_parameter_run(const MethodRun& run) {
  if (run.options.integer("--iterations") < 0)
    throw Error("vi: --iterations must be 0 or more");
  if (const char* flag = plate_flag_given(run.options))
    throw Error(fmt::format("vi: {} serves the guides of a model over a plate; model '{}' is a "
                            "state-space model, whose vi fits a density to its parameters' "
                            "posterior",
                            flag, run.info.name));
  if (run.options.toggle("--laplace-start").value_or(false) &&
      !run.options.word("--load-guide").empty())
    throw Error("vi: --laplace-start and --load-guide both choose where q starts; give one");
}

void add_options(MethodRegistry& registry) {
  const VariationalOptions d;
  const Task vi = Task::Vi;
  registry.add_option(vi, {.flag = "--objective",
                           .help = "The bound maximised: elbo, or iwae (the importance-weighted "
                                   "bound with --samples draws, tighter for K > 1)",
                           .default_value = d.objective,
                           .choices = {"elbo", "iwae"}});
  registry.add_option(vi, {.flag = "--samples",
                           .help = "K: draws from the guide per item and iteration (a model's "
                                   "parameters: base draws from q per iteration)",
                           .default_value = d.samples,
                           .check = MethodOption::Check::Positive,
                           .type_name = "K"});
  registry.add_option(
      vi, {.flag = "--estimator",
           .help = fmt::format("The gradient estimator: auto (per latent: {} for a continuous "
                               "one, {} for a discrete one while the joint values stay within "
                               "{}, {} otherwise), or one of {}, {}, {}, {} for every latent; "
                               "NAME=ESTIMATOR for one latent variable (repeatable)",
                               kReparamName, kEnumerateName, kMaxEnumeration, kScoreName,
                               kReparamName, kScoreName, kEnumerateName, kGumbelName),
           .default_value = std::vector<std::string>{},
           .type_name = "ESTIMATOR"});
  registry.add_option(vi, {.flag = "--iterations",
                           .help = "Steps of Adam (0: evaluate the starting guide)",
                           .default_value = d.iterations});
  registry.add_option(vi, {.flag = "--learning-rate",
                           .help = "Adam's step size",
                           .default_value = d.learning_rate,
                           .type_name = "RATE"});
  registry.add_option(vi, {.flag = "--batch-size",
                           .help = "Items per step, drawn without replacement per epoch (0: all)",
                           .default_value = d.batch_size});
  registry.add_option(vi, {.flag = "--clip",
                           .help = "Clip the gradient's norm to this (0: no clipping)",
                           .default_value = d.clip});
  registry.add_option(vi, {.flag = "--schedule",
                           .help = "The learning rate: constant, or cosine (decays to 0 over "
                                   "the iterations)",
                           .default_value = d.schedule,
                           .choices = {"constant", "cosine"}});
  registry.add_option(vi, {.flag = "--baseline",
                           .help = "score: the baseline subtracted from each draw's ELBO: "
                                   "average (the mean of the item's other draws with K > 1, its "
                                   "moving average with K = 1), learned (the average plus an MLP "
                                   "of the item's observations fitted to what it leaves: NVIL) "
                                   "or none",
                           .default_value = d.baseline,
                           .choices = {"average", "learned", "none"}});
  registry.add_option(vi, {.flag = "--temperature",
                           .help = "gumbel: the relaxation's starting temperature",
                           .default_value = d.temperature,
                           .type_name = "TAU"});
  registry.add_option(vi, {.flag = "--temperature-decay",
                           .help = "gumbel: the temperature at iteration i is TAU exp(-R i), "
                                   "floored at --temperature-min (0: constant)",
                           .default_value = d.temperature_decay,
                           .type_name = "R"});
  registry.add_option(vi, {.flag = "--temperature-min",
                           .help = "gumbel: the annealed temperature's floor",
                           .default_value = d.temperature_min,
                           .type_name = "TAU"});
  registry.add_option(vi, {.flag = "--straight-through",
                           .help = "gumbel: the hard draw's value with the relaxed draw's "
                                   "gradient (Bengio et al. 2013; Jang et al. 2017)",
                           .default_value = std::optional<bool>{}});
  registry.add_option(vi, {.flag = "--kl-warmup",
                           .help = "KL annealing: the ELBO's KL term weighs iteration / N for the "
                                   "first N iterations, then 1 (Bowman et al. 2016; 0: none)",
                           .default_value = d.kl_warmup,
                           .type_name = "N"});
  registry.add_option(vi, {.flag = "--fix",
                           .help = "Keep this parameter at its value (repeatable); every other "
                                   "parameter with a default or a prior is trained with the guide",
                           .default_value = std::vector<std::string>{},
                           .type_name = "NAME"});
  registry.add_option(vi, {.flag = "--eval-samples",
                           .help = "Draws per item of the reported bounds (the IWAE bound with "
                                   "this many draws estimates log p(x)); a state-space model's "
                                   "parameters: base draws of the reported ELBO (a plate "
                                   "model's joint ELBO takes --draws)",
                           .default_value = d.eval_samples,
                           .check = MethodOption::Check::Positive,
                           .type_name = "K"});
  registry.add_option(vi, {.flag = "--hidden",
                           .help = "amortized: the encoder's hidden layers, widths separated by "
                                   "commas; dif, maf, realnvp: their networks'",
                           .default_value = std::string(kDefaultHidden),
                           .type_name = "WIDTHS"});
  const ParameterVariationalOptions p;
  registry.add_option(vi, {.flag = "--components",
                           .help = "gmm, dif (a model's parameters): the mixture's or the flow's "
                                   "number of components",
                           .default_value = p.components,
                           .check = MethodOption::Check::Positive,
                           .type_name = "K"});
  registry.add_option(vi, {.flag = "--maps",
                           .help = "dif (a model's parameters): its maps, location-scale "
                                   "(affine), or --layers MAF or coupling layers before it that "
                                   "read the component (Argouarc'h 2024, 4.3.8)",
                           .default_value = p.maps,
                           .choices = {"affine", "maf", "realnvp"}});
  registry.add_option(vi, {.flag = "--base",
                           .help = "dif, maf, realnvp (a model's parameters): the density they "
                                   "transport onto, a cascade's next stage (Argouarc'h 2024, "
                                   "4.3.10): N(0, I), or a maf or realnvp of --layers, or a dif "
                                   "of --components",
                           .default_value = p.base,
                           .choices = {"none", "maf", "realnvp", "dif"}});
  registry.add_option(vi, {.flag = "--layers",
                           .help = "maf, realnvp (a model's parameters): the flow's layers; "
                                   "dif with --maps maf or realnvp: its maps' layers",
                           .default_value = p.layers,
                           .check = MethodOption::Check::Positive,
                           .type_name = "L"});
  registry.add_option(vi, {.flag = "--draws",
                           .help = "A model's parameters: the draws from the fitted density, "
                                   "written to --out (Stan's CSV, as CmdStan's variational; a "
                                   "plate model's, with --param-guide, to --param-draws), whose "
                                   "importance weights estimate log p(x)",
                           .default_value = p.draws,
                           .check = MethodOption::Check::Positive,
                           .type_name = "N"});
  registry.add_option(vi, {.flag = "--psis-resample",
                           .help = "A model's parameters: replace the draws by as many drawn "
                                   "from them with their Pareto-smoothed importance weights "
                                   "(as Stan's Pathfinder), which follow the posterior where "
                                   "Pareto k-hat is below 0.7",
                           .default_value = std::optional<bool>{}});
  registry.add_option(
      vi,
      {.flag = "--param-guide",
       .help = "A plate model's parameters: none (point estimates, trained "
               "with the guides: variational EM), or the family of a density "
               "q(θ) fitted to their posterior jointly with the items' guides "
               "(each learned parameter needs a prior, or --prior a file): meanfield, fullrank, "
               "gmm, dif, maf, realnvp",
       .default_value = std::string("none"),
       .type_name = "FAMILY",
       .choices = {"none", "meanfield", "fullrank", "gmm", "dif", "maf", "realnvp"}});
  registry.add_option(
      vi, {.flag = "--item-guide",
           .help = "--param-guide: each item's Gaussian given the parameters' draw, its mean and "
                   "log sd affine in their coordinates: q(θ) Π q(z_n | θ) (linear), or "
                   "independent of it: q(θ) Π q(z_n), narrower than the posterior when the items "
                   "depend on θ (independent); auto: linear for meanfield and fullrank, "
                   "independent for amortized (whose encoder outputs the gains with "
                   "--item-guide linear)",
           .default_value = std::string("auto"),
           .choices = {"auto", "linear", "independent"}});
  registry.add_option(vi, {.flag = "--param-draws",
                           .help = "--param-guide: write the parameters' draws here (Stan's CSV, "
                                   "as CmdStan's variational; --out keeps each item's guide)",
                           .default_value = std::string(),
                           .type_name = "FILE.csv",
                           .show_default = false});
  registry.add_option(vi, {.flag = "--laplace-start",
                           .help = "A state-space model's parameters: start q at the mode of their "
                                   "log posterior (L-BFGS), scaled by the Laplace approximation "
                                   "(the inverse of its negative Hessian: a full-rank Gaussian "
                                   "starts there exactly), instead of at the parameters' values "
                                   "with unit scales",
                           .default_value = std::optional<bool>{}});
  registry.add_option(vi, {.flag = "--save-param-guide",
                           .help = "--param-guide: write the fitted density over the parameters "
                                   "(as `ssmc density fit` saves one, over their unconstrained "
                                   "coordinates), which --prior reads",
                           .default_value = std::string(),
                           .type_name = "FILE.pt",
                           .show_default = false});
  registry.add_option(vi, {.flag = "--prior",
                           .help = "A model's parameters: a density over their unconstrained "
                                   "coordinates (saved by --save-guide or `ssmc density fit`) "
                                   "that replaces their priors in the model, as a posterior "
                                   "becomes the next data's prior",
                           .default_value = std::string(),
                           .type_name = "FILE.pt",
                           .show_default = false});
  registry.add_option(vi, {.flag = "--activation",
                           .help = "amortized: the encoder's activation",
                           .default_value = d.activation,
                           .choices = {"tanh", "relu", "silu", "gelu"}});
  registry.add_option(vi, {.flag = "--save-guide",
                           .help = "amortized: write the trained encoder (LibTorch's archive), "
                                   "which --load-guide reads; meanfield: the model's dif guides; "
                                   "a model's parameters: the fitted density (as `ssmc density` "
                                   "saves one)",
                           .default_value = std::string(),
                           .type_name = "FILE.pt",
                           .show_default = false});
  registry.add_option(vi, {.flag = "--load-guide",
                           .help = "amortized: start from this saved encoder, meanfield: from "
                                   "these dif guides, a model's parameters: from this density "
                                   "(with --iterations 0: only evaluate them)",
                           .default_value = std::string(),
                           .type_name = "FILE.pt",
                           .show_default = false});
  registry.add_option(vi, {.flag = "--net-learning-rate",
                           .help = "Adam's step size for the weights of the model's networks "
                                   "(`net` declarations), of its dif guides' networks and of a "
                                   "parameters' density's (dif, maf, realnvp)",
                           .default_value = d.net_learning_rate,
                           .type_name = "RATE"});
  registry.add_option(
      vi, {.flag = "--precision",
           .help = "The networks' arithmetic (the model's `net`s, the amortized "
                   "encoder, a dif guide's, a learned baseline): double, or single (float32, "
                   "about twice as fast); the model's kernels compute in double "
                   "either way",
           .default_value = std::string("double"),
           .choices = {"double", "single"}});
  registry.add_option(vi, {.flag = "--save-nets",
                           .help = "Write the model's trained networks (LibTorch's archive, "
                                   "one entry per `net`), which --load-nets reads",
                           .default_value = std::string(),
                           .type_name = "FILE.pt",
                           .show_default = false});
  registry.add_option(vi, {.flag = "--save-density",
                           .help = "Write the model's learned density (the `net` of kind dif, "
                                   "maf or realnvp that is a latent's distribution) after "
                                   "training, as a file of `ssmc density` (sample, logpdf) and "
                                   "--prior",
                           .default_value = std::string(),
                           .type_name = "FILE.pt",
                           .show_default = false});
  registry.add_option(vi, {.flag = "--load-nets",
                           .help = "Start the model's networks from this file of --save-nets "
                                   "(with --iterations 0: only evaluate them)",
                           .default_value = std::string(),
                           .type_name = "FILE.pt",
                           .show_default = false});
  registry.add_option(vi, {.flag = "--test",
                           .help = "Held-out items (CSV, as --data): their guides are fitted with "
                                   "the parameters kept (amortized: the encoder is applied), "
                                   "and their bounds reported",
                           .default_value = std::string(),
                           .type_name = "FILE.csv",
                           .show_default = false});
  registry.add_option(vi, {.flag = "--test-out",
                           .help = "Write the held-out items' bounds and guides, one row per "
                                   "item as --out writes the training items' (needs --test)",
                           .default_value = std::string(),
                           .type_name = "FILE.csv",
                           .show_default = false});
}

// A plate model's guide family (meanfield, fullrank, amortized); the first two also fit a
// density to a state-space model's parameters (`parameters`).
Method family(const char* name, const char* title, int rank, bool parameters) {
  Method m;
  m.name = name;
  m.title = title;
  m.task = Task::Vi;
  m.rank = rank;
  m.auto_help = rank == 0 ? "{}" : "";
  m.options = {
      "--objective",  "--samples",      "--estimator", "--iterations",  "--learning-rate",
      "--batch-size", "--clip",         "--schedule",  "--baseline",    "--kl-warmup",
      "--fix",        "--eval-samples", "--test",      "--test-out",    "--net-learning-rate",
      "--save-nets",  "--load-nets",    "--precision", "--save-density"};
  if (std::string_view(name) == kAmortizedName)
    m.options.push_back("--activation");
  if (std::string_view(name) != kFullRankName || parameters) // amortized's encoder, dif guides, q
    for (const char* o : {"--save-guide", "--load-guide"})
      m.options.push_back(o);
  // --param-guide's, on a plate model; --draws and --psis-resample also a state-space model's.
  for (const char* o :
       {"--param-guide", "--param-draws", "--draws", "--psis-resample", "--components", "--layers",
        "--maps", "--base", "--hidden", "--prior", "--save-param-guide", "--item-guide"})
    m.options.push_back(o);
  if (parameters) // a state-space model's only (checked below)
    m.options.push_back("--laplace-start");
  m.applies = [parameters](const ssm_model& model, const ModelInfo& info) -> Refusal {
    if (info.step == "n" || !parameters)
      return variational_refusal(model, info);
    return parameter_variational_refusal(model, info);
  };
  m.check = [amortized = std::string_view(name) == kAmortizedName, applies = m.applies,
             family_name = std::string(name)](const MethodRun& run) {
    if (Refusal why = applies(run.model, run.info))
      throw Error(fmt::format("vi: {}", *why));
    if (run.info.step != "n") {
      check_family_sizes(run.options, family_name, "--method");
      return check_parameter_run(run);
    }
    if (run.options.toggle("--laplace-start").value_or(false))
      throw Error(fmt::format("vi: --laplace-start needs the parameters' exact log posterior (a "
                              "state-space model's); model '{}' is over a plate, whose "
                              "likelihood is estimated through the items' guides",
                              run.info.name));
    if (const std::string q = run.options.word("--param-guide"); q != "none") {
      check_family_sizes(run.options, q, "--param-guide", amortized);
      // A learned baseline's network steps at each use: a mixture's or a DIF's components would
      // each serve the same draws, the later ones a baseline that has seen them.
      if ((q == "gmm" || q == "dif") && run.options.word("--baseline") == "learned")
        throw Error(fmt::format("vi: --baseline learned with --param-guide {}: the baseline "
                                "would see the draws it serves (each of q's components "
                                "evaluates the same ones); use --baseline average, or another "
                                "family",
                                q));
    } else {
      if (!amortized && run.options.word("--hidden") != kDefaultHidden)
        throw Error(fmt::format("vi: --hidden sizes --method amortized's encoder, or the "
                                "networks of --param-guide dif, maf, realnvp; model '{}' has "
                                "neither here",
                                run.info.name));
      const ParameterVariationalOptions d;
      const char* parameters_flag =
          run.options.integer("--draws") != d.draws               ? "--draws"
          : run.options.toggle("--psis-resample").value_or(false) ? "--psis-resample"
          : run.options.integer("--components") != d.components   ? "--components"
          : run.options.integer("--layers") != d.layers           ? "--layers"
          : run.options.word("--maps") != d.maps                  ? "--maps"
          : run.options.word("--base") != d.base                  ? "--base"
          : !run.options.word("--param-draws").empty()            ? "--param-draws"
          : !run.options.word("--prior").empty()                  ? "--prior"
          : !run.options.word("--save-param-guide").empty()       ? "--save-param-guide"
          : run.options.word("--item-guide") != "auto"            ? "--item-guide"
                                                                  : nullptr;
      if (parameters_flag)
        throw Error(fmt::format("vi: {} serves a density over the parameters; model '{}' is over "
                                "a plate, whose parameters are point estimates unless "
                                "--param-guide names a family for them",
                                parameters_flag, run.info.name));
    }
    for (const char* flag : {"--iterations", "--kl-warmup", "--batch-size"})
      if (run.options.integer(flag) < 0)
        throw Error(fmt::format("vi: {} must be 0 or more", flag));
    for (const char* flag : {"--temperature", "--temperature-min"})
      if (!(run.options.real(flag) > 0))
        throw Error(fmt::format("vi: {} must be positive", flag));
    if (!(run.options.real("--temperature-decay") >= 0))
      throw Error("vi: --temperature-decay must be 0 or more");
    for (const char* flag : {"--save-nets", "--load-nets"})
      if (run.info.nets.empty() && !run.options.word(flag).empty())
        throw Error(fmt::format("vi: {}: model '{}' declares no networks", flag, run.info.name));
    if (!run.options.word("--save-density").empty()) {
      std::vector<std::string> densities;
      for (const NetInfo& net : run.info.nets)
        if (net.density() && net.base_of < 0) // a cascade is one density
          densities.push_back(net.name);
      if (densities.size() != 1)
        throw Error(fmt::format(
            "vi: --save-density writes a model's one learned density; model '{}' declares {}",
            run.info.name,
            densities.empty() ? std::string("none")
                              : fmt::format("{} ({}: --save-nets saves them all)", densities.size(),
                                            fmt::join(densities, ", "))));
    }
    const bool dif = std::any_of(run.info.guide.relations.begin(), run.info.guide.relations.end(),
                                 [](const GuideInfo::Relation& r) { return r.dist == "dif"; });
    for (const char* flag : {"--save-guide", "--load-guide"})
      if (!amortized && !dif && !run.options.word(flag).empty())
        throw Error(fmt::format("vi: {} needs --method {} or a dif guide in the model: the "
                                "other guides have parameters per item, which do not carry over "
                                "to other items",
                                flag, kAmortizedName));
  };
  const std::string family_name = name;
  m.vi = [family_name](const MethodRun& run) {
    return fit_variational_loaded(run, variational_options(run, family_name));
  };
  if (parameters)
    m.vi_parameters = [family_name](const MethodRun& run) {
      return fit_parameter_variational_loaded(run, parameter_options(run, family_name));
    };
  return m;
}

// A family that only a model's parameters have (gmm, dif, maf, realnvp).
Method parameter_family(const char* name, const char* title) {
  Method m;
  m.name = name;
  m.title = title;
  m.task = Task::Vi;
  m.rank = 10;
  m.note = "a model's parameters";
  m.options = {"--samples",       "--iterations", "--learning-rate", "--clip",
               "--schedule",      "--fix",        "--eval-samples",  "--net-learning-rate",
               "--save-guide",    "--load-guide", "--draws",         "--precision",
               "--psis-resample", "--components", "--layers",        "--maps",
               "--base",          "--hidden",     "--prior",         "--laplace-start"};
  m.applies = [family = std::string(name)](const ssm_model& model,
                                           const ModelInfo& info) -> Refusal {
    if (info.step == "n")
      return family == "dif" ? "a plate model's latent variables take a dif guide in the model "
                               "(`guide z[n] ~ dif(...)`: language.md); this family serves a "
                               "state-space model's parameters"
                             : "this family serves a state-space model's parameters";
    return parameter_variational_refusal(model, info);
  };
  m.check = [applies = m.applies, family = std::string(name)](const MethodRun& run) {
    if (Refusal why = applies(run.model, run.info))
      throw Error(fmt::format("vi: {}", *why));
    check_family_sizes(run.options, family, "--method");
    check_parameter_run(run);
  };
  m.vi_parameters = [family = std::string(name)](const MethodRun& run) {
    return fit_parameter_variational_loaded(run, parameter_options(run, family));
  };
  return m;
}

} // namespace

Refusal parameter_variational_refusal(const ssm_model& model, const ModelInfo& info) {
  if (Refusal why = exact_score_refusal(model, info))
    return fmt::format("variational inference of a state-space model's parameters needs an "
                       "exact likelihood and score: {}; sample --method pmmh or smc2 draws from "
                       "the posterior with a particle filter's",
                       *why);
  return std::nullopt;
}

void register_variational_methods(MethodRegistry& registry) {
  add_options(registry);
  registry.add(family(kMeanFieldName,
                      "a Gaussian per continuous latent component, a categorical per discrete "
                      "one; for a model's parameters, a diagonal Gaussian",
                      0, true));
  registry.add(family(kFullRankName,
                      "a Gaussian with a full covariance over the continuous latents of an item, "
                      "or over a model's parameters",
                      1, true));
  registry.add(family(kAmortizedName,
                      "mean-field, its parameters computed from the item's observations by an "
                      "MLP encoder, as a VAE's",
                      2, false));
  registry.add(parameter_family("gmm", "a Gaussian mixture of --components"));
  registry.add(parameter_family("dif", "a Discretely Indexed Flow of --components maps"));
  registry.add(parameter_family("maf", "a masked autoregressive flow"));
  registry.add(parameter_family("realnvp", "a RealNVP flow of affine couplings"));
}

} // namespace ssm
