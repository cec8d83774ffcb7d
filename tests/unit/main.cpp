// Catch2's main, one object (tests/CMakeLists.txt: catch_main) linked into every test executable;
// test files only include <catch2/catch.hpp>.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
