// The classifier-based energy model of Argouarc'h (2024, 2.1.4): a density known through samples
// p1 is approximated by p(x) ∝ p0(x) r(x) / (1 - r(x)), with p0 an instrumental law easy to
// sample (here the Gaussian with the data's mean and covariance) and r a classifier (an MLP with
// SiLU activations whose output is logit r) trained by binary cross-entropy to tell the data
// (label 1) from draws of p0 (label 0), so that r / (1 - r) estimates p1 / p0 (2.7, 2.16). Its
// energy is -log p0(x) - logit r(x) (2.17). Sampling takes p0 as the instrumental law and needs
// only the ratio: accept-reject with the running bound C̃ = max r / (1 - r) (2.13, the thesis's
// Algorithm 2), independent Metropolis-Hastings (2.14) or importance sampling with resampling
// (2.15). log_prob also needs p0's density and the normaliser Z = E_p0[r / (1 - r)], estimated
// once after training, so that held-out log-likelihoods compare with the other densities'.
#pragma once

#include "flows/density.h"
#include "nn/mlp.h"

#include <string>
#include <vector>

namespace ssm::flows {

// How sample() draws: "ar" (accept-reject), "imh" (one independent Metropolis-Hastings chain),
// "sir" (a pool of 20 n instrumental draws, at most 2^24, resampled by their weights r / (1 - r)).
const std::vector<std::string>& energy_samplers();

// What the last sample() did: proposals made and accepted (sir: the pool, and its effective size).
struct EnergySamplerReport {
  std::string sampler;
  int64_t proposals = 0;
  double accepted = 0; // ar, imh: accepted proposals; sir: the pool's effective sample size
};

class EnergyImpl : public DensityImpl {
public:
  explicit EnergyImpl(const DensitySpec& spec);
  using DensityImpl::log_prob;
  using DensityImpl::sample;
  // log p0(x) + logit r(x) - log Z: [n]. Unconditional (no context).
  torch::Tensor log_prob(const torch::Tensor& x, const torch::Tensor& context) override;
  torch::Tensor sample(int64_t n, const torch::Tensor& context) override;

  // logit r(x): [n], differentiable in the classifier's weights.
  torch::Tensor logit(const torch::Tensor& x);
  torch::Tensor instrumental_sample(int64_t n);
  torch::Tensor instrumental_log_prob(const torch::Tensor& x);
  // p0 = N(mean, cov): the data's moments (in the standardised units the density sees).
  void set_instrumental(const torch::Tensor& mean, const torch::Tensor& cov);
  // log Z, estimated from `draws` instrumental draws: log mean exp(logit).
  void estimate_normaliser(int64_t draws);
  // log mean exp(logit) over the rows of x, in blocks, without gradients.
  double log_mean_odds(const torch::Tensor& x);
  // log C̃: accept-reject's starting bound on log r / (1 - r), the largest logit over `x`.
  void set_bound(const torch::Tensor& x);
  double log_normaliser() const { return log_z_.item<double>(); }

  std::string sampler = "ar";
  EnergySamplerReport last;

private:
  torch::Tensor accept_reject(int64_t n);
  torch::Tensor independent_metropolis(int64_t n);
  torch::Tensor importance_resampling(int64_t n);

  nn::Mlp classifier_{nullptr};
  torch::Tensor mean_, chol_;     // p0 = N(mean, chol chol^T)
  torch::Tensor log_z_, log_cap_; // log Z and accept-reject's log C̃ (scalars)
};

} // namespace ssm::flows
