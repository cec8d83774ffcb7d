// The default guide of a plate model, q(z_n) per item n: Gaussian over the continuous latent
// components (mean-field, or full-rank with a Cholesky factor, the guide's own or a declared
// mvnormal_chol's), a categorical over each discrete
// one, with parameters of each item's own or computed from its observations by an encoder network
// (amortized), and a declared `dif` guide's Discretely Indexed Flow (flows/dif.h) conditional on
// its context; the gradient estimator each latent variable's part of the objective gets; draws
// from the guide as LibTorch tensors whose graph reaches its parameters.
#pragma once

#include "core/csv.h"
#include "core/results.h"
#include "flows/dif.h"
#include "kernel/abi.h"
#include "nn/mlp.h"
#include "vi/guide_plan.h"
#include "vi/model_networks.h"
#include "vi/variational.h"

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace ssm {

// Philox sites of the guide's draws (the counter's third word; the draw k is its fourth).
inline constexpr uint32_t kSiteContinuous = 0;      // + the continuous component c
inline constexpr uint32_t kSiteDiscrete = 1u << 24; // + the discrete component j
inline constexpr uint32_t kSiteGumbel = 1u << 25;   // + the discrete component j
inline constexpr uint32_t kSiteDifStart = 1u << 26; // + the dif guide j: its maps' first locations
inline constexpr uint32_t kSiteBatchOrder = 1u << 30;

// What a network reads of each item (the encoder, a learned baseline: `who`, as a message names
// it): its observations, then its covariates (input x[n]), as a [T, n_obs + n_inputs] tensor.
// Throws ssm::Error naming the line of a missing observation.
torch::Tensor item_features(const ObsData& data, const std::string& who);
// The same for the model's guide, which needs only the observations it reads present.
torch::Tensor guide_observations(const ObsData& data, const GuideInfo& guide);

// Draws of the latents of items, K per item, and the enumerated values: z is [I, K, E, D].
struct GuideDraws {
  torch::Tensor z;
  torch::Tensor log_q_sampled; // [I, K]: log q of the drawn components
  // [I, K]: the same values, with the guide's parameters held constant in the reparameterised
  // components' log q ("sticking the landing", Roeder, Wu & Duvenaud 2017): the ELBO's
  // reparameterised gradient without the score term of log q, which has mean zero, so that its
  // variance vanishes as q reaches the posterior.
  torch::Tensor log_q_sticking;
  torch::Tensor log_q_enumerated; // [I, E]: log q of the enumerated ones (0 when none)
  torch::Tensor log_q_score;      // [I, K]: the part of log q_sampled that the score function
                                  // differentiates (undefined when no latent uses it)
  // [I, K, E]: the weights of the enumerated values in the ELBO: q of the enumerated latents,
  // times, for gumbel ones while training, each draw's relaxed one-hot (q at evaluation); times
  // the dif guides' weights of their maps.
  torch::Tensor weights;
  // [I, K, E], with a dif guide only (else undefined): log q of every continuous component at
  // each point (its dif's density, the bounded components' log-Jacobians), and the log weights
  // of the dif maps that made it.
  torch::Tensor log_q_point, log_point_weights;
};

// How a draw weighs the gumbel latents' values: a relaxed one-hot at `temperature` (0: their
// exact probabilities, as enumerated latents), straight-through or not.
struct Relaxation {
  double temperature = 0;
  bool straight_through = false;
};

class Guide {
public:
  // Starts at the prior: each item's Gaussian has the prior's mean and sd (from draws of the
  // initial kernel), each categorical the prior's frequencies; an amortized guide's encoder
  // outputs them whatever the item (or is read from options.load_guide).
  // `given_dimension` > 0 (--item-guide linear): each item's Gaussian is conditional on the
  // parameters' draw v ([given_dimension] standardised unconstrained coordinates), q(z_n | v)
  // with mean mu_n + A_n v and log sd log_sd_n + B_n v over the components of the guide's own
  // Gaussian (not a model's guide's, nor score-estimated ones); A_n, B_n are parameters of each
  // item's own, or outputs of the amortized encoder, starting at 0 (the independent guide).
  // `nets`: the model's networks, whose outputs the prior's draws read (a latent's prior that
  // calls one); they are computed at the start's parameters before the draws.
  Guide(const GuidePlan& plan, const ssm_model& model, const ModelInfo& info,
        const std::vector<double>& fixed, const ObsData& data, const VariationalOptions& options,
        uint64_t seed, int64_t given_dimension = 0, nn::ModelNetworks* nets = nullptr);

  // `given` ([d], with --item-guide linear): the standardised coordinates of the parameters'
  // draw that the items' Gaussians are conditional on (undefined: at 0). `sampled_path`: whether
  // log_q_sampled must carry its gradient (the IWAE bound's); without it, it is log_q_sticking
  // (the same values), which saves the ELBO's steps a second log q.
  GuideDraws draw(const std::vector<int64_t>& items, int64_t K, uint32_t step, uint64_t seed,
                  Relaxation relax = {}, const torch::Tensor& given = {},
                  bool sampled_path = true) const;
  // Whether the items' Gaussians are conditional on a draw (some component has a Gaussian of the
  // guide's own to condition).
  bool conditional() const { return given_ > 0; }
  std::vector<torch::Tensor> parameters() const;
  std::vector<std::string> parameter_names() const;
  // Per item: a mean and an sd per continuous component, then a probability per value of each
  // discrete one (a bounded component's mean and sd: those of its Gaussian on the unconstrained
  // scale, which bounds() replaces by estimates from draws).
  std::vector<std::string> columns() const;
  // `given`: the parameters' draw conditional guides are at (draw()'s; undefined: at 0).
  std::vector<std::vector<double>> moments(const torch::Tensor& given = {}) const;
  bool bounded(int64_t c) const {
    return plan_.continuous_lower[c] > -INFINITY || plan_.continuous_upper[c] < INFINITY;
  }
  // Whether moments() cannot give component c's mean and sd (a bounded component's, a dif's),
  // which the caller estimates from draws.
  bool moments_from_draws(int64_t c) const { return bounded(c) || plan_.continuous_dif[c] >= 0; }

  bool amortized() const { return !encoder_.is_empty(); }
  // The model's guide (`guide z[n] ~ ...`): `arguments(items)` gives its relations' arguments
  // for those items ([I, GuideInfo::n_arguments], differentiable in its networks), which replace
  // the guide's own parameters for the latents it covers.
  using Arguments = std::function<torch::Tensor(const std::vector<int64_t>&)>;
  // Builds the dif guides (or reads them from options.load_guide).
  void declare(const GuideInfo& guide, Arguments arguments);
  // The dif guides' weights, which every item shares: trained as networks (--net-learning-rate).
  std::vector<torch::Tensor> network_parameters() const;
  std::vector<std::string> network_parameter_names() const;
  // Whether some latent's guide has parameters of each item's own (fitted per item: held-out
  // items need fitting too), rather than from networks every item shares.
  bool fitted_per_item() const;
  // Whether the guide has networks that serve other items (an encoder, dif guides): save() gives
  // them as bytes (--save-guide: nn/mlp.h's encoder, or an archive of the dif guides), and
  // share_networks applies those of `other` to this guide's items (held-out items).
  bool saves() const { return amortized() || !difs_.empty(); }
  std::string save() const;
  void share_networks(const Guide& other);
  // The dif guides by their latents' names (training watches them: flows/scale_watch.h).
  std::vector<std::pair<std::string, const flows::DensityImpl*>> dif_guides() const;

private:
  // The guide's parameters of items `idx`: means and log sds [I, C], logits per discrete
  // component [I, values]; for a dense plan, the Cholesky factor's entries below the diagonal
  // [I, C, C] (its diagonal is exp(log_sd)).
  struct Local {
    torch::Tensor mu, log_sd, lower;
    // Conditional guides: the gains A, B ([I, C, d], own_local), and after local() mu and log_sd
    // with the guide's parameters held constant but not the draw, for sticking the landing
    // (undefined: mu's and log_sd's detach).
    torch::Tensor gain_mu, gain_log_sd;
    torch::Tensor mu_held, log_sd_held;
    std::vector<torch::Tensor> logits;
    std::vector<torch::Tensor> contexts; // per dif guide: [I, c], standardised
  };
  Local local(const torch::Tensor& idx, const torch::Tensor& given = {}) const;
  Local own_local(const torch::Tensor& idx) const; // the guide's own parameters alone
  // Replaces the declared latents' parameters in `l` by those the model's guide gives.
  void apply_declared(Local& l, const torch::Tensor& idx) const;
  // z of the continuous components from their unconstrained draws u ([I, K, C]), and
  // log |dz/du| summed over the components ([I, K]).
  std::pair<torch::Tensor, torch::Tensor> constrain(const torch::Tensor& u) const;
  bool bounded() const;                          // some continuous component has a finite bound
  static torch::Tensor cholesky(const Local& l); // [I, C, C] (dense plans)
  void start_encoder(const ObsData& data, const VariationalOptions& options,
                     const std::vector<double>& start);
  // A dif guide's maps start around the prior: locations at draws of it, scales its sd / sqrt(2)
  // (the mixture's spread then near the prior's), constant weights; its context standardised by
  // the items' means and sds.
  void start_dif(size_t j, const GuideInfo::Relation& r);
  void load_difs(const std::string& path);
  void read_difs(const std::string& path); // load_difs without its reading of LibTorch's errors
  // The dif guides' points for draws eps ([I, K, C]) and contexts: the unconstrained components
  // with the difs' columns filled ([I, K, E, C], from u [I, K, C]), and log q and the log weights
  // of the difs' points ([I, K, E]).
  struct DifPoints {
    torch::Tensor u, log_q, log_weights;
  };
  DifPoints dif_points(const torch::Tensor& u, const torch::Tensor& eps, const Local& l) const;

  const GuidePlan& plan_;
  int64_t n_state_ = 0, items_ = 0, continuous_ = 0;
  bool fullrank_ = false, single_ = false;
  uint64_t seed_ = 0;
  std::string load_guide_;
  std::vector<double> prior_mean_, prior_log_sd_;     // per continuous component, unconstrained
  std::vector<std::shared_ptr<flows::DifImpl>> difs_; // per plan_.difs
  std::vector<torch::Tensor> dif_shift_, dif_scale_;  // each dif's context standardisation
  torch::Tensor mu_, log_sd_, lower_;   // [N, C], [N, C], [N, C, C] (strictly lower part used)
  std::vector<torch::Tensor> logits_;   // per discrete component: [N, values]
  int64_t given_ = 0;                   // d of a conditional guide, else 0
  int64_t base_outputs_ = 0;            // amortized: the encoder's outputs before the gains
  torch::Tensor gain_mu_, gain_log_sd_; // conditional, per item: [N, C, d] (A_n, B_n)
  torch::Tensor own_gaussian_;          // conditional: [C], 1 where the guide's own Gaussian
  mutable nn::Mlp encoder_{nullptr};    // amortized: observations -> (mu, log_sd, logits)
  torch::Tensor inputs_;                // amortized: [N, n_obs + n_inputs] (item_features)
  const GuideInfo* declared_ = nullptr;
  Arguments arguments_;
  struct DeclaredSlot {
    torch::Tensor columns;    // normal, mvnormal_chol: its columns among the continuous components
    bool all_columns = false; // they are all the continuous components, in order
    size_t discrete = 0;      // categorical, bernoulli: its index among the discrete ones
    int dif = -1;             // dif: its index among plan_.difs
  };
  std::vector<DeclaredSlot> declared_slots_; // per declared relation: see declare()
};

} // namespace ssm
