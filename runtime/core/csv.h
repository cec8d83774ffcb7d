// CSV input: a small RFC 4180 reader that keeps file line numbers for error messages, and the
// extraction of a model's observation columns into a dense T x n_obs array (NaN = missing).
#pragma once

#include "core/metadata.h"

#include <cstdint>
#include <istream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ssm {

struct CsvTable {
  std::string source; // file name used in messages
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows; // each has header.size() cells
  std::vector<int64_t> lines;                 // line in the file where each row starts (1-based)
};

// Reads CSV records one at a time from a stream, so a long data file is never held in memory as
// text or strings. The header is read on construction. Quoted fields ("a,b", "say ""hi""") are
// supported; CRLF is accepted; blank lines at the end are ignored; every other row must have as
// many fields as the header (with a single column a blank line is a missing value). Throws
// ssm::Error `SOURCE:LINE: ...`.
class CsvReader {
public:
  // `comment_lines`: lines that start with `#` (Stan CSV's) are skipped wherever a row may
  // start, and still counted in the lines that errors name.
  CsvReader(std::istream& in, std::string source, bool comment_lines = false);
  const std::vector<std::string>& header() const { return header_; }
  const std::string& source() const { return source_; }
  // The next data row and the file line where it starts; false at the end.
  bool next(std::vector<std::string>& fields, int64_t& line);

private:
  bool read_record(std::vector<std::string>& fields, int64_t& start_line);
  bool next_pending(std::vector<std::string>& fields, int64_t& line);
  int get();
  std::istream& in_;
  std::string source_;
  bool comment_lines_ = false;
  std::vector<std::string> header_;
  int64_t line_ = 1;
  // A run of blank lines waits for the row after it; in a single-column file each is a missing
  // value, emitted before that (held) row.
  int64_t pending_blanks_ = 0, pending_line_ = 0;
  std::vector<std::string> held_;
  int64_t held_line_ = 0;
  bool has_held_ = false;
};

// Parses CSV text. Quoted fields ("a,b", "say ""hi""") are supported; CRLF is accepted; blank
// lines at the end are ignored; every other row must have as many fields as the header. Throws
// ssm::Error `SOURCE:LINE: ...`.
CsvTable parse_csv(std::string_view text, const std::string& source);
// Reads and parses a file (with `comment_lines`, as CsvReader's). Throws ssm::Error if it cannot
// be read.
CsvTable read_csv(const std::string& path, bool comment_lines = false);

// Parses one cell: returns false for a missing value (empty, `NA`, `NaN`, any case); throws
// ssm::Error `SOURCE:LINE: column 'c': cannot parse 'abc' as a number` otherwise.
bool parse_cell(std::string_view cell, double& value, const std::string& source, int64_t line,
                const std::string& column);

// Several independent series in one data file, in long format: a `series` column names the series
// of each row, and the rows of a series are contiguous. Series k has the steps [start[k],
// start[k + 1]) of the file (start ends with T); empty for a file without the column.
struct SeriesLayout {
  std::vector<int64_t> start;
  std::vector<std::string> names;
  int64_t count() const { return start.empty() ? 1 : static_cast<int64_t>(names.size()); }
  // The series of step t of the file and t within it.
  std::pair<int64_t, int64_t> locate(int64_t t) const;
};
// "series," before the header of a per-step CSV of several series, "" otherwise; and the cells
// "NAME,t" or "t" that start the row of step t of the file.
std::string series_header(const SeriesLayout& series);
std::string step_cells(const SeriesLayout& series, int64_t t);

struct ObsData {
  std::string source;
  int64_t T = 0, n_obs = 0;
  std::vector<double> y; // y[t * n_obs + k], NaN when missing
  // File line of each time step: empty when row t is on line t + 2 (the usual case), so a long
  // series costs no memory for it; use line(t).
  std::vector<int64_t> lines;
  int64_t n_inputs = 0;
  std::vector<double> u; // inputs, u[t * n_inputs + k], never missing
  SeriesLayout series;   // the `series` column's series (empty: one)
  // A plate model's observations that are sequences (VarInfo::sequence), once its rows are
  // gathered into items (core/sequence_items.h): per such observation, every item's tokens end to
  // end, item n's in [start[n], start[n + 1]).
  struct Sequences {
    std::string name;
    std::vector<int64_t> tokens, start;
  };
  std::vector<Sequences> sequences;
  const double* at(int64_t t) const { return y.data() + t * n_obs; }
  const double* inputs_at(int64_t t) const { return n_inputs ? u.data() + t * n_inputs : nullptr; }
  int64_t line(int64_t t) const { return lines.empty() ? t + 2 : lines[t]; }
  // Series k alone (its steps from t = 0; file lines kept for messages).
  ObsData one_series(int64_t k) const;
};

// Finds the observation columns by name (other columns are ignored), one time step per row in
// file order; a `series` column (unless a variable of the model is named so) splits the rows into
// independent series. A joint observation must be either fully present or fully missing in each
// row. The model's input columns are read too; an input cell may not be missing.
ObsData read_observations(const ModelInfo& info, const CsvTable& table);

// Only the input columns (for simulate): n_obs = 0.
ObsData read_inputs(const ModelInfo& info, const CsvTable& table);

// The same, streaming the file row by row (the data is never held as text).
ObsData read_observations_file(const ModelInfo& info, const std::string& path);
ObsData read_inputs_file(const ModelInfo& info, const std::string& path);

// Shortest round-trip text of a double; NaN is written `NA` so outputs read back as missing.
std::string format_double(double v);
// A CSV field for `name`: quoted (RFC 4180) when it holds a comma, a quote or a line break, as
// the column of a matrix component does (`A[0,1]`).
std::string csv_name(const std::string& name);

// "data.csv line 12: y=3.5": the row of time step t, for messages about that step.
std::string data_row_text(const ModelInfo& info, const ObsData& data, int64_t t);
// Throws ssm::Error naming the row when the transition to t reads y[t-1] and it is missing.
void require_previous_obs(const ModelInfo& info, const ObsData& data, int64_t t);

} // namespace ssm
