// The module libssm_vsmooth.so: the variational smoother's fit on LibTorch behind two C entry
// points, which vsmooth/methods.cpp opens when `smooth --method variational` runs. Errors come
// back as text, never thrown across the module's boundary; nothing else is exported.
#include "vsmooth/fit.h"

#include <c10/util/Exception.h>

#include <exception>
#include <new>

extern "C" {

__attribute__((visibility("default"))) const char* ssm_vsmooth_layout() {
  static const std::string layout = ssm::vsmooth_layout();
  return layout.c_str();
}

__attribute__((visibility("default"))) int
ssm_vsmooth_fit(const ssm::MethodRun* run, const ssm::VariationalSmoothOptions* options,
                ssm::VariationalSmoothFit* out, std::string* error) {
  try {
    *out = ssm::vsmooth::fit_variational_smoother(*run, *options);
    return 0;
  } catch (const std::bad_alloc&) {
    *error = "smooth --method variational: out of memory (try fewer --samples or --draws)";
  } catch (const c10::Error& e) { // LibTorch's message without its stack trace
    *error = std::string("smooth --method variational: internal error in LibTorch: ") +
             e.what_without_backtrace();
  } catch (const std::exception& e) {
    *error = e.what();
  }
  return 1;
}

} // extern "C"
