// CSV reading with line numbers, observation extraction, and number formatting for outputs.
#include "ssm/csv.h"
#include "ssm/error.h"

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

namespace ssm {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

} // namespace

CsvTable parse_csv(std::string_view text, const std::string& source) {
  CsvTable table;
  table.source = source;
  if (text.size() >= 3 && text.substr(0, 3) == "\xEF\xBB\xBF") // UTF-8 byte-order mark
    text.remove_prefix(3);

  size_t pos = 0;
  int64_t line = 1;
  // Reads one record starting at pos; returns false at end of input.
  auto read_record = [&](std::vector<std::string>& fields, int64_t& start_line) -> bool {
    fields.clear();
    if (pos >= text.size())
      return false;
    start_line = line;
    std::string field;
    bool quoted_field = false;
    for (;;) {
      if (pos >= text.size()) {
        fields.push_back(quoted_field ? field : std::string(trim(field)));
        return true;
      }
      char c = text[pos];
      if (c == '"' && trim(field).empty() && !quoted_field) {
        field.clear();
        quoted_field = true;
        ++pos;
        for (;;) {
          if (pos >= text.size())
            throw Error(fmt::format("{}:{}: unterminated quoted field", source, start_line));
          char q = text[pos++];
          if (q == '"') {
            if (pos < text.size() && text[pos] == '"') {
              field += '"';
              ++pos;
            } else {
              break;
            }
          } else {
            if (q == '\n')
              ++line;
            field += q;
          }
        }
        // Only blanks may follow the closing quote.
        while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t'))
          ++pos;
        if (pos < text.size() && text[pos] != ',' && text[pos] != '\n' && text[pos] != '\r')
          throw Error(
              fmt::format("{}:{}: unexpected character after a quoted field", source, line));
        continue;
      }
      if (c == ',') {
        fields.push_back(quoted_field ? field : std::string(trim(field)));
        field.clear();
        quoted_field = false;
        ++pos;
        continue;
      }
      if (c == '\r' || c == '\n') {
        fields.push_back(quoted_field ? field : std::string(trim(field)));
        if (c == '\r' && pos + 1 < text.size() && text[pos + 1] == '\n')
          ++pos;
        ++pos;
        ++line;
        return true;
      }
      field += c;
      ++pos;
    }
  };

  std::vector<std::string> fields;
  int64_t start = 0;
  if (!read_record(fields, start))
    throw Error(
        fmt::format("{}: the file is empty (expected a header line naming the columns)", source));
  table.header = fields;
  for (size_t i = 0; i < table.header.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (!table.header[i].empty() && table.header[i] == table.header[j])
        throw Error(
            fmt::format("{}:1: column '{}' appears twice in the header", source, table.header[i]));

  // Blank lines are kept while more rows may follow: with a single column a blank line is a
  // missing value. Trailing blank lines are dropped below.
  std::vector<int64_t> blank_run;
  while (read_record(fields, start)) {
    bool blank = fields.size() == 1 && fields[0].empty();
    if (blank && table.header.size() > 1) {
      blank_run.push_back(start);
      continue;
    }
    if (!blank_run.empty())
      throw Error(fmt::format("{}:{}: empty line inside the data (write a row of empty cells or "
                              "NA for a missing observation)",
                              source, blank_run.front()));
    if (fields.size() != table.header.size())
      throw Error(fmt::format("{}:{}: expected {} fields as in the header, found {}", source, start,
                              table.header.size(), fields.size()));
    table.rows.push_back(fields);
    table.lines.push_back(start);
  }
  // Blank lines at the end of a single-column file are formatting, not missing values.
  while (table.header.size() == 1 && !table.rows.empty() && table.rows.back()[0].empty()) {
    table.rows.pop_back();
    table.lines.pop_back();
  }
  return table;
}

CsvTable read_csv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad())
    throw Error(fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
  return parse_csv(ss.str(), path);
}

