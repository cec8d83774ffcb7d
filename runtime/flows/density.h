// Densities over R^d on LibTorch, the flows room's common interface: a density evaluates log p
// on a batch and samples from p, optionally given a context ω per row (a conditional density
// p(x | ω): its DIF stages read ω, Argouarc'h 2024, 4.3.11). The kinds: the standard normal (the
// base of the others), the Gaussian mixture (gmm.h), the normalising flows MAF and RealNVP
// (flows.h) and the Discretely Indexed Flow (dif.h). A flow or a DIF transports a base density,
// which may itself be a flow or a DIF: a cascade. `DensityModel` is what is fitted, saved and
// loaded: a density over the data's standardised columns, with the standardisation and the columns'
// names.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ssm::flows {

// What a density is, enough to build it again (saved with the weights). A cascade is a chain of
// specs through `base`, from the data towards the latent space.
struct DensitySpec {
  std::string kind = "normal"; // normal, gmm, maf, realnvp, dif
  int64_t dim = 0;
  int64_t components = 1;          // gmm, dif: K
  std::string covariance = "full"; // gmm: full or diagonal
  int64_t layers = 5;              // maf, realnvp: the number of flow layers (dif: of its maps)
  std::string maps = "affine"; // dif: affine (location-scale), or maf or realnvp layers before it
  std::vector<int64_t> hidden = {64, 64}; // widths of the networks (MADE, coupling, DIF weights)
  int64_t context = 0; // the dimension of ω for a conditional density (its dif stages read it)
  // The networks' weights and arithmetic in float32 (about twice as fast on a CPU); densities,
  // maps and the mixture stay in float64.
  bool single = false;
  std::shared_ptr<DensitySpec> base; // flows and dif: the density they transport; none: N(0, I)
};

// The kinds `kind` may name, in the order --help lists them.
const std::vector<std::string>& density_kinds();
// "dif(K = 8, hidden = [64, 64]) over maf(layers = 5, hidden = [64, 64]) over normal".
std::string describe(const DensitySpec& spec);

class DensityImpl : public torch::nn::Module {
public:
  explicit DensityImpl(DensitySpec spec) : spec_(std::move(spec)) {}
  // x: [n, d], context: [n, c] (undefined when c = 0) -> log p(x | context): [n].
  virtual torch::Tensor log_prob(const torch::Tensor& x, const torch::Tensor& context) = 0;
  torch::Tensor log_prob(const torch::Tensor& x) { return log_prob(x, {}); }
  // n draws: [n, d], from torch's default generator (seeded by the caller), without gradients;
  // draw i given row i of the context ([n, c], undefined when c = 0).
  virtual torch::Tensor sample(int64_t n, const torch::Tensor& context) = 0;
  torch::Tensor sample(int64_t n) { return sample(n, {}); }
  // E_{x~p}[f(x)] Rao-Blackwellised, one value per base draw: [n], differentiable in the weights.
  // The base's draws are reparameterised (z = ε for N(0, I), through the inverse layers for a
  // flow), and a DIF sums over its index instead of drawing it (Argouarc'h 2024, 4.76 and A.7):
  // E[f(X)] = E_z[Σ_k w_k(z) f(T_k^{-1}(z))]. f maps [m, d] to [m].
  using Integrand = std::function<torch::Tensor(const torch::Tensor&)>;
  virtual torch::Tensor expectation(int64_t n, const Integrand& f);
  const DensitySpec& spec() const { return spec_; }
  int64_t dim() const { return spec_.dim; }

private:
  DensitySpec spec_;
};

// Builds a density of `spec` (and its bases), with fresh weights, in float64.
std::shared_ptr<DensityImpl> make_density(const DensitySpec& spec);

// The standard normal N(0, I_d): the base of every flow and DIF.
class StandardNormalImpl : public DensityImpl {
public:
  explicit StandardNormalImpl(const DensitySpec& spec) : DensityImpl(spec) {}
  using DensityImpl::log_prob;
  using DensityImpl::sample;
  torch::Tensor log_prob(const torch::Tensor& x, const torch::Tensor& context) override;
  torch::Tensor sample(int64_t n, const torch::Tensor& context) override;
  torch::Tensor expectation(int64_t n, const Integrand& f) override;
};

// A fitted density and how its data is read: the columns by name, standardised as
// (x - shift) / scale before the density sees them (log p includes the Jacobian); for a
// conditional density, the context's columns, standardised the same way.
struct DensityModel {
  std::vector<std::string> columns, context_columns;
  torch::Tensor shift, scale;                 // [d], float64
  torch::Tensor context_shift, context_scale; // [c]; undefined without a context
  std::shared_ptr<DensityImpl> density;

  // x and the context in the data's units; the context undefined for an unconditional density.
  torch::Tensor log_prob(const torch::Tensor& x, const torch::Tensor& context = {}) const;
  torch::Tensor sample(int64_t n, const torch::Tensor& context = {}) const;
  torch::Tensor standardised_context(const torch::Tensor& context) const;
  int64_t parameter_count() const;
};

// Writes the model (spec, columns, standardisation, weights) to `path` atomically, in LibTorch's
// archive format; and reads it back. load_density_model throws ssm::Error naming the file when it
// is not a density saved by ssmc.
void save_density_model(const DensityModel& model, const std::string& path);
// The bytes save_density_model writes, for a caller that writes the file itself.
std::string density_model_bytes(const DensityModel& model);
DensityModel load_density_model(const std::string& path);

} // namespace ssm::flows
