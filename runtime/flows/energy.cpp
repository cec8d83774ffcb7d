// The classifier-based energy model: see energy.h.
#include "flows/energy.h"
#include "core/error.h"
#include "kernel/special_functions.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ssm::flows {

namespace {

// Rows per block of logits: bounds the classifier's activations.
constexpr int64_t kBlock = 1 << 16;
// Accept-reject gives up past this many proposals when it has accepted fewer than one in
// kMinAcceptance of them.
constexpr int64_t kMinProposals = 10000000;
constexpr double kMinAcceptance = 1e-6;
// SIR's pool: torch::multinomial draws from at most 2^24 categories.
constexpr int64_t kMaxPool = int64_t(1) << 24;

} // namespace

const std::vector<std::string>& energy_samplers() {
  static const std::vector<std::string> names = {"ar", "imh", "sir"};
  return names;
}

EnergyImpl::EnergyImpl(const DensitySpec& spec) : DensityImpl(spec) {
  if (spec.context)
    throw Error("an energy model is unconditional (no --context)");
  nn::MlpSpec net;
  net.inputs = spec.dim;
  net.outputs = 1;
  net.hidden = spec.hidden;
  net.activation = "silu";
  net.single = spec.single;
  classifier_ = register_module("classifier", nn::Mlp(net));
  auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  mean_ = register_buffer("mean", torch::zeros({spec.dim}, f64));
  chol_ = register_buffer("chol", torch::eye(spec.dim, f64));
  log_z_ = register_buffer("log_z", torch::zeros({}, f64));
  log_cap_ = register_buffer("log_cap", torch::zeros({}, f64));
}

torch::Tensor EnergyImpl::logit(const torch::Tensor& x) {
  return classifier_->forward(x).squeeze(1);
}

torch::Tensor EnergyImpl::instrumental_sample(int64_t n) {
  torch::NoGradGuard no_grad;
  return mean_ + torch::randn({n, dim()}, torch::kFloat64).matmul(chol_.t());
}

torch::Tensor EnergyImpl::instrumental_log_prob(const torch::Tensor& x) {
  auto z = torch::linalg_solve_triangular(chol_, (x - mean_).t(), /*upper=*/false);
  return -0.5 * z.pow(2).sum(0) - torch::log(chol_.diagonal()).sum() -
         double(dim()) * kLogSqrtTwoPi;
}

void EnergyImpl::set_instrumental(const torch::Tensor& mean, const torch::Tensor& cov) {
  torch::NoGradGuard no_grad;
  mean_.copy_(mean);
  chol_.copy_(torch::linalg_cholesky(cov));
}

double EnergyImpl::log_mean_odds(const torch::Tensor& x) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> logits;
  for (int64_t start = 0; start < x.size(0); start += kBlock)
    logits.push_back(logit(x.slice(0, start, start + kBlock)));
  return torch::logsumexp(torch::cat(logits), 0).item<double>() - std::log(double(x.size(0)));
}

void EnergyImpl::estimate_normaliser(int64_t draws) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> logits;
  for (int64_t done = 0; done < draws; done += kBlock)
    logits.push_back(logit(instrumental_sample(std::min(kBlock, draws - done))));
  log_z_.fill_(torch::logsumexp(torch::cat(logits), 0).item<double>() - std::log(double(draws)));
}

void EnergyImpl::set_bound(const torch::Tensor& x) {
  torch::NoGradGuard no_grad;
  double cap = -INFINITY;
  for (int64_t start = 0; start < x.size(0); start += kBlock)
    cap = std::max(cap, logit(x.slice(0, start, start + kBlock)).max().item<double>());
  log_cap_.fill_(cap);
}

torch::Tensor EnergyImpl::log_prob(const torch::Tensor& x, const torch::Tensor& context) {
  if (context.defined())
    throw Error("an energy model is unconditional: no context");
  return instrumental_log_prob(x) + logit(x) - log_z_;
}

