// The variational methods' registration: see methods.h.
#include "vi/methods.h"
#include "core/error.h"
#include "vi/loader.h"
#include "vi/variational.h"

#include <fmt/format.h>

#include <algorithm>

namespace ssm {

namespace {

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
  o.single = run.options.word("--precision") == "single";
  return o;
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
                           .help = "K: draws from the guide per item and iteration",
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
                                   "parameter with a value or a prior is trained with the guide",
                           .default_value = std::vector<std::string>{},
                           .type_name = "NAME"});
  registry.add_option(vi, {.flag = "--eval-samples",
                           .help = "Draws per item of the reported bounds (the IWAE bound with "
                                   "this many draws estimates log p(x))",
                           .default_value = d.eval_samples,
                           .check = MethodOption::Check::Positive,
                           .type_name = "K"});
  registry.add_option(vi, {.flag = "--hidden",
                           .help = "amortized: the encoder's hidden layers, widths separated by "
                                   "commas",
                           .default_value = std::string("64"),
                           .type_name = "WIDTHS"});
  registry.add_option(vi, {.flag = "--activation",
                           .help = "amortized: the encoder's activation",
                           .default_value = d.activation,
                           .choices = {"tanh", "relu", "silu", "gelu"}});
  registry.add_option(vi, {.flag = "--save-guide",
                           .help = "amortized: write the trained encoder (LibTorch's archive), "
                                   "which --load-guide reads; meanfield: the model's dif guides",
                           .default_value = std::string(),
                           .type_name = "FILE.pt",
                           .show_default = false});
  registry.add_option(vi, {.flag = "--load-guide",
                           .help = "amortized: start from this saved encoder, meanfield: from "
                                   "these dif guides (with --iterations 0: only evaluate them)",
                           .default_value = std::string(),
                           .type_name = "FILE.pt",
                           .show_default = false});
  registry.add_option(vi, {.flag = "--net-learning-rate",
                           .help = "Adam's step size for the weights of the model's networks "
                                   "(`net` declarations) and of its dif guides' networks",
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
}

Method family(const char* name, const char* title, int rank) {
  Method m;
  m.name = name;
  m.title = title;
  m.task = Task::Vi;
  m.rank = rank;
  m.auto_help = rank == 0 ? "{}" : "";
  m.options = {"--objective",     "--samples",           "--estimator", "--iterations",
               "--learning-rate", "--batch-size",        "--clip",      "--schedule",
               "--baseline",      "--kl-warmup",         "--fix",       "--eval-samples",
               "--test",          "--net-learning-rate", "--save-nets", "--load-nets"};
  if (std::string_view(name) == kAmortizedName)
    for (const char* o : {"--hidden", "--activation"})
      m.options.push_back(o);
  if (std::string_view(name) != kFullRankName) // amortized's encoder, or a model's dif guides
    for (const char* o : {"--save-guide", "--load-guide"})
      m.options.push_back(o);
  m.applies = variational_refusal;
  m.check = [amortized = std::string_view(name) == kAmortizedName](const MethodRun& run) {
    if (Refusal why = variational_refusal(run.model, run.info))
      throw Error(fmt::format("vi: {}", *why));
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
  return m;
}

} // namespace

void register_variational_methods(MethodRegistry& registry) {
  add_options(registry);
  registry.add(family(kMeanFieldName,
                      "a Gaussian per continuous latent component, a categorical per discrete one",
                      0));
  registry.add(family(kFullRankName,
                      "a Gaussian with a full covariance over the continuous latents of an item",
                      1));
  registry.add(family(kAmortizedName,
                      "mean-field, its parameters computed from the item's observations by an "
                      "MLP encoder, as a VAE's",
                      2));
}

} // namespace ssm
