// The test runner's main(). Catch2 v3 ships its own main library; v2 needs one translation
// unit with CATCH_CONFIG_MAIN.
#if !__has_include(<catch2/catch_test_macros.hpp>)
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#endif
