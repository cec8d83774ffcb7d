// Parameter resolution: defaults < --params FILE.json < --param name=value, with checks of shape,
// finiteness, prior support and positive-definiteness of cov_matrix parameters.
#include "core/params.h"
#include "core/error.h"
#include "core/number_text.h"
#include "core/text_encoding.h"

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

using nlohmann::json;

namespace ssm {

json parse_json_text(std::string_view text, const std::string& source) {
  if (std::optional<std::string> why = not_utf8_text(text))
    throw Error(fmt::format("{}:1:1: {}", source, *why));
  try {
    return json::parse(without_utf8_bom(text));
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: invalid JSON: {}", source, e.what()));
  }
}

namespace {

// The JSON in `path` (a `what`: "parameter file"), or an error that names the file: unreadable,
// not UTF-8 text (a UTF-16 file, a binary one), or not JSON.
json read_json_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(fmt::format("cannot read {} '{}': {}", what, path, std::strerror(errno)));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return parse_json_text(bytes.str(), path);
}

// Text for a message: a long value (a pasted file) is shown by its start only.
std::string start_of(std::string_view text) {
  if (text.size() <= 80)
    return std::string(text);
  size_t cut = 60;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
    --cut; // not inside a UTF-8 character
  return std::string(text.substr(0, cut)) + "...";
}

// Recursive-descent reader for the --param value syntax. Unlike strict JSON it accepts numbers
// such as `.5`, `+1` and `1.`, which users type on command lines.
class ValueParser {
public:
  explicit ValueParser(std::string_view s) : s_(s) {}

  json parse() {
    json v = value();
    skip_ws();
    if (pos_ != s_.size())
      fail(fmt::format("unexpected '{}'", start_of(s_.substr(pos_))));
    return v;
  }

private:
  // Values are at most matrices; the limit keeps `[[[[...` from exhausting the stack.
  static constexpr int kMaxDepth = 32;
  std::string_view s_;
  size_t pos_ = 0;
  int depth_ = 0;

  [[noreturn]] void fail(const std::string& what) {
    throw Error(fmt::format("cannot parse '{}': {} (expected a number, [a, b, ...] or "
                            "[[a, b], [c, d]])",
                            start_of(s_), what));
  }
  void skip_ws() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_])))
      ++pos_;
  }
  json value() {
    skip_ws();
    if (pos_ == s_.size())
      fail("missing value");
    if (s_[pos_] == '[') {
      if (++depth_ > kMaxDepth)
        fail(fmt::format("arrays nested more than {} deep", kMaxDepth));
      ++pos_;
      json arr = json::array();
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        --depth_;
        return arr;
      }
      for (;;) {
        arr.push_back(value());
        skip_ws();
        if (pos_ < s_.size() && s_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (pos_ < s_.size() && s_[pos_] == ']') {
          ++pos_;
          --depth_;
          return arr;
        }
        fail(pos_ == s_.size() ? "missing ']'" : "expected ',' or ']'");
      }
    }
    size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != ',' && s_[pos_] != ']' && s_[pos_] != '[' &&
           !std::isspace(static_cast<unsigned char>(s_[pos_])))
      ++pos_;
    const std::string_view tok = s_.substr(start, pos_ - start);
    const NumberText number = read_number(tok);
    if (!number.value)
      fail(fmt::format("'{}' {}", start_of(tok), number.problem));
    return json(*number.value);
  }
};

std::string describe(const json& v) {
  if (v.is_number())
    return "a number";
  if (v.is_array()) {
    if (v.empty())
      return "an empty array";
    bool all_num = true, all_arr = true;
    for (const json& e : v) {
      all_num = all_num && e.is_number();
      all_arr = all_arr && e.is_array();
    }
    if (all_num)
      return fmt::format("an array of {} numbers", v.size());
    if (all_arr) {
      size_t c = v[0].size();
      bool rect = true;
      for (const json& e : v)
        rect = rect && e.size() == c;
      if (rect)
        return fmt::format("a {}x{} nested array", v.size(), c);
      return "a ragged nested array";
    }
    return "a mixed array";
  }
  if (v.is_string())
    return "a string";
  if (v.is_boolean())
    return "a boolean";
  if (v.is_null())
    return "null";
  return "an object";
}

std::string expected_form(const ParamInfo& p) {
  if (p.shape.empty())
    return "a number";
  if (p.shape.size() == 1)
    return fmt::format("an array of {} numbers, e.g. [1, 2]", p.shape[0]);
  return fmt::format("a {}x{} nested array (rows), e.g. [[1, 2], [3, 4]]", p.shape[0], p.shape[1]);
}

