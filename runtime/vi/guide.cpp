// The default guide of a plate model: its start, draws, parameters and moments (see guide.h;
// which latent gets which estimator: guide_plan.cpp).
#include "vi/guide.h"
#include "core/error.h"
#include "core/frame.h"
#include "kernel/distributions.h"
#include "learning/param_transform.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace ssm {

namespace {

constexpr double kHalfLog2Pi = 0.91893853320467274178;
constexpr double kTinyProbability = 1e-300; // a declared guide's probabilities stay above it

} // namespace

Guide::Guide(const GuidePlan& plan, const ssm_model& model, const ModelInfo& info,
             const std::vector<double>& fixed, const ObsData& data,
             const VariationalOptions& options, uint64_t seed, int64_t given_dimension,
             nn::ModelNetworks* nets)
    : plan_(plan), n_state_(info.n_state), items_(data.T),
      continuous_(static_cast<int64_t>(plan.continuous.size())),
      fullrank_(options.family == kFullRankName), single_(options.single), seed_(seed),
      load_guide_(options.load_guide) {
  // The prior's moments, from draws of the initial kernel: items share their prior, unless
  // covariates (input x[n]) give each its own, when the draws cycle through the items' inputs
  // (a start pooled over the items).
  constexpr int64_t S = 512;
  std::vector<double> x(S * std::max<int64_t>(1, info.n_state));
  if (nets && !nets->empty()) { // the networks' outputs, which the draws read from the state
    torch::NoGradGuard no_grad;
    torch::Tensor covariates;
    if (info.n_inputs > 0 && data.T > 0)
      covariates = torch::tensor(data.u, torch::kFloat64)
                       .view({data.T, info.n_inputs})
                       .index_select(0, torch::arange(S, torch::kInt64).remainder(data.T));
    const torch::Tensor theta = torch::tensor(
        std::vector<double>(fixed.begin(), fixed.begin() + info.n_theta), torch::kFloat64);
    nets->apply_in_place(x, S, theta, fixed, covariates); // at states of zeros
  }
  Frame frame(info, fixed);
  if (info.n_inputs == 0 || data.T == 0)
    model.init_sample(frame.step(nullptr, nullptr), seed ^ 0x5eed, 0, S, S, x.data());
  else
    for (int64_t n = 0; n < S; ++n)
      model.init_sample(frame.step(data.inputs_at(n % data.T), nullptr), seed ^ 0x5eed, n, n + 1, S,
                        x.data());
  const int64_t C = continuous_;
  std::vector<double> mean(C, 0.0), log_sd(C, 0.0);
  for (int64_t j = 0; j < C; ++j) {
    // The prior's draws on the guide's unconstrained scale (guide.h).
    const double lo = plan.continuous_lower[j], hi = plan.continuous_upper[j];
    std::vector<double> u(S);
    for (int64_t n = 0; n < S; ++n)
      u[n] = unconstrain_within(lo, hi, x[plan.continuous[j] * S + n]);
    double s = 0, ss = 0;
    for (int64_t n = 0; n < S; ++n)
      s += u[n];
    const double m = s / S;
    for (int64_t n = 0; n < S; ++n)
      ss += std::pow(u[n] - m, 2);
    const double sd = std::sqrt(ss / (S - 1));
    if (std::isfinite(m) && std::isfinite(sd) && sd > 0) {
      mean[j] = m;
      log_sd[j] = std::log(sd);
    }
  }
  prior_mean_ = mean;
  prior_log_sd_ = log_sd;
  std::vector<std::vector<double>> logits;
  for (const GuidePlan::Discrete& d : plan.discrete) {
    std::vector<double> count(d.values, 1.0); // add-one: no value starts impossible
    for (int64_t n = 0; n < S; ++n) {
      const double v = x[d.component * S + n] - static_cast<double>(d.lower);
      if (v >= 0 && v < static_cast<double>(d.values))
        count[static_cast<size_t>(v)] += 1;
    }
    for (double& c : count)
      c = std::log(c);
    logits.push_back(count);
  }
  // The components a conditional guide conditions: its own Gaussians' (a model's guide's and the
  // score function's draws are not differentiable in the draw's path).
  std::vector<double> own(C, 0.0);
  for (int64_t c = 0; c < C; ++c)
    own[c] = !plan.continuous_declared[c] && !plan.continuous_score[c] ? 1.0 : 0.0;
  if (given_dimension > 0 && std::find(own.begin(), own.end(), 1.0) != own.end()) {
    given_ = given_dimension;
    own_gaussian_ = torch::tensor(own, torch::kFloat64);
  }
  auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  const int64_t N = items_;
  if (options.family == kAmortizedName) {
    std::vector<double> start = mean;
    start.insert(start.end(), log_sd.begin(), log_sd.end());
    for (const std::vector<double>& l : logits)
      start.insert(start.end(), l.begin(), l.end());
    base_outputs_ = static_cast<int64_t>(start.size());
    start.resize(start.size() + 2 * C * given_, 0.0); // the gains, from 0
    start_encoder(data, options, start);
    return;
  }
  mu_ = torch::tensor(mean, opts).repeat({N, 1}).set_requires_grad(true);
  log_sd_ = torch::tensor(log_sd, opts).repeat({N, 1}).set_requires_grad(true);
  if (fullrank_)
    lower_ = torch::zeros({N, C, C}, opts).set_requires_grad(true);
  for (const std::vector<double>& l : logits)
    logits_.push_back(torch::tensor(l, opts).repeat({N, 1}).set_requires_grad(true));
  if (conditional()) {
    gain_mu_ = torch::zeros({N, C, given_}, opts).set_requires_grad(true);
    gain_log_sd_ = torch::zeros({N, C, given_}, opts).set_requires_grad(true);
  }
}

