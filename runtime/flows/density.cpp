// The densities' common part: building a density from its spec, the standard normal, the fitted
// model with its standardisation, and its file. See density.h.
#include "flows/density.h"
#include "core/error.h"
#include "core/output.h"
#include "flows/dif.h"
#include "flows/energy.h"
#include "flows/flows.h"
#include "flows/gaussian.h"
#include "flows/gmm.h"
#include "kernel/special_functions.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>

namespace ssm::flows {

namespace {

// The file's format: a version that a reader of another layout refuses.
constexpr int64_t kFormatVersion = 2; // 2: MADE context terms, clamped coupling scales

nlohmann::json spec_json(const DensitySpec& spec) {
  nlohmann::json j = {{"kind", spec.kind},
                      {"dim", spec.dim},
                      {"components", spec.components},
                      {"covariance", spec.covariance},
                      {"layers", spec.layers},
                      {"hidden", spec.hidden},
                      {"context", spec.context},
                      {"maps", spec.maps},
                      {"single", spec.single}};
  j["base"] = spec.base ? spec_json(*spec.base) : nlohmann::json(nullptr);
  return j;
}

DensitySpec spec_from_json(const nlohmann::json& j) {
  DensitySpec spec;
  spec.kind = j.at("kind").get<std::string>();
  if (std::find(density_kinds().begin(), density_kinds().end(), spec.kind) == density_kinds().end())
    throw std::out_of_range("unknown kind " + spec.kind);
  spec.dim = j.at("dim").get<int64_t>();
  spec.components = j.at("components").get<int64_t>();
  spec.covariance = j.at("covariance").get<std::string>();
  spec.layers = j.at("layers").get<int64_t>();
  spec.hidden = j.at("hidden").get<std::vector<int64_t>>();
  spec.context = j.value("context", int64_t(0));
  spec.maps = j.value("maps", std::string("affine"));
  spec.single = j.value("single", false);
  if (spec.maps != "affine" && spec.maps != "maf" && spec.maps != "realnvp")
    throw std::out_of_range("unknown maps " + spec.maps);
  if (!j.at("base").is_null())
    spec.base = std::make_shared<DensitySpec>(spec_from_json(j.at("base")));
  return spec;
}

// Text as a tensor of bytes, the archive's way of holding it.
torch::Tensor text_tensor(const std::string& text) {
  return torch::from_blob(const_cast<char*>(text.data()), {int64_t(text.size())}, torch::kUInt8)
      .clone();
}

std::string tensor_text(const torch::Tensor& t) {
  auto bytes = t.contiguous();
  return std::string(reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()), bytes.numel());
}

} // namespace

const std::vector<std::string>& density_kinds() {
  static const std::vector<std::string> kinds = {"dif",    "gmm",    "maf",     "realnvp",
                                                 "normal", "energy", "gaussian"};
  return kinds;
}

std::string describe(const DensitySpec& spec) {
  std::string text;
  if (spec.kind == "gmm")
    text = fmt::format("gmm(K = {}, {} covariance)", spec.components, spec.covariance);
  else if (spec.kind == "dif")
    text = fmt::format(
        "dif(K = {}, hidden = [{}]{}{}{})", spec.components, fmt::join(spec.hidden, ", "),
        spec.maps == "affine" ? std::string()
                              : fmt::format(", maps = {} of {} layers", spec.maps, spec.layers),
        spec.context ? fmt::format(", context = {}", spec.context) : "",
        spec.single ? ", single" : "");
  else if (spec.kind == "maf" || spec.kind == "realnvp")
    text = fmt::format("{}(layers = {}, hidden = [{}]{})", spec.kind, spec.layers,
                       fmt::join(spec.hidden, ", "), spec.single ? ", single" : "");
  else if (spec.kind == "gaussian")
    text = fmt::format("gaussian({} covariance)", spec.covariance);
  else if (spec.kind == "energy")
    text = fmt::format("energy(classifier hidden = [{}], silu{}) over a Gaussian",
                       fmt::join(spec.hidden, ", "), spec.single ? ", single" : "");
  else
    text = "normal";
  if (spec.kind == "dif" || spec.kind == "maf" || spec.kind == "realnvp")
    text += " over " + (spec.base ? describe(*spec.base) : std::string("normal"));
  return text;
}

