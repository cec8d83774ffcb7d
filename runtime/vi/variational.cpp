// Variational inference for plate models: see variational.h. The guide is mean-field or
// full-rank Gaussian over the continuous latents of each item and a free categorical over each
// discrete one; the objective's gradient is a LibTorch autograd graph whose leaves are the guide's
// parameters and the learned model parameters' unconstrained coordinates, and whose model part is
// the compiled log joint density (nn/compiled_density.h).
#include "vi/variational.h"
#include "core/error.h"
#include "core/frame.h"
#include "kernel/distributions.h"
#include "learning/parameter_space.h"
#include "nn/adam_schedule.h"
#include "nn/compiled_density.h"
#include "nn/compiled_guide.h"
#include "nn/model_networks.h"
#include "vi/guide.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

namespace ssm {

namespace {

// theta(u) as an autograd function: the parameter space's constrain, with its chain rule.
struct ConstrainFunction : torch::autograd::Function<ConstrainFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& u,
                               const ParameterSpace* space, const std::vector<double>* base) {
    std::vector<double> uu(u.data_ptr<double>(), u.data_ptr<double>() + u.numel());
    std::vector<double> theta(base->begin(), base->begin() + space->n_theta());
    space->constrain(uu, theta);
    ctx->save_for_backward({u});
    ctx->saved_data["space"] = reinterpret_cast<int64_t>(space);
    return torch::tensor(theta, torch::kFloat64);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grad_out) {
    const torch::Tensor u = ctx->get_saved_variables()[0];
    const auto* space = reinterpret_cast<const ParameterSpace*>(ctx->saved_data["space"].toInt());
    const torch::Tensor g = grad_out[0].to(torch::kFloat64).contiguous();
    std::vector<double> uu(u.data_ptr<double>(), u.data_ptr<double>() + u.numel());
    std::vector<double> gt(g.data_ptr<double>(), g.data_ptr<double>() + g.numel());
    const std::vector<double> gu = space->gradient(uu, gt, false);
    return {torch::tensor(gu, torch::kFloat64), torch::Tensor(), torch::Tensor()};
  }
};

std::vector<double> to_vector(const torch::Tensor& t) {
  const torch::Tensor c = t.detach().to(torch::kFloat64).contiguous();
  return {c.data_ptr<double>(), c.data_ptr<double>() + c.numel()};
}

// The per-item terms of the objectives at one set of draws.
struct Terms {
  torch::Tensor elbo, iwae, kl; // [I] (kl only when asked)
  torch::Tensor surrogate;      // [I]: its gradient is the estimator's
  torch::Tensor value_k;        // [I, K]: each draw's ELBO value (detached)
  torch::Tensor log_w;          // [I, K]: each draw's log importance weight
  torch::Tensor z_mean, z_sd;   // [I, C]: the continuous components' draws' moments (with kl)
  torch::Tensor theta;          // the parameters the terms were computed at (detached)
};

} // namespace

struct VariationalProblem::Impl {
  const MethodRun& run;
  VariationalOptions opt;
  const ObsData& data;
  GuidePlan plan;
  std::vector<double> fixed; // parameters then data values; the learned ones are overwritten
  std::optional<ParameterSpace> space;
  nn::CompiledDensity density;
  Guide guide;
  // The model's networks (shared with the held-out items' problem, which keeps them).
  std::shared_ptr<nn::ModelNetworks> nets;
  // The model's own guide (`guide z[n] ~ ...`), when it has one: its compiled arguments, and the
  // items' observations its networks read.
  std::optional<nn::CompiledGuide> declared;
  torch::Tensor guide_observations; // [N, n_obs]
  // The learned parameters' unconstrained coordinates are u * u_scale, u_scale = max(1, |start|):
  // Adam's steps in u are then relative to each coordinate's size (a mean of 1000 moves by tens,
  // a log-scale by hundredths), where steps in the coordinates themselves would all be alike.
  torch::Tensor u, u_scale; // may be empty
  torch::Tensor baseline;   // [N]: per item, a moving average of its ELBO (score estimators)
  torch::Tensor has_base;   // [N] bool
  // --baseline learned: the network, its optimiser, the items' observations it reads.
  nn::Mlp learned_baseline{nullptr};
  std::unique_ptr<torch::optim::Adam> baseline_adam;
  torch::Tensor baseline_inputs;