torch::Tensor item_features(const ObsData& data, const std::string& who) {
  const int64_t M = data.n_obs;
  for (int64_t t = 0; t < data.T; ++t)
    for (int64_t k = 0; k < M; ++k)
      if (std::isnan(data.y[t * M + k]))
        throw Error(fmt::format("vi: {} line {}: a missing observation; {} reads every "
                                "observation of an item",
                                data.source, data.line(t), who));
  const torch::Tensor y = torch::tensor(data.y, torch::kFloat64).view({data.T, M});
  if (data.n_inputs == 0)
    return y;
  return torch::cat({y, torch::tensor(data.u, torch::kFloat64).view({data.T, data.n_inputs})}, 1);
}

torch::Tensor guide_observations(const ObsData& data, const GuideInfo& guide) {
  const int64_t M = data.n_obs;
  for (int64_t t = 0; t < data.T; ++t)
    for (const GuideInfo::Observation& o : guide.observations)
      for (int64_t k = o.offset; k < o.offset + o.size; ++k)
        if (std::isnan(data.y[t * M + k]))
          throw Error(fmt::format("vi: {} line {}: '{}' is missing, and the model's guide reads "
                                  "it",
                                  data.source, data.line(t), o.name));
  return torch::tensor(data.y, torch::kFloat64).view({data.T, M});
}

void Guide::start_encoder(const ObsData& data, const VariationalOptions& options,
                          const std::vector<double>& start) {
  inputs_ = item_features(data, fmt::format("the {} guide's encoder", kAmortizedName));
  const int64_t M = inputs_.size(1), outputs = static_cast<int64_t>(start.size());
  if (!options.load_guide.empty()) {
    encoder_ = nn::load_mlp(options.load_guide);
    encoder_->set_precision(options.single);
    if (encoder_->spec().inputs != M || encoder_->spec().outputs != outputs)
      throw Error(fmt::format(
          "vi: the guide in {} maps {} inputs to {} outputs; this model's amortized guide maps {} "
          "(its observations{}) to {}{}",
          options.load_guide, encoder_->spec().inputs, encoder_->spec().outputs, M,
          data.n_inputs > 0 ? " and covariates" : "", outputs,
          given_ > 0 ? fmt::format(" (its means and sds, and {} gains given the parameters' "
                                   "draw: --item-guide linear)",
                                   outputs - base_outputs_)
                     : ""));
    return;
  }
  encoder_ = nn::Mlp(nn::MlpSpec{M, outputs, options.hidden, options.activation, options.single});
  encoder_->set_standardisation(inputs_.mean(0), inputs_.std(0));
  encoder_->start_at(start);
}

bool Guide::bounded() const {
  const auto finite = [](double b) { return std::isfinite(b); };
  return std::any_of(plan_.continuous_lower.begin(), plan_.continuous_lower.end(), finite) ||
         std::any_of(plan_.continuous_upper.begin(), plan_.continuous_upper.end(), finite);
}

