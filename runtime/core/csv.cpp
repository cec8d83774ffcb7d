// CSV reading with line numbers, observation extraction, and number formatting for outputs.
#include "core/csv.h"
#include "core/error.h"
#include "core/number_text.h"
#include "core/text_encoding.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
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

CsvReader::CsvReader(std::istream& in, std::string source, bool comment_lines)
    : in_(in), source_(std::move(source)), comment_lines_(comment_lines) {
  // No UTF-8 text starts with these bytes; UTF-16 and UTF-32 files (byte-order marks FF FE,
  // FE FF, 00 00 FE FF) and many binary ones do.
  if (const int first = in_.peek(); first == 0xFF || first == 0xFE || first == 0)
    throw Error(fmt::format("{}:1:1: not a UTF-8 text file (it starts with the byte 0x{:02X}: "
                            "UTF-16, UTF-32 or binary? save it as UTF-8)",
                            source_, first));
  if (in_.peek() == 0xEF) { // UTF-8 byte-order mark (peek() gives an unsigned char as an int)
    char bom[3];
    in_.read(bom, 3);
    if (in_.gcount() != 3 || bom[1] != '\xBB' || bom[2] != '\xBF')
      throw Error(
          fmt::format("{}:1: the file does not start with a valid UTF-8 byte-order mark", source_));
  }
  int64_t start = 0;
  if (!read_record(header_, start))
    throw Error(
        fmt::format("{}: the file is empty (expected a header line naming the columns)", source_));
  for (size_t k = 0; k < header_.size(); ++k)
    for (size_t i = 0, n = 0; i < header_[k].size(); i += n)
      if ((n = utf8_sequence_length(header_[k], i)) == 0)
        throw Error(fmt::format("{}:{}: not a UTF-8 text file (column {} of the header has the "
                                "byte 0x{:02X}, which starts no UTF-8 character: Latin-1 or "
                                "another encoding? save it as UTF-8)",
                                source_, start, k + 1, static_cast<unsigned char>(header_[k][i])));
  for (size_t i = 0; i < header_.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (!header_[i].empty() && header_[i] == header_[j])
        throw Error(fmt::format("{}:{}: column '{}' appears twice in the header", source_, start,
                                header_[i]));
}

int CsvReader::get() {
  const int c = in_.get();
  if (in_.bad())
    throw Error(fmt::format("{}: read error: {}", source_, std::strerror(errno)));
  if (c == 0)
    throw Error(
        fmt::format("{}:{}: not a UTF-8 text file (a NUL byte: a binary file?)", source_, line_));
  return c;
}

bool CsvReader::read_record(std::vector<std::string>& fields, int64_t& start_line) {
  fields.clear();
  const int eof = std::char_traits<char>::eof();
  while (comment_lines_ && in_.peek() == '#') { // a comment line: skipped, counted
    int c = get();
    while (c != eof && c != '\n' && c != '\r')
      c = get();
    if (c == '\r' && in_.peek() == '\n')
      get();
    ++line_;
  }
  if (in_.peek() == eof)
    return false;
  start_line = line_;
  std::string field;
  bool quoted_field = false;
  auto finish_field = [&] {
    fields.push_back(quoted_field ? field : std::string(trim(field)));
    field.clear();
    quoted_field = false;
  };
  for (;;) {
    const int c = get();
    if (c == eof) {
      finish_field();
      return true;
    }
    if (c == '"' && trim(field).empty() && !quoted_field) {
      field.clear();
      quoted_field = true;
      for (;;) {
        const int q = get();
        if (q == eof)
          throw Error(fmt::format("{}:{}: unterminated quoted field", source_, start_line));
        if (q == '"') {
          if (in_.peek() != '"')
            break;
          get();
          field += '"';
        } else {
          if (q == '\n')
            ++line_;
          field += static_cast<char>(q);
        }
      }
      // Only blanks may follow the closing quote.
      while (in_.peek() == ' ' || in_.peek() == '\t')
        get();
      const int next = in_.peek();
      if (next != eof && next != ',' && next != '\n' && next != '\r')
        throw Error(
            fmt::format("{}:{}: unexpected character after a quoted field", source_, line_));
      continue;
    }
    if (c == ',') {
      finish_field();
      continue;
    }
    if (c == '\r' || c == '\n') {
      finish_field();
      if (c == '\r' && in_.peek() == '\n')
        get();
      ++line_;
      return true;
    }
    field += static_cast<char>(c);
  }
}

bool CsvReader::next(std::vector<std::string>& fields, int64_t& line) {
  // Blank lines wait until a row follows: with several columns that is an error, with a single
  // column each is a missing value; at the end of the file they are formatting.
  if (has_held_)
    return next_pending(fields, line);
  int64_t start = 0;
  while (read_record(fields, start)) {
    const bool blank = fields.size() == 1 && fields[0].empty();
    if (blank) {
      if (pending_blanks_++ == 0)
        pending_line_ = start;
      continue;
    }
    if (pending_blanks_ > 0 && header_.size() > 1)
      throw Error(fmt::format("{}:{}: empty line inside the data (write a row of empty cells or "
                              "NA for a missing observation)",
                              source_, pending_line_));
    if (fields.size() != header_.size())
      throw Error(fmt::format("{}:{}: expected {} fields as in the header, found {}", source_,
                              start, header_.size(), fields.size()));
    if (pending_blanks_ > 0) { // single column: the blanks first, then this row
      held_ = fields;
      held_line_ = start;
      has_held_ = true;
      return next_pending(fields, line);
    }
    line = start;
    return true;
  }
  return false;
}

bool CsvReader::next_pending(std::vector<std::string>& fields, int64_t& line) {
  if (pending_blanks_ > 0) {
    --pending_blanks_;
    fields.assign(1, std::string());
    line = pending_line_++;
    return true;
  }
  has_held_ = false;
  fields = std::move(held_);
  line = held_line_;
  return true;
}

namespace {

CsvTable read_table(std::istream& in, const std::string& source, bool comment_lines = false) {
  CsvReader reader(in, source, comment_lines);
  CsvTable table;
  table.source = source;
  table.header = reader.header();
  std::vector<std::string> fields;
  int64_t line = 0;
  while (reader.next(fields, line)) {
    table.rows.push_back(fields);
    table.lines.push_back(line);
  }
  return table;
}

std::ifstream open_input(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
  return in;
}

} // namespace

CsvTable parse_csv(std::string_view text, const std::string& source) {
  std::istringstream in{std::string(text)};
  return read_table(in, source);
}

CsvTable read_csv(const std::string& path, bool comment_lines) {
  std::ifstream in = open_input(path);
  return read_table(in, path, comment_lines);
}

bool parse_cell(std::string_view cell, double& value, const std::string& source, int64_t line,
                const std::string& column) {
  std::string_view s = trim(cell);
  if (s.empty() || iequals(s, "NA") || iequals(s, "NaN")) {
    value = std::numeric_limits<double>::quiet_NaN();
    return false;
  }
  const NumberText number = read_number(s);
  if (number.out_of_range)
    throw Error(
        fmt::format("{}:{}: column '{}': '{}' {}", source, line, column, cell, number.problem));
  if (!number.value)
    throw Error(fmt::format("{}:{}: column '{}': cannot parse '{}' as a number", source, line,
                            column, cell));
  const double d = *number.value;
  if (!std::isfinite(d))
    throw Error(fmt::format("{}:{}: column '{}': '{}' is not a finite number (write NA or leave "
                            "the cell empty for a missing value)",
                            source, line, column, cell));
  value = d;
  return true;
}

namespace {

// The index of each named column in the header; throws naming the first that is absent.
std::vector<int64_t> find_columns(const ModelInfo& info, const std::string& source,
                                  const std::vector<std::string>& header,
                                  const std::vector<std::string>& cols, const char* what) {
  std::vector<int64_t> index(cols.size(), -1);
  for (size_t k = 0; k < cols.size(); ++k) {
    for (size_t j = 0; j < header.size(); ++j)
      if (header[j] == cols[k])
        index[k] = static_cast<int64_t>(j);
    if (index[k] < 0) {
      std::vector<std::string> found;
      for (const auto& h : header)
        found.push_back("'" + h + "'");
      throw Error(fmt::format("{}: column '{}' not found ({} columns of model '{}': {}); "
                              "columns found: {}",
                              source, cols[k], what, info.name, fmt::join(cols, ", "),
                              fmt::join(found, ", ")));
    }
  }
  return index;
}

// Per component of `vars`: the variable when it is integer-valued, else nullptr.
std::vector<const VarInfo*> integer_components(const std::vector<VarInfo>& vars, int64_t n) {
  std::vector<const VarInfo*> out(n, nullptr);
  for (const VarInfo& v : vars)
    if (v.integer)
      for (int64_t i = 0; i < v.size; ++i)
        out[v.offset + i] = &v;
  return out;
}

// A value read for an int or int[lo..hi] observation or input must be an integer in its range.
void check_integer_cell(const VarInfo* v, double value, const std::string& source, int64_t line,
                        const std::string& column, const char* what) {
  if (!v || std::isnan(value))
    return;
  if (value != std::floor(value))
    throw Error(fmt::format("{}:{}: column '{}': {} is not an integer, but {} '{}' is declared {}",
                            source, line, column, value, what, v->name, integer_type(*v)));
  if (value < v->lower || value > v->upper)
    throw Error(fmt::format("{}:{}: column '{}': {} is outside the declared range of {} '{}', {}",
                            source, line, column, value, what, v->name, integer_type(*v)));
}

// Row t of the file belongs to series `name`: a new series starts where the name changes, and a
// name seen before is an error (a series' rows are contiguous).
void add_series_row(SeriesLayout& series, const std::string& name, int64_t t,
                    const std::string& source, int64_t line) {
  if (name.empty())
    throw Error(
        fmt::format("{}:{}: column 'series' is empty: every row names its series", source, line));
  if (!series.names.empty() && series.names.back() == name)
    return;
  if (std::find(series.names.begin(), series.names.end(), name) != series.names.end())
    throw Error(fmt::format("{}:{}: series '{}' appears again after series '{}': the rows of a "
                            "series must be contiguous (sort the file by series, keeping each "
                            "series' rows in time order)",
                            source, line, name, series.names.back()));
  series.names.push_back(name);
  series.start.push_back(t);
}

// Reads the model's observation columns (when `observations`) and input columns from each of the
// `rows` rows that next_row(fields, line) yields, straight into the dense arrays.
template <class NextRow>
ObsData read_rows(const ModelInfo& info, const std::string& source,
                  const std::vector<std::string>& header, bool observations, int64_t rows,
                  NextRow next_row) {
  const std::vector<std::string> cols =
      observations ? obs_columns(info) : std::vector<std::string>{};
  const std::vector<std::string> in_cols = input_columns(info);
  const std::vector<int64_t> index = find_columns(info, source, header, cols, "observation");
  const std::vector<int64_t> in_index = find_columns(info, source, header, in_cols, "input");
  const std::vector<const VarInfo*> obs_int = integer_components(info.obs, info.n_obs),
                                    in_int = integer_components(info.inputs, info.n_inputs);
  ObsData data;
  data.source = source;
  data.n_obs = observations ? info.n_obs : 0;
  data.n_inputs = info.n_inputs;
  data.y.reserve(rows * data.n_obs);
  data.u.reserve(rows * data.n_inputs);
  // The series column, unless the model reads a column of that name.
  int64_t series_col = -1;
  if (std::find(cols.begin(), cols.end(), "series") == cols.end() &&
      std::find(in_cols.begin(), in_cols.end(), "series") == in_cols.end())
    if (auto it = std::find(header.begin(), header.end(), "series"); it != header.end())
      series_col = it - header.begin();
  std::vector<std::string> fields;
  int64_t line = 0;
  while (next_row(fields, line)) {
    const int64_t t = data.T;
    if (series_col >= 0)
      add_series_row(data.series, fields[series_col], t, source, line);
    ++data.T;
    if (line != t + 2 && data.lines.empty()) // the first irregular row: keep every line from now
      for (int64_t s = 0; s < t; ++s)
        data.lines.push_back(s + 2);
    if (!data.lines.empty())
      data.lines.push_back(line);
    for (size_t k = 0; k < cols.size(); ++k) {
      double v = 0;
      parse_cell(fields[index[k]], v, source, line, cols[k]);
      check_integer_cell(obs_int[k], v, source, line, cols[k], "observation");
      data.y.push_back(v);
    }
    for (const VarInfo& v : observations ? info.obs : std::vector<VarInfo>{}) {
      if (!v.joint || v.size < 2)
        continue;
      std::vector<std::string> missing;
      for (int64_t i = 0; i < v.size; ++i)
        if (std::isnan(data.y[t * data.n_obs + v.offset + i]))
          missing.push_back(cols[v.offset + i]);
      if (!missing.empty() && static_cast<int64_t>(missing.size()) != v.size)
        throw Error(fmt::format("{}:{}: observation '{}' is jointly distributed, so its {} "
                                "columns must be all present or all missing; missing here: {}",
                                source, line, v.name, v.size, fmt::join(missing, ", ")));
    }
    for (size_t k = 0; k < in_cols.size(); ++k) {
      double v = 0;
      if (!parse_cell(fields[in_index[k]], v, source, line, in_cols[k]))
        throw Error(fmt::format("{}:{}: input column '{}' is empty: inputs are needed at every "
                                "{}",
                                source, line, in_cols[k], info.step == "n" ? "item" : "time step"));
      check_integer_cell(in_int[k], v, source, line, in_cols[k], "input");
      data.u.push_back(v);
    }
  }
  if (observations && data.T == 0)
    throw Error(fmt::format("{}: no data rows after the header", source));
  if (series_col >= 0)
    data.series.start.push_back(data.T);
  return data;
}

ObsData read_table_rows(const ModelInfo& info, const CsvTable& table, bool observations) {
  size_t row = 0;
  return read_rows(info, table.source, table.header, observations,
                   static_cast<int64_t>(table.rows.size()),
                   [&](std::vector<std::string>& fields, int64_t& line) {
                     if (row == table.rows.size())
                       return false;
                     fields = table.rows[row];
                     line = table.lines[row++];
                     return true;
                   });
}

ObsData read_file_rows(const ModelInfo& info, const std::string& path, bool observations) {
  // Two passes: counting the rows first lets the arrays be allocated once at their final size,
  // with no growth by doubling (whose peak is up to three times the data).
  int64_t rows = 0;
  {
    std::ifstream in = open_input(path);
    CsvReader reader(in, path);
    std::vector<std::string> fields;
    int64_t line = 0;
    while (reader.next(fields, line))
      ++rows;
  }
  std::ifstream in = open_input(path);
  CsvReader reader(in, path);
  return read_rows(
      info, path, reader.header(), observations, rows,
      [&](std::vector<std::string>& fields, int64_t& line) { return reader.next(fields, line); });
}

} // namespace

ObsData read_inputs(const ModelInfo& info, const CsvTable& table) {
  return read_table_rows(info, table, false);
}

ObsData read_observations(const ModelInfo& info, const CsvTable& table) {
  return read_table_rows(info, table, true);
}

ObsData read_observations_file(const ModelInfo& info, const std::string& path) {
  return read_file_rows(info, path, true);
}

ObsData read_inputs_file(const ModelInfo& info, const std::string& path) {
  return read_file_rows(info, path, false);
}

std::pair<int64_t, int64_t> SeriesLayout::locate(int64_t t) const {
  if (start.empty())
    return {0, t};
  const auto k = std::upper_bound(start.begin(), start.end() - 1, t) - start.begin() - 1;
  return {k, t - start[k]};
}

std::string series_header(const SeriesLayout& series) {
  return series.start.empty() ? "" : "series,";
}

std::string step_cells(const SeriesLayout& series, int64_t t) {
  if (series.start.empty())
    return fmt::format("{}", t);
  const auto [k, local] = series.locate(t);
  return fmt::format("{},{}", series.names[k], local);
}

ObsData ObsData::one_series(int64_t k) const {
  if (series.start.empty())
    return *this;
  const int64_t a = series.start[k], b = series.start[k + 1];
  ObsData out;
  out.source = source;
  out.T = b - a;
  out.n_obs = n_obs;
  out.n_inputs = n_inputs;
  out.y.assign(y.begin() + a * n_obs, y.begin() + b * n_obs);
  out.u.assign(u.begin() + a * n_inputs, u.begin() + b * n_inputs);
  for (int64_t t = a; t < b; ++t)
    out.lines.push_back(line(t));
  return out;
}

std::string csv_name(const std::string& name) {
  if (name.find_first_of(",\"\n\r") == std::string::npos)
    return name;
  std::string out = "\"";
  for (char c : name)
    out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string format_double(double v) {
  if (std::isnan(v))
    return "NA";
  return fmt::format("{}", v);
}

// "data.csv line 12: y=3.5" for messages about time step t.
std::string data_row_text(const ModelInfo& info, const ObsData& data, int64_t t) {
  std::vector<std::string> cols = obs_columns(info), parts;
  for (int64_t k = 0; k < data.n_obs; ++k)
    parts.push_back(cols[k] + "=" + format_double(data.at(t)[k]));
  std::string where = data.source;
  where += fmt::format(" line {}", data.line(t));
  return fmt::format("{}: {}", where, fmt::join(parts, ", "));
}

void require_previous_obs(const ModelInfo& info, const ObsData& data, int64_t t) {
  if (info.reads_previous_obs && t > 0)
    for (int64_t k = 0; k < info.n_obs; ++k)
      if (std::isnan(data.at(t - 1)[k]))
        throw Error(fmt::format("filter: the transition to t={} reads the observation at t={}, "
                                "which is missing ({}); a model whose transition reads y[t-1] "
                                "needs every observation but the last",
                                t, t - 1, data_row_text(info, data, t - 1)));
}

} // namespace ssm