  Impl(const MethodRun& r, const VariationalOptions& o, const ObsData& d,
       const std::vector<double>& f, bool learn)
      : run(r), opt(o), data(d), plan(plan_guide(r.model, r.info, o)), fixed(f),
        density(r.model, r.info, d, f), guide(plan, r.model, r.info, f, d, o, r.seed),
        nets(std::make_shared<nn::ModelNetworks>(r.info, r.seed, o.load_nets, o.single)) {
    if (learn) {
      space.emplace(r.info, o.fixed);
      if (space->dimension() > 0 && !r.model.score_terms)
        throw Error(fmt::format(
            "vi: model '{}' has no score terms ({}), so its parameters cannot be trained: keep "
            "them at their values with --fix",
            r.info.name, r.info.no_score_reason));
      const std::vector<double> theta(f.begin(), f.begin() + r.info.n_theta);
      std::vector<double> u0 = space->unconstrain(theta), scale(u0.size());
      for (size_t k = 0; k < u0.size(); ++k) {
        scale[k] = std::max(1.0, std::abs(u0[k]));
        u0[k] /= scale[k];
      }
      u = torch::tensor(u0, torch::kFloat64).reshape({space->dimension()});
      u_scale = torch::tensor(scale, torch::kFloat64).reshape({space->dimension()});
      u.set_requires_grad(space->dimension() > 0);
    }
    baseline = torch::zeros({d.T}, torch::kFloat64);
    has_base = torch::zeros({d.T}, torch::kBool);
    if (!r.info.guide.empty()) {
      declared.emplace(r.model, r.info, d, f);
      guide_observations = ssm::guide_observations(d, r.info.guide);
      guide.declare(r.info.guide, [this](const std::vector<int64_t>& items) {
        const torch::Tensor idx = torch::tensor(items, torch::kInt64);
        const torch::Tensor inputs =
            nets->guide_inputs(guide_observations.index_select(0, idx), {}, fixed);
        return declared->arguments(inputs, items);
      });
    }
  }

  bool learns() const { return space && space->dimension() > 0; }

  torch::Tensor theta() const {
    if (learns())
      return ConstrainFunction::apply(u * u_scale, &*space, &fixed);
    return torch::tensor(std::vector<double>(fixed.begin(), fixed.begin() + run.info.n_theta),
                         torch::kFloat64);
  }

  // The guide's parameters and the learned parameters' coordinates (at --learning-rate).
  std::vector<torch::Tensor> own_parameters() const {
    std::vector<torch::Tensor> p = guide.parameters();
    if (learns())
      p.push_back(u);
    return p;
  }
  // The weights of the model's networks (at --net-learning-rate), trained with the parameters.
  // The dif guides' weights with them.
  std::vector<torch::Tensor> net_parameters() const {
    if (!space)
      return {};
    std::vector<torch::Tensor> p = nets->parameters(), g = guide.network_parameters();
    p.insert(p.end(), g.begin(), g.end());
    return p;
  }
  std::vector<torch::Tensor> parameters() const {
    std::vector<torch::Tensor> p = own_parameters(), w = net_parameters();
    p.insert(p.end(), w.begin(), w.end());
    return p;
  }