std::pair<torch::Tensor, torch::Tensor> Guide::constrain(const torch::Tensor& u) const {
  if (!bounded()) // the identity, without a select and a stack per component to differentiate
    return {u, torch::Tensor()};
  std::vector<int64_t> leading(u.sizes().begin(), u.sizes().end() - 1);
  torch::Tensor log_det = torch::zeros(leading, torch::kFloat64);
  std::vector<torch::Tensor> z;
  for (int64_t c = 0; c < continuous_; ++c) {
    const torch::Tensor uc = u.select(-1, c);
    const double lo = plan_.continuous_lower[c], hi = plan_.continuous_upper[c];
    if (lo > -INFINITY && hi < INFINITY) {
      z.push_back(lo + (hi - lo) * torch::sigmoid(uc));
      log_det = log_det + std::log(hi - lo) - torch::softplus(uc) - torch::softplus(-uc);
    } else if (lo > -INFINITY || hi < INFINITY) {
      z.push_back(lo > -INFINITY ? lo + uc.exp() : hi - uc.exp());
      log_det = log_det + uc;
    } else {
      z.push_back(uc);
    }
  }
  return {torch::stack(z, -1), log_det};
}

void Guide::declare(const GuideInfo& guide, Arguments arguments) {
  declared_ = &guide;
  arguments_ = std::move(arguments);
  // Where each relation's latent is among the guide's components (the plan covers every latent):
  // a normal's columns of the continuous ones, a discrete (scalar) latent's index.
  declared_slots_.clear();
  for (const GuideInfo::Relation& r : guide.relations) {
    DeclaredSlot slot;
    if (r.dist == "normal" || r.dist == "mvnormal_chol" || r.dist == "dif") {
      std::vector<int64_t> columns;
      for (int64_t k = 0; k < r.size; ++k)
        columns.push_back(
            std::find(plan_.continuous.begin(), plan_.continuous.end(), r.offset + k) -
            plan_.continuous.begin());
      slot.columns = torch::tensor(columns, torch::kInt64);
      slot.all_columns = static_cast<int64_t>(columns.size()) == continuous_;
      for (size_t k = 0; k < columns.size(); ++k)
        slot.all_columns = slot.all_columns && columns[k] == static_cast<int64_t>(k);
      for (size_t j = 0; j < plan_.difs.size(); ++j)
        if (r.dist == "dif" && plan_.difs[j].latent == r.latent)
          slot.dif = static_cast<int>(j);
    } else {
      for (size_t j = 0; j < plan_.discrete.size(); ++j)
        if (plan_.discrete[j].component == r.offset)
          slot.discrete = j;
    }
    declared_slots_.push_back(slot);
  }
  difs_.assign(plan_.difs.size(), nullptr);
  dif_shift_.assign(plan_.difs.size(), {});
  dif_scale_.assign(plan_.difs.size(), {});
  for (size_t i = 0; i < guide.relations.size(); ++i)
    if (declared_slots_[i].dif >= 0)
      start_dif(static_cast<size_t>(declared_slots_[i].dif), guide.relations[i]);
  if (!load_guide_.empty() && !difs_.empty())
    load_difs(load_guide_);
}

bool Guide::fitted_per_item() const {
  if (amortized())
    return false;
  const auto own = [](bool declared) { return !declared; };
  return std::any_of(plan_.continuous_declared.begin(), plan_.continuous_declared.end(), own) ||
         std::any_of(plan_.discrete.begin(), plan_.discrete.end(),
                     [](const GuidePlan::Discrete& d) { return !d.declared; });
}

