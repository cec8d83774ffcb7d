// A model's networks: see model_networks.h.
#include "vi/model_networks.h"
#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

namespace ssm::nn {

namespace {

MlpSpec declared_spec(const NetInfo& net, bool single) {
  if (net.kind != "mlp")
    throw Error(fmt::format("network '{}' is a '{}', which this runtime does not know", net.name,
                            net.kind));
  return MlpSpec{net.inputs, net.outputs, net.hidden, net.activation, single};
}

// A density declaration's flows spec: over vector[dim], given inputs - dim context values, on a
// standard normal base, or on its declared base (a cascade: make_density gives every stage the
// outermost density's context).
flows::DensitySpec density_spec(const std::vector<NetInfo>& nets, const NetInfo& net, bool single) {
  flows::DensitySpec spec;
  if (net.base >= 0)
    spec.base = std::make_shared<flows::DensitySpec>(density_spec(nets, nets.at(net.base), single));
  spec.kind = net.kind;
  spec.dim = net.dim;
  spec.context = net.inputs - net.dim;
  spec.components = std::max<int64_t>(1, net.components);
  spec.layers = std::max<int64_t>(1, net.layers);
  spec.maps = net.kind == "dif" ? net.maps : "affine";
  spec.hidden = net.hidden;
  spec.single = single;
  return spec;
}

RecurrentSpec recurrent_spec(const NetInfo& net, bool single) {
  RecurrentSpec spec;
  spec.language_model = net.kind == "rnn_lm";
  spec.vocab = net.vocab;
  spec.context = net.inputs - 1; // the sequence, then the context
  spec.outputs = net.outputs;
  spec.embedding = net.embedding;
  spec.hidden = net.hidden.at(0);
  spec.layers = net.layers;
  spec.cell = net.cell;
  spec.single = single;
  return spec;
}

// Reads a density's (or a recurrent network's) weights from its entry in a file of save(): the
// declaration it was saved under must be the model's (Module::load would take tensors of any
// shape, and leave out layers the declaration does not ask for), and each tensor keeps the dtype
// of the run's --precision.
void load_declared(torch::nn::Module& module, torch::serialize::InputArchive& archive,
                   const std::string& path, const NetInfo& net, const std::vector<NetInfo>& nets) {
  const char* what = net.density() ? "density" : "network";
  torch::serialize::InputArchive entry;
  c10::IValue declared;
  try {
    archive.read(net.name, entry);
    entry.read("declaration", declared);
  } catch (const c10::Error&) {
    throw Error(fmt::format("{} holds no {} '{}' (it was saved from another model?)", path, what,
                            net.name));
  }
  const std::string want = net_declaration(net, nets);
  if (!declared.isString() || declared.toStringRef() != want)
    throw Error(fmt::format("{}: {} '{}' was saved as {}, but the model declares {}", path, what,
                            net.name, declared.isString() ? declared.toStringRef() : "?", want));
  std::vector<torch::Dtype> dtypes;
  for (const torch::Tensor& t : module.parameters())
    dtypes.push_back(t.scalar_type());
  for (const torch::Tensor& t : module.buffers())
    dtypes.push_back(t.scalar_type());
  try {
    module.load(entry);
  } catch (const c10::Error& e) {
    throw Error(fmt::format("{}: {} '{}' could not be read ({})", path, what, net.name,
                            e.what_without_backtrace()));
  }
  size_t k = 0;
  torch::NoGradGuard no_grad;
  for (torch::Tensor t : module.parameters())
    t.set_data(t.to(dtypes.at(k++)));
  for (torch::Tensor t : module.buffers())
    t.set_data(t.to(dtypes.at(k++)));
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
    if (net.base_of >= 0) { // a stage of another's cascade, which holds its weights
      nets_.emplace_back();
      continue;
    }
    if (net.density() || net.over_sequences() || net.kind == "embedding") {
      Network n;
      if (net.density()) {
        n.density = flows::make_density(density_spec(info.nets, net, single));
      } else if (net.over_sequences()) {
        n.recurrent = Recurrent(recurrent_spec(net, single));
      } else {
        n.embedding = torch::nn::Embedding(net.vocab, net.outputs);
        n.embedding->to(single ? torch::kFloat32 : torch::kFloat64);
      }
      if (!load_path.empty())
        load_declared(n.module(), archive, load_path, net, info.nets);
      nets_.push_back(std::move(n));
      continue;
    }
    const MlpSpec spec = declared_spec(net, single);
    if (load_path.empty()) {
      nets_.push_back({Mlp(spec), nullptr});
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
    nets_.push_back({loaded, nullptr});
  }
}

torch::nn::Module& ModelNetworks::Network::module() const {
  if (mlp)
    return *mlp.ptr();
  if (recurrent)
    return *recurrent.ptr();
  if (embedding)
    return *embedding.ptr();
  return *density;
}

SequenceBatch SequenceBatch::select(const torch::Tensor& rows) const {
  SequenceBatch out;
  out.names = names;
  for (size_t k = 0; k < names.size(); ++k) {
    const torch::Tensor lengths_k = lengths[k].index_select(0, rows);
    const int64_t L = rows.numel() > 0 ? lengths_k.max().item<int64_t>() : 1;
    out.tokens.push_back(tokens[k].index_select(0, rows).narrow(1, 0, L));
    out.lengths.push_back(lengths_k);
  }
  return out;
}

SequenceBatch sequence_batch(const ObsData& data) {
  SequenceBatch out;
  for (const ObsData::Sequences& s : data.sequences) {
    const int64_t items = static_cast<int64_t>(s.start.size()) - 1;
    int64_t longest = 1;
    for (int64_t n = 0; n < items; ++n)
      longest = std::max(longest, s.start[n + 1] - s.start[n]);
    torch::Tensor tokens = torch::zeros({items, longest}, torch::kInt64),
                  lengths = torch::zeros({items}, torch::kInt64);
    auto t = tokens.accessor<int64_t, 2>();
    auto l = lengths.accessor<int64_t, 1>();
    for (int64_t n = 0; n < items; ++n) {
      l[n] = s.start[n + 1] - s.start[n];
      for (int64_t i = 0; i < l[n]; ++i)
        t[n][i] = s.tokens[s.start[n] + i];
    }
    out.names.push_back(s.name);
    out.tokens.push_back(tokens);
    out.lengths.push_back(lengths);
  }
  return out;
}

namespace {

// The index of sequence `name` in `sequences`, or -1.
int64_t sequence_index(const SequenceBatch& sequences, const std::string& name) {
  for (size_t k = 0; k < sequences.names.size(); ++k)
    if (sequences.names[k] == name)
      return static_cast<int64_t>(k);
  return -1;
}

bool reads_sequence(const NetCallInfo& call) {
  return !call.arguments.empty() && call.arguments[0].kind == "sequence";
}

} // namespace

torch::Tensor ModelNetworks::forward(const NetCallInfo& call, const torch::Tensor& z,
                                     const torch::Tensor& obs, const torch::Tensor& covariates,
                                     const torch::Tensor& theta, const std::vector<double>& fixed,
                                     const SequenceBatch& sequences) {
  int64_t R = z.defined() ? z.size(0) : obs.size(0);
  int64_t sequence = -1;
  if (reads_sequence(call)) {
    sequence = sequence_index(sequences, call.arguments[0].name);
    if (sequence < 0)
      throw Error(fmt::format("internal error: network '{}' reads the sequence '{}', which its "
                              "caller did not give",
                              info_.nets[call.net].name, call.arguments[0].name));
    R = sequences.tokens[sequence].size(0);
  }
  const std::vector<torch::Tensor> inputs = arguments_of(call, z, obs, covariates, theta, fixed, R);
  Network& net = nets_[call.net];
  if (net.recurrent)
    return net.recurrent->forward(sequences.tokens[sequence], sequences.lengths[sequence],
                                  inputs.empty() ? torch::Tensor() : torch::cat(inputs, 1));
  const torch::Tensor x = inputs.size() == 1 ? inputs[0] : torch::cat(inputs, 1);
  if (net.embedding) // the token's row (the frontend checked its range)
    return net.embedding->forward(x.round().to(torch::kInt64).view({-1})).to(torch::kFloat64);
  if (net.mlp)
    return net.mlp->forward(x);
  // A density: log p of the target (the first argument) given the context (the others).
  const int64_t dim = net.density->dim(), c = x.size(1) - dim;
  return net.density->log_prob(x.narrow(1, 0, dim), c > 0 ? x.narrow(1, dim, c) : torch::Tensor())
      .unsqueeze(1);
}

std::vector<torch::Tensor>
ModelNetworks::arguments_of(const NetCallInfo& call, const torch::Tensor& z,
                            const torch::Tensor& obs, const torch::Tensor& covariates,
                            const torch::Tensor& theta, const std::vector<double>& fixed,
                            int64_t R) const {
  std::vector<torch::Tensor> inputs;
  for (const NetCallInfo::Argument& a : call.arguments) {
    if (a.kind == "sequence") {
      continue; // the recurrent network's own input, below
    } else if (a.kind == "state") {
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
  return inputs;
}

SequenceBatch
ModelNetworks::sample_sequences(const torch::Tensor& z, const torch::Tensor& theta,
                                const std::vector<double>& fixed, const torch::Tensor& covariates,
                                int64_t max_length, int64_t end,
                                const std::function<double(int64_t, int64_t, int64_t)>& uniform) {
  SequenceBatch out;
  for (const NetCallInfo& call : info_.net_calls) {
    Network& net = nets_[call.net];
    if (!reads_sequence(call) || !net.recurrent || !net.recurrent->spec().language_model)
      continue;
    const int64_t k = static_cast<int64_t>(out.names.size()), R = z.size(0);
    const std::vector<torch::Tensor> context =
        arguments_of(call, z, {}, covariates, theta, fixed, R);
    auto [tokens, lengths] = net.recurrent->sample(
        context.empty() ? torch::Tensor() : torch::cat(context, 1), R, max_length, end,
        [&](int64_t r, int64_t t) { return uniform(k, r, t); });
    out.names.push_back(call.arguments[0].name);
    out.tokens.push_back(tokens);
    out.lengths.push_back(lengths);
  }
  return out;
}

torch::Tensor ModelNetworks::apply(const torch::Tensor& z, const torch::Tensor& theta,
                                   const std::vector<double>& fixed,
                                   const torch::Tensor& covariates,
                                   const SequenceBatch* sequences) {
  if (info_.net_calls.empty())
    return z;
  const int64_t I = z.size(0), S = z.size(1), D = z.size(2);
  const torch::Tensor rows = z.reshape({I * S, D});
  // Each item's covariates on each of its S rows.
  const torch::Tensor row_covariates =
      covariates.defined()
          ? covariates.unsqueeze(1).expand({I, S, covariates.size(1)}).reshape({I * S, -1})
          : torch::Tensor();
  // Each item's sequences on each of its S rows.
  const SequenceBatch row_sequences =
      sequences == nullptr || sequences->empty()
          ? SequenceBatch()
          : sequences->select(torch::arange(I, torch::kInt64).repeat_interleave(S));
  torch::Tensor out = z;
  for (const NetCallInfo& call : info_.net_calls) {
    if (call.for_guide() || (reads_sequence(call) && sequences == nullptr))
      continue;
    // A call that reads no state has one value per item, whatever its draws: computed once
    // (a language model of the item's sequence alone runs once, not once per draw).
    const bool per_item = std::none_of(call.arguments.begin(), call.arguments.end(),
                                       [](const auto& a) { return a.kind == "state"; });
    torch::Tensor y;
    if (per_item)
      y = forward(call, z.select(1, 0), {}, covariates, theta, fixed,
                  sequences == nullptr ? SequenceBatch() : *sequences)
              .view({I, 1, call.size})
              .expand({I, S, call.size});
    else
      y = forward(call, rows, {}, row_covariates, theta, fixed, row_sequences)
              .view({I, S, call.size});
    // The output in its slots, between the states before and after them (a concatenation of
    // views: cheaper than an index copy, forward and backward).
    std::vector<torch::Tensor> parts;
    if (call.offset > 0)
      parts.push_back(out.narrow(2, 0, call.offset));
    parts.push_back(y);
    if (call.offset + call.size < D)
      parts.push_back(out.narrow(2, call.offset + call.size, D - call.offset - call.size));
    out = parts.size() == 1 ? parts[0] : torch::cat(parts, 2);
  }
  return out;
}

torch::Tensor ModelNetworks::apply_in_place(std::vector<double>& x, int64_t R,
                                            const torch::Tensor& theta,
                                            const std::vector<double>& fixed,
                                            const torch::Tensor& covariates) {
  const int64_t D = info_.n_state;
  const torch::Tensor states =
      apply(torch::tensor(x, torch::kFloat64).view({D, R}).t().reshape({R, 1, D}), theta, fixed,
            covariates)
          .view({R, D})
          .to(torch::kFloat64)
          .contiguous();
  const double* s = states.data_ptr<double>();
  for (const NetCallInfo& call : info_.net_calls)
    if (!call.for_guide())
      for (int64_t c = call.offset; c < call.offset + call.size; ++c)
        for (int64_t n = 0; n < R; ++n)
          x[c * R + n] = s[n * D + c];
  return states;
}

torch::Tensor ModelNetworks::guide_inputs(const torch::Tensor& obs, const torch::Tensor& theta,
                                          const std::vector<double>& fixed,
                                          const torch::Tensor& covariates,
                                          const SequenceBatch& sequences) {
  std::vector<torch::Tensor> outputs;
  for (const GuideInfo::Input& input : info_.guide.inputs)
    for (const NetCallInfo& call : info_.net_calls)
      if (call.state == input.state)
        outputs.push_back(
            forward(call, {}, obs, covariates, theta, fixed, sequences).to(torch::kFloat64));
  if (outputs.empty())
    return torch::zeros({obs.size(0), 0}, torch::kFloat64);
  return outputs.size() == 1 ? outputs[0] : torch::cat(outputs, 1);
}

std::vector<std::pair<std::string, const flows::DensityImpl*>> ModelNetworks::densities() const {
  std::vector<std::pair<std::string, const flows::DensityImpl*>> out;
  for (size_t k = 0; k < nets_.size(); ++k)
    if (nets_[k].density)
      out.emplace_back(info_.nets[k].name, nets_[k].density.get());
  return out;
}

flows::DensityModel ModelNetworks::density_model(const std::string& name) const {
  for (const NetCallInfo& call : info_.net_calls) {
    const NetInfo& net = info_.nets[call.net];
    if (net.name != name || !net.density())
      continue;
    flows::DensityModel m;
    for (size_t a = 0; a < call.arguments.size(); ++a) {
      const NetCallInfo::Argument& arg = call.arguments[a];
      std::vector<int64_t> shape = {arg.size};
      for (const std::vector<VarInfo>* vars : {&info_.state, &info_.inputs, &info_.data})
        for (const VarInfo& v : *vars)
          if (v.name == arg.name)
            shape = v.shape;
      for (const ParamInfo& p : info_.params)
        if (p.name == arg.name)
          shape = p.shape;
      const std::vector<std::string> cols = column_names(arg.name, shape);
      std::vector<std::string>& to = a == 0 ? m.columns : m.context_columns;
      to.insert(to.end(), cols.begin(), cols.end());
    }
    const auto d = static_cast<int64_t>(m.columns.size()),
               c = static_cast<int64_t>(m.context_columns.size());
    m.shift = torch::zeros({d}, torch::kFloat64);
    m.scale = torch::ones({d}, torch::kFloat64);
    if (c > 0) {
      m.context_shift = torch::zeros({c}, torch::kFloat64);
      m.context_scale = torch::ones({c}, torch::kFloat64);
    }
    m.density = nets_[call.net].density;
    return m;
  }
  throw Error(
      fmt::format("internal error: model '{}' has no call of a density '{}'", info_.name, name));
}

std::vector<torch::Tensor> ModelNetworks::parameters() const {
  std::vector<torch::Tensor> p;
  for (const Network& net : nets_)
    if (!net.cascade_stage())
      for (const torch::Tensor& t : net.module().parameters())
        p.push_back(t);
  return p;
}

std::vector<int64_t> ModelNetworks::weights() const {
  std::vector<int64_t> counts;
  for (const Network& net : nets_) {
    int64_t n = 0;
    if (!net.cascade_stage())
      for (const torch::Tensor& t : net.module().parameters())
        n += t.numel();
    counts.push_back(n);
  }
  return counts;
}

std::vector<std::string> ModelNetworks::parameter_names() const {
  std::vector<std::string> names;
  for (size_t k = 0; k < nets_.size(); ++k) {
    if (nets_[k].cascade_stage())
      continue; // its weights are named under the density whose base it is
    for (const auto& item : nets_[k].module().named_parameters())
      for (int64_t i = 0; i < item.value().numel(); ++i)
        names.push_back(fmt::format("{}.{}[{}]", info_.nets[k].name, item.key(), i));
  }
  return names;
}

std::string ModelNetworks::save() const {
  torch::serialize::OutputArchive archive;
  for (size_t k = 0; k < nets_.size(); ++k) {
    if (nets_[k].cascade_stage())
      continue; // saved with the density whose base it is
    torch::serialize::OutputArchive entry;
    if (nets_[k].mlp) {
      nets_[k].mlp->write(entry);
    } else { // with its declaration, which load_declared checks
      nets_[k].module().save(entry);
      entry.write("declaration", c10::IValue(net_declaration(info_.nets[k], info_.nets)));
    }
    archive.write(info_.nets[k].name, entry);
  }
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

} // namespace ssm::nn