std::shared_ptr<DensityImpl> make_density(const DensitySpec& spec) {
  if (spec.dim < 1)
    throw Error("a density needs at least one dimension");
  if (spec.components < 1 || spec.layers < 1 || spec.context < 0)
    throw Error(fmt::format("{}: components and layers must be at least 1", describe(spec)));
  for (int64_t width : spec.hidden)
    if (width < 1)
      throw Error(fmt::format("{}: a hidden layer must have at least one unit", describe(spec)));
  if (spec.maps != "affine" && spec.maps != "maf" && spec.maps != "realnvp")
    throw Error(fmt::format("unknown DIF maps '{}' (expected affine, maf or realnvp)", spec.maps));
  if (spec.covariance != "full" && spec.covariance != "diagonal")
    throw Error(
        fmt::format("unknown covariance '{}' (expected full or diagonal)", spec.covariance));
  if (spec.kind == "normal")
    return std::make_shared<StandardNormalImpl>(spec);
  if (spec.kind == "gmm")
    return std::make_shared<GaussianMixtureImpl>(spec);
  if (spec.kind == "gaussian")
    return std::make_shared<GaussianImpl>(spec);
  if (spec.kind == "energy") {
    if (spec.base)
      throw Error("an energy model stands alone: its instrumental law is a Gaussian fitted to "
                  "the data, not another stage of --model");
    return std::make_shared<EnergyImpl>(spec);
  }
  if (spec.kind != "dif" && spec.kind != "maf" && spec.kind != "realnvp")
    throw Error(fmt::format("unknown density '{}' (expected {})", spec.kind,
                            fmt::join(density_kinds(), ", ")));
  DensitySpec base_spec;
  if (spec.base)
    base_spec = *spec.base;
  base_spec.dim = spec.dim;
  base_spec.context = spec.context;
  base_spec.single = spec.single;
  if (base_spec.kind == "gmm" || base_spec.kind == "gaussian")
    throw Error(fmt::format("a {} cannot be the base of a flow or a DIF: their maps hold its "
                            "location and scale, over N(0, I)",
                            base_spec.kind));
  if (base_spec.kind == "energy")
    throw Error("an energy model cannot be the base of a flow or a DIF: it stands alone (its "
                "density is known only up to a constant that its own fit estimates)");
  auto base = make_density(base_spec);
  if (spec.kind == "dif")
    return std::make_shared<DifImpl>(spec, base);
  return std::make_shared<FlowImpl>(spec, base);
}

torch::Tensor StandardNormalImpl::log_prob(const torch::Tensor& x, const torch::Tensor&) {
  return -0.5 * x.pow(2).sum(1) - double(dim()) * kLogSqrtTwoPi;
}

torch::Tensor StandardNormalImpl::sample(int64_t n, const torch::Tensor&) {
  return torch::randn({n, dim()}, torch::kFloat64);
}

torch::Tensor DensityImpl::expectation(int64_t, const Integrand&) {
  throw Error(fmt::format("a {} has no reparameterised expectation (a dif, gmm, gaussian, maf, "
                          "realnvp or normal has)",
                          spec_.kind));
}

torch::Tensor StandardNormalImpl::expectation(int64_t n, const Integrand& f) {
  return f(torch::randn({n, dim()}, torch::kFloat64));
}

torch::Tensor DensityModel::standardised_context(const torch::Tensor& context) const {
  return context_columns.empty() ? torch::Tensor() : (context - context_shift) / context_scale;
}

torch::Tensor DensityModel::log_prob(const torch::Tensor& x, const torch::Tensor& context) const {
  return density->log_prob((x - shift) / scale, standardised_context(context)) -
         torch::log(scale).sum();
}