void Guide::apply_declared(Local& l, const torch::Tensor& idx) const {
  const std::vector<int64_t> items(idx.data_ptr<int64_t>(), idx.data_ptr<int64_t>() + idx.numel());
  const torch::Tensor args = arguments_(items); // [I, n_arguments]
  const int64_t I = idx.numel();
  auto argument = [&](const GuideInfo::Relation& r, size_t k, int64_t size) {
    const GuideInfo::Relation::Argument& a = r.arguments.at(k);
    const torch::Tensor v = args.narrow(1, a.offset, a.size);
    return a.size == size ? v : v.expand({I, size}); // a real broadcasts
  };
  for (size_t i = 0; i < declared_->relations.size(); ++i) {
    const GuideInfo::Relation& r = declared_->relations[i];
    const DeclaredSlot& slot = declared_slots_[i];
    if (r.dist == "dif") {
      const size_t j = static_cast<size_t>(slot.dif);
      const GuideInfo::Relation::Argument& a = r.arguments.at(0);
      l.contexts[j] = (args.narrow(1, a.offset, a.size) - dif_shift_[j]) / dif_scale_[j];
      continue;
    }
    // The relation's columns of an item's mean or log sd set to `v`: the whole of it when they
    // are all the columns (one operation fewer each way per step, as a VAE's guide is).
    auto set = [&](torch::Tensor& to, const torch::Tensor& v) {
      if (slot.all_columns)
        to = v;
      else
        to = (to.defined() ? to : torch::zeros({I, continuous_}, torch::kFloat64))
                 .index_copy(1, slot.columns, v);
    };
    if (r.dist == "normal") {
      set(l.mu, argument(r, 0, r.size));
      set(l.log_sd, argument(r, 1, r.size).log());
      continue;
    }
    if (r.dist == "mvnormal_chol") { // mean, then the factor L [k, k], row-major
      const int64_t k = r.size;
      set(l.mu, argument(r, 0, k));
      const torch::Tensor L = argument(r, 1, k * k).reshape({I, k, k});
      // Only the lower triangle is read, as the model's mvnormal_chol does. A negative diagonal
      // entry flips its column: L S (S the signs) has the same L L^T and a positive diagonal.
      const torch::Tensor diag = L.diagonal(0, 1, 2);                                // [I, k]
      const torch::Tensor sign = torch::ones_like(diag).masked_fill(diag < 0, -1.0); // constant
      const torch::Tensor factor = torch::tril(L, -1) * sign.unsqueeze(1); // column j times s_j
      set(l.log_sd, diag.abs().log());
      const torch::Tensor rows = slot.columns.unsqueeze(1).expand({k, k});
      const torch::Tensor cols = slot.columns.unsqueeze(0).expand({k, k});
      l.lower = l.lower.clone(); // written in place below; autograd records the write
      l.lower.index_put_({torch::indexing::Slice(), rows, cols}, factor);
      continue;
    }
    const size_t j = slot.discrete;
    // Probabilities are kept off 0 and 1: a value of q 0 would make the enumerated ELBO's term
    // 0 * inf and the gradient through log p infinite (bernoulli_logit needs no such care).
    if (r.dist == "bernoulli") {
      const torch::Tensor p = argument(r, 0, 1).clamp(kTinyProbability, 1 - 1e-16);
      l.logits[j] = torch::cat({torch::log1p(-p), torch::log(p)}, 1);
    } else if (r.dist == "bernoulli_logit") { // log_softmax([0, alpha]) = log q(0), log q(1)
      const torch::Tensor alpha = argument(r, 0, 1);
      l.logits[j] = torch::cat({torch::zeros_like(alpha), alpha}, 1);
    } else { // categorical: probabilities, which log_softmax normalises as the model does
      l.logits[j] =
          torch::log(argument(r, 0, plan_.discrete[j].values).clamp_min(kTinyProbability));
    }
  }
}

Guide::Local Guide::local(const torch::Tensor& idx, const torch::Tensor& given) const {
  // The model's guide that covers every latent with a Gaussian or a discrete law leaves nothing
  // of the guide's own to select (a dif guide's draws start from the guide's own Gaussian).
  Local l;
  if (declared_ && !amortized() && !fitted_per_item() && difs_.empty()) {
    // apply_declared sets every continuous component (or they are none)
    if (continuous_ == 0) {
      l.mu = torch::zeros({idx.numel(), 0}, torch::kFloat64);
      l.log_sd = l.mu;
    }
    l.logits.resize(plan_.discrete.size());
  } else {
    l = own_local(idx);
  }
  if (plan_.dense && !l.lower.defined()) // a declared mvnormal_chol fills its block
    l.lower = torch::zeros({idx.numel(), continuous_, continuous_}, torch::kFloat64);
  l.contexts.resize(difs_.size());
  if (declared_)
    apply_declared(l, idx);
  if (given.defined() && conditional()) {
    const torch::Tensor mask = own_gaussian_.view({1, continuous_, 1});
    const torch::Tensor v = given.reshape({-1, 1}).to(torch::kFloat64); // [d, 1]
    const torch::Tensor a = l.gain_mu * mask;                           // [I, C, d]
    const torch::Tensor b = l.gain_log_sd * mask;
    l.mu_held = l.mu.detach() + torch::matmul(a.detach(), v).squeeze(2);
    l.log_sd_held = l.log_sd.detach() + torch::matmul(b.detach(), v).squeeze(2);
    l.mu = l.mu + torch::matmul(a, v).squeeze(2);
    l.log_sd = l.log_sd + torch::matmul(b, v).squeeze(2);
  }
  return l;
}

