// CSV input: a small RFC 4180 reader that keeps file line numbers for error messages, and the
// extraction of a model's observation columns into a dense T x n_obs array (NaN = missing).
#ifndef SSM_CSV_H
#define SSM_CSV_H

#include "ssm/metadata.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ssm {

struct CsvTable {
  std::string source; // file name used in messages
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows; // each has header.size() cells
  std::vector<int64_t> lines;                 // line in the file where each row starts (1-based)
};

// Parses CSV text. Quoted fields ("a,b", "say ""hi""") are supported; CRLF is accepted; blank
// lines at the end are ignored; every other row must have as many fields as the header. Throws
// ssm::Error `SOURCE:LINE: ...`.
CsvTable parse_csv(std::string_view text, const std::string& source);
// Reads and parses a file. Throws ssm::Error if it cannot be read.
CsvTable read_csv(const std::string& path);

// Parses one cell: returns false for a missing value (empty, `NA`, `NaN`, any case); throws
// ssm::Error `SOURCE:LINE: column 'c': cannot parse 'abc' as a number` otherwise.
bool parse_cell(std::string_view cell, double& value, const std::string& source, int64_t line,
                const std::string& column);

struct ObsData {
  std::string source;
  int64_t T = 0, n_obs = 0;
  std::vector<double> y;      // y[t * n_obs + k], NaN when missing
  std::vector<int64_t> lines; // file line of each time step
  int64_t n_inputs = 0;
  std::vector<double> u; // inputs, u[t * n_inputs + k], never missing
  const double* at(int64_t t) const { return y.data() + t * n_obs; }
  const double* inputs_at(int64_t t) const { return n_inputs ? u.data() + t * n_inputs : nullptr; }
};

// Finds the observation columns by name (other columns are ignored), one time step per row in
// file order. A joint observation must be either fully present or fully missing in each row.
// The model's input columns are read too; an input cell may not be missing.
ObsData read_observations(const ModelInfo& info, const CsvTable& table);

// Only the input columns (for simulate): n_obs = 0.
ObsData read_inputs(const ModelInfo& info, const CsvTable& table);

// Shortest round-trip text of a double; NaN is written `NA` so outputs read back as missing.
std::string format_double(double v);

} // namespace ssm

#endif
