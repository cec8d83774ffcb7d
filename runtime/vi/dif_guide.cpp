// A model's `dif` guides (vi/guide.h): their construction around the prior, their
// Rao-Blackwellised points for a batch of draws, their weights as networks, and the archive that
// --save-guide writes and --load-guide reads.
#include "core/error.h"
#include "kernel/distributions.h"
#include "vi/guide.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <numeric>
#include <sstream>

namespace ssm {

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
  spec.single = single_;
  spec.base = std::make_shared<flows::DensitySpec>();
  spec.base->dim = d;
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

std::vector<torch::Tensor> Guide::network_parameters() const {
  std::vector<torch::Tensor> p;
  for (const auto& dif : difs_)
    for (const torch::Tensor& t : dif->parameters())
      p.push_back(t);
  return p;
}

std::vector<std::string> Guide::network_parameter_names() const {
  std::vector<std::string> names;
  for (size_t j = 0; j < difs_.size(); ++j)
    for (const auto& p : difs_[j]->named_parameters())
      for (int64_t k = 0; k < p.value().numel(); ++k)
        names.push_back(fmt::format("dif.{}.{}[{}]", plan_.difs[j].latent, p.key(), k));
  return names;
}

namespace {
// The archive of a guide's difs (--save-guide): its format, then per dif, by latent, its sizes
// (dimension, maps, width, context), context standardisation and weights.
constexpr int64_t kDifGuideFormat = 1;
} // namespace

std::string Guide::save() const {
  if (amortized())
    return encoder_->save();
  torch::serialize::OutputArchive archive;
  archive.write("ssmc_dif_guide", torch::tensor(kDifGuideFormat));
  for (size_t j = 0; j < difs_.size(); ++j) {
    const flows::DensitySpec& spec = difs_[j]->spec();
    torch::serialize::OutputArchive one;
    one.write("sizes", torch::tensor(std::vector<int64_t>{spec.dim, spec.components,
                                                          spec.hidden.at(0), spec.context}));
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
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path);
    torch::Tensor format;
    if (!archive.try_read("ssmc_dif_guide", format) || format.item<int64_t>() != kDifGuideFormat)
      throw Error(fmt::format("vi: {} is not a dif guide saved by this version of ssmc "
                              "(--save-guide)",
                              path));
  } catch (const c10::Error&) {
    throw Error(fmt::format("vi: {} is not a guide saved by ssmc (--save-guide)", path));
  }
  torch::NoGradGuard no_grad;
  for (size_t j = 0; j < difs_.size(); ++j) {
    const flows::DensitySpec& spec = difs_[j]->spec();
    const std::string name = plan_.difs[j].latent;
    torch::serialize::InputArchive one;
    if (!archive.try_read("dif." + name, one))
      throw Error(fmt::format("vi: {} has no dif guide of '{}'", path, name));
    torch::Tensor sizes, shift, scale;
    one.read("sizes", sizes);
    const std::vector<int64_t> want = {spec.dim, spec.components, spec.hidden.at(0), spec.context};
    const std::vector<int64_t> have(sizes.data_ptr<int64_t>(),
                                    sizes.data_ptr<int64_t>() + sizes.numel());
    if (have != want)
      throw Error(fmt::format("vi: the dif guide of '{}' in {} has (dimension, components, "
                              "width, context) = ({}); this model's has ({})",
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