Guide::Local Guide::own_local(const torch::Tensor& idx) const {
  Local l;
  const int64_t C = continuous_;
  if (amortized()) {
    const torch::Tensor out = encoder_->forward(inputs_.index_select(0, idx));
    l.mu = out.narrow(1, 0, C);
    l.log_sd = out.narrow(1, C, C);
    int64_t at = 2 * C;
    for (const GuidePlan::Discrete& d : plan_.discrete) {
      l.logits.push_back(out.narrow(1, at, d.values));
      at += d.values;
    }
    if (conditional()) {
      const int64_t I = idx.numel();
      l.gain_mu = out.narrow(1, base_outputs_, C * given_).reshape({I, C, given_});
      l.gain_log_sd = out.narrow(1, base_outputs_ + C * given_, C * given_).reshape({I, C, given_});
    }
    return l;
  }
  l.mu = mu_.index_select(0, idx);
  l.log_sd = log_sd_.index_select(0, idx);
  if (fullrank_)
    l.lower = lower_.index_select(0, idx);
  for (const torch::Tensor& t : logits_)
    l.logits.push_back(t.index_select(0, idx));
  if (conditional()) {
    l.gain_mu = gain_mu_.index_select(0, idx);
    l.gain_log_sd = gain_log_sd_.index_select(0, idx);
  }
  return l;
}

torch::Tensor Guide::cholesky(const Local& l) {
  return torch::tril(l.lower, -1) + torch::diag_embed(l.log_sd.exp());
}

