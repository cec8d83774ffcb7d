// A shared library that is not a pass plugin: `--load-pass` must refuse it (tests/CMakeLists.txt).
extern "C" __attribute__((visibility("default"))) int not_a_pass_plugin() {
  return 42;
}
