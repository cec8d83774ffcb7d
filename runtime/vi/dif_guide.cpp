// A model's `dif` guides (vi/guide.h): their part of the guide's plan, their construction around
// the prior, their Rao-Blackwellised points for a batch of draws, their weights as networks, and
// the archive that --save-guide writes and --load-guide reads.
#include "core/error.h"
#include "kernel/distributions.h"
#include "vi/guide.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <numeric>
#include <sstream>

namespace ssm {

void plan_dif(GuidePlan& plan, const VarInfo& v, const GuideInfo::Relation& rel,
              const VariationalOptions& options) {
  if (plan.estimators.back().estimator != kReparamName)
    throw Error(fmt::format("vi: the dif guide of '{}' is drawn through its maps "
                            "(reparameterisation), but its estimator is {} ({})",
                            v.name, plan.estimators.back().estimator, plan.estimators.back().why));
  if (options.family != kMeanFieldName)
    throw Error(fmt::format("vi: '{}' has a dif guide, which --method {} cannot hold "
                            "beside its own family: use --method {}",
                            v.name, options.family, kMeanFieldName));
  plan.difs.push_back({v.name, {}, rel.components, rel.width, 1, rel.layers});
  plan.estimators.back().why = fmt::format(
      "continuous, its family the model's guide (dif): a draw eps of N(0, I) carried by "
      "each of the {} maps, z = T_k^-1(eps) weighted by w_k(eps) (Rao-Blackwellised), the "
      "gradient through the model's compiled state gradient",
      rel.components);
}

void place_difs(GuidePlan& plan, const VariationalOptions& options) {
  // The IWAE bound leaves a map of negligible weight unconstrained (its term p / q does not
  // shrink with its weight), free to drift where the model's density vanishes.
  if (!plan.difs.empty() && options.objective != "elbo")
    throw Error(fmt::format("vi: the dif guide of '{}' trains on the ELBO, the Rao-Blackwellised "
                            "KL of Argouarc'h (2024, 4.76): the {} bound holds none of its maps "
                            "near the posterior once its weight is small. Use --objective elbo "
                            "(the {} bound is reported all the same)",
                            plan.difs.front().latent, options.objective, options.objective));
  // The difs' maps above the discrete values on the enumeration axis.
  plan.discrete_enumeration = plan.enumeration;
  for (GuidePlan::Dif& d : plan.difs) {
    d.radix = plan.enumeration;
    if (static_cast<double>(plan.enumeration) * static_cast<double>(d.components) > 1e6)
      throw Error(fmt::format(
          "vi: the dif guide of '{}' would evaluate the model at {} points "
          "per draw (its {} maps times the enumerated values before it)",
          d.latent, static_cast<double>(plan.enumeration) * static_cast<double>(d.components),
          d.components));
    plan.enumeration *= d.components;
  }
}

void Guide::start_dif(size_t j, const GuideInfo::Relation& r) {
  const GuidePlan::Dif& plan = plan_.difs[j];
  const GuideInfo::Relation::Argument& context = r.arguments.at(0);
  const int64_t d = static_cast<int64_t>(plan.columns.size()), K = plan.components;
  flows::DensitySpec spec;
  spec.kind = "dif";
  spec.dim = d;
  spec.components = K;
  spec.hidden = {plan.width, plan.width};
  spec.context = context.size;
  if (plan.layers > 0) { // flow maps (4.3.8), starting as the identity
    spec.maps = "maf";
    spec.layers = plan.layers;
  }
  spec.single = single_;
  spec.base = std::make_shared<flows::DensitySpec>();
  spec.base->dim = d;
  // Its networks' initial weights from --seed (LibTorch's generator, as the model's networks).
  torch::manual_seed(seed_ ^ (0x9e3779b97f4a7c15ULL * (j + 1)));
  difs_[j] = std::dynamic_pointer_cast<flows::DifImpl>(flows::make_density(spec));
  torch::NoGradGuard no_grad;
  std::vector<double> means(K * d), log_scales(K * d);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t i = 0; i < d; ++i) {
      const int64_t c = plan.columns[i];
      const double eps =
          K == 1 ? 0.0
                 : sample_std_normal_k(seed_, 0, 0, kSiteDifStart + static_cast<uint32_t>(j),
                                       static_cast<uint32_t>(k * d + i));
      means[k * d + i] = prior_mean_[c] + std::exp(prior_log_sd_[c]) * eps;
      log_scales[k * d + i] = prior_log_sd_[c] - (K == 1 ? 0.0 : 0.5 * std::log(2.0));
    }
  difs_[j]->means.copy_(torch::tensor(means, torch::kFloat64).view({K, d}));
  difs_[j]->log_scales.copy_(torch::tensor(log_scales, torch::kFloat64).view({K, d}));
  // The context's standardisation, from every item's (the encoder's outputs at the start).
  std::vector<int64_t> all(items_);
  std::iota(all.begin(), all.end(), 0);
  const torch::Tensor omega = arguments_(all).narrow(1, context.offset, context.size);
  dif_shift_[j] = omega.mean(0);
  dif_scale_[j] = items_ > 1 ? omega.std(0) : torch::ones({context.size}, torch::kFloat64);
  dif_scale_[j] =
      torch::where(dif_scale_[j] > 1e-12, dif_scale_[j], torch::ones_like(dif_scale_[j]));
}

