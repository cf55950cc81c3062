# libFuzzer support (ULLM_BUILD_FUZZERS=ON): clang only. The library is compiled with
# -fsanitize=fuzzer-no-link so that coverage reaches its code; each fuzz target is compiled
# and linked with -fsanitize=fuzzer (see tests/fuzz/CMakeLists.txt). Combine with
# ULLM_SANITIZE=address,undefined: without sanitizers the fuzzers find only crashes.
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "ullm: ULLM_BUILD_FUZZERS needs clang (libFuzzer), not "
                      "${CMAKE_CXX_COMPILER_ID}; configure with -DCMAKE_CXX_COMPILER=clang++")
endif()
if(NOT ULLM_SANITIZE)
  message(WARNING "ullm: ULLM_BUILD_FUZZERS without ULLM_SANITIZE: the fuzzers will find only "
                  "crashes and mismatches, not memory errors or undefined behaviour")
endif()

# Coverage instrumentation for a library target; everything in this build that links it gets
# the coverage runtime (BUILD_INTERFACE only: never exported to consumers).
function(ullm_fuzz_instrument target)
  target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link)
  target_link_options(${target} PUBLIC $<BUILD_INTERFACE:-fsanitize=fuzzer-no-link>)
endfunction()

# A libFuzzer executable: ullm_add_fuzzer(name SOURCES ... [DEFINITIONS ...] [INCLUDES ...]).
function(ullm_add_fuzzer name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SOURCES;DEFINITIONS;INCLUDES")
  add_executable(${name} ${arg_SOURCES})
  target_link_libraries(${name} PRIVATE ullm::ullm)
  target_include_directories(${name} PRIVATE ${arg_INCLUDES})
  target_compile_definitions(${name} PRIVATE ${arg_DEFINITIONS})
  # Header-only parsers are compiled here: -O1 (as libFuzzer advises) makes Debug fuzzing
  # several times faster without hiding what the sanitizers check.
  target_compile_options(${name} PRIVATE -fsanitize=fuzzer $<$<CONFIG:Debug>:-O1>)
  target_link_options(${name} PRIVATE -fsanitize=fuzzer)
  ullm_target_warnings(${name})
  set_property(GLOBAL APPEND PROPERTY ULLM_FUZZERS ${name})
endfunction()