  // The terms at `items` with K draws each, from the draws of `step`.
  // `beta` < 1 (KL annealing): the ELBO's surrogate weighs its KL term by beta.
  Terms terms(const std::vector<int64_t>& items, int64_t K, int64_t step, bool with_kl,
              double beta = 1, Relaxation relax = {}) {
    const GuideDraws d = guide.draw(items, K, static_cast<uint32_t>(step), run.seed, relax);
    const int64_t I = static_cast<int64_t>(items.size()), E = d.z.size(2), D = run.info.n_state;
    const torch::Tensor th = theta();
    // The networks' outputs in their slots: the kernels read them as states.
    const torch::Tensor flat = nets->apply(d.z.reshape({I, K * E, D}), th, fixed);
    const torch::Tensor logp = density.log_joint(flat, items, th).view({I, K, E});
    const torch::Tensor log_q_k = d.log_q_sampled;      // [I, K]
    const torch::Tensor q_e = d.log_q_enumerated.exp(); // [I, E]
    // A dif guide's log q and log weights at each point (0 without one).
    const bool points = d.log_q_point.defined();
    const torch::Tensor log_q_point = points ? d.log_q_point : torch::zeros_like(logp);
    const torch::Tensor log_point_w = points ? d.log_point_weights : torch::zeros_like(logp);
    // The ELBO's terms, with log q of the reparameterised components held at the guide's
    // parameters (the same values; the gradient "sticks the landing": guide.h).
    const torch::Tensor f = logp - d.log_q_sticking.unsqueeze(2) - d.log_q_enumerated.unsqueeze(1) -
                            log_q_point; // [I, K, E]
    Terms t;
    t.theta = th.detach();
    const torch::Tensor value_k = (d.weights * f).sum(2); // [I, K]
    t.value_k = value_k.detach();
    t.elbo = value_k.mean(1);
    if (opt.objective == "iwae" || with_kl) { // not needed to train on the ELBO
      // The enumerated latents summed in p; a dif's maps weighted by w / q (Rao-Blackwellised:
      // an unbiased estimate of p(x) still, so the bound holds).
      const torch::Tensor log_w = torch::logsumexp(logp + log_point_w - log_q_point, 2) - log_q_k;
      t.log_w = log_w.detach();
      t.iwae = torch::logsumexp(log_w, 1) - std::log(static_cast<double>(K));
    }
    if (opt.objective == "iwae" && (K > 1 || !d.log_q_score.defined())) {
      t.surrogate = t.iwae;
      // Score-function latents: VIMCO (Mnih & Rezende 2016), each draw's learning signal the
      // bound minus the bound with its log weight replaced by the mean of the others'.
      if (d.log_q_score.defined())
        t.surrogate = t.surrogate + (vimco_signal(t.log_w) * d.log_q_score).sum(1);
      // IWAE sums the enumerated latents exactly, so their categoricals are not in it: they are
      // trained on the ELBO given the other draws (its gradient in their logits only), which
      // makes them the posterior of the enumerated latents that the bounds and `prob_` report.
      if (plan.discrete_enumeration > 1)
        t.surrogate = t.surrogate + (q_e.unsqueeze(1) * log_point_w.detach().exp() *
                                     (logp.detach() - d.log_q_sticking.detach().unsqueeze(2) -
                                      d.log_q_enumerated.unsqueeze(1) - log_q_point.detach()))
                                        .sum(2)
                                        .mean(1);
    } else {
      // E[log p(x | z)] - beta KL(q || p(z)) = E[log p(x, z) - (1 - beta) log p(z) - beta log q].
      torch::Tensor annealed = value_k;
      if (beta < 1) {
        const torch::Tensor lp = density.log_prior(flat, items, th).view({I, K, E});
        annealed = (d.weights * (logp - (1 - beta) * lp -
                                 beta * (d.log_q_sticking.unsqueeze(2) +
                                         d.log_q_enumerated.unsqueeze(1) + log_q_point)))
                       .sum(2);
      }
      t.surrogate = annealed.mean(1);
      if (d.log_q_score.defined()) { // REINFORCE: (f - b) * d log q, b a baseline
        const torch::Tensor v = annealed.detach(), b = baseline_for(items, v);
        t.surrogate = t.surrogate + ((v - b) * d.log_q_score).mean(1);
      }
    }
    if (with_kl) {
      torch::NoGradGuard no_grad;
      const torch::Tensor lp = density.log_prior(flat, items, th).view({I, K, E});
      const torch::Tensor g =
          log_q_k.unsqueeze(2) + d.log_q_enumerated.unsqueeze(1) + log_q_point - lp;
      const torch::Tensor q = q_e.unsqueeze(1) * log_point_w.exp(); // [I, K, E], sums to 1 in E
      t.kl = (q * g).sum(2).mean(1);
      if (points) { // the points vary along E: their moments under q
        const torch::Tensor z =
            d.z.index_select(3, torch::tensor(plan.continuous, torch::kInt64)); // [I, K, E, C]
        const torch::Tensor m1 = (q.unsqueeze(3) * z).sum(2), m2 = (q.unsqueeze(3) * z * z).sum(2);
        t.z_mean = m1.mean(1);
        t.z_sd = (m2.mean(1) - t.z_mean.pow(2)).clamp_min(0).sqrt();
      } else if (!plan.continuous.empty()) {
        const torch::Tensor z = d.z.select(2, 0).index_select(
            2, torch::tensor(plan.continuous, torch::kInt64)); // [I, K, C]
        t.z_mean = z.mean(1);
        t.z_sd = K > 1 ? z.std(1) : torch::zeros_like(t.z_mean);
      }
    }
    return t;
  }

