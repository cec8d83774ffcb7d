// The libFuzzer target of the parameter and data readers (README.md here): any bytes are a
// --params file, a --data-file and a --param value of tests/fuzz/fuzz_model.h's model
// (runtime/core/params.h). A clear ssm::Error is fine; a crash, a leak, undefined behaviour,
// another exception (a JSON type error escaping), or a value accepted that breaks its declared
// type is a bug.
#include "core/error.h"
#include "core/params.h"
#include "fuzz_model.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

// Every value given must be of its parameter's size and pass the parameter's own check.
void check_accepted(const ssm::ModelInfo& info, const ssm::ParamValues& values) {
  for (size_t i = 0; i < info.params.size(); ++i) {
    if (!values[i])
      continue;
    if (static_cast<int64_t>(values[i]->size()) != info.params[i].size) {
      std::fprintf(stderr, "parameter '%s' accepted with the wrong size\n",
                   info.params[i].name.c_str());
      std::abort();
    }
    ssm::check_param_value(info.params[i], *values[i]); // throws, uncaught, if it breaks it
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
