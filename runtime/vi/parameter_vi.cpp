// Variational inference of a model's parameters with a density of the flows room as q: see
// parameter_vi.h.
#include "vi/parameter_vi.h"
#include "core/error.h"
#include "flows/dif.h"
#include "flows/gaussian.h"
#include "flows/gmm.h"
#include "flows/variational.h"
#include "learning/log_posterior.h"
#include "nn/adam_schedule.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace ssm {

namespace {

// log p(y, θ(u)) |J(u)| at each row of u ([n, d]) as a LibTorch autograd function: the exact
// smoother computes the value and its gradient at once, and backward hands the gradient on.
struct LogPosteriorFunction : torch::autograd::Function<LogPosteriorFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& u,
                               const ExactLogPosterior* target) {
    const torch::Tensor points = u.detach().to(torch::kFloat64).contiguous();
    const int64_t n = points.size(0);
    auto values = torch::empty({n}, torch::kFloat64);
    auto gradients = torch::empty_like(points);
    target->evaluate(n, points.data_ptr<double>(), values.data_ptr<double>(),
                     gradients.data_ptr<double>());
    ctx->save_for_backward({gradients});
    return values;
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grad_output) {
    const torch::Tensor gradients = ctx->get_saved_variables()[0];
    return {grad_output[0].unsqueeze(1) * gradients, torch::Tensor()};
  }
};

// q's spec for --method and its options.
flows::DensitySpec family_spec(const ParameterVariationalOptions& o, int64_t dim) {
  flows::DensitySpec spec;
  spec.dim = dim;
  spec.hidden = o.hidden;
  spec.layers = o.layers;
  spec.single = o.single;
  if (o.family == "meanfield" || o.family == "fullrank") {
    spec.kind = "gaussian";
    spec.covariance = o.family == "meanfield" ? "diagonal" : "full";
  } else if (o.family == "gmm") {
    spec.kind = "gmm";
    spec.components = o.components;
  } else if (o.family == "dif") {
    spec.kind = "dif";
    spec.components = o.components;
  } else if (o.family == "maf" || o.family == "realnvp") {
    spec.kind = o.family;
  } else {
    throw Error(fmt::format("vi: no family '{}' for the parameters (expected {})", o.family,
                            fmt::join(kParameterFamilies, ", ")));
  }
  return spec;
}

// q over the unconstrained coordinates: fresh, centred at `start` with unit scales (a Gaussian
// N(start, I); a mixture's or a DIF's components spread around it by N(0, I) draws), or read from
// --load-guide.
flows::DensityModel make_guide(const ParameterVariationalOptions& o,
                               const std::vector<std::string>& coordinates,
                               const std::vector<double>& start) {
  const auto d = static_cast<int64_t>(coordinates.size());
  const flows::DensitySpec spec = family_spec(o, d);
  if (!o.load_guide.empty()) {
    flows::DensityModel q = flows::load_density_model(o.load_guide);
    if (q.columns != coordinates)
      throw Error(fmt::format("vi: --load-guide {}: its coordinates are {}, and the learned "
                              "parameters' are {}",
                              o.load_guide, fmt::join(q.columns, ", "),
                              fmt::join(coordinates, ", ")));
    if (flows::describe(q.density->spec()) != flows::describe(spec))
      throw Error(fmt::format("vi: --load-guide {} holds a {}, and --method {} with these options "
                              "is a {}",
                              o.load_guide, flows::describe(q.density->spec()), o.family,
                              flows::describe(spec)));
    return q;
  }
  flows::DensityModel q;
  q.columns = coordinates;
  q.shift = torch::tensor(start, torch::kFloat64);
  q.scale = torch::ones({d}, torch::kFloat64);
  q.density = flows::make_density(spec);
  return q;
}

// Adam's two groups: the Gaussians', the mixture's and the DIF maps' own parameters, and the
// networks' weights.
std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>>
parameter_groups(flows::DensityImpl& density) {
  std::vector<torch::Tensor> own;
  for (const auto& m : density.modules(/*include_self=*/true)) {
    if (dynamic_cast<flows::GaussianMixtureImpl*>(m.get()) ||
        dynamic_cast<flows::GaussianImpl*>(m.get()))
      for (const torch::Tensor& p : m->parameters(false))
        own.push_back(p);
    if (auto* dif = dynamic_cast<flows::DifImpl*>(m.get())) {
      own.push_back(dif->means);
      own.push_back(dif->log_scales);
    }
  }
  std::vector<torch::Tensor> nets;
  for (const torch::Tensor& p : density.parameters())
    if (std::none_of(own.begin(), own.end(), [&](const torch::Tensor& o) { return o.is_same(p); }))
      nets.push_back(p);
  return {own, nets};
}

// The Rao-Blackwellised terms log q(u) - log p(y, θ(u)) |J(u)|, one per base draw: their mean
// is KL(q || posterior) - log p(y).
torch::Tensor kl_terms(const flows::DensityModel& q, const ExactLogPosterior& target, int64_t n) {
  const torch::Tensor log_scale = torch::log(q.scale).sum();
  return flows::reverse_kl_terms(
      *q.density,
      [&](const torch::Tensor& v) {
        const torch::Tensor u = v * q.scale + q.shift;
        return LogPosteriorFunction::apply(u, &target) + log_scale;
      },
      n);
}

