// Variational inference for plate models: see variational.h. Training by Adam on the objective's
// terms (variational_problem.h) and the fit's entry point; the bounds are evaluated in
// variational_bounds.cpp. The guide is mean-field or full-rank Gaussian over the continuous
// latents of each item and a free categorical over each discrete one; the objective's gradient is
// a LibTorch autograd graph whose leaves are the guide's parameters and the learned model
// parameters' unconstrained coordinates (with --param-guide, q(θ)'s weights), and whose model part
// is the compiled log joint density (nn/compiled_density.h).
#include "vi/variational.h"
#include "core/sequence_items.h"
#include "flows/scale_watch.h"
#include "nn/adam_schedule.h"
#include "nn/gradient_step.h"
#include "vi/variational_problem.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

namespace ssm {

namespace {

// The items of step `step`: all of them, or a batch of a permutation drawn per epoch (`order`
// caches the current epoch's).
std::vector<int64_t> batch_items(int64_t N, int64_t batch, int64_t step, uint64_t seed,
                                 std::pair<int64_t, std::vector<int64_t>>& order) {
  auto all_items = [N] {
    std::vector<int64_t> all(N);
    std::iota(all.begin(), all.end(), 0);
    return all;
  };
  if (batch <= 0 || batch >= N)
    return all_items();
  const int64_t per_epoch = (N + batch - 1) / batch, epoch = step / per_epoch,
                first = (step % per_epoch) * batch;
  if (order.second.empty() || order.first != epoch) {
    std::vector<int64_t> all = all_items();
    std::vector<double> key(N);
    for (int64_t n = 0; n < N; ++n)
      key[n] = philox_u01(seed, static_cast<uint32_t>(n), static_cast<uint32_t>(epoch),
                          kSiteBatchOrder, 0);
    std::sort(all.begin(), all.end(), [&](int64_t a, int64_t b) { return key[a] < key[b]; });
    order = {epoch, std::move(all)};
  }
  return {order.second.begin() + first, order.second.begin() + std::min(N, first + batch)};
}

// The items of a batch as a message names them: "items n = 3, 17, 40, 41, 52 and 95 more" (n as
// in --out's rows).
std::string batch_description(const std::vector<int64_t>& items) {
  constexpr size_t kShown = 5;
  std::string s = items.size() == 1 ? "item n = " : "items n = ";
  for (size_t k = 0; k < std::min(items.size(), kShown); ++k)
    s += fmt::format("{}{}", k == 0 ? "" : ", ", items[k]);
  if (items.size() > kShown)
    s += fmt::format(" and {} more", items.size() - kShown);
  return s;
}

// Trains the problem's parameters with Adam: the trace, and the failure message (empty when every
// objective was finite). `theta_good`: the parameters of the last finite objective.
std::string train(VariationalProblem::Impl& p, VariationalFit& fit, std::vector<double>& theta_good,
                  const std::function<void(int64_t, int64_t)>& progress) {
  const VariationalOptions& opt = p.opt;
  const int64_t N = p.data.T;
  std::vector<torch::Tensor> params = p.parameters();
  theta_good = to_vector(p.theta());
  if (params.empty()) // nothing to fit: a guide of constants, every parameter fixed
    return {};
  // Two groups: the guide and parameters, and the networks' weights (their own step size).
  std::vector<torch::optim::OptimizerParamGroup> groups;
  std::vector<double> rates;
  for (const auto& [group, rate] : {std::pair{p.own_parameters(), opt.learning_rate},
                                    {p.net_parameters(), opt.net_learning_rate}})
    if (!group.empty()) {
      groups.emplace_back(group, std::make_unique<torch::optim::AdamOptions>(rate));
      rates.push_back(rate);
    }
  torch::optim::Adam adam(groups, torch::optim::AdamOptions(opt.learning_rate));
  // The networks' weights at the last finite objective, restored after a failure.
  const std::vector<torch::Tensor> weights = p.net_parameters();
  nn::Checkpoint weights_good(weights);
  const int64_t every = std::max<int64_t>(1, opt.iterations / 100);
  double sum = 0, last_finite = NAN;
  int64_t count = 0, last_finite_step = -1;
  std::pair<int64_t, std::vector<int64_t>> order; // the current epoch's order of the items
  // The DIFs training could collapse: the latents' guides, the parameters' q, the model's own.
  std::vector<std::pair<std::string, const flows::DensityImpl*>> watched;
  for (const auto& [latent, dif] : p.guide.dif_guides())
    watched.emplace_back(fmt::format("the guide of {}", latent), dif);
  if (p.q_theta)
    watched.emplace_back("the parameters' q", p.q_theta->density.get());
  for (const auto& [net, density] : p.nets->densities())
    watched.emplace_back(fmt::format("net {}", net), density);
  flows::ScaleWatch watch(true);
  for (int64_t step = 0; step < opt.iterations; ++step) {
    const std::vector<int64_t> items = batch_items(N, opt.batch_size, step, p.run.seed, order);
    const double beta =
        opt.kl_warmup > 0
            ? std::min(1.0, static_cast<double>(step) / static_cast<double>(opt.kl_warmup))
            : 1.0;
    // What a failure after a finite start says of the last good iteration.
    auto last_good = [&] {
      return fmt::format("the last finite {} was {} at iteration {}; try a smaller "
                         "--learning-rate{} or --clip",
                         opt.objective, last_finite, last_finite_step,
                         weights.empty() ? "" : " (--net-learning-rate for the networks)");
    };
    // gumbel: the temperature, annealed.
    const Relaxation relax{
        std::max(std::min(opt.temperature_min, opt.temperature),
                 opt.temperature * std::exp(-opt.temperature_decay * static_cast<double>(step))),
        opt.straight_through};
    fit.temperature = relax.temperature;
    const double scale = static_cast<double>(N) / static_cast<double>(items.size());
    // The loss, whose gradient the step follows, the objective per item, the parameters.
    torch::Tensor loss, theta;
    double value = NAN, loss_value = NAN;
    try { // a parameter sent out of range by the last step
      if (p.q_theta) {
        const VariationalProblem::Impl::JointStep j = p.joint_step(items, step, beta, relax, scale);
        loss = j.loss;
        value = j.value;
        loss_value = loss.item<double>();
        theta = j.theta;
      } else {
        const ObjectiveTerms t = p.terms(items, opt.samples, step, false, beta, relax);
        const torch::Tensor objective = opt.objective == "iwae" ? t.iwae : t.elbo;
        const torch::Tensor total = t.surrogate.sum();
        loss = total * -scale;
        // The ELBO's surrogate is the ELBO itself (the sticking-the-landing gradient): its sum
        // gives both, in one reading.
        if (objective.is_same(t.surrogate)) {
          const double sum = total.item<double>();
          value = sum / static_cast<double>(items.size());
          loss_value = sum * -scale;
        } else {
          value = objective.detach().mean().item<double>();
          loss_value = loss.item<double>();
        }
        theta = t.theta;
      }
    } catch (const Error& e) {
      weights_good.restore();
      return fmt::format("vi: at iteration {} (its batch: {}): {}; {}", step,
                         batch_description(items), e.what(), last_good());
    }
    if (!std::isfinite(value) || !std::isfinite(loss_value)) {
      weights_good.restore();
      if (step == 0 || value == -INFINITY) // the model's density is 0 at the guide's draws
        return fmt::format(
            "vi: the {} is {} at iteration {}: the model's density is 0 (or not a number) at the "
            "guide's draws; the guide keeps a continuous latent in its distribution's support "
            "only when the compiler knows it (not one that depends on a run-time value), and "
            "covers a discrete latent's whole declared range (a binomial narrower than its "
            "int[lo..hi] is not served yet)",
            opt.objective, value, step);
      return fmt::format("vi: the {} is {} at iteration {} (its batch: {}); {}", opt.objective,
                         value, step, batch_description(items), last_good());
    }
    last_finite = value;
    last_finite_step = step;
    theta_good = to_vector(theta);
    weights_good.take();
    nn::clear_gradients(params);
    loss.backward();
    if (opt.clip > 0)
      nn::clip_gradients(params, opt.clip);
    adam.step();
    for (const auto& [owner, density] : watched)
      for (const flows::Collapse& c : watch.check(*density))
        fit.warnings.push_back(flows::collapse_warning(
            owner, c, fmt::format("iteration {}", step),
            "a spike in the posterior, or a degenerate fit: fewer components, or a smaller "
            "--learning-rate or --net-learning-rate"));
    if (opt.schedule == "cosine")
      nn::set_learning_rate(adam, rates, nn::cosine_factor(step + 1, opt.iterations));
    sum += value;
    ++count;
    if ((step + 1) % every == 0 || step + 1 == opt.iterations) {
      fit.trace.push_back({step + 1, sum / static_cast<double>(count)});
      sum = 0;
      count = 0;
    }
    if (progress)
      progress(step, opt.iterations); // step + 1 of them done
  }
  theta_good = to_vector(p.theta());
  return "";
}

// The items of `rows`: one per row, or, for a model whose observation is a sequence, one per
// series of rows (core/sequence_items.h). A series column in a model without sequences is an
// error: its items are not sequences.
ObsData items_of(const ModelInfo& info, const ObsData& rows) {
  if (!has_sequences(info) && rows.series.count() > 1)
    throw Error(fmt::format("vi: {} has a series column, but no observation of model '{}' is a "
                            "sequence (obs c[n] : sequence[V]): its items are its rows",
                            rows.source, info.name));
  return gather_sequence_items(info, rows);
}

} // namespace

VariationalFit fit_variational(const MethodRun& given, const VariationalOptions& options) {
  if (Refusal why = variational_refusal(given.model, given.info))
    throw Error(fmt::format("vi: {}", *why));
  const ObsData items = items_of(given.info, *given.data);
  MethodRun run = given;
  run.data = &items;
  torch::set_num_threads(std::max(1, run.threads));
  VariationalFit fit;
  fit.objective = options.objective;
  fit.samples = options.samples;
  fit.iterations = options.iterations;
  if (options.parameter_guide) // q's start, its draws: LibTorch's generator, under --seed
    torch::manual_seed(run.seed);
  VariationalProblem::Impl p(run, options, *run.data, *run.fixed, true);
  if (p.guide.fitted_per_item() && options.batch_size > 0 && options.batch_size < run.data->T)
    throw Error(
        fmt::format("vi: --batch-size {} with --method {}: its parameters are per item, and "
                    "Adam's moments would move the items left out of a batch; mini-batches "
                    "need --method {}, whose encoder every item shares, or a guide in the "
                    "model for every latent variable",
                    options.batch_size, options.family, kAmortizedName));
  fit.estimators = p.plan.estimators;
  if (p.space)
    for (const LearnedParam& l : p.space->learned())
      fit.learned.push_back(run.info.params[l.index].name);
  for (const NetInfo& net : run.info.nets)
    if (net.base_of < 0) // a cascade's stages are learned as part of it
      fit.learned.push_back(net.name);
  const std::vector<int64_t> weights = p.nets->weights();
  for (size_t k = 0; k < weights.size(); ++k)
    if (run.info.nets[k].base_of < 0)
      fit.network_weights.emplace_back(run.info.nets[k].name, weights[k]);
  std::vector<double> theta_good;
  const auto start = std::chrono::steady_clock::now();
  fit.failure = train(p, fit, theta_good, run.progress);
  fit.train_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fit.theta = theta_good;
  if (!p.nets->empty())
    fit.nets_state = p.nets->save();
  if (!fit.failure.empty())
    return fit;
  if (!options.save_density.empty())
    for (const NetInfo& net : run.info.nets)
      if (net.density() && net.base_of < 0) // methods.cpp checked there is one
        flows::save_density_model(p.nets->density_model(net.name), options.save_density);
  if (p.q_theta) { // the items' bounds below are then at θ of q's mean
    if (run.progress_phase)
      run.progress_phase("drawing the parameters");
    fit.parameters = evaluate_parameters(p, options.iterations + 1 + run.data->T);
    fit.parameters->iterations = options.iterations;
    fit.parameters->train_seconds = fit.train_seconds;
    for (const VariationalFit::TracePoint& t : fit.trace) // per item there, the whole ELBO here
      fit.parameters->trace.push_back(
          {t.iteration, t.objective * static_cast<double>(run.data->T)});
    // The draws' mean on the parameters' own scale, over the draws that did not overflow.
    std::vector<double> mean(static_cast<size_t>(run.info.n_theta), 0.0);
    double count = 0;
    for (const std::vector<double>& th : fit.parameters->theta)
      if (std::all_of(th.begin(), th.end(), [](double v) { return std::isfinite(v); })) {
        for (size_t k = 0; k < mean.size(); ++k)
          mean[k] += th[k];
        ++count;
      }
    if (count > 0) {
      for (double& v : mean)
        v /= count;
      std::copy(mean.begin(), mean.end(), p.fixed.begin());
      fit.theta = mean;
      if (p.items_conditional) // the items' bounds: their guides given θ̄
        p.items_given = p.standardised(torch::tensor(p.space->unconstrain(mean), torch::kFloat64));
    }
  }
  fit.train = evaluate_bounds(p);
  if (p.guide.saves())
    fit.guide_state = p.guide.save();
  if (!options.test_file.empty()) {
    const ObsData test = items_of(run.info, read_observations_file(run.info, options.test_file));
    std::vector<double> fixed = *run.fixed;
    std::copy(fit.theta.begin(), fit.theta.end(), fixed.begin());
    VariationalProblem::Impl q(run, options, test, fixed, false);
    q.nets = p.nets;     // the trained networks
    if (p.guide.saves()) // the trained encoder or difs, applied to the held-out items
      q.guide.share_networks(p.guide);
    q.items_given = p.items_given;   // a conditional encoder's items: given θ̄'s draw
    if (q.guide.fitted_per_item()) { // a guide of their own per item
      VariationalFit ignored;
      std::vector<double> unused;
      if (std::string failure = train(q, ignored, unused, nullptr); !failure.empty()) {
        fit.test_failure = fmt::format("{} (fitting the guides of the --test items)", failure);
        return fit; // the training items' results stand
      }
    }
    fit.test = evaluate_bounds(q);
  }
  return fit;
}

VariationalProblem::VariationalProblem(const MethodRun& run, const VariationalOptions& options)
    : impl_(std::make_unique<Impl>(run, options, *run.data, *run.fixed, true)) {
  if (has_sequences(run.info)) // its data would need gathering into items, as fit_variational's
    throw Error("VariationalProblem: items that are sequences are not served");
  if (options.parameter_guide)
    throw Error("VariationalProblem: --param-guide is not served (its parameters are q's)");
}

VariationalProblem::~VariationalProblem() = default;

std::vector<double> VariationalProblem::parameters() const {
  std::vector<double> out;
  for (const torch::Tensor& t : impl_->parameters()) {
    const std::vector<double> v = to_vector(t);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

void VariationalProblem::set_parameters(std::span<const double> values) {
  torch::NoGradGuard no_grad;
  size_t k = 0;
  for (torch::Tensor& t : impl_->parameters()) {
    const int64_t n = t.numel();
    if (k + n > values.size())
      throw Error("internal error: too few values for the variational parameters");
    t.copy_(torch::tensor(std::vector<double>(values.begin() + k, values.begin() + k + n),
                          torch::kFloat64)
                .view(t.sizes()));
    k += n;
  }
}

std::vector<std::string> VariationalProblem::parameter_names() const {
  std::vector<std::string> names = impl_->guide.parameter_names();
  if (impl_->learns())
    for (const std::string& name : impl_->space->coordinate_names())
      names.push_back(name);
  if (impl_->space) {
    for (const std::string& name : impl_->nets->parameter_names())
      names.push_back(name);
    for (const std::string& name : impl_->guide.network_parameter_names())
      names.push_back(name);
  }
  return names;
}

VariationalProblem::Estimate VariationalProblem::estimate(int64_t step) {
  std::vector<int64_t> items(impl_->data.T);
  std::iota(items.begin(), items.end(), 0);
  std::vector<torch::Tensor> params = impl_->parameters();
  for (torch::Tensor& t : params)
    if (t.grad().defined())
      t.mutable_grad().zero_();
  const ObjectiveTerms t =
      impl_->terms(items, impl_->opt.samples, step, false, 1,
                   Relaxation{impl_->opt.temperature, impl_->opt.straight_through});
  t.surrogate.sum().backward();
  Estimate e;
  e.objective = (impl_->opt.objective == "iwae" ? t.iwae : t.elbo).sum().item<double>();
  for (const torch::Tensor& p : params) {
    const std::vector<double> g =
        p.grad().defined() ? to_vector(p.grad()) : std::vector<double>(p.numel(), 0.0);
    e.gradient.insert(e.gradient.end(), g.begin(), g.end());
  }
  return e;
}

} // namespace ssm
