// The entry points of libssm_vi.so, the module that executables load when `vi` runs
// (vi/loader.h): the fits (of a plate model's guides, of a model's parameters), the reading of
// a --prior density file (for sample and optimize) and `simulate` with networks, with errors
// returned as text rather than thrown across the module's boundary, and the layout of the types
// that cross it.
#include "vi/loader.h"
#include "vi/network_simulation.h"
#include "vi/parameter_guide.h"
#include "vi/parameter_vi.h"
#include "vi/variational.h"

#include <c10/util/Exception.h>

#include <exception>
#include <new>

extern "C" __attribute__((visibility("default"))) const char* ssm_vi_layout() {
  static const std::string layout = ssm::variational_layout();
  return layout.c_str();
}

namespace {

// Runs `fit`, with errors returned as text.
template <class Fit> int guarded(std::string* error, Fit&& fit, const std::string& who = "vi") {
  try {
    fit();
    return 0;
  } catch (const std::bad_alloc&) {
    *error = who == "vi" ? "vi: out of memory (try a smaller --batch-size, --eval-samples, "
                           "--samples or --draws)"
                         : who + ": out of memory (try a smaller --T)";
  } catch (const c10::Error& e) { // LibTorch's own: its message without the C++ backtrace
    *error = who + ": internal error in LibTorch: " + e.what_without_backtrace();
  } catch (const std::exception& e) {
    *error = e.what();
  }
  return 1;
}

} // namespace

extern "C" __attribute__((visibility("default"))) int
ssm_vi_fit(const ssm::MethodRun* run, const ssm::VariationalOptions* options,
           ssm::VariationalFit* out, std::string* error) {
  return guarded(error, [&] { *out = ssm::fit_variational(*run, *options); });
}

extern "C" __attribute__((visibility("default"))) int
ssm_vi_fit_parameters(const ssm::MethodRun* run, const ssm::ParameterVariationalOptions* options,
                      ssm::ParameterVariationalFit* out, std::string* error) {
  return guarded(error, [&] { *out = ssm::fit_parameter_variational(*run, *options); });
}

extern "C" __attribute__((visibility("default"))) int
ssm_vi_simulate(const ssm::MethodRun* run, const ssm::NetworkSimulationOptions* options,
                ssm::NetworkSimulation* out, std::string* error) {
  return guarded(
      error, [&] { *out = ssm::simulate_networks(*run, *options); }, "simulate");
}

extern "C" __attribute__((visibility("default"))) int
ssm_vi_load_prior(const std::string* path, const std::vector<std::string>* coordinates,
                  const std::string* who, ssm::PriorDensity** out, std::string* error) {
  try {
    *out = ssm::load_prior_density(*path, *coordinates, *who).release();
    return 0;
  } catch (const c10::Error& e) {
    *error = std::string("internal error in LibTorch: ") + e.what_without_backtrace();
  } catch (const std::exception& e) {
    *error = e.what();
  }
  return 1;
}
