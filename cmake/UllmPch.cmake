# Precompiled headers for ullm's own targets: nlohmann_json is most of what every translation
# unit parses (about 133k of the 147k lines the umbrella header preprocesses to), so it and the
# standard headers are compiled once per target. Consumers never see this. A target built as a
# few unity units (the library, the `ullm` program, the test suites, with ULLM_UNITY_BUILD) gets
# none: building the header would cost more CPU than it saves there; the test support, a unit
# per file, keeps it.
option(ULLM_ENABLE_PCH "Precompile the heavy headers of ullm's own targets" ON)

set(ULLM_PCH_HEADERS
  <nlohmann/json.hpp> <algorithm> <atomic> <chrono> <cstdint> <functional> <map> <memory>
  <mutex> <optional> <stdexcept> <stop_token> <string> <string_view> <thread> <utility>
  <vector>)

# Gives `target` a precompiled header of ULLM_PCH_HEADERS and `ARGN` (extra headers), unless
# `ullm_target_unity` made it a unity build (call that first).
function(ullm_target_pch target)
  get_target_property(unity ${target} UNITY_BUILD)
  if(ULLM_ENABLE_PCH AND NOT unity)
    target_precompile_headers(${target} PRIVATE ${ULLM_PCH_HEADERS} ${ARGN})
  endif()
endfunction()

# Unity builds: the sources of `target` under `root` are compiled as one translation unit per
# top-level folder, or all as one unit named by the optional third argument, so the nlohmann
# templates every file instantiates are compiled and optimised once per unit rather than once
# per file. Files of one unit share one scope: a helper in an anonymous namespace must not reuse
# a name another file of its unit uses (put shared helpers in a private header instead). Off
# gives one object per file.
option(ULLM_UNITY_BUILD "Compile ullm's own targets as a few units each" ON)

function(ullm_target_unity target root)
  if(NOT ULLM_UNITY_BUILD)
    return()
  endif()
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_MODE GROUP)
  # GCC takes an included .cpp for a header and warns when a class there holds a type of an
  # anonymous namespace; in a unity build that is every such class, and harmless.
  target_compile_options(${target} PRIVATE $<$<CXX_COMPILER_ID:GNU>:-Wno-subobject-linkage>)
  get_target_property(sources ${target} SOURCES)
  foreach(source IN LISTS sources)
    get_filename_component(path "${source}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    file(RELATIVE_PATH relative "${root}" "${path}")
    if(path MATCHES "\\.cpp$" AND NOT relative MATCHES "^\\.\\.")
      if(ARGC GREATER 2)
        set(group "${ARGV2}")
      else()
        string(REGEX REPLACE "/.*" "" group "${relative}")
        if(group STREQUAL relative)
          set(group "top")
        endif()
      endif()
      set_source_files_properties(${source} TARGET_DIRECTORY ${target}
                                  PROPERTIES UNITY_GROUP "${group}")
    endif()
  endforeach()
endfunction()

# Code off the request path compiled for size in the optimised configurations: the library
# outside `ullm_request_path`, the store components and the `ullm` program. A clean Release
# build of the library and `ullm` takes a sixth to a quarter less CPU; the request path, where
# the client's CPU per request is spent, keeps the configured flags. Off leaves every file at
# the configured flags.
option(ULLM_COLD_FOR_SIZE "Compile ullm's code off the request path with -Os in Release and RelWithDebInfo" ON)

function(ullm_target_cold target)
  if(ULLM_COLD_FOR_SIZE AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE $<$<CONFIG:Release,RelWithDebInfo>:-Os>)
  endif()
endfunction()

# A test suite as one unit: the Catch2 and nlohmann templates every test file instantiates are
# compiled once rather than once per file (the unit suite takes a sixth of the CPU time of a
# unit per file). Each test file wraps its contents in a namespace named after the file, so
# that the helpers of two files never meet.
function(ullm_target_unity_suite target)
  if(NOT ULLM_UNITY_BUILD)
    return()
  endif()
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_MODE BATCH
                                             UNITY_BUILD_BATCH_SIZE 0)
  target_compile_options(${target} PRIVATE $<$<CXX_COMPILER_ID:GNU>:-Wno-subobject-linkage>)
endfunction()
