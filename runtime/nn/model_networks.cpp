// A model's networks: see model_networks.h.
#include "nn/model_networks.h"
#include "core/error.h"

#include <fmt/format.h>

#include <sstream>

namespace ssm::nn {

namespace {

MlpSpec declared_spec(const NetInfo& net, bool single) {
  if (net.kind != "mlp")
    throw Error(fmt::format("network '{}' is a '{}', which this runtime does not know", net.name,
                            net.kind));
  return MlpSpec{net.inputs, net.outputs, net.hidden, net.activation, single};
}

} // namespace

ModelNetworks::ModelNetworks(const ModelInfo& info, uint64_t seed, const std::string& load_path,
                             bool single)
    : info_(info) {
  if (info.nets.empty()) {
    if (!load_path.empty())
      throw Error(
          fmt::format("--load-nets {}: model '{}' declares no networks", load_path, info.name));
    return;
  }
  torch::manual_seed(seed);
  torch::serialize::InputArchive archive;
  if (!load_path.empty()) {
    try {
      archive.load_from(load_path);
    } catch (const c10::Error& e) {
      throw Error(fmt::format("{} is not a file of networks saved by ssmc ({})", load_path,
                              e.what_without_backtrace()));
    }
  }
  for (const NetInfo& net : info.nets) {
    const MlpSpec spec = declared_spec(net, single);
    if (load_path.empty()) {
      nets_.emplace_back(spec);
      continue;
    }
    Mlp loaded = nullptr;
    try {
      torch::serialize::InputArchive entry;
      archive.read(net.name, entry);
      loaded = read_mlp(entry);
    } catch (const c10::Error&) {
      throw Error(fmt::format("{} holds no network '{}' (it was saved from another model?)",
                              load_path, net.name));
    } catch (const std::out_of_range&) {
      throw Error(fmt::format("{}: network '{}' has an unknown activation", load_path, net.name));
    }
    const MlpSpec& got = loaded->spec();
    if (got.inputs != spec.inputs || got.outputs != spec.outputs || got.hidden != spec.hidden ||
        got.activation != spec.activation)
      throw Error(fmt::format("{}: network '{}' was saved as {}, but the model declares {}",
                              load_path, net.name, describe(got), describe(spec)));
    loaded->set_precision(single);
    nets_.push_back(loaded);
  }
}

torch::Tensor ModelNetworks::forward(const NetCallInfo& call, const torch::Tensor& z,
                                     const torch::Tensor& obs, const torch::Tensor& covariates,
                                     const torch::Tensor& theta, const std::vector<double>& fixed) {
  const int64_t R = z.defined() ? z.size(0) : obs.size(0);
  std::vector<torch::Tensor> inputs;
  for (const NetCallInfo::Argument& a : call.arguments) {
    if (a.kind == "state") {
      inputs.push_back(z.narrow(1, a.offset, a.size));
    } else if (a.kind == "obs") {
      inputs.push_back(obs.narrow(1, a.offset, a.size));
    } else if (a.kind == "input") {
      if (!covariates.defined())
        throw Error(fmt::format("internal error: network '{}' reads the covariate '{}', which "
                                "its caller did not give",
                                info_.nets[call.net].name, a.name));
      inputs.push_back(covariates.narrow(1, a.offset, a.size).to(torch::kFloat64));
    } else {
      const torch::Tensor v =
          a.kind == "param" ? theta.narrow(0, a.offset, a.size)
                            : torch::tensor(std::vector<double>(fixed.begin() + a.offset,
                                                                fixed.begin() + a.offset + a.size),
                                            torch::kFloat64);
      inputs.push_back(v.view({1, a.size}).expand({R, a.size}));
    }
  }
  return nets_[call.net]->forward(torch::cat(inputs, 1));
}

torch::Tensor ModelNetworks::apply(const torch::Tensor& z, const torch::Tensor& theta,
                                   const std::vector<double>& fixed,
                                   const torch::Tensor& covariates) {
  if (info_.net_calls.empty())
    return z;
  const int64_t I = z.size(0), S = z.size(1), D = z.size(2);
  const torch::Tensor rows = z.reshape({I * S, D});
  // Each item's covariates on each of its S rows.
  const torch::Tensor row_covariates =
      covariates.defined()
          ? covariates.unsqueeze(1).expand({I, S, covariates.size(1)}).reshape({I * S, -1})
          : torch::Tensor();
  torch::Tensor out = z;
  for (const NetCallInfo& call : info_.net_calls) {
    if (call.for_guide())
      continue;
    const torch::Tensor y =
        forward(call, rows, {}, row_covariates, theta, fixed).view({I, S, call.size});
    const torch::Tensor slots = torch::arange(call.offset, call.offset + call.size, torch::kInt64);
    out = out.index_copy(2, slots, y);
  }
  return out;
}

torch::Tensor ModelNetworks::guide_inputs(const torch::Tensor& obs, const torch::Tensor& theta,
                                          const std::vector<double>& fixed,
                                          const torch::Tensor& covariates) {
  std::vector<torch::Tensor> outputs;
  for (const GuideInfo::Input& input : info_.guide.inputs)
    for (const NetCallInfo& call : info_.net_calls)
      if (call.state == input.state)
        outputs.push_back(forward(call, {}, obs, covariates, theta, fixed).to(torch::kFloat64));
  if (outputs.empty())
    return torch::zeros({obs.size(0), 0}, torch::kFloat64);
  return torch::cat(outputs, 1);
}

std::vector<torch::Tensor> ModelNetworks::parameters() const {
  std::vector<torch::Tensor> p;
  for (const Mlp& net : nets_)
    for (const torch::Tensor& t : net->parameters())
      p.push_back(t);
  return p;
}

std::vector<std::string> ModelNetworks::parameter_names() const {
  std::vector<std::string> names;
  for (size_t k = 0; k < nets_.size(); ++k)
    for (const auto& item : nets_[k]->named_parameters())
      for (int64_t i = 0; i < item.value().numel(); ++i)
        names.push_back(fmt::format("{}.{}[{}]", info_.nets[k].name, item.key(), i));
  return names;
}

std::string ModelNetworks::save() const {
  torch::serialize::OutputArchive archive;
  for (size_t k = 0; k < nets_.size(); ++k) {
    torch::serialize::OutputArchive entry;
    nets_[k]->write(entry);
    archive.write(info_.nets[k].name, entry);
  }
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

} // namespace ssm::nn