GuideDraws Guide::draw(const std::vector<int64_t>& items, int64_t K, uint32_t step, uint64_t seed,
                       Relaxation relax, const torch::Tensor& given, bool sampled_path) const {
  const int64_t I = static_cast<int64_t>(items.size()), C = continuous_,
                Dd = static_cast<int64_t>(plan_.discrete.size()), E = plan_.enumeration;
  auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  const torch::Tensor idx = torch::tensor(items, torch::kInt64);
  const Local params = local(idx, given);
  GuideDraws d; // log_q_sampled and log_q_sticking: undefined until a term adds to them
  auto add = [](torch::Tensor& to, const torch::Tensor& v) { to = to.defined() ? to + v : v; };
  std::vector<torch::Tensor> component(n_state_); // the discrete ones, each [I, K, E]
  torch::Tensor continuous;                       // [I, K, E, C]

  if (C > 0) {
    torch::Tensor eps = torch::empty({I, K, C}, opts);
    double* e = eps.data_ptr<double>();
    for (int64_t i = 0; i < I; ++i)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t c = 0; c < C; ++c)
          e[(i * K + k) * C + c] = sample_std_normal_k(seed, static_cast<uint32_t>(items[i]), step,
                                                       kSiteContinuous + static_cast<uint32_t>(c),
                                                       static_cast<uint32_t>(k));
    const torch::Tensor mu = params.mu.unsqueeze(1); // [I, 1, C]
    const torch::Tensor log_sd = params.log_sd;
    torch::Tensor L, z, sd; // sd: [I, 1, C], the diagonal guide's
    if (plan_.dense) {
      L = cholesky(params);
      z = mu + torch::matmul(eps, L.transpose(1, 2));
    } else {
      sd = log_sd.exp().unsqueeze(1);
      z = mu + eps * sd;
    }
    const bool any_score = std::any_of(plan_.continuous_score.begin(), plan_.continuous_score.end(),
                                       [](bool s) { return s; });
    const torch::Tensor score =
        any_score ? torch::tensor(std::vector<int64_t>(plan_.continuous_score.begin(),
                                                       plan_.continuous_score.end()))
                        .to(torch::kBool)
                  : torch::Tensor();
    if (any_score) // the score function differentiates log q only: no path through the draw
      z = torch::where(score, z.detach(), z);
    // log q(z) with the guide's parameters as given (`held`: constant, for sticking the landing).
    // Conditional on a draw, what is held is the guide's parameters, not the draw (local()).
    const bool given_path = params.mu_held.defined();
    const torch::Tensor mu_held = given_path ? params.mu_held.unsqueeze(1) : mu.detach();
    const torch::Tensor log_sd_held = given_path ? params.log_sd_held : log_sd.detach();
    auto log_q = [&](bool held) {
      const torch::Tensor m = held ? mu_held : mu, s = held ? log_sd_held : log_sd;
      if (plan_.dense) {
        const torch::Tensor L_held =
            given_path ? torch::tril(params.lower.detach(), -1) + torch::diag_embed(s.exp())
                       : L.detach();
        const torch::Tensor u =
            torch::linalg_solve_triangular(held ? L_held : L, (z - m).transpose(1, 2), false);
        return torch::Tensor(-0.5 * u.pow(2).sum(1) - s.sum(1, true) -
                             static_cast<double>(C) * kHalfLog2Pi); // [I, K]
      }
      const torch::Tensor scale = given_path ? s.exp().unsqueeze(1) : held ? sd.detach() : sd;
      return torch::Tensor(-0.5 * ((z - m) / scale).pow(2) - s.unsqueeze(1) -
                           kHalfLog2Pi); // [I, K, C]
    };
    const torch::Tensor lq_held = log_q(true);
    const torch::Tensor lq = sampled_path || any_score ? log_q(false) : lq_held;
    const bool plain = !any_score && difs_.empty(); // every component reparameterised, Gaussian
    if (plan_.dense) {                              // one estimator for all components (plan_guide)
      add(d.log_q_sampled, lq);
      add(d.log_q_sticking, any_score ? lq : lq_held);
      if (any_score)
        d.log_q_score = lq;
    } else if (plain) {
      d.log_q_sticking = lq_held.sum(2);
      d.log_q_sampled = lq.is_same(lq_held) ? d.log_q_sticking : lq.sum(2);
    } else {
      const torch::Tensor s = any_score ? score.to(torch::kFloat64) : torch::Tensor();
      // The Gaussian's components: a dif's are its own (dif_points).
      const torch::Tensor own = torch::tensor(std::vector<int64_t>(plan_.continuous_dif.begin(),
                                                                   plan_.continuous_dif.end()))
                                    .lt(0)
                                    .to(torch::kFloat64);
      add(d.log_q_sampled, (lq * own).sum(2));
      add(d.log_q_sticking, ((any_score ? lq * s + lq_held * (1 - s) : lq_held) * own).sum(2));
      if (any_score)
        d.log_q_score = (lq * s).sum(2);
    }
    if (difs_.empty()) {
      // The draws so far are on the unconstrained scale: map bounded components into their
      // support.
      const auto [constrained, log_det] = constrain(z);
      if (bounded()) {
        d.log_q_sampled = d.log_q_sampled - log_det;
        d.log_q_sticking = d.log_q_sticking - log_det;
      }
      continuous = constrained.unsqueeze(2).expand({I, K, E, C});
    } else { // the points vary along E: so does the log-Jacobian
      const DifPoints p = dif_points(z, eps, params);
      const auto [constrained, log_det] = constrain(p.u);
      d.log_q_point = log_det.defined() ? p.log_q - log_det : p.log_q;
      d.log_point_weights = p.log_weights;
      continuous = constrained;
    }
  }

  // Discrete components: sampled ones by inverse CDF, enumerated ones in mixed radix over E.
  d.log_q_enumerated = torch::zeros({I, E}, opts);
  d.weights = torch::ones({I, K, E}, opts);
  int64_t radix = 1;
  for (int64_t j = 0; j < Dd; ++j) {
    const GuidePlan::Discrete& g = plan_.discrete[j];
    const torch::Tensor log_p = torch::log_softmax(params.logits[j], 1); // [I, V]
    if (g.enumerate) {
      std::vector<int64_t> values(E);
      for (int64_t e = 0; e < E; ++e)
        values[e] = (e / radix) % g.values;
      radix *= g.values;
      const torch::Tensor v = torch::tensor(values, torch::kInt64);
      d.log_q_enumerated = d.log_q_enumerated + log_p.index_select(1, v);
      if (g.gumbel && relax.temperature > 0) {
        // y = softmax((log q + G) / tau), G Gumbel(0, 1): a relaxed one-hot per draw.
        torch::Tensor u = torch::empty({I, K, g.values}, opts);
        double* uu = u.data_ptr<double>();
        for (int64_t i = 0; i < I; ++i)
          for (int64_t k = 0; k < K; ++k)
            for (int64_t w = 0; w < g.values; ++w)
              uu[(i * K + k) * g.values + w] = philox_u01(
                  seed, static_cast<uint32_t>(items[i]), step,
                  kSiteGumbel + static_cast<uint32_t>(j), static_cast<uint32_t>(k * g.values + w));
        const torch::Tensor gumbel = -torch::log(-torch::log(u.clamp(1e-300, 1 - 1e-16)));
        torch::Tensor y = torch::softmax((log_p.unsqueeze(1) + gumbel) / relax.temperature, 2);
        if (relax.straight_through) { // the hard draw's value, the relaxed draw's gradient
          const torch::Tensor hard =
              torch::zeros_like(y).scatter_(2, std::get<1>(y.detach().max(2, true)), 1.0);
          y = hard + y - y.detach();
        }
        d.weights = d.weights * y.index_select(2, v);
      } else {
        d.weights = d.weights * log_p.index_select(1, v).exp().unsqueeze(1);
      }
      component[g.component] =
          (v.to(torch::kFloat64) + static_cast<double>(g.lower)).view({1, 1, E}).expand({I, K, E});
      continue;
    }
    const torch::Tensor p = log_p.detach().exp().contiguous();
    const double* pp = p.data_ptr<double>();
    torch::Tensor chosen = torch::empty({I, K}, torch::kInt64);
    int64_t* ch = chosen.data_ptr<int64_t>();
    for (int64_t i = 0; i < I; ++i)
      for (int64_t k = 0; k < K; ++k) {
        const double u =
            philox_u01(seed, static_cast<uint32_t>(items[i]), step,
                       kSiteDiscrete + static_cast<uint32_t>(j), static_cast<uint32_t>(k));
        int64_t v = 0;
        for (double acc = pp[i * g.values]; acc < u && v + 1 < g.values;)
          acc += pp[i * g.values + ++v];
        ch[i * K + k] = v;
      }
    const torch::Tensor lq = log_p.gather(1, chosen); // [I, K]
    add(d.log_q_sampled, lq);
    add(d.log_q_sticking, lq);
    add(d.log_q_score, lq);
    component[g.component] =
        (chosen.to(torch::kFloat64) + static_cast<double>(g.lower)).unsqueeze(2).expand({I, K, E});
  }
  if (d.log_point_weights.defined())
    d.weights = d.weights * d.log_point_weights.exp();
  if (!d.log_q_sampled.defined()) { // no term: every latent enumerated (or none)
    d.log_q_sampled = torch::zeros({I, K}, opts);
    d.log_q_sticking = d.log_q_sampled;
  }
  // [I, K, E, D], in a few operations (the state may be wide: a network's outputs, which the
  // model's networks fill in, stay 0 here).
  bool leading = Dd == 0; // the continuous components first, in order: padded in one operation
  for (int64_t c = 0; c < C && leading; ++c)
    leading = plan_.continuous[c] == c;
  if (leading && C > 0) {
    d.z = C == n_state_ ? continuous : torch::constant_pad_nd(continuous, {0, n_state_ - C});
    return d;
  }
  d.z = torch::zeros({I, K, E, n_state_}, opts);
  if (C > 0)
    d.z = d.z.index_copy(3, torch::tensor(plan_.continuous, torch::kInt64), continuous);
  for (int64_t c = 0; c < n_state_; ++c)
    if (component[c].defined())
      d.z = d.z.index_copy(3, torch::tensor(std::vector<int64_t>{c}, torch::kInt64),
                           component[c].unsqueeze(3));
  return d;
}