Guide::DifPoints Guide::dif_points(const torch::Tensor& u, const torch::Tensor& eps,
                                   const Local& l) const {
  const int64_t I = u.size(0), K = u.size(1), C = continuous_, E = plan_.enumeration;
  DifPoints p;
  p.u = u.unsqueeze(2).expand({I, K, E, C});
  p.log_q = torch::zeros({I, K, E}, torch::kFloat64);
  p.log_weights = torch::zeros({I, K, E}, torch::kFloat64);
  for (size_t j = 0; j < difs_.size(); ++j) {
    const GuidePlan::Dif& g = plan_.difs[j];
    const int64_t d = static_cast<int64_t>(g.columns.size()), M = g.components;
    const torch::Tensor columns = torch::tensor(g.columns, torch::kInt64);
    // Draw k of item i: its base point, carried by every map, given the item's context.
    const torch::Tensor z = eps.index_select(2, columns).reshape({I * K, d});
    const torch::Tensor context = l.contexts[j].repeat_interleave(K, 0); // [I K, c]
    const auto [x, log_w] = difs_[j]->transport(z, context);             // [I K, M, d], [I K, M]
    const torch::Tensor log_q =
        difs_[j]->log_prob(x.reshape({I * K * M, d}), context.repeat_interleave(M, 0));
    // The point e holds map (e / radix) % M of this dif.
    std::vector<int64_t> map(E);
    for (int64_t e = 0; e < E; ++e)
      map[e] = (e / g.radix) % M;
    const torch::Tensor at = torch::tensor(map, torch::kInt64);
    p.u = p.u.index_copy(3, columns, x.view({I, K, M, d}).index_select(2, at));
    p.log_q = p.log_q + log_q.view({I, K, M}).index_select(2, at);
    p.log_weights = p.log_weights + log_w.view({I, K, M}).index_select(2, at);
  }
  return p;
}

namespace {
// A dif's maps (its own locations and log-scales), which the guide trains as its parameters.
bool is_map(const std::string& key) {
  return key == "means" || key == "log_scales";
}
} // namespace

std::vector<torch::Tensor> Guide::network_parameters() const {
  std::vector<torch::Tensor> p;
  for (const auto& dif : difs_)
    for (const auto& t : dif->named_parameters())
      if (!is_map(t.key()))
        p.push_back(t.value());
  return p;
}

std::vector<std::string> Guide::network_parameter_names() const {
  std::vector<std::string> names;
  for (size_t j = 0; j < difs_.size(); ++j)
    for (const auto& p : difs_[j]->named_parameters())
      if (!is_map(p.key()))
        for (int64_t k = 0; k < p.value().numel(); ++k)
          names.push_back(fmt::format("dif.{}.{}[{}]", plan_.difs[j].latent, p.key(), k));
  return names;
}