std::string bound_text(const std::optional<double>& b, bool lower) {
  if (!b)
    return lower ? "(-inf" : "inf)";
  return lower ? fmt::format("[{}", *b) : fmt::format("{}]", *b);
}

std::string element_name(const ParamInfo& p, int64_t k) {
  if (p.shape.empty())
    return p.name;
  if (p.shape.size() == 1)
    return fmt::format("{}[{}]", p.name, k);
  return fmt::format("{}[{},{}]", p.name, k / p.shape[1], k % p.shape[1]);
}

std::string param_list(const ModelInfo& info) {
  std::vector<std::string> names;
  for (const ParamInfo& p : info.params)
    names.push_back(p.name);
  return names.empty() ? "(none)" : fmt::format("{}", fmt::join(names, ", "));
}

} // namespace

json parse_param_value(std::string_view text) {
  return ValueParser(text).parse();
}

std::vector<double> flatten_param(const ParamInfo& p, const json& v, const std::string& where,
                                  const std::string& kind) {
  auto mismatch = [&] {
    return Error(fmt::format("{} '{}' is {} and needs {}; {} gives {}", kind, p.name,
                             type_string(p), expected_form(p), where, describe(v)));
  };
  std::vector<double> out;
  out.reserve(p.size);
  if (p.shape.empty()) {
    if (!v.is_number())
      throw mismatch();
    out.push_back(v.get<double>());
  } else if (p.shape.size() == 1) {
    if (!v.is_array() || static_cast<int64_t>(v.size()) != p.shape[0])
      throw mismatch();
    for (const json& e : v) {
      if (!e.is_number())
        throw mismatch();
      out.push_back(e.get<double>());
    }
  } else if (p.shape.size() == 2) {
    if (!v.is_array() || static_cast<int64_t>(v.size()) != p.shape[0])
      throw mismatch();
    for (const json& row : v) {
      if (!row.is_array() || static_cast<int64_t>(row.size()) != p.shape[1])
        throw mismatch();
      for (const json& e : row) {
        if (!e.is_number())
          throw mismatch();
        out.push_back(e.get<double>());
      }
    }
  } else {
    throw Error(fmt::format("parameter '{}': parameters of rank {} are not supported", p.name,
                            p.shape.size()));
  }
  for (size_t k = 0; k < out.size(); ++k)
    if (!std::isfinite(out[k]))
      throw Error(fmt::format("{} '{}' = {} ({}): values must be finite", kind, element_name(p, k),
                              out[k], where));
  return out;
}

std::vector<double> read_data_values(const ModelInfo& info, const std::string& path) {
  std::vector<std::string> names;
  for (const VarInfo& d : info.data)
    names.push_back("'" + d.name + "'");
  if (info.data.empty()) {
    if (!path.empty())
      throw Error(fmt::format("--data-file {}: model '{}' declares no data", path, info.name));
    return {};
  }
  if (path.empty())
    throw Error(fmt::format("model '{}' declares data ({}): give their values with --data-file "
                            "FILE.json, an object mapping each name to a number or an array",
                            info.name, fmt::join(names, ", ")));
  return read_data_values_json(info, read_json_file(path, "data file"), path);
}

std::vector<double> read_observation_values(const ModelInfo& info, const std::string& path) {
  return read_named_values_json(info.name, info.obs, info.n_obs,
                                read_json_file(path, "observation file"), path, "observation");
}

std::vector<double> read_data_values_json(const ModelInfo& info, const json& file,
                                          const std::string& path) {
  return read_named_values_json(info.name, info.data, info.n_data, file, path, "data");
}

std::vector<double> read_named_values_json(const std::string& model,
                                           const std::vector<VarInfo>& vars, int64_t total,
                                           const json& file, const std::string& path,
                                           const std::string& kind) {
  std::vector<std::string> names;
  for (const VarInfo& d : vars)
    names.push_back("'" + d.name + "'");
  if (!file.is_object())
    throw Error(fmt::format("{}: expected a JSON object mapping {} names to values", path, kind));
  for (const auto& item : file.items()) {
    const std::string& key = item.key();
    bool known =
        std::any_of(vars.begin(), vars.end(), [&](const VarInfo& d) { return d.name == key; });
    if (!known)
      throw Error(fmt::format("{}: '{}' is not {} of model '{}' ({}: {})", path, key,
                              kind == "data" ? "a data item" : "an " + kind, model, kind,
                              fmt::join(names, ", ")));
  }
  std::vector<double> values(total);
  for (const VarInfo& d : vars) {
    auto it = file.find(d.name);
    if (it == file.end())
      throw Error(fmt::format("{}: {} '{}' has no value", path, kind, d.name));
    // The item as a parameter of its declared type, so that the parameters' checks apply.
    ParamInfo as_value;
    as_value.name = d.name;
    as_value.type = !d.type.empty()       ? d.type
                    : d.integer           ? "int"
                    : d.shape.empty()     ? "real"
                    : d.shape.size() == 1 ? "vector"
                                          : "matrix";
    as_value.shape = d.shape;
    as_value.size = d.size;
    if (d.lower > -INFINITY)
      as_value.lower = d.lower;
    if (d.upper < INFINITY)
      as_value.upper = d.upper;
    std::vector<double> v = flatten_param(as_value, *it, path, kind);
    check_value(as_value, v, kind, path);
    std::copy(v.begin(), v.end(), values.begin() + d.offset);
  }
  return values;
}