std::vector<torch::Tensor> Guide::parameters() const {
  if (amortized())
    return encoder_->parameters();
  // The dif guides' maps, as the guide's own parameters (their networks: network_parameters).
  std::vector<torch::Tensor> p;
  for (const auto& dif : difs_) {
    p.push_back(dif->means);
    p.push_back(dif->log_scales);
  }
  // The model's guide covers every latent: its networks are the model's.
  if (declared_ && !fitted_per_item())
    return p;
  if (continuous_ > 0) {
    p.push_back(mu_);
    p.push_back(log_sd_);
    if (fullrank_)
      p.push_back(lower_);
  }
  for (const torch::Tensor& l : logits_)
    p.push_back(l);
  if (gain_mu_.defined()) {
    p.push_back(gain_mu_);
    p.push_back(gain_log_sd_);
  }
  return p;
}

std::vector<std::string> Guide::parameter_names() const {
  std::vector<std::string> names;
  if (amortized()) {
    for (const auto& p : encoder_->named_parameters())
      for (int64_t k = 0; k < p.value().numel(); ++k)
        names.push_back(fmt::format("encoder.{}[{}]", p.key(), k));
    return names;
  }
  for (size_t j = 0; j < difs_.size(); ++j) // as parameters()
    for (const char* what : {"means", "log_scales"})
      for (int64_t k = 0; k < difs_[j]->means.numel(); ++k)
        names.push_back(fmt::format("dif.{}.{}[{}]", plan_.difs[j].latent, what, k));
  if (declared_ && !fitted_per_item())
    return names;
  const int64_t C = continuous_;
  if (C > 0) {
    for (const char* what : {"mu", "log_sd"})
      for (int64_t n = 0; n < items_; ++n)
        for (int64_t c = 0; c < C; ++c)
          names.push_back(fmt::format("{}[n={}]:{}", what, n, plan_.continuous_columns[c]));
    if (fullrank_)
      for (int64_t n = 0; n < items_; ++n)
        for (int64_t r = 0; r < C; ++r)
          for (int64_t c = 0; c < C; ++c)
            names.push_back(fmt::format("L[n={}]:{},{}", n, plan_.continuous_columns[r],
                                        plan_.continuous_columns[c]));
  }
  for (const GuidePlan::Discrete& g : plan_.discrete)
    for (int64_t n = 0; n < items_; ++n)
      for (int64_t v = 0; v < g.values; ++v)
        names.push_back(fmt::format("logit[n={}]:{}={}", n, g.column, g.lower + v));
  if (gain_mu_.defined())
    for (const char* what : {"gain_mu", "gain_log_sd"})
      for (int64_t n = 0; n < items_; ++n)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t k = 0; k < gain_mu_.size(2); ++k)
            names.push_back(fmt::format("{}[n={}]:{},{}", what, n, plan_.continuous_columns[c], k));
  return names;
}

