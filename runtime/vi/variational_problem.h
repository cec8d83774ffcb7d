// The variational problem of a plate model inside the vi module: its per-item objective terms
// at one set of the guide's draws (VariationalProblem::Impl), which training (variational.cpp)
// and evaluation (variational_bounds.cpp) share. Torch code: the vi module's only.
#pragma once

#include "core/error.h"
#include "core/frame.h"
#include "flows/variational.h"
#include "kernel/distributions.h"
#include "learning/parameter_space.h"
#include "learning/pmmh.h"
#include "nn/compiled_density.h"
#include "nn/compiled_guide.h"
#include "nn/tensor_values.h"
#include "vi/guide.h"
#include "vi/model_networks.h"
#include "vi/parameter_guide.h"
#include "vi/variational.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

namespace ssm {

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

using nn::to_vector;

// The per-item terms of the objectives at one set of draws.
struct ObjectiveTerms {
  torch::Tensor elbo, iwae, kl; // [I] (kl only when asked)
  torch::Tensor surrogate;      // [I]: its gradient is the estimator's
  torch::Tensor value_k;        // [I, K]: each draw's ELBO value (detached)
  torch::Tensor log_w;          // [I, K]: each draw's log importance weight
  torch::Tensor z_mean, z_sd;   // [I, C]: the continuous components' draws' moments (with kl)
  torch::Tensor z_square;       // [I, C]: their mean square (with kl)
  torch::Tensor theta;          // the parameters the terms were computed at (detached)
};

// The problem: the guide, the model's compiled density and networks, the learned parameters (point
// estimates, or q(θ) with --param-guide), and the terms of the objective at a batch of items.
struct VariationalProblem::Impl {
  const MethodRun& run;
  VariationalOptions opt;
  const ObsData& data;
  GuidePlan plan;
  std::vector<double> fixed; // parameters then data values; the learned ones are overwritten
  std::optional<ParameterSpace> space;
  nn::CompiledDensity density;
  // The model's networks (shared with the held-out items' problem, which keeps them); before the
  // guide, whose start reads their outputs.
  std::shared_ptr<nn::ModelNetworks> nets;
  Guide guide;
  // The model's own guide (`guide z[n] ~ ...`), when it has one: its compiled arguments, and the
  // items' observations its networks read.
  std::optional<nn::CompiledGuide> declared;
  torch::Tensor guide_observations; // [N, n_obs]
  torch::Tensor item_covariates;    // [N, n_inputs] (input x[n]) for networks that read them
  torch::Tensor covariates_of(const std::vector<int64_t>& items) const {
    return item_covariates.defined()
               ? item_covariates.index_select(0, torch::tensor(items, torch::kInt64))
               : torch::Tensor();
  }
  nn::SequenceBatch item_sequences; // the items' sequences (observations `sequence[V]`)
  nn::SequenceBatch sequences_of(const std::vector<int64_t>& items) const {
    return item_sequences.empty() ? item_sequences
                                  : item_sequences.select(torch::tensor(items, torch::kInt64));
  }
  // The learned parameters' unconstrained coordinates are u * u_scale, u_scale = max(1, |start|):
  // Adam's steps in u are then relative to each coordinate's size (a mean of 1000 moves by tens,
  // a log-scale by hundredths), where steps in the coordinates themselves would all be alike.
  torch::Tensor u, u_scale; // may be empty
  // --param-guide: q over the learned parameters' unconstrained coordinates, and their prior.
  std::optional<flows::DensityModel> q_theta;
  std::optional<LogPrior> model_prior;
  std::optional<ParameterPrior> prior; // the model's, or --prior's density
  // --param-guide: the items' guides conditional on θ's draw (--item-guide linear), and the
  // draw (q's standardised coordinates) they are evaluated at when terms() is given none.
  bool items_conditional = false;
  torch::Tensor items_given;
  // --item-guide linear: each item's marginal moments over q(θ) q(z_n | θ) ([N, C]: mean, sd of
  // the continuous components), from evaluate_parameters' draws, for the reported guide.
  torch::Tensor item_mean, item_sd;
  torch::Tensor baseline; // [N]: per item, a moving average of its ELBO (score estimators)
  torch::Tensor has_base; // [N] bool
  // --baseline learned: the network, its optimiser, the items' observations it reads.
  nn::Mlp learned_baseline{nullptr};
  std::unique_ptr<torch::optim::Adam> baseline_adam;
  torch::Tensor baseline_inputs;

