// Parameter resolution: model defaults, then a --params JSON file, then --param name=value
// assignments (later sources override earlier ones), with shape, support and cov_matrix checks.
#pragma once

#include "core/metadata.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ssm {

// One value per parameter of ModelInfo::params (same order), flat row-major; nullopt when no
// source gives a value.
using ParamValues = std::vector<std::optional<std::vector<double>>>;

// Parses the value syntax of --param: a number, `[1, 2]`, `[[1, 2], [3, 4]]`. Throws ssm::Error.
nlohmann::json parse_param_value(std::string_view text);

// Checks `value` (number / array / nested array) against p's shape and flattens it row-major.
// `where` names the source in error messages (e.g. "--param", "params.json").
// `kind` names what the value is for in messages ("parameter", "data").
std::vector<double> flatten_param(const ParamInfo& p, const nlohmann::json& value,
                                  const std::string& where, const std::string& kind = "parameter");

// The JSON document in `text` (a file's bytes; `source` names it in messages). Throws ssm::Error
// for text that is not UTF-8 (a UTF-16 or binary file) or not JSON; a UTF-8 byte-order mark is
// skipped.
nlohmann::json parse_json_text(std::string_view text, const std::string& source);

// The values of the model's data items from a --data-file JSON object (flat, in the layout of
// ModelInfo::data); empty for a model without data. Throws ssm::Error naming the file and item.
std::vector<double> read_data_values(const ModelInfo& info, const std::string& path);
// Same, with the file already parsed (`path` names it in messages).
std::vector<double> read_data_values_json(const ModelInfo& info, const nlohmann::json& file,
                                          const std::string& path);

// The values of `vars` (data items, observations) from a JSON object mapping their names to
// values, flat in their layout (`total` numbers); `kind` names them in messages ("data",
// "observation"), `model` the model. Throws ssm::Error naming the file and the item.
std::vector<double> read_named_values_json(const std::string& model,
                                           const std::vector<VarInfo>& vars, int64_t total,
                                           const nlohmann::json& file, const std::string& path,
                                           const std::string& kind);

// The observations' values from a JSON file mapping their names to values (`--observed`).
std::vector<double> read_observation_values(const ModelInfo& info, const std::string& path);

// Applies the sources in order. `params_file` may be empty (no file). `assignments` are the
// `name=value` strings of --param. Checks shapes, finiteness, prior support and cov_matrix
// positive-definiteness of every value present. Throws ssm::Error.
ParamValues resolve_params(const ModelInfo& info, const std::string& params_file,
                           const std::vector<std::string>& assignments);

// Same, with the file given as already-parsed JSON (`file_label` names it in messages).
ParamValues resolve_params_json(const ModelInfo& info, const nlohmann::json* file,
                                const std::string& file_label,
                                const std::vector<std::string>& assignments);

// Flat theta of size n_theta; throws ssm::Error naming every parameter that has no value.
std::vector<double> assemble_theta(const ModelInfo& info, const ParamValues& values);

// Checks one flattened value against p's declared type: finite, within [lower, upper], a whole
// number when p.type is "int", on the simplex for "simplex", symmetric positive definite for
// "cov_matrix". `kind` and `where` name it in messages ("parameter", or "data" and the data file).
// Throws ssm::Error.
void check_value(const ParamInfo& p, const std::vector<double>& value, const std::string& kind,
                 const std::string& where);
// check_value for a parameter.
void check_param_value(const ParamInfo& p, const std::vector<double>& value);

// `[[1, 2], [3, 4]]`-style text of a flat value in p's shape.
std::string format_param_value(const ParamInfo& p, const std::vector<double>& value);
// The same as JSON (number / array / nested array).
nlohmann::json param_value_json(const ParamInfo& p, const std::vector<double>& value);
// {"name": value, ...} of every parameter, each read from its place in `theta` (at least n_theta
// values: a point, a score, its standard errors): a --params file's layout.
nlohmann::json params_json(const ModelInfo& info, const std::vector<double>& theta);

} // namespace ssm
