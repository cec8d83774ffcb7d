// The entry point of a generated executable: runs the runtime's command line on the model table
// exported by the compiled model object.
#include "kernel/abi.h"

extern "C" const ssm_model ssm_model_table;

#ifdef __SANITIZE_ADDRESS__
// Sanitizer builds: GCC 12's LeakSanitizer can crash ("Tracer caught signal 11", a bogus dynamic
// TLS range) scanning the thread-local storage of the libraries `vi` loads with LibTorch
// (OpenBLAS's). It leaves TLS unscanned, and suppresses the blocks only TLS then holds.
extern "C" const char* __lsan_default_options() {
  return "use_tls=0";
}
extern "C" const char* __lsan_default_suppressions() {
  return "leak:g_malloc0\nleak:_dl_resize_dtv\nleak:__cxa_thread_atexit_impl\n";
}
#endif

int main(int argc, char** argv) {
  return ssm_main(&ssm_model_table, argc, argv);
}