// Trains q by Adam on the mean of kl_terms; fills the trace. Throws ssm::Error at a non-finite
// objective, naming the iteration.
void train(const flows::DensityModel& q, const ExactLogPosterior& target,
           const ParameterVariationalOptions& o, const MethodRun& run,
           ParameterVariationalFit& fit) {
  auto [own, nets] = parameter_groups(*q.density);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  std::vector<double> rates;
  for (auto& [group, rate] : {std::pair{own, o.learning_rate}, {nets, o.net_learning_rate}})
    if (!group.empty()) {
      groups.emplace_back(group, std::make_unique<torch::optim::AdamOptions>(rate));
      rates.push_back(rate);
    }
  if (groups.empty())
    return;
  torch::optim::Adam adam(groups, torch::optim::AdamOptions(o.learning_rate));
  const std::vector<torch::Tensor> all = q.density->parameters();
  const int64_t every = std::max<int64_t>(1, o.iterations / 100);
  double sum = 0, last_finite = NAN;
  int64_t count = 0;
  for (int64_t step = 0; step < o.iterations; ++step) {
    const torch::Tensor loss = kl_terms(q, target, o.samples).mean();
    const double elbo = -loss.item<double>();
    if (!std::isfinite(elbo))
      throw Error(
          step == 0
              ? fmt::format("vi: the ELBO is {} at iteration 0: the log posterior is not finite "
                            "at q's first draws (check the starting values and the priors)",
                            elbo)
              : fmt::format("vi: the ELBO is {} at iteration {}; the last finite one was {}; try "
                            "a smaller --learning-rate{} or --clip",
                            elbo, step, last_finite,
                            nets.empty() ? "" : " (--net-learning-rate for the networks)"));
    last_finite = elbo;
    adam.zero_grad();
    loss.backward();
    if (o.clip > 0)
      torch::nn::utils::clip_grad_norm_(all, o.clip);
    adam.step();
    if (o.schedule == "cosine")
      nn::set_learning_rate(adam, rates, nn::cosine_factor(step + 1, o.iterations));
    sum += elbo;
    ++count;
    if ((step + 1) % every == 0 || step + 1 == o.iterations) {
      fit.trace.push_back({step + 1, sum / static_cast<double>(count)});
      sum = 0;
      count = 0;
    }
    if (run.progress)
      run.progress(step, o.iterations);
  }
}

std::vector<double> row(const torch::Tensor& t, int64_t i) {
  const torch::Tensor r = t[i].contiguous();
  return {r.data_ptr<double>(), r.data_ptr<double>() + r.numel()};
}

} // namespace

ParameterVariationalFit fit_parameter_variational(const MethodRun& run,
                                                  const ParameterVariationalOptions& o) {
  if (Refusal why = parameter_variational_refusal(run.model, run.info))
    throw Error(fmt::format("vi: {}", *why));
  const ExactLogPosterior target(run, o.fixed, "vi");
  const ParameterSpace& space = target.space();
  torch::set_num_threads(1); // the smoother's evaluations take the run's threads
  torch::manual_seed(run.seed);
  ParameterVariationalFit fit;
  for (const LearnedParam& p : space.learned())
    fit.learned.push_back(run.info.params[p.index].name);
  fit.coordinates = space.coordinate_names();
  for (const ParamInfo& p : run.info.params)
    if (!p.prior.empty() && !space.find(p.name))
      fit.warnings.push_back(fmt::format("--fix {}: its prior density at its value is a factor of "
                                         "the target, so the ELBO and log_evidence estimate log "
                                         "p(y, {}) rather than log p(y)",
                                         p.name, p.name));
  fit.likelihood = target.smoother();
  flows::DensityModel q = make_guide(o, fit.coordinates, target.start());
  fit.family = flows::describe(q.density->spec());
  fit.family_parameters = q.parameter_count();

  const auto start = std::chrono::steady_clock::now();
  train(q, target, o, run, fit);
  fit.iterations = o.iterations;
  fit.train_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (run.progress_phase)
    run.progress_phase("evaluating");

  torch::NoGradGuard no_grad;
  const torch::Tensor terms = kl_terms(q, target, o.eval_samples);
  fit.eval_samples = o.eval_samples;
  fit.elbo = -terms.mean().item<double>();
  fit.elbo_se =
      o.eval_samples > 1 ? terms.std().item<double>() / std::sqrt(double(o.eval_samples)) : NAN;
  const torch::Tensor u = q.sample(o.draws);
  const torch::Tensor log_q = q.log_prob(u).contiguous();
  auto log_p = torch::empty({o.draws}, torch::kFloat64);
  auto gradients = torch::empty_like(u);
  target.evaluate(o.draws, u.contiguous().data_ptr<double>(), log_p.data_ptr<double>(),
                  gradients.data_ptr<double>());
  fit.log_q.assign(log_q.data_ptr<double>(), log_q.data_ptr<double>() + o.draws);
  fit.log_p.assign(log_p.data_ptr<double>(), log_p.data_ptr<double>() + o.draws);
  // A draw whose parameters overflow (far out on a log or logit scale) is a row of NaN, as its
  // log_p is -inf: the warning below counts both.
  const auto theta_at = [&](const std::vector<double>& point) {
    try {
      return target.theta(point);
    } catch (const Error&) {
      return std::vector<double>(static_cast<size_t>(space.n_theta()), NAN);
    }
  };
  for (int64_t i = 0; i < o.draws; ++i)
    fit.theta.push_back(theta_at(row(u, i)));
  fit.mean_theta = theta_at(row(u.mean(0, /*keepdim=*/true), 0));
  const auto bad =
      std::count_if(fit.log_p.begin(), fit.log_p.end(), [](double v) { return !std::isfinite(v); });
  if (bad > 0)
    fit.warnings.push_back(fmt::format("the log posterior is not finite at {} of the {} draws "
                                       "(parameters that overflow, or a likelihood that fails)",
                                       bad, o.draws));
  fit.guide_state = flows::density_model_bytes(q);
  return fit;
}

} // namespace ssm