void check_value(const ParamInfo& p, const std::vector<double>& value, const std::string& kind,
                 const std::string& where) {
  const std::string in = where.empty() ? "" : " in " + where;
  const bool integer = p.type == "int";
  for (size_t k = 0; k < value.size(); ++k) {
    double v = value[k];
    if (!std::isfinite(v))
      throw Error(
          fmt::format("{} '{}' = {}{}: values must be finite", kind, element_name(p, k), v, in));
    if (integer && v != std::floor(v))
      throw Error(fmt::format("{} '{}' = {}{} is not an integer, but '{}' is declared {}", kind,
                              element_name(p, k), v, in, p.name, type_string(p)));
    if ((p.lower && v < *p.lower) || (p.upper && v > *p.upper)) {
      if (integer)
        throw Error(fmt::format("{} '{}' = {}{} is outside its declared range {}", kind,
                                element_name(p, k), v, in, type_string(p)));
      throw Error(fmt::format("{} '{}' = {}{} is outside {}, {}, {}", kind, element_name(p, k), v,
                              in, bound_text(p.lower, true), bound_text(p.upper, false),
                              p.prior.empty() ? std::string("its declared bounds")
                                              : "the support of its prior " + p.prior));
    }
  }
  if (p.type == "simplex") {
    double total = 0;
    for (size_t k = 0; k < value.size(); ++k) {
      if (value[k] < 0)
        throw Error(fmt::format("{} '{}' ({}){} must be on the simplex, but '{}' = {} is "
                                "negative",
                                kind, p.name, type_string(p), in, element_name(p, k), value[k]));
      total += value[k];
    }
    if (std::abs(total - 1) > 1e-9)
      throw Error(fmt::format("{} '{}' ({}){} must be on the simplex, but its components "
                              "sum to {}",
                              kind, p.name, type_string(p), in, total));
  }
  if (p.type == "cov_matrix") {
    const int64_t n = p.shape[0];
    Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> m(
        value.data(), n, n);
    const double scale = std::max(1.0, m.cwiseAbs().maxCoeff());
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i + 1; j < n; ++j)
        if (std::abs(m(i, j) - m(j, i)) > 1e-12 * scale)
          throw Error(fmt::format("{} '{}' ({}){} must be symmetric positive definite: "
                                  "{}[{},{}] = {} but {}[{},{}] = {}",
                                  kind, p.name, type_string(p), in, p.name, i, j, m(i, j), p.name,
                                  j, i, m(j, i)));
    Eigen::LLT<Eigen::MatrixXd> llt(m);
    if (llt.info() != Eigen::Success)
      throw Error(fmt::format("{} '{}' ({}){} must be symmetric positive definite: the "
                              "Cholesky factorisation fails (an eigenvalue is <= 0)",
                              kind, p.name, type_string(p), in));
  }
}

void check_param_value(const ParamInfo& p, const std::vector<double>& value) {
  check_value(p, value, "parameter", "");
}

ParamValues resolve_params_json(const ModelInfo& info, const json* file,
                                const std::string& file_label,
                                const std::vector<std::string>& assignments) {
  ParamValues values(info.params.size());
  auto index_of = [&](const std::string& name) -> int64_t {
    for (size_t i = 0; i < info.params.size(); ++i)
      if (info.params[i].name == name)
        return static_cast<int64_t>(i);
    return -1;
  };
  for (size_t i = 0; i < info.params.size(); ++i)
    values[i] = info.params[i].default_value;

  if (file) {
    if (!file->is_object())
      throw Error(
          fmt::format("{}: expected a JSON object mapping parameter names to values", file_label));
    for (auto it = file->begin(); it != file->end(); ++it) {
      int64_t i = index_of(it.key());
      if (i < 0)
        throw Error(fmt::format("{}: unknown parameter '{}'; the model's parameters are: {}",
                                file_label, it.key(), param_list(info)));
      values[i] = flatten_param(info.params[i], it.value(), file_label);
    }
  }

  for (const std::string& a : assignments) {
    auto eq = a.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error(fmt::format("--param '{}': expected name=value, e.g. --param sigma=0.5", a));
    std::string name = a.substr(0, eq);
    while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back())))
      name.pop_back();
    int64_t i = index_of(name);
    if (i < 0)
      throw Error(fmt::format("--param {}: unknown parameter '{}'; the model's parameters are: {}",
                              a, name, param_list(info)));
    json v;
    try {
      v = parse_param_value(std::string_view(a).substr(eq + 1));
    } catch (const Error& e) {
      throw Error(fmt::format("--param {}: {}", a, e.what()));
    }
    values[i] = flatten_param(info.params[i], v, "--param");
  }

  for (size_t i = 0; i < info.params.size(); ++i)
    if (values[i])
      check_param_value(info.params[i], *values[i]);
  return values;
}

