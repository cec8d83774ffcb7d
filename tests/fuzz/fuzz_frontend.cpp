// The libFuzzer target of the frontend (tests/fuzz/README.md): any bytes go through
// frontend::compile_model (parse, check, lower) and the diagnostics are rendered. Errors are fine;
// a crash, a leak, undefined behaviour, or a model that compiles without error into IR the
// verifier rejects is a bug. Built with clang's -fsanitize=fuzzer (tools/fuzz.sh), or with a
// main() that replays files (replay_main.cpp) so that the corpus is a regression test everywhere.
#include "frontend/frontend.h"
#include "ir/printer.h"
#include "ir/verifier.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view source(reinterpret_cast<const char*>(data), size);
  ssm::frontend::DiagnosticEngine diags;
  auto model = ssm::frontend::compile_model(source, "fuzz.ssm", diags);
  std::string rendered = diags.str();
  if (model && !diags.has_errors()) {
    auto errors = ssm::ir::verify(*model);
    if (!errors.empty()) {
      std::fprintf(stderr, "the frontend produced invalid IR:\n%s\n%s\n", errors.front().c_str(),
                   ssm::ir::print(*model).c_str());
      std::abort();
    }
    (void)ssm::ir::print(*model);
  }
  return 0;
}