torch::Tensor EnergyImpl::sample(int64_t n, const torch::Tensor& context) {
  if (context.defined())
    throw Error("an energy model is unconditional: no context");
  torch::NoGradGuard no_grad;
  last = {sampler, 0, 0};
  if (n <= 0)
    return torch::empty({0, dim()}, torch::kFloat64);
  if (sampler == "ar")
    return accept_reject(n);
  if (sampler == "imh")
    return independent_metropolis(n);
  if (sampler == "sir")
    return importance_resampling(n);
  throw Error(fmt::format("unknown sampler '{}' (expected ar, imh or sir)", sampler));
}

// Algorithm 2: a proposal x from p0 is kept with probability exp(logit(x) - log C̃); a proposal
// whose logit exceeds log C̃ raises the bound for itself and every proposal after it, in later
// calls too (the bound is kept).
torch::Tensor EnergyImpl::accept_reject(int64_t n) {
  std::vector<torch::Tensor> kept;
  int64_t have = 0;
  double cap = log_cap_.item<double>();
  while (have < n) {
    if (last.proposals >= kMinProposals && double(have) < kMinAcceptance * double(last.proposals))
      throw Error(fmt::format("accept-reject: {} of {} proposals accepted; the energy model is "
                              "too far from its instrumental Gaussian for ar (use --sampler sir "
                              "or imh)",
                              have, last.proposals));
    const int64_t m = std::min(kBlock, std::max<int64_t>(1024, 2 * (n - have)));
    auto x = instrumental_sample(m);
    auto l = logit(x);
    auto running = torch::cummax(l, 0);
    auto bound = torch::clamp_min(std::get<0>(running), cap);
    cap = std::max(cap, l.max().item<double>());
    auto keep = torch::rand({m}, torch::kFloat64) < torch::exp(l - bound);
    auto accepted = x.index({keep});
    kept.push_back(accepted);
    have += accepted.size(0);
    last.proposals += m;
  }
  last.accepted = double(have);
  log_cap_.fill_(cap);
  return torch::cat(kept).slice(0, 0, n);
}

// One chain from the first proposal, a tenth of its length (at least 100 steps) discarded:
// x* replaces x_t with probability min(1, exp(logit(x*) - logit(x_t))).
torch::Tensor EnergyImpl::independent_metropolis(int64_t n) {
  const int64_t warmup = std::max<int64_t>(100, n / 10), total = warmup + n, d = dim();
  auto out = torch::empty({n, d}, torch::kFloat64);
  auto rows = out.accessor<double, 2>();
  std::vector<double> current(static_cast<size_t>(d));
  double current_logit = -INFINITY;
  int64_t step = 0;
  while (step < total) {
    const int64_t m = std::min(kBlock, total - step);
    auto x = instrumental_sample(m).contiguous();
    auto l = logit(x).contiguous();
    auto u = torch::rand({m}, torch::kFloat64).contiguous();
    const double* xp = x.data_ptr<double>();
    const double* lp = l.data_ptr<double>();
    const double* up = u.data_ptr<double>();
    for (int64_t i = 0; i < m; ++i, ++step) {
      if (std::log(up[i]) < lp[i] - current_logit) { // the first proposal is always taken
        std::copy(xp + i * d, xp + (i + 1) * d, current.begin());
        current_logit = lp[i];
        last.accepted += step >= warmup;
      }
      if (step >= warmup)
        for (int64_t j = 0; j < d; ++j)
          rows[step - warmup][j] = current[static_cast<size_t>(j)];
    }
  }
  last.proposals = n;
  return out;
}

// A pool of 20 n instrumental draws (at most kMaxPool), weighted by r / (1 - r), resampled
// multinomially.
torch::Tensor EnergyImpl::importance_resampling(int64_t n) {
  const int64_t pool = std::min(20 * n, kMaxPool);
  std::vector<torch::Tensor> xs, ls;
  for (int64_t done = 0; done < pool; done += kBlock) {
    xs.push_back(instrumental_sample(std::min(kBlock, pool - done)));
    ls.push_back(logit(xs.back()));
  }
  auto x = torch::cat(xs);
  auto w = torch::softmax(torch::cat(ls), 0);
  last.proposals = pool;
  last.accepted = 1.0 / w.pow(2).sum().item<double>();
  return x.index_select(0, torch::multinomial(w, n, /*replacement=*/true));
}

} // namespace ssm::flows