torch::Tensor DensityModel::sample(int64_t n, const torch::Tensor& context) const {
  torch::NoGradGuard no_grad;
  return density->sample(n, standardised_context(context)) * scale + shift;
}

int64_t DensityModel::parameter_count() const {
  if (auto* gmm = dynamic_cast<GaussianMixtureImpl*>(density.get()))
    return gmm->free_parameter_count();
  if (auto* g = dynamic_cast<GaussianImpl*>(density.get())) // the lower triangle, not the square
    return g->dim() + (g->spec().covariance == "full" ? g->dim() * (g->dim() + 1) / 2 : g->dim());
  int64_t count = 0;
  for (const auto& p : density->parameters())
    count += p.numel();
  return count;
}

std::string density_model_bytes(const DensityModel& model) {
  torch::serialize::OutputArchive archive;
  archive.write("format", torch::tensor(kFormatVersion));
  archive.write("spec", text_tensor(spec_json(model.density->spec()).dump()));
  archive.write("columns", text_tensor(nlohmann::json(model.columns).dump()));
  archive.write("shift", model.shift);
  archive.write("scale", model.scale);
  if (!model.context_columns.empty()) {
    archive.write("context_columns", text_tensor(nlohmann::json(model.context_columns).dump()));
    archive.write("context_shift", model.context_shift);
    archive.write("context_scale", model.context_scale);
  }
  torch::serialize::OutputArchive weights;
  model.density->save(weights);
  archive.write("density", weights);
  std::ostringstream bytes;
  archive.save_to(bytes);
  return bytes.str();
}

void save_density_model(const DensityModel& model, const std::string& path) {
  OutputFile out(path);
  out.write(density_model_bytes(model));
  out.commit();
}

DensityModel load_density_model(const std::string& path) {
  struct Malformed { // why the file is not one: reported once, with the file's name
    std::string why;
  };
  auto not_ours = [&](const std::string& why) {
    return Error(fmt::format("{} is not a density saved by ssmc ({})", path, why));
  };
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(path);
    torch::Tensor format, spec, columns;
    archive.read("format", format);
    if (format.item<int64_t>() != kFormatVersion)
      throw Malformed{fmt::format("format {}, and this ssmc reads format {}",
                                  format.item<int64_t>(), kFormatVersion)};
    archive.read("spec", spec);
    archive.read("columns", columns);
    DensityModel model;
    model.density = make_density(spec_from_json(nlohmann::json::parse(tensor_text(spec))));
    model.columns = nlohmann::json::parse(tensor_text(columns)).get<std::vector<std::string>>();
    archive.read("shift", model.shift);
    archive.read("scale", model.scale);
    if (model.density->spec().context) {
      torch::Tensor names;
      archive.read("context_columns", names);
      model.context_columns =
          nlohmann::json::parse(tensor_text(names)).get<std::vector<std::string>>();
      archive.read("context_shift", model.context_shift);
      archive.read("context_scale", model.context_scale);
      if (int64_t(model.context_columns.size()) != model.density->spec().context)
        throw Malformed{"its context's columns and dimension disagree"};
    }
    torch::serialize::InputArchive weights;
    archive.read("density", weights);
    model.density->load(weights);
    const int64_t d = model.density->dim(), c = model.density->spec().context;
    if (int64_t(model.columns.size()) != d || model.shift.numel() != d ||
        model.scale.numel() != d ||
        (c && (model.context_shift.numel() != c || model.context_scale.numel() != c)))
      throw Malformed{"its columns and its dimension disagree"};
    return model;
  } catch (const Malformed& e) {
    throw not_ours(e.why);
  } catch (const Error& e) { // a spec make_density refuses
    throw not_ours(e.what());
  } catch (const c10::Error& e) {
    throw not_ours(e.what_without_backtrace());
  } catch (const nlohmann::json::exception& e) {
    throw not_ours(e.what());
  } catch (const std::out_of_range& e) {
    throw not_ours(e.what());
  }
}

} // namespace ssm::flows