  Impl(const MethodRun& r, const VariationalOptions& o, const ObsData& d,
       const std::vector<double>& f, bool learn)
      : run(r), opt(o), data(d), plan(plan_guide(r.model, r.info, o)), fixed(f),
        density(r.model, r.info, d, f),
        nets(std::make_shared<nn::ModelNetworks>(r.info, r.seed, o.load_nets, o.single)),
        guide(plan, r.model, r.info, f, d, o, r.seed, items_given_dimension(r, o, learn),
              nets.get()) {
    if (learn && o.parameter_guide) {
      const std::string& prior_file = o.parameter_guide->prior;
      if (prior_file.empty())
        space.emplace(sampled_parameters(r, o.fixed, "vi --param-guide"));
      else
        space.emplace(r.info, o.fixed);
      space->require_some("vi --param-guide", "infer");
      if (!r.model.score_terms)
        throw Error(fmt::format("vi --param-guide: model '{}' has no score terms ({}), so its "
                                "parameters cannot be trained",
                                r.info.name, r.info.no_score_reason));
      if (prior_file.empty()) {
        model_prior.emplace(r.model, *space, f);
        prior.emplace(&*model_prior);
      } else {
        prior.emplace(prior_file, space->coordinate_names());
      }
      q_theta =
          make_parameter_guide(*o.parameter_guide, space->coordinate_names(),
                               space->unconstrain({f.data(), static_cast<size_t>(r.info.n_theta)}));
      items_conditional = guide.conditional();
      if (!items_conditional && o.item_guide == "linear")
        throw Error("vi --item-guide linear: no latent has a Gaussian of the guide's own to "
                    "condition on the parameters (the model's guide covers them, or they are "
                    "discrete or score-estimated)");
    } else if (learn) {
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
    if (d.n_inputs > 0)
      item_covariates = torch::tensor(d.u, torch::kFloat64).view({d.T, d.n_inputs});
    item_sequences = nn::sequence_batch(d);
    if (!r.info.guide.empty()) {
      declared.emplace(r.model, r.info, d, f);
      guide_observations = ssm::guide_observations(d, r.info.guide);
      guide.declare(r.info.guide, [this](const std::vector<int64_t>& items) {
        const torch::Tensor idx = torch::tensor(items, torch::kInt64);
        const torch::Tensor inputs =
            nets->guide_inputs(guide_observations.index_select(0, idx), {}, fixed,
                               covariates_of(items), sequences_of(items));
        return declared->arguments(inputs, items);
      });
    }
  }

  // The dimension of the parameters' draw that the items' guides are conditional on
  // (--item-guide linear, or auto, under --param-guide), or 0. The held-out items' problem
  // (learn false) has conditional guides too when an encoder serves them: it shares the trained
  // one, gains included, and evaluates it at θ̄'s draw (items_given).
  static int64_t items_given_dimension(const MethodRun& r, const VariationalOptions& o,
                                       bool learn) {
    // auto: linear for the per-item families; an encoder's gains train less reliably on few
    // items (bench/README.md), so amortized takes them when asked.
    if (!o.parameter_guide || o.item_guide == "independent" ||
        (o.item_guide == "auto" && o.family == kAmortizedName) ||
        (!learn && o.family != kAmortizedName))
      return 0;
    if (!o.parameter_guide->prior.empty())
      return ParameterSpace(r.info, o.fixed).dimension();
    return sampled_parameters(r, o.fixed, "vi --param-guide").dimension();
  }

  // Point estimates of the parameters (without --param-guide).
  bool learns() const { return space && space->dimension() > 0 && !q_theta; }

  // The parameters: the point estimates, or (with --param-guide, or none learned) `fixed`'s.
  torch::Tensor theta() const {
    if (learns())
      return ConstrainFunction::apply(u * u_scale, &*space, &fixed);
    return torch::tensor(std::vector<double>(fixed.begin(), fixed.begin() + run.info.n_theta),
                         torch::kFloat64);
  }
  // θ(u) at one unconstrained point u ([d]), differentiable in u.
  torch::Tensor theta_at(const torch::Tensor& point) const {
    return ConstrainFunction::apply(point.contiguous(), &*space, &fixed);
  }
  // --param-guide: u's coordinates standardised as q's base (what conditional guides read).
  torch::Tensor standardised(const torch::Tensor& point) const {
    return (point - q_theta->shift) / q_theta->scale;
  }

  // The guide's parameters and the learned parameters' coordinates, or q's own parameters (at
  // --learning-rate).
  std::vector<torch::Tensor> own_parameters() const {
    std::vector<torch::Tensor> p = guide.parameters();
    if (learns())
      p.push_back(u);
    if (q_theta) {
      const std::vector<torch::Tensor> own = parameter_groups(*q_theta->density).first;
      p.insert(p.end(), own.begin(), own.end());
    }
    return p;
  }
  // The weights of the model's networks (at --net-learning-rate), trained with the parameters.
  // The dif guides' weights with them.
  std::vector<torch::Tensor> net_parameters() const {
    if (!space)
      return {};
    std::vector<torch::Tensor> p = nets->parameters(), g = guide.network_parameters();
    p.insert(p.end(), g.begin(), g.end());
    if (q_theta) {
      const std::vector<torch::Tensor> q_nets = parameter_groups(*q_theta->density).second;
      p.insert(p.end(), q_nets.begin(), q_nets.end());
    }
    return p;
  }
  std::vector<torch::Tensor> parameters() const {
    std::vector<torch::Tensor> p = own_parameters(), w = net_parameters();
    p.insert(p.end(), w.begin(), w.end());
    return p;
  }

  // The terms at `items` with K draws each, from the draws of `step`, at the parameters `at`
  // (default: theta()).
  // `beta` < 1 (KL annealing): the ELBO's surrogate weighs its KL term by beta.
  // `given`: the parameters' draw the items' guides are conditional on (q's standardised
  // coordinates; default: items_given).
  ObjectiveTerms terms(const std::vector<int64_t>& items, int64_t K, int64_t step, bool with_kl,
                       double beta = 1, Relaxation relax = {}, const torch::Tensor& at = {},
                       const torch::Tensor& given = {}) {
    // Only the IWAE bound differentiates log q of the draws through its parameters.
    const GuideDraws d = guide.draw(items, K, static_cast<uint32_t>(step), run.seed, relax,
                                    given.defined() ? given : items_given, opt.objective == "iwae");
    const int64_t I = static_cast<int64_t>(items.size()), E = d.z.size(2), D = run.info.n_state;
    const torch::Tensor th = at.defined() ? at : theta();
    // The networks' outputs in their slots: the kernels read them as states.
    const nn::SequenceBatch sequences = sequences_of(items);
    const torch::Tensor flat =
        nets->apply(d.z.reshape({I, K * E, D}), th, fixed, covariates_of(items), &sequences);
    const torch::Tensor logp = density.log_joint(flat, items, th).view({I, K, E});
    const torch::Tensor log_q_k = d.log_q_sampled; // [I, K]
    // Without discrete latents or a dif guide (E = 1, weights 1, log q of the points 0), in as
    // few operations as a hand-written VAE's step: what only the others need is not computed.
    const bool points = d.log_q_point.defined();
    const bool plain = !points && plan.discrete.empty();
    const bool bounds = opt.objective == "iwae" || with_kl;
    const bool general = !plain || bounds || beta < 1;
    const torch::Tensor q_e = general ? d.log_q_enumerated.exp() : torch::Tensor(); // [I, E]
    // A dif guide's log q and log weights at each point (0 without one).
    const torch::Tensor log_q_point =
        points ? d.log_q_point : (general ? torch::zeros_like(logp) : torch::Tensor());
    const torch::Tensor log_point_w = points ? d.log_point_weights : log_q_point;
    // The ELBO's terms, with log q of the reparameterised components held at the guide's
    // parameters (the same values; the gradient "sticks the landing": guide.h).
    const torch::Tensor value_k = // [I, K]
        plain ? logp.select(2, 0) - d.log_q_sticking
              : (d.weights * (logp - d.log_q_sticking.unsqueeze(2) -
                              d.log_q_enumerated.unsqueeze(1) - log_q_point))
                    .sum(2);
    ObjectiveTerms t;
    t.theta = th.detach();
    t.value_k = value_k.detach();
    t.elbo = value_k.mean(1);
    if (bounds) { // not needed to train on the ELBO
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
      t.surrogate = beta < 1 ? annealed.mean(1) : t.elbo; // the same values: one operation
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
        t.z_square = m2.mean(1);
        t.z_sd = (t.z_square - t.z_mean.pow(2)).clamp_min(0).sqrt();
      } else if (!plan.continuous.empty()) {
        const torch::Tensor z = d.z.select(2, 0).index_select(
            2, torch::tensor(plan.continuous, torch::kInt64)); // [I, K, C]
        t.z_mean = z.mean(1);
        t.z_square = z.pow(2).mean(1);
        t.z_sd = K > 1 ? z.std(1) : torch::zeros_like(t.z_mean);
      }
    }
    return t;
  }