namespace {
// The archive of a guide's difs (--save-guide): its format, then per dif, by latent, its sizes
// (dimension, maps, width, context, precision, flow layers), context standardisation and weights.
constexpr int64_t kDifGuideFormat = 2;
int64_t map_layers(const flows::DensitySpec& spec) {
  return spec.maps == "affine" ? 0 : spec.layers;
}
} // namespace

std::vector<std::pair<std::string, const flows::DensityImpl*>> Guide::dif_guides() const {
  std::vector<std::pair<std::string, const flows::DensityImpl*>> out;
  for (size_t j = 0; j < difs_.size(); ++j)
    out.emplace_back(plan_.difs[j].latent, difs_[j].get());
  return out;
}

std::string Guide::save() const {
  if (amortized())
    return encoder_->save();
  torch::serialize::OutputArchive archive;
  archive.write("ssmc_dif_guide", torch::tensor(kDifGuideFormat));
  for (size_t j = 0; j < difs_.size(); ++j) {
    const flows::DensitySpec& spec = difs_[j]->spec();
    torch::serialize::OutputArchive one;
    one.write("sizes", torch::tensor(std::vector<int64_t>{spec.dim, spec.components,
                                                          spec.hidden.at(0), spec.context,
                                                          spec.single ? 1 : 0, map_layers(spec)}));
    one.write("shift", dif_shift_[j]);
    one.write("scale", dif_scale_[j]);
    torch::serialize::OutputArchive weights;
    difs_[j]->save(weights);
    one.write("weights", weights);
    archive.write("dif." + plan_.difs[j].latent, one);
  }
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

void Guide::load_difs(const std::string& path) {
  try {
    read_difs(path);
  } catch (const c10::Error& e) { // not an archive, or one without an entry read here
    throw Error(fmt::format("vi: {} is not a guide saved by ssmc (--save-guide): {}", path,
                            e.what_without_backtrace()));
  }
}

void Guide::read_difs(const std::string& path) {
  torch::serialize::InputArchive archive;
  archive.load_from(path);
  torch::Tensor format;
  if (!archive.try_read("ssmc_dif_guide", format) || format.item<int64_t>() != kDifGuideFormat)
    throw Error(fmt::format("vi: {} is not a dif guide saved by this version of ssmc "
                            "(--save-guide)",
                            path));
  torch::NoGradGuard no_grad;
  for (size_t j = 0; j < difs_.size(); ++j) {
    const flows::DensitySpec& spec = difs_[j]->spec();
    const std::string name = plan_.difs[j].latent;
    torch::serialize::InputArchive one;
    if (!archive.try_read("dif." + name, one))
      throw Error(fmt::format("vi: {} has no dif guide of '{}'", path, name));
    torch::Tensor sizes, shift, scale;
    one.read("sizes", sizes);
    const std::vector<int64_t> want = {spec.dim,     spec.components,     spec.hidden.at(0),
                                       spec.context, spec.single ? 1 : 0, map_layers(spec)};
    sizes = sizes.to(torch::kInt64).contiguous();
    const std::vector<int64_t> have(sizes.data_ptr<int64_t>(),
                                    sizes.data_ptr<int64_t>() + sizes.numel());
    if (have != want)
      throw Error(fmt::format("vi: the dif guide of '{}' in {} has (dimension, components, "
                              "width, context, single precision, layers) = ({}); this run's has "
                              "({})",
                              name, path, fmt::join(have, ", "), fmt::join(want, ", ")));
    one.read("shift", dif_shift_[j]);
    one.read("scale", dif_scale_[j]);
    torch::serialize::InputArchive weights;
    one.read("weights", weights);
    difs_[j]->load(weights);
  }
}

void Guide::share_networks(const Guide& other) {
  encoder_ = other.encoder_;
  difs_ = other.difs_;
  dif_shift_ = other.dif_shift_;
  dif_scale_ = other.dif_scale_;
}

} // namespace ssm
