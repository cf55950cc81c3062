#pragma once

// A small shim so the tests build against Catch2 v2 (Debian 12) and v3 alike.
#if __has_include(<catch2/catch_all.hpp>)
#include <catch2/catch_all.hpp>
#define ULLM_CATCH_V3 1
#else
#include <catch2/catch.hpp>
#endif