  // VIMCO's learning signals [I, K] from the log weights [I, K] (K >= 2): log mean w minus the
  // same with log w_k replaced by the mean of the other log weights.
  static torch::Tensor vimco_signal(const torch::Tensor& log_w) {
    const int64_t K = log_w.size(1);
    const torch::Tensor others = (log_w.sum(1, true) - log_w) / static_cast<double>(K - 1);
    const torch::Tensor eye = torch::eye(K, torch::kBool);
    // [I, K (replaced), K (summed)]: log_w with entry k replaced by others[k].
    const torch::Tensor replaced =
        torch::where(eye.unsqueeze(0), others.unsqueeze(2), log_w.unsqueeze(1));
    const torch::Tensor bound_k = torch::logsumexp(replaced, 2);
    return torch::logsumexp(log_w, 1, true) - bound_k;
  }

  // The baseline of each draw: with K >= 2 the mean of the item's other draws (leave one out);
  // with one draw, the item's moving average, or at its first visit the mean of the batch's other
  // items (none with --baseline none); with --baseline learned, plus a network's prediction of
  // the rest from the item's observations. Each is independent of the draw it serves: unbiased.
  torch::Tensor baseline_for(const std::vector<int64_t>& items, const torch::Tensor& value_k) {
    if (opt.baseline == "none")
      return torch::zeros_like(value_k);
    const torch::Tensor average = average_baseline(items, value_k);
    if (opt.baseline != "learned")
      return average;
    // NVIL's input-dependent baseline (Mnih & Gregor 2014): r(x) fits what the average leaves,
    // by least squares, one Adam step per use; the prediction served precedes the step.
    if (!learned_baseline)
      start_learned_baseline();
    const torch::Tensor x = baseline_inputs.index_select(0, torch::tensor(items, torch::kInt64));
    const torch::Tensor r = learned_baseline->forward(x); // [I, 1]
    if (torch::GradMode::is_enabled()) {
      const torch::Tensor loss = (value_k - average - r).pow(2).mean();
      baseline_adam->zero_grad();
      loss.backward();
      baseline_adam->step();
    }
    return average + r.detach();
  }

  torch::Tensor average_baseline(const std::vector<int64_t>& items, const torch::Tensor& value_k) {
    const int64_t K = value_k.size(1);
    if (K >= 2)
      return (value_k.sum(1, true) - value_k) / static_cast<double>(K - 1);
    const torch::Tensor idx = torch::tensor(items, torch::kInt64);
    const torch::Tensor v = value_k.squeeze(1);
    const int64_t I = v.size(0);
    const torch::Tensor others =
        I > 1 ? (v.sum() - v) / static_cast<double>(I - 1) : torch::zeros_like(v);
    const torch::Tensor seen = has_base.index_select(0, idx);
    const torch::Tensor old = torch::where(seen, baseline.index_select(0, idx), others);
    baseline.index_put_({idx}, torch::where(seen, 0.9 * old + 0.1 * v, v));
    has_base.index_put_({idx}, torch::ones_like(seen));
    return old.unsqueeze(1);
  }

