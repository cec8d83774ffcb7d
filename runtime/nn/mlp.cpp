// A multilayer perceptron on LibTorch: see mlp.h.
#include "nn/mlp.h"
#include "core/error.h"
#include "core/metadata.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <sstream>

namespace ssm::nn {

namespace {

torch::nn::AnyModule activation(const std::string& name) {
  if (name == "relu")
    return torch::nn::AnyModule(torch::nn::ReLU());
  if (name == "tanh")
    return torch::nn::AnyModule(torch::nn::Tanh());
  if (name == "silu")
    return torch::nn::AnyModule(torch::nn::SiLU());
  if (name == "gelu")
    return torch::nn::AnyModule(torch::nn::GELU());
  throw Error(fmt::format("unknown activation '{}' (expected {})", name,
                          fmt::join(mlp_activations(), ", ")));
}

} // namespace

const std::vector<std::string>& mlp_activations() {
  static const std::vector<std::string> names = {"tanh", "relu", "silu", "gelu"};
  return names;
}

MlpImpl::MlpImpl(const MlpSpec& spec) : spec_(spec) {
  int64_t width = spec.inputs;
  for (int64_t h : spec.hidden) {
    layers_->push_back(torch::nn::Linear(width, h));
    layers_->push_back(activation(spec.activation));
    width = h;
  }
  layers_->push_back(torch::nn::Linear(width, spec.outputs));
  layers_->to(spec.single ? torch::kFloat32 : torch::kFloat64);
  register_module("layers", layers_);
  mean_ = register_buffer("mean", torch::zeros({spec.inputs}, torch::kFloat64));
  sd_ = register_buffer("sd", torch::ones({spec.inputs}, torch::kFloat64));
}

bool MlpImpl::standardises() const {
  // Read from the buffers themselves, which a load may have replaced: a few dozen doubles.
  const double *m = mean_.data_ptr<double>(), *s = sd_.data_ptr<double>();
  for (int64_t k = 0; k < mean_.numel(); ++k)
    if (m[k] != 0 || s[k] != 1)
      return true;
  return false;
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  // A model's own networks read their inputs as they are: two operations fewer each way.
  const torch::Tensor input = standardises()                       ? (x - mean_) / sd_
                              : x.scalar_type() == torch::kFloat64 ? x
                                                                   : x.to(torch::kFloat64);
  if (!spec_.single)
    return layers_->forward(input);
  return layers_->forward(input.to(torch::kFloat32)).to(torch::kFloat64);
}

void MlpImpl::set_standardisation(const torch::Tensor& mean, const torch::Tensor& sd) {
  torch::NoGradGuard no_grad;
  mean_.copy_(mean);
  sd_.copy_(torch::where(sd > 0, sd, torch::ones_like(sd)));
}

void MlpImpl::start_at(const std::vector<double>& output) {
  torch::NoGradGuard no_grad;
  auto& last = layers_->ptr(layers_->size() - 1)->as<torch::nn::Linear>()[0];
  last.weight.zero_();
  last.bias.copy_(torch::tensor(output, torch::kFloat64).to(last.bias.scalar_type()));
}

void MlpImpl::write(torch::serialize::OutputArchive& archive) const {
  std::vector<int64_t> shape = {spec_.inputs, spec_.outputs};
  shape.insert(shape.end(), spec_.hidden.begin(), spec_.hidden.end());
  archive.write("shape", torch::tensor(shape, torch::kInt64));
  const auto& names = mlp_activations();
  archive.write("activation",
                torch::tensor(static_cast<int64_t>(
                    std::find(names.begin(), names.end(), spec_.activation) - names.begin())));
  archive.write("single", torch::tensor(static_cast<int64_t>(spec_.single)));
  torch::serialize::OutputArchive net;
  torch::nn::Module::save(net);
  archive.write("network", net);
}

std::string MlpImpl::save() const {
  torch::serialize::OutputArchive archive;
  write(archive);
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

Mlp read_mlp(torch::serialize::InputArchive& archive) {
  torch::Tensor shape, act;
  archive.read("shape", shape);
  archive.read("activation", act);
  MlpSpec spec;
  spec.inputs = shape[0].item<int64_t>();
  spec.outputs = shape[1].item<int64_t>();
  spec.hidden.clear();
  for (int64_t k = 2; k < shape.numel(); ++k)
    spec.hidden.push_back(shape[k].item<int64_t>());
  spec.activation = mlp_activations().at(static_cast<size_t>(act.item<int64_t>()));
  torch::Tensor single;
  spec.single = archive.try_read("single", single) && single.item<int64_t>() != 0;
  Mlp mlp(spec);
  torch::serialize::InputArchive net;
  archive.read("network", net);
  mlp->load(net);
  return mlp;
}

std::string describe(const MlpSpec& spec) {
  return net_declaration(
      NetInfo{"", "mlp", spec.inputs, spec.outputs, spec.hidden, spec.activation});
}

void MlpImpl::set_precision(bool single) {
  if (single == spec_.single)
    return;
  spec_.single = single;
  layers_->to(single ? torch::kFloat32 : torch::kFloat64);
}

Mlp load_mlp(const std::string& path) {
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path);
    return read_mlp(archive);
  } catch (const c10::Error& e) {
    throw Error(
        fmt::format("{} is not a network saved by ssmc ({})", path, e.what_without_backtrace()));
  } catch (const std::out_of_range&) {
    throw Error(fmt::format("{} is not a network saved by ssmc (an unknown activation)", path));
  }
}

} // namespace ssm::nn
