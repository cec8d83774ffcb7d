// The module libssm_lfi.so: ratio estimation on LibTorch behind three C entry points, which
// lfi/ratio_loader.cpp opens when `nre` or `posterior --ratio FILE` runs, and `ssmc c2st`, which
// the driver opens (tools/ssmc/module_commands.h). Errors come back as text or, for the command,
// on standard error with its exit status; nothing but these symbols is exported.
#include "core/error.h"
#include "lfi/c2st.h"
#include "lfi/ratio_estimation.h"

#include <c10/util/Exception.h>

#include <cstdio>
#include <exception>
#include <new>

extern "C" {

__attribute__((visibility("default"))) const char* ssm_lfi_layout() {
  static const std::string layout = ssm::lfi::ratio_layout();
  return layout.c_str();
}

__attribute__((visibility("default"))) int
ssm_lfi_train(const ssm::lfi::RatioTrainingData* data,
              const ssm::lfi::RatioTrainingOptions* options, ssm::lfi::RatioTrainingReport* out,
              std::string* error) {
  try {
    *out = ssm::lfi::train_ratio(*data, *options);
    return 0;
  } catch (const c10::Error& e) { // LibTorch's message without its stack trace
    *error = "ratio estimation: " + std::string(e.what_without_backtrace());
  } catch (const std::bad_alloc&) {
    *error = "ratio estimation: out of memory (try fewer simulations or a smaller --batch-size)";
  } catch (const std::exception& e) {
    *error = e.what();
  }
  return 1;
}

__attribute__((visibility("default"))) ssm::lfi::LoadedRatio*
ssm_lfi_open(const std::string* bytes, const std::string* source, std::string* error) {
  try {
    return ssm::lfi::open_ratio(*bytes, *source).release();
  } catch (const c10::Error& e) {
    *error = *source + ": not a ratio saved by nre: " + std::string(e.what_without_backtrace());
  } catch (const std::exception& e) {
    *error = e.what();
  }
  return nullptr;
}

// `ssmc c2st ARGS...` (argv[0] the command's name): 0, 1 for an error in the data or the run, 2
// for a usage error, 70 for an internal error.
__attribute__((visibility("default"))) int ssm_c2st_main(int argc, char** argv) {
  try {
    return ssm::lfi::c2st_main(argc, argv);
  } catch (const ssm::Error& e) {
    std::fprintf(stderr, "ssmc c2st: error: %s\n", e.what());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "ssmc c2st: error: out of memory (try a smaller --max-draws)\n");
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "ssmc c2st: internal error in LibTorch: %s\n", e.what_without_backtrace());
    return 70;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ssmc c2st: internal error: %s\n", e.what());
    return 70;
  }
  return 1;
}

} // extern "C"