  // The learned baseline's network: the item's observations (standardised) through one hidden
  // layer of 64 tanh units, starting at 0 (the average baseline alone).
  void start_learned_baseline() {
    const int64_t M = data.n_obs;
    baseline_inputs = item_observations(data, "the learned baseline (--baseline learned)");
    learned_baseline = nn::Mlp(nn::MlpSpec{M, 1, {64}, "tanh", opt.single});
    learned_baseline->set_standardisation(baseline_inputs.mean(0), baseline_inputs.std(0));
    learned_baseline->start_at({0.0});
    baseline_adam = std::make_unique<torch::optim::Adam>(
        learned_baseline->parameters(), torch::optim::AdamOptions(opt.learning_rate));
  }
};

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
  std::vector<torch::Tensor> weights_good(weights.size());
  auto restore_weights = [&] {
    torch::NoGradGuard no_grad;
    for (size_t k = 0; k < weights.size(); ++k)
      if (weights_good[k].defined())
        weights[k].copy_(weights_good[k]);
  };
  const int64_t every = std::max<int64_t>(1, opt.iterations / 100);
  double sum = 0, last_finite = NAN;
  int64_t count = 0, last_finite_step = -1;
  std::pair<int64_t, std::vector<int64_t>> order; // the current epoch's order of the items
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
    Terms t;
    try { // a parameter sent out of range by the last step
      t = p.terms(items, opt.samples, step, false, beta, relax);
    } catch (const Error& e) {
      restore_weights();
      return fmt::format("vi: at iteration {}: {}; {}", step, e.what(), last_good());
    }
    const torch::Tensor objective = opt.objective == "iwae" ? t.iwae : t.elbo;
    const double value = objective.detach().mean().item<double>();
    if (!std::isfinite(value) || !torch::isfinite(t.surrogate).all().item<bool>()) {
      restore_weights();
      if (step == 0 || value == -INFINITY) // the model's density is 0 at the guide's draws
        return fmt::format(
            "vi: the {} is {} at iteration {}: the model's density is 0 (or not a number) at the "
            "guide's draws; the guide keeps a continuous latent in its distribution's support "
            "only when the compiler knows it (not one that depends on a run-time value), and "
            "covers a discrete latent's whole declared range (a binomial narrower than its "
            "int[lo..hi] is not served yet)",
            opt.objective, value, step);
      return fmt::format("vi: the {} is {} at iteration {} (a batch of {} items); {}",
                         opt.objective, value, step, items.size(), last_good());
    }
    last_finite = value;
    last_finite_step = step;
    theta_good = to_vector(t.theta);
    for (size_t k = 0; k < weights.size(); ++k)
      weights_good[k] = weights[k].detach().clone();
    const double scale = static_cast<double>(N) / static_cast<double>(items.size());
    const torch::Tensor loss = -t.surrogate.sum() * scale;
    adam.zero_grad();
    loss.backward();
    if (opt.clip > 0)
      torch::nn::utils::clip_grad_norm_(params, opt.clip);
    adam.step();
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

