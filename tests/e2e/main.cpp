// The Catch2 main of the e2e_tests executable.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
