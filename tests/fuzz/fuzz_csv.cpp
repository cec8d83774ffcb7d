// The libFuzzer target of the CSV reader (README.md here): any bytes are a data file of
// tests/fuzz/fuzz_model.h's model, read as observations and as inputs (runtime/core/csv.h). A
// clear ssm::Error is fine; a crash, a leak, undefined behaviour, another exception, or data read
// without error that breaks what the reader promises (a row per time step, integer observations
// within their range, inputs never missing) is a bug.
#include "core/csv.h"
#include "core/error.h"
#include "fuzz_model.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace {

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "the CSV reader broke its promise: %s\n", what);
  std::abort();
}

void check_observations(const ssm::ObsData& data) {
  if (static_cast<int64_t>(data.y.size()) != data.T * data.n_obs)
    broken("y does not hold T x n_obs values");
  if (static_cast<int64_t>(data.u.size()) != data.T * data.n_inputs)
    broken("u does not hold T x n_inputs values");
  for (double u : data.u)
    if (std::isnan(u))
      broken("a missing input was accepted");
  for (int64_t t = 0; t < data.T; ++t) {
    if (data.line(t) < 2)
      broken("a time step has no file line");
    if (data.n_obs == 0)
      continue;
    const double c = data.at(t)[1]; // the int[0..2] observation
    if (!std::isnan(c) && (c != std::floor(c) || c < 0 || c > 2))
      broken("an integer observation outside its range was accepted");
    const double z0 = data.at(t)[2], z1 = data.at(t)[3]; // the joint vector[2]
    if (std::isnan(z0) != std::isnan(z1))
      broken("a joint observation was accepted half missing");
  }
  if (!data.series.start.empty() && data.series.start.back() != data.T)
    broken("the series layout does not end at T");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(bytes), size);
  const ssm::ModelInfo& info = ssm_fuzz::fuzz_model();
  ssm::CsvTable table;
  try {
    table = ssm::parse_csv(text, "fuzz.csv");
  } catch (const ssm::Error&) {
    return 0;
  }
  for (const auto& row : table.rows)
    if (row.size() != table.header.size())
      broken("a row with a different number of fields than the header");
  try {
    check_observations(ssm::read_observations(info, table));
  } catch (const ssm::Error&) {
  }
  try {
    const ssm::ObsData inputs = ssm::read_inputs(info, table);
    if (inputs.n_obs != 0)
      broken("read_inputs read observations");
    check_observations(inputs);
  } catch (const ssm::Error&) {
  }
  return 0;
}