// The bounds per item with opt.eval_samples draws each, in chunks of items that keep the draws
// under about 2^22 values.
VariationalFit::Bounds evaluate(VariationalProblem::Impl& p) {
  torch::NoGradGuard no_grad;
  VariationalFit::Bounds b;
  const int64_t N = p.data.T, K = p.opt.eval_samples;
  b.samples = K;
  int64_t per_item = K * p.plan.enumeration * std::max<int64_t>(1, p.run.info.n_state);
  // A dif's density at its M points per draw runs its weight network on M^2 rows.
  for (const GuidePlan::Dif& d : p.plan.difs)
    per_item += K * d.components * d.components *
                (2 * d.width + d.components + 2 * static_cast<int64_t>(d.columns.size()));
  const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 22) / per_item);
  std::vector<double> z_mean, z_sd; // [n * C + c]
  for (int64_t first = 0; first < N; first += chunk) {
    std::vector<int64_t> items(std::min(chunk, N - first));
    std::iota(items.begin(), items.end(), first);
    // Draws of their own: the steps after training's.
    const Terms t = p.terms(items, K, p.opt.iterations + 1 + first / chunk, true);
    // Monte Carlo standard errors: of a mean of K draws, and of log of the mean of the weights
    // by the delta method, sd(w) / (sqrt(K) mean(w)) (0 with one draw).
    const double k = static_cast<double>(K);
    const torch::Tensor elbo_se =
        K > 1 ? t.value_k.std(1) / std::sqrt(k) : torch::zeros_like(t.elbo);
    const torch::Tensor w = (t.log_w - std::get<0>(t.log_w.max(1, true))).exp();
    const torch::Tensor iwae_se =
        K > 1 ? w.std(1) / (std::sqrt(k) * w.mean(1)) : torch::zeros_like(t.elbo);
    if (t.z_mean.defined())
      for (const auto& [out, v] : {std::pair{&z_mean, t.z_mean}, {&z_sd, t.z_sd}}) {
        const std::vector<double> vals = to_vector(v);
        out->insert(out->end(), vals.begin(), vals.end());
      }
    for (const auto& [out, v] : {std::pair{&b.elbo, t.elbo},
                                 {&b.iwae, t.iwae},
                                 {&b.kl, t.kl},
                                 {&b.elbo_se, elbo_se},
                                 {&b.iwae_se, iwae_se}}) {
      const std::vector<double> vals = to_vector(v);
      out->insert(out->end(), vals.begin(), vals.end());
    }
  }
  b.guide_columns = p.guide.columns();
  b.guide = p.guide.moments();
  // A bounded component's mean and sd on its own scale, from the draws.
  const int64_t C = static_cast<int64_t>(p.plan.continuous.size());
  for (int64_t c = 0; c < C; ++c)
    if (p.guide.moments_from_draws(c))
      for (int64_t n = 0; n < N; ++n) {
        b.guide[n][2 * c] = z_mean[n * C + c];
        b.guide[n][2 * c + 1] = z_sd[n * C + c];
      }
  return b;
}

// Items that are sequences (a series column) are not served yet.
void require_single_items(const ObsData& data) {
  if (data.series.count() > 1)
    throw Error(fmt::format("vi: {} has a series column: items that are sequences are not "
                            "supported by vi yet",
                            data.source));
}

} // namespace

VariationalFit fit_variational(const MethodRun& run, const VariationalOptions& options) {
  if (Refusal why = variational_refusal(run.model, run.info))
    throw Error(fmt::format("vi: {}", *why));
  require_single_items(*run.data);
  torch::set_num_threads(std::max(1, run.threads));
  VariationalFit fit;
  fit.objective = options.objective;
  fit.samples = options.samples;
  fit.iterations = options.iterations;
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
    fit.learned.push_back(net.name);
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
  fit.train = evaluate(p);
  if (p.guide.saves())
    fit.guide_state = p.guide.save();
  if (!options.test_file.empty()) {
    const ObsData test = read_observations_file(run.info, options.test_file);
    require_single_items(test);
    std::vector<double> fixed = *run.fixed;
    std::copy(fit.theta.begin(), fit.theta.end(), fixed.begin());
    VariationalProblem::Impl q(run, options, test, fixed, false);
    q.nets = p.nets;     // the trained networks
    if (p.guide.saves()) // the trained encoder or difs, applied to the held-out items
      q.guide.share_networks(p.guide);
    if (q.guide.fitted_per_item()) { // a guide of their own per item
      VariationalFit ignored;
      std::vector<double> unused;
      if (std::string failure = train(q, ignored, unused, nullptr); !failure.empty()) {
        fit.test_failure = fmt::format("{} (fitting the guides of the --test items)", failure);
        return fit; // the training items' results stand
      }
    }
    fit.test = evaluate(q);
  }
  return fit;
}

VariationalProblem::VariationalProblem(const MethodRun& run, const VariationalOptions& options)
    : impl_(std::make_unique<Impl>(run, options, *run.data, *run.fixed, true)) {}

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
  const Terms t = impl_->terms(items, impl_->opt.samples, step, false, 1,
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