ParamValues resolve_params(const ModelInfo& info, const std::string& params_file,
                           const std::vector<std::string>& assignments) {
  if (params_file.empty())
    return resolve_params_json(info, nullptr, "", assignments);
  const json file = read_json_file(params_file, "parameter file");
  return resolve_params_json(info, &file, params_file, assignments);
}

// A value of the right shape to show the syntax in messages: 0.5, [1,2], [[1,2],[3,4]].
static std::string example_value(const ParamInfo& p) {
  if (p.shape.empty())
    return "0.5";
  if (p.size > 6)
    return p.shape.size() == 1
               ? fmt::format("[<{} numbers>]", p.size)
               : fmt::format("[[<{} numbers>], ... <{} rows>]", p.shape[1], p.shape[0]);
  std::vector<std::string> rows;
  int64_t k = 0;
  const int64_t nr = p.shape.size() == 1 ? 1 : p.shape[0], nc = p.shape.back();
  for (int64_t r = 0; r < nr; ++r) {
    std::vector<int64_t> row;
    for (int64_t c = 0; c < nc; ++c)
      row.push_back(++k);
    rows.push_back(fmt::format("[{}]", fmt::join(row, ",")));
  }
  return p.shape.size() == 1 ? rows[0] : fmt::format("[{}]", fmt::join(rows, ","));
}

std::vector<double> assemble_theta(const ModelInfo& info, const ParamValues& values) {
  std::vector<std::string> missing, examples;
  for (size_t i = 0; i < info.params.size(); ++i)
    if (!values[i]) {
      missing.push_back(fmt::format("'{}'", info.params[i].name));
      examples.push_back(
          fmt::format("--param {}={}", info.params[i].name, example_value(info.params[i])));
    }
  if (!missing.empty()) {
    const bool many = missing.size() > 1;
    throw Error(fmt::format("parameter{} {} ha{} no value (the model gives no default): give "
                            "{} with --param, e.g. {}, or in a --params FILE.json object",
                            many ? "s" : "", fmt::join(missing, ", "), many ? "ve" : "s",
                            many ? "them" : "it", fmt::join(examples, " ")));
  }
  std::vector<double> theta(info.n_theta, 0.0);
  for (size_t i = 0; i < info.params.size(); ++i)
    std::copy(values[i]->begin(), values[i]->end(), theta.begin() + info.params[i].offset);
  return theta;
}

json param_value_json(const ParamInfo& p, const std::vector<double>& value) {
  if (p.shape.empty())
    return value.at(0);
  if (p.shape.size() == 1)
    return json(value);
  json rows = json::array();
  for (int64_t r = 0; r < p.shape[0]; ++r)
    rows.push_back(json(
        std::vector<double>(value.begin() + r * p.shape[1], value.begin() + (r + 1) * p.shape[1])));
  return rows;
}

std::string format_param_value(const ParamInfo& p, const std::vector<double>& value) {
  if (p.shape.empty())
    return fmt::format("{}", value.at(0));
  if (p.shape.size() == 1)
    return fmt::format("[{}]", fmt::join(value, ", "));
  std::vector<std::string> rows;
  for (int64_t r = 0; r < p.shape[0]; ++r)
    rows.push_back(fmt::format("[{}]", fmt::join(value.begin() + r * p.shape[1],
                                                 value.begin() + (r + 1) * p.shape[1], ", ")));
  return fmt::format("[{}]", fmt::join(rows, ", "));
}

nlohmann::json params_json(const ModelInfo& info, const std::vector<double>& theta) {
  nlohmann::json out = nlohmann::json::object();
  for (const ParamInfo& p : info.params)
    out[p.name] = param_value_json(
        p, std::vector<double>(theta.begin() + p.offset, theta.begin() + p.offset + p.size));
  return out;
}

} // namespace ssm
