// What the model metadata names: CSV columns of states, observations, inputs and functionals,
// the declared types of integer variables and parameters, and network declarations as written.
#include "core/metadata.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ssm {

std::string net_declaration(const NetInfo& net) {
  const std::string hidden =
      net.hidden.empty() ? std::string("none") : fmt::format("[{}]", fmt::join(net.hidden, ", "));
  if (net.kind == "dif")
    return fmt::format("dif(dim = {}, context = {}, components = {}, {}hidden = {})", net.dim,
                       net.inputs - net.dim, net.components,
                       net.maps == "affine"
                           ? std::string()
                           : fmt::format("maps = {}, layers = {}, ", net.maps, net.layers),
                       hidden);
  if (net.density())
    return fmt::format("{}(dim = {}, layers = {}, hidden = {})", net.kind, net.dim, net.layers,
                       hidden);
  if (net.kind == "embedding")
    return fmt::format("embedding(vocab = {}, dim = {})", net.vocab, net.outputs);
  if (net.over_sequences())
    return fmt::format("{}(vocab = {}, {}context = {}, embedding = {}, hidden = {}, layers = {}, "
                       "cell = {})",
                       net.kind, net.vocab,
                       net.kind == "rnn" ? fmt::format("outputs = {}, ", net.outputs) : "",
                       net.inputs - 1, net.embedding, hidden, net.layers, net.cell);
  return fmt::format("{}(inputs = {}, outputs = {}, hidden = {}, activation = {})", net.kind,
                     net.inputs, net.outputs, hidden, net.activation);
}

std::string net_declaration(const NetInfo& net, const std::vector<NetInfo>& nets) {
  std::string d = net_declaration(net);
  if (net.base >= 0 && net.base < static_cast<int64_t>(nets.size()))
    d.insert(d.size() - 1, ", base = " + net_declaration(nets[net.base], nets));
  return d;
}

std::vector<std::string> column_names(const std::string& name, const std::vector<int64_t>& shape) {
  std::vector<std::string> cols;
  if (shape.empty()) {
    cols.push_back(name);
    return cols;
  }
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    cols.push_back(fmt::format("{}[{}]", name, fmt::join(idx, ",")));
    for (size_t d = shape.size(); d-- > 0;) { // row-major: last index fastest
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
  return cols;
}

static std::vector<std::string> columns_of(const std::vector<VarInfo>& vars, int64_t n) {
  std::vector<std::string> cols(n);
  for (const VarInfo& v : vars) {
    auto names = column_names(v.name, v.shape);
    for (int64_t i = 0; i < v.size; ++i)
      cols[v.offset + i] = names[i];
  }
  return cols;
}

std::vector<std::string> state_columns(const ModelInfo& info) {
  std::vector<std::string> cols = columns_of(info.state, info.n_state);
  int64_t visible = info.n_state;
  for (const VarInfo& v : info.state)
    if (v.hidden)
      visible = std::min(visible, v.offset);
  cols.resize(visible);
  return cols;
}

std::vector<std::string> input_columns(const ModelInfo& info) {
  return columns_of(info.inputs, info.n_inputs);
}

std::vector<std::string> functional_columns(const ModelInfo& info) {
  std::vector<std::string> cols;
  for (const FunctionalInfo& f : info.functionals)
    for (std::string& c : column_names(f.name, f.shape))
      cols.push_back(std::move(c));
  return cols;
}

std::vector<std::string> obs_columns(const ModelInfo& info) {
  return columns_of(info.obs, info.n_obs);
}

std::string integer_type(const VarInfo& v) {
  if (v.lower == -INFINITY && v.upper == INFINITY)
    return "int";
  return fmt::format("int[{}..{}]", v.lower, v.upper);
}

std::vector<IntegerRange> integer_ranges(const std::vector<VarInfo>& vars) {
  std::vector<IntegerRange> out;
  for (const VarInfo& v : vars) {
    if (!v.integer || v.hidden || (v.lower == -INFINITY && v.upper == INFINITY))
      continue;
    const std::vector<std::string> names = column_names(v.name, v.shape);
    for (int64_t i = 0; i < v.size; ++i)
      out.push_back({v.offset + i, v.lower, v.upper, names[i], integer_type(v)});
  }
  return out;
}

std::pair<int64_t, int> first_outside(const std::vector<IntegerRange>& ranges, const double* x,
                                      int64_t begin, int64_t end, int64_t stride) {
  std::pair<int64_t, int> first{-1, -1};
  for (size_t r = 0; r < ranges.size(); ++r) {
    const double* xc = x + ranges[r].component * stride;
    const double lo = ranges[r].lower, hi = ranges[r].upper;
    const int64_t stop = first.first < 0 ? end : first.first;
    for (int64_t n = begin; n < stop; ++n)
      if (!(xc[n] >= lo && xc[n] <= hi)) {
        first = {n, static_cast<int>(r)};
        break;
      }
  }
  return first;
}

std::string out_of_range_message(const std::string& who, const IntegerRange& range, double value,
                                 int64_t t, const std::string& where, const std::string& step) {
  return fmt::format("{}: at {}={} {}drew {} = {}, outside its declared range {}; declare the "
                     "whole support of its distribution (as in int[0..inf]) or use a "
                     "distribution that stays within the range",
                     who, step, t, where.empty() ? "the model " : where + " ", range.name, value,
                     range.type);
}

std::string type_string(const ParamInfo& p) {
  if (p.type == "int") {
    if (!p.lower && !p.upper)
      return "int";
    return fmt::format("int[{}..{}]", p.lower ? fmt::format("{}", *p.lower) : "-inf",
                       p.upper ? fmt::format("{}", *p.upper) : "inf");
  }
  if (p.type == "cov_matrix" && !p.shape.empty())
    return fmt::format("cov_matrix[{}]", p.shape[0]);
  if (p.shape.empty())
    return p.type;
  return fmt::format("{}[{}]", p.type, fmt::join(p.shape, ","));
}

} // namespace ssm
