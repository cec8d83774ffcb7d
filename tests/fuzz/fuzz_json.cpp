// The libFuzzer target of the parameter and data readers (README.md here): any bytes are a
// --params file, a --data-file and a --param value of tests/fuzz/fuzz_model.h's model
// (runtime/core/params.h). A clear ssm::Error is fine; a crash, a leak, undefined behaviour,
// another exception (a JSON type error escaping), or a value accepted that breaks its declared
// type (checked here independently) is a bug.
#include "core/error.h"
#include "core/params.h"
#include "fuzz_model.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

[[noreturn]] void broken(const std::string& name, const char* what) {
  std::fprintf(stderr, "parameter '%s' was accepted %s\n", name.c_str(), what);
  std::abort();
}

// Every value accepted must be of its parameter's size and of its declared type, checked here
// independently of the runtime's own check (with looser tolerances, so rounding never aborts).
void check_accepted(const ssm::ModelInfo& info, const ssm::ParamValues& values) {
  for (size_t i = 0; i < info.params.size(); ++i) {
    if (!values[i])
      continue;
    const ssm::ParamInfo& p = info.params[i];
    const std::vector<double>& v = *values[i];
    if (static_cast<int64_t>(v.size()) != p.size)
      broken(p.name, "with the wrong size");
    for (double x : v) {
      if (!std::isfinite(x))
        broken(p.name, "not finite");
      if ((p.lower && x < *p.lower) || (p.upper && x > *p.upper))
        broken(p.name, "outside its bounds");
    }
    if (p.type == "simplex") {
      double total = 0;
      for (double x : v) {
        if (x < 0)
          broken(p.name, "off the simplex (a negative component)");
        total += x;
      }
      if (std::abs(total - 1) > 1e-6)
        broken(p.name, "off the simplex (its sum is not 1)");
    }
    if (p.type == "cov_matrix") { // the model's Q is 2 x 2
      const double a = v[0], b = v[1], c = v[2], d = v[3];
      // As the runtime scales its tolerance: relative to the largest entry, and at least 1.
      const double scale = std::max({1.0, std::abs(a), std::abs(b), std::abs(c), std::abs(d)});
      if (std::abs(b - c) > 1e-6 * scale)
        broken(p.name, "not symmetric");
      // The Cholesky factor's pivots: a, then d - c^2 / a (without forming products that
      // overflow or underflow).
      if (!(a > 0) || !(d - c * (c / a) > -1e-6 * scale))
        broken(p.name, "not positive definite");
    }
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(bytes), size);
  const ssm::ModelInfo& info = ssm_fuzz::fuzz_model();
  try {
    const nlohmann::json file = ssm::parse_json_text(text, "fuzz.json");
    try {
      check_accepted(info, ssm::resolve_params_json(info, &file, "fuzz.json", {}));
    } catch (const ssm::Error&) {
    }
    try {
      const std::vector<double> data = ssm::read_data_values_json(info, file, "fuzz.json");
      if (static_cast<int64_t>(data.size()) != info.n_data)
        std::abort();
      for (double v : data)
        if (!std::isfinite(v))
          std::abort();
    } catch (const ssm::Error&) {
    }
  } catch (const ssm::Error&) {
  }
  // The bytes as the value of --param, for a scalar, a simplex and a covariance.
  for (const char* name : {"mu=", "p=", "Q="}) {
    try {
      check_accepted(info, ssm::resolve_params_json(info, nullptr, "", {name + std::string(text)}));
    } catch (const ssm::Error&) {
    }
  }
  return 0;
}
