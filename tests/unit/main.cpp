// The Catch2 main of the unit_tests executable (one per executable; test files only include
// <catch2/catch.hpp>).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
