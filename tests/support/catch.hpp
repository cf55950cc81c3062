#pragma once

// A small shim so the tests build against Catch2 v2 (Debian 12) and v3 alike. Under v3 only
// the test macros and Approx are included, not the whole of catch_all.hpp.
#if __has_include(<catch2/catch_test_macros.hpp>)
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#define ULLM_CATCH_V3 1
using Catch::Approx;
#else
#include <catch2/catch.hpp>
#endif
