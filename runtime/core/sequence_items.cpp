// Items that are sequences, gathered from their rows: see sequence_items.h.
#include "core/sequence_items.h"
#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ssm {

bool has_sequences(const ModelInfo& info) {
  return std::any_of(info.obs.begin(), info.obs.end(), [](const VarInfo& v) { return v.sequence; });
}

ObsData gather_sequence_items(const ModelInfo& info, const ObsData& rows) {
  if (!has_sequences(info))
    return rows;
  std::vector<const VarInfo*> sequences;
  for (const VarInfo& v : info.obs)
    if (v.sequence)
      sequences.push_back(&v);
  if (rows.series.start.empty())
    throw Error(fmt::format("{}: observation '{}' is a sequence: the data needs a 'series' column "
                            "that names each item's rows (one token per row, in order)",
                            rows.source, sequences[0]->name));
  auto is_sequence_slot = [&](int64_t k) {
    return std::any_of(sequences.begin(), sequences.end(),
                       [&](const VarInfo* v) { return v->offset == k; });
  };
  auto same = [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); };
  auto columns = [](const std::vector<VarInfo>& vars) {
    std::vector<std::string> names;
    for (const VarInfo& v : vars)
      for (const std::string& c : column_names(v.name, v.shape))
        names.push_back(c);
    return names;
  };
  const std::vector<std::string> obs_names = columns(info.obs), input_names = columns(info.inputs);
  const int64_t items = rows.series.count();
  ObsData out;
  out.source = rows.source;
  out.n_obs = rows.n_obs;
  out.n_inputs = rows.n_inputs;
  out.T = items;
  for (const VarInfo* v : sequences)
    out.sequences.push_back({v->name, {}, {0}});
  for (int64_t n = 0; n < items; ++n) {
    const int64_t a = rows.series.start[n], b = rows.series.start[n + 1];
    out.lines.push_back(rows.line(a));
    for (int64_t k = 0; k < rows.n_obs; ++k) {
      if (is_sequence_slot(k))
        continue;
      for (int64_t t = a + 1; t < b; ++t)
        if (!same(rows.at(t)[k], rows.at(a)[k]))
          throw Error(fmt::format(
              "{}:{}: column '{}' of item '{}' differs from its first row (line {}): an item's "
              "observations other than its sequences have one value, on every row",
              rows.source, rows.line(t), obs_names.at(k), rows.series.names[n], rows.line(a)));
    }
    for (int64_t k = 0; k < rows.n_inputs; ++k)
      for (int64_t t = a + 1; t < b; ++t)
        if (!same(rows.inputs_at(t)[k], rows.inputs_at(a)[k]))
          throw Error(fmt::format("{}:{}: column '{}' of item '{}' differs from its first row "
                                  "(line {}): an item's covariates have one value, on every row",
                                  rows.source, rows.line(t), input_names.at(k),
                                  rows.series.names[n], rows.line(a)));
    std::vector<double> y(rows.at(a), rows.at(a) + rows.n_obs);
    for (size_t s = 0; s < sequences.size(); ++s) {
      ObsData::Sequences& seq = out.sequences[s];
      for (int64_t t = a; t < b; ++t) {
        const double token = rows.at(t)[sequences[s]->offset];
        if (std::isnan(token))
          throw Error(fmt::format("{}:{}: column '{}' is missing: every row of a sequence holds "
                                  "one of its tokens",
                                  rows.source, rows.line(t), sequences[s]->name));
        seq.tokens.push_back(static_cast<int64_t>(token));
      }
      seq.start.push_back(static_cast<int64_t>(seq.tokens.size()));
      y[sequences[s]->offset] = static_cast<double>(b - a);
    }
    out.y.insert(out.y.end(), y.begin(), y.end());
    if (rows.n_inputs > 0)
      out.u.insert(out.u.end(), rows.inputs_at(a), rows.inputs_at(a) + rows.n_inputs);
  }
  return out;
}

} // namespace ssm
