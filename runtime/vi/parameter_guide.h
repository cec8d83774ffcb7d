// The density q(u) over a model's learned parameters (on their unconstrained space) that both of
// vi's Bayesian fits train: a state-space model's alone (parameter_vi.cpp) and a plate model's
// jointly with its items' guides (variational.cpp, --param-guide). Built from the flows room's
// densities; the prior's factor of the target enters LibTorch's autograd here. Torch code: the
// vi module's only.
#pragma once

#include "core/results.h"
#include "flows/density.h"
#include "learning/log_posterior.h"
#include "vi/parameter_vi.h"

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace ssm {

// The learned parameters' names and coordinates, and (with the model's priors in the target) a
// warning per parameter kept by --fix that has a prior: its density at its value stays a factor.
void describe_parameters(ParameterVariationalFit& fit, const ModelInfo& info,
                         const ParameterSpace& space, bool model_priors);

// q's spec for the family and its options. Throws ssm::Error for a family with no such name.
flows::DensitySpec parameter_family_spec(const ParameterVariationalOptions& o, int64_t dim);

// q over the unconstrained coordinates: fresh, centred at `start` with unit scales (a Gaussian
// N(start, I); a mixture's or a DIF's components spread around it by N(0, I) draws), or read from
// o.load_guide (refused, naming both, when its coordinates or its family differ).
flows::DensityModel make_parameter_guide(const ParameterVariationalOptions& o,
                                         const std::vector<std::string>& coordinates,
                                         const std::vector<double>& start);

// Adam's two groups of q's weights: the Gaussians', the mixture's and the DIF maps' own
// parameters (at --learning-rate), and the networks' (at --net-learning-rate).
std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>>
parameter_groups(flows::DensityImpl& density);

// A function at each row of u ([m, d]) as a LibTorch autograd function, differentiable in u:
// evaluate(m, points, values, gradients) computes the m values and their gradients at once
// (row-major, double; gradients start at 0).
using BatchEvaluation = std::function<void(int64_t, const double*, double*, double*)>;
torch::Tensor value_and_gradient(const torch::Tensor& u, const BatchEvaluation& evaluate);

// log p(θ(u)) + log |J(u)| at each row of u ([m, d]), differentiable in u. A row whose
// parameters overflow gets -inf and no gradient.
torch::Tensor log_prior(const torch::Tensor& u, const LogPrior& prior);

// The prior of the unconstrained coordinates u: the model's (log p(θ(u)) + log |J(u)|, by
// LogPrior), or the density of --prior over u itself, its weights fixed.
class ParameterPrior {
public:
  // The model's prior; `model` must outlive this.
  explicit ParameterPrior(const LogPrior* model) : model_(model) {}
  // The density saved in `path`, whose columns must be `coordinates` in any order (the file's
  // column named c reads u's coordinate c), else ssm::Error prefixed by `who` naming both.
  ParameterPrior(const std::string& path, const std::vector<std::string>& coordinates,
                 const std::string& who = "vi");

  bool from_file() const { return density_.has_value(); }
  // At each row of u ([m, d]), differentiable in u.
  torch::Tensor operator()(const torch::Tensor& u) const;
  // At one point; -inf where θ(u) overflows.
  double value(std::span<const double> u) const;
  // n draws of u ([n, d], float64) from the file's density, by torch's default generator.
  torch::Tensor sample(int64_t n) const;

private:
  const LogPrior* model_ = nullptr;
  std::optional<flows::DensityModel> density_;
  torch::Tensor order_; // the file's columns in the coordinates' order
};

// The density saved in `path` as the learning room's PriorDensity (sample's and optimize's
// --prior, through vi/loader.h): ParameterPrior's, one point at a time, its gradient by autograd.
std::unique_ptr<PriorDensity> load_prior_density(const std::string& path,
                                                 const std::vector<std::string>& coordinates,
                                                 const std::string& who);

// Fills fit's draws from q: u ([n, d]), log q and the target's log p at each; `theta` maps a
// point to the whole parameter vector (throwing where it overflows: that draw is a row of NaN).
// Also the mean row (θ at the draws' mean) and a warning counting the draws where log p is not
// finite.
void record_parameter_draws(
    ParameterVariationalFit& fit, const torch::Tensor& u, const torch::Tensor& log_q,
    const torch::Tensor& log_p,
    const std::function<std::vector<double>(std::span<const double>)>& theta, int64_t n_theta);

} // namespace ssm