bool parse_cell(std::string_view cell, double& value, const std::string& source, int64_t line,
                const std::string& column) {
  std::string_view s = trim(cell);
  if (s.empty() || iequals(s, "NA") || iequals(s, "NaN")) {
    value = std::numeric_limits<double>::quiet_NaN();
    return false;
  }
  std::string_view num = s;
  if (num[0] == '+')
    num.remove_prefix(1);
  double d = 0;
  auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), d);
  if (num.empty() || ec != std::errc() || end != num.data() + num.size())
    throw Error(fmt::format("{}:{}: column '{}': cannot parse '{}' as a number", source, line,
                            column, cell));
  if (!std::isfinite(d))
    throw Error(fmt::format("{}:{}: column '{}': '{}' is not a finite number (write NA or leave "
                            "the cell empty for a missing value)",
                            source, line, column, cell));
  value = d;
  return true;
}

namespace {

// The index of each named column in the table; throws naming the first that is absent.
std::vector<int64_t> find_columns(const ModelInfo& info, const CsvTable& table,
                                  const std::vector<std::string>& cols, const char* what) {
  std::vector<int64_t> index(cols.size(), -1);
  for (size_t k = 0; k < cols.size(); ++k) {
    for (size_t j = 0; j < table.header.size(); ++j)
      if (table.header[j] == cols[k])
        index[k] = static_cast<int64_t>(j);
    if (index[k] < 0) {
      std::vector<std::string> found;
      for (const auto& h : table.header)
        found.push_back("'" + h + "'");
      throw Error(fmt::format("{}: column '{}' not found ({} columns of model '{}': {}); "
                              "columns found: {}",
                              table.source, cols[k], what, info.name, fmt::join(cols, ", "),
                              fmt::join(found, ", ")));
    }
  }
  return index;
}

void read_input_cells(const ModelInfo& info, const CsvTable& table, ObsData& data) {
  std::vector<std::string> cols = input_columns(info);
  std::vector<int64_t> index = find_columns(info, table, cols, "input");
  data.n_inputs = info.n_inputs;
  data.u.resize(data.T * data.n_inputs);
  for (int64_t t = 0; t < data.T; ++t)
    for (size_t k = 0; k < cols.size(); ++k)
      if (!parse_cell(table.rows[t][index[k]], data.u[t * data.n_inputs + k], table.source,
                      table.lines[t], cols[k]))
        throw Error(fmt::format("{}:{}: input column '{}' is empty: inputs are needed at every "
                                "time step",
                                table.source, table.lines[t], cols[k]));
}

} // namespace

ObsData read_inputs(const ModelInfo& info, const CsvTable& table) {
  ObsData data;
  data.source = table.source;
  data.T = static_cast<int64_t>(table.rows.size());
  data.lines = table.lines;
  read_input_cells(info, table, data);
  return data;
}

ObsData read_observations(const ModelInfo& info, const CsvTable& table) {
  std::vector<std::string> cols = obs_columns(info);
  std::vector<int64_t> index = find_columns(info, table, cols, "observation");
  if (table.rows.empty())
    throw Error(fmt::format("{}: no data rows after the header", table.source));

  ObsData data;
  data.source = table.source;
  data.T = static_cast<int64_t>(table.rows.size());
  data.n_obs = info.n_obs;
  data.y.resize(data.T * data.n_obs);
  data.lines = table.lines;
  for (int64_t t = 0; t < data.T; ++t) {
    const auto& row = table.rows[t];
    for (size_t k = 0; k < cols.size(); ++k)
      parse_cell(row[index[k]], data.y[t * data.n_obs + k], table.source, table.lines[t], cols[k]);
    for (const VarInfo& v : info.obs) {
      if (!v.joint || v.size < 2)
        continue;
      std::vector<std::string> missing;
      for (int64_t i = 0; i < v.size; ++i)
        if (std::isnan(data.y[t * data.n_obs + v.offset + i]))
          missing.push_back(cols[v.offset + i]);
      if (!missing.empty() && static_cast<int64_t>(missing.size()) != v.size)
        throw Error(fmt::format("{}:{}: observation '{}' is jointly distributed, so its {} "
                                "columns must be all present or all missing; missing here: {}",
                                table.source, table.lines[t], v.name, v.size,
                                fmt::join(missing, ", ")));
    }
  }
  read_input_cells(info, table, data);
  return data;
}

std::string format_double(double v) {
  if (std::isnan(v))
    return "NA";
  return fmt::format("{}", v);
}

} // namespace ssm
