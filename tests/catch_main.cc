// Catch2's main() in its own translation unit, so that test files compile fast.
#define CATCH_CONFIG_MAIN
#define CATCH_CONFIG_PREFIX_ALL
#include <catch2/catch.hpp>