  // --param-guide: one estimate of the negative joint ELBO of p(x, z, θ) over q(θ) Π_n q(z_n)
  // (the loss, its gradient the estimators'), Rao-Blackwellised over a mixture's or a DIF's
  // components as for a state-space model's parameters; the items' part is scaled by `scale`
  // (all items over the batch's). Also the ELBO per item, and θ at the first draw.
  struct JointStep {
    torch::Tensor loss;
    double value = 0;
    torch::Tensor theta;
  };
  JointStep joint_step(const std::vector<int64_t>& items, int64_t step, double beta,
                       Relaxation relax, double scale) {
    const flows::DensityModel& q = *q_theta;
    const torch::Tensor log_scale = torch::log(q.scale).sum();
    torch::Tensor first;
    // Each row (a mixture's or a DIF's components carry one draw) sees the same latents' draws,
    // so each gets the moving-average baseline as it was before any of them: one independent of
    // the draws it serves. The last row's update stands.
    const torch::Tensor baseline_before = baseline.clone(), has_base_before = has_base.clone();
    const auto log_target = [&](const torch::Tensor& v) {
      const torch::Tensor u = v * q.scale + q.shift;
      std::vector<torch::Tensor> items_part;
      for (int64_t i = 0; i < u.size(0); ++i) {
        baseline.copy_(baseline_before);
        has_base.copy_(has_base_before);
        const torch::Tensor th = theta_at(u[i]);
        if (!first.defined())
          first = th.detach();
        const ObjectiveTerms t = terms(items, opt.samples, step, false, beta, relax, th, v[i]);
        const torch::Tensor objective = (opt.objective == "iwae" ? t.iwae : t.elbo).sum();
        const torch::Tensor surrogate = t.surrogate.sum(); // the objective's value, its gradient
        items_part.push_back(scale * (surrogate + (objective - surrogate).detach()));
      }
      return torch::stack(items_part) + (*prior)(u) + log_scale;
    };
    JointStep j;
    j.loss = flows::reverse_kl_terms(*q.density, log_target, opt.parameter_guide->samples).mean();
    j.value = -j.loss.item<double>() / static_cast<double>(data.T);
    j.theta = first;
    return j;
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

  // The learned baseline's network: the item's observations and covariates (standardised)
  // through one hidden layer of 64 tanh units, starting at 0 (the average baseline alone).
  void start_learned_baseline() {
    baseline_inputs = item_features(data, "the learned baseline (--baseline learned)");
    const int64_t M = baseline_inputs.size(1);
    learned_baseline = nn::Mlp(nn::MlpSpec{M, 1, {64}, "tanh", opt.single});
    learned_baseline->set_standardisation(baseline_inputs.mean(0), baseline_inputs.std(0));
    learned_baseline->start_at({0.0});
    baseline_adam = std::make_unique<torch::optim::Adam>(
        learned_baseline->parameters(), torch::optim::AdamOptions(opt.learning_rate));
  }
};

// How many items' terms with K draws each keep the draws under about 2^22 values.
int64_t items_per_chunk(const VariationalProblem::Impl& p, int64_t K);

// The bounds per item with opt.eval_samples draws each, in chunks of items (items_per_chunk).
VariationalFit::Bounds evaluate_bounds(VariationalProblem::Impl& p);

// --param-guide: q's draws (--draws of them), each with the log of an unbiased estimate of
// p(x, θ) |J| (per item, the mean of its `samples` importance weights, whose product over the
// items is unbiased for p(x | θ)) and its ELBO term; the joint ELBO is their mean. The latents'
// draws come from steps `first_step` on.
ParameterVariationalFit evaluate_parameters(VariationalProblem::Impl& p, int64_t first_step);

} // namespace ssm
