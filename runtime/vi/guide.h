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
#include "vi/variational.h"

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ssm {

// Philox sites of the guide's draws (the counter's third word; the draw k is its fourth).
inline constexpr uint32_t kSiteContinuous = 0;      // + the continuous component c
inline constexpr uint32_t kSiteDiscrete = 1u << 24; // + the discrete component j
inline constexpr uint32_t kSiteGumbel = 1u << 25;   // + the discrete component j
inline constexpr uint32_t kSiteDifStart = 1u << 26; // + the dif guide j: its maps' first locations
inline constexpr uint32_t kSiteBatchOrder = 1u << 30;

// Which latent components the guide treats how.
struct GuidePlan {
  std::vector<int64_t> continuous; // state components
  std::vector<std::string> continuous_columns;
  std::vector<bool> continuous_score; // estimated by the score function rather than reparam
  // The support of each continuous component ([-inf, inf] when unbounded): the guide's Gaussian
  // is on the unconstrained scale u, and z = lower + exp(u), upper - exp(u) or lower + (upper -
  // lower) logistic(u), with the log-Jacobian in log q.
  std::vector<double> continuous_lower, continuous_upper;
  // Whether a component's mean and sd come from the model's guide (`guide z[n] ~ normal(m, s)`,
  // its arguments on the unconstrained scale), rather than from the guide's own parameters.
  std::vector<bool> continuous_declared;
  // A declared `dif(context, components, width)` guide: a conditional Discretely Indexed Flow
  // over its latent's continuous components (on the unconstrained scale), drawn Rao-Blackwellised
  // (Argouarc'h 2024, 4.76): one base draw eps per draw k, carried by each of its maps, each
  // image weighted by w_j(eps). Its maps fill the enumeration axis E, above the discrete values:
  // map j of the point e is (e / radix) % components.
  struct Dif {
    std::string latent;
    std::vector<int64_t> columns; // among the continuous components
    int64_t components = 0, width = 0, radix = 1;
  };
  std::vector<Dif> difs;
  std::vector<int> continuous_dif; // per continuous component: its dif's index, or -1
  struct Discrete {
    int64_t component = 0;
    std::string column;
    int64_t lower = 0, values = 0;
    bool enumerate = false; // summed over exactly; else sampled (score function)
    bool gumbel = false;    // enumerated too, but weighted by a relaxed draw while training
    bool declared = false;  // its probabilities come from the model's guide (`guide z[n] ~ ...`)
  };
  std::vector<Discrete> discrete;
  int64_t enumeration = 1; // points per draw: joint values of the enumerated components, times
                           // each dif's maps
  int64_t discrete_enumeration = 1; // joint values of the enumerated discrete components
  // A Cholesky factor couples the continuous components (--method fullrank, or a guide's
  // mvnormal_chol): one Gaussian over all of them, with one estimator.
  bool dense = false;
  std::vector<VariationalFit::Estimator> estimators;
};

// Resolves --estimator per latent variable (auto: enumerate a discrete latent while the joint
// enumeration stays within kMaxEnumeration values, else the score function; reparameterise a
// continuous one). Throws ssm::Error for an estimator that cannot apply, naming those that can.
GuidePlan plan_guide(const ssm_model& model, const ModelInfo& info,
                     const VariationalOptions& options);
// plan_guide's part for dif guides: a latent's (its estimator must be reparam, the family
// meanfield), then their maps' places on the enumeration axis and the objective (the ELBO).
void plan_dif(GuidePlan& plan, const VarInfo& v, const GuideInfo::Relation& rel,
              const VariationalOptions& options);
void place_difs(GuidePlan& plan, const VariationalOptions& options);

// The items' observations as a [T, n_obs] tensor, for a network that reads them (`who`, as a
// message names it: "the encoder"). Throws ssm::Error naming the line of a missing one.
torch::Tensor item_observations(const ObsData& data, const std::string& who);
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
  Guide(const GuidePlan& plan, const ssm_model& model, const ModelInfo& info,
        const std::vector<double>& fixed, const ObsData& data, const VariationalOptions& options,
        uint64_t seed);

  GuideDraws draw(const std::vector<int64_t>& items, int64_t K, uint32_t step, uint64_t seed,
                  Relaxation relax = {}) const;
  std::vector<torch::Tensor> parameters() const;
  std::vector<std::string> parameter_names() const;
  // Per item: a mean and an sd per continuous component, then a probability per value of each
  // discrete one (a bounded component's mean and sd: those of its Gaussian on the unconstrained
  // scale, which bounds() replaces by estimates from draws).
  std::vector<std::string> columns() const;
  std::vector<std::vector<double>> moments() const;
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

private:
  // The guide's parameters of items `idx`: means and log sds [I, C], logits per discrete
  // component [I, values]; for a dense plan, the Cholesky factor's entries below the diagonal
  // [I, C, C] (its diagonal is exp(log_sd)).
  struct Local {
    torch::Tensor mu, log_sd, lower;
    std::vector<torch::Tensor> logits;
    std::vector<torch::Tensor> contexts; // per dif guide: [I, c], standardised
  };
  Local local(const torch::Tensor& idx) const;
  Local own_local(const torch::Tensor& idx) const; // the guide's own parameters alone
  // Replaces the declared latents' parameters in `l` by those the model's guide gives.
  void apply_declared(Local& l, const torch::Tensor& idx) const;
  // z of the continuous components from their unconstrained draws u ([I, K, C]), and
  // log |dz/du| summed over the components ([I, K]).
  std::pair<torch::Tensor, torch::Tensor> constrain(const torch::Tensor& u) const;
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
  torch::Tensor mu_, log_sd_, lower_; // [N, C], [N, C], [N, C, C] (strictly lower part used)
  std::vector<torch::Tensor> logits_; // per discrete component: [N, values]
  mutable nn::Mlp encoder_{nullptr};  // amortized: observations -> (mu, log_sd, logits)
  torch::Tensor inputs_;              // amortized: [N, n_obs], the items' observations
  const GuideInfo* declared_ = nullptr;
  Arguments arguments_;
  struct DeclaredSlot {
    torch::Tensor columns; // normal, mvnormal_chol: its columns among the continuous components
    size_t discrete = 0;   // categorical, bernoulli: its index among the discrete ones
    int dif = -1;          // dif: its index among plan_.difs
  };
  std::vector<DeclaredSlot> declared_slots_; // per declared relation: see declare()
};

} // namespace ssm
