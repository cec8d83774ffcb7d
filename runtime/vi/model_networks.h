// The networks a model declares (`net NAME : mlp(...)`, `embedding(...)` of a token, `rnn(...)`
// over a sequence, and the
// densities `dif(...)`, `maf(...)`, `realnvp(...)` that are latents' distributions and
// `rnn_lm(...)` that is a sequence's) and the calls of them that the compiler turned into hidden
// states (passes/net_outputs.cpp): this class holds the networks' weights, applies each call to the
// values of its arguments (a density: log p of its first argument given the rest) and writes the
// outputs into those states' slots, differentiably, so that the gradient the compiled kernels give
// for a slot (nn/compiled_density.h) flows on through the network to its weights and its arguments.
// It also saves all the networks to one file, and starts them from one. The vi module's: a density
// is a flows room's (runtime/flows).
#pragma once

#include "core/csv.h"
#include "core/metadata.h"
#include "flows/density.h"
#include "nn/mlp.h"
#include "nn/recurrent.h"

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace ssm::nn {

// The tokens of items' sequences: per observation that is a sequence (by name), tokens [R, L]
// (int64, 0 past each row's end) and lengths [R].
struct SequenceBatch {
  std::vector<std::string> names;
  std::vector<torch::Tensor> tokens, lengths;
  bool empty() const { return names.empty(); }
  // Rows `rows` ([R'] int64) of this batch, trimmed to the longest of them.
  SequenceBatch select(const torch::Tensor& rows) const;
};
// Every item's sequences (ObsData::sequences), in item order.
SequenceBatch sequence_batch(const ObsData& data);

class ModelNetworks {
public:
  // New networks, their weights drawn from LibTorch's initialisation under `seed`, or those of
  // `load_path` (a file of save()), checked against the declarations; in float32 if `single`.
  ModelNetworks(const ModelInfo& info, uint64_t seed, const std::string& load_path,
                bool single = false);

  bool empty() const { return nets_.empty(); }
  // z: [I, S, D] values of the state (the slots of the calls' outputs are replaced); theta:
  // [n_theta]; fixed: the frame's fixed part (parameters then data values); covariates: the
  // items' inputs [I, n_inputs] (undefined when the model has none); sequences: the items'
  // sequences, or null to leave out the calls that read one (the guide's start, whose draws do
  // not read their outputs). Returns z with every call's output in its slot, but for the calls
  // that read observations (a guide's: see guide_inputs).
  torch::Tensor apply(const torch::Tensor& z, const torch::Tensor& theta,
                      const std::vector<double>& fixed, const torch::Tensor& covariates = {},
                      const SequenceBatch* sequences = nullptr);
  // apply() to R states held as a sampling kernel holds them (x[c * R + n], D components each),
  // the model's calls' outputs written back into x, where the kernels read them. Returns the
  // states with the outputs, [R, D].
  torch::Tensor apply_in_place(std::vector<double>& x, int64_t R, const torch::Tensor& theta,
                               const std::vector<double>& fixed,
                               const torch::Tensor& covariates = {});
  // The network outputs a declared guide reads (GuideInfo::inputs, in order) for items whose
  // observations are `obs` ([I, n_obs]) and covariates `covariates` ([I, n_inputs]):
  // [I, GuideInfo::n_inputs].
  torch::Tensor guide_inputs(const torch::Tensor& obs, const torch::Tensor& theta,
                             const std::vector<double>& fixed, const torch::Tensor& covariates = {},
                             const SequenceBatch& sequences = {});

  // `simulate`: a draw of each sequence that a language model (rnn_lm) is the distribution of,
  // per row of z ([R, D]: the items' states, the calls' outputs in their slots), its context
  // read as apply() reads it; the uniform behind sequence k's token t of row r is
  // uniform(k, r, t). Rows end after the token `end` (if >= 0) or at max_length tokens.
  SequenceBatch sample_sequences(const torch::Tensor& z, const torch::Tensor& theta,
                                 const std::vector<double>& fixed, const torch::Tensor& covariates,
                                 int64_t max_length, int64_t end,
                                 const std::function<double(int64_t, int64_t, int64_t)>& uniform);

  std::vector<torch::Tensor> parameters() const;
  // Each network's number of weights, in declaration order.
  std::vector<int64_t> weights() const;
  // The model's density `name` (a `dif`, `maf` or `realnvp` declaration) as a file of `ssmc
  // density`: its columns the latent's (its context's, those of the call's other arguments), in
  // their own units (no standardisation).
  flows::DensityModel density_model(const std::string& name) const;
  // The densities among the networks (each cascade once, by its outermost stage's name): what
  // training watches for collapsing components (flows/scale_watch.h).
  std::vector<std::pair<std::string, const flows::DensityImpl*>> densities() const;
  // `NET.layers.K.weight[i]` per scalar of parameters(), in order.
  std::vector<std::string> parameter_names() const;
  // All networks by name, in LibTorch's archive format.
  std::string save() const;

private:
  // Call `call` on R rows: its state arguments from `z` ([R, D]), its observation arguments from
  // `obs` ([R, n_obs]), its covariates from `covariates` ([R, n_inputs]), its sequence from
  // `sequences` (R rows), parameters and data broadcast. [R, outputs].
  torch::Tensor forward(const NetCallInfo& call, const torch::Tensor& z, const torch::Tensor& obs,
                        const torch::Tensor& covariates, const torch::Tensor& theta,
                        const std::vector<double>& fixed, const SequenceBatch& sequences);

  // The values of the call's arguments but a sequence, each [R, size] (forward()'s).
  std::vector<torch::Tensor> arguments_of(const NetCallInfo& call, const torch::Tensor& z,
                                          const torch::Tensor& obs, const torch::Tensor& covariates,
                                          const torch::Tensor& theta,
                                          const std::vector<double>& fixed, int64_t R) const;
  // One of the four is set: an mlp, a density over its first `dim` inputs given the rest, a
  // recurrent network over a sequence (given the rest), or an embedding of a token; none for a
  // stage of another density's cascade.
  struct Network {
    Mlp mlp{nullptr};
    std::shared_ptr<flows::DensityImpl> density;
    Recurrent recurrent{nullptr};
    torch::nn::Embedding embedding{nullptr};
    torch::nn::Module& module() const;
    // A stage of another density's cascade: its weights are that density's.
    bool cascade_stage() const { return !mlp && !density && !recurrent && !embedding; }
  };
  const ModelInfo& info_;
  std::vector<Network> nets_;
};

} // namespace ssm::nn
