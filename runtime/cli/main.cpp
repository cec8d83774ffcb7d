// The entry point of a generated executable: runs the runtime's command line on the model table
// exported by the compiled model object.
#include "kernel/abi.h"

extern "C" const ssm_model ssm_model_table;

int main(int argc, char** argv) {
  return ssm_main(&ssm_model_table, argc, argv);
}