std::vector<std::string> Guide::columns() const {
  std::vector<std::string> cols;
  for (const std::string& c : plan_.continuous_columns) {
    cols.push_back("mean_" + c);
    cols.push_back("sd_" + c);
  }
  for (const GuidePlan::Discrete& g : plan_.discrete)
    for (int64_t v = 0; v < g.values; ++v)
      cols.push_back(fmt::format("prob_{}={}", g.column, g.lower + v));
  return cols;
}

std::vector<std::vector<double>> Guide::moments(const torch::Tensor& given) const {
  torch::NoGradGuard no_grad;
  const int64_t C = continuous_;
  const torch::Tensor all = torch::arange(items_, torch::kInt64);
  const Local l = local(all, given);
  const torch::Tensor mu = l.mu.contiguous();
  const torch::Tensor sd = (plan_.dense ? cholesky(l).pow(2).sum(2).sqrt() // sqrt(diag(L L^T))
                                        : l.log_sd.exp())
                               .contiguous();
  std::vector<torch::Tensor> probs;
  for (const torch::Tensor& logits : l.logits)
    probs.push_back(torch::softmax(logits, 1).contiguous());
  std::vector<std::vector<double>> out(items_);
  for (int64_t n = 0; n < items_; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      out[n].push_back(mu.data_ptr<double>()[n * C + c]);
      out[n].push_back(sd.data_ptr<double>()[n * C + c]);
    }
    for (const torch::Tensor& p : probs)
      for (int64_t v = 0; v < p.size(1); ++v)
        out[n].push_back(p.data_ptr<double>()[n * p.size(1) + v]);
  }
  return out;
}

} // namespace ssm
