// The entry point of the executables that link the variational room (and so LibTorch): the
// models it serves (plate models). Registers its methods with the command line, then runs it on
// the model table, as cli/main.cpp does for every other executable.
#include "core/method_registry.h"
#include "kernel/abi.h"
#include "vi/methods.h"

extern "C" const ssm_model ssm_model_table;

int main(int argc, char** argv) {
  ssm::add_optional_registration(ssm::register_variational_methods);
  return ssm_main(&ssm_model_table, argc, argv);
}
