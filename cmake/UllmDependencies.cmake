# Finds ullm's dependencies. On Debian 12 every one is a system package; users without them
# may opt into FetchContent with ULLM_FETCH_DEPENDENCIES=ON (needs network).
include(GNUInstallDirs)
find_package(Threads REQUIRED)
find_package(CURL 7.68 REQUIRED)
find_package(SQLite3 REQUIRED)

# RE2 runs the `pattern`s of tool schemas in linear time. It is private to ullm, but a static
# libullm still needs it at link time, so the installed package finds it the same way
# (ULLM_RE2_FIND_DEPENDENCY is pasted into ullmConfig.cmake). Newer RE2 releases install a
# CMake package (re2::re2); Debian 12's libre2-dev ships only a pkg-config file.
find_package(re2 CONFIG QUIET)
if(TARGET re2::re2)
  set(ULLM_RE2_TARGET re2::re2)
  set(ULLM_RE2_FIND_DEPENDENCY "find_dependency(re2)")
else()
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(ULLM_RE2 REQUIRED IMPORTED_TARGET re2)
  set(ULLM_RE2_TARGET PkgConfig::ULLM_RE2)
  set(ULLM_RE2_FIND_DEPENDENCY [=[find_dependency(PkgConfig)
pkg_check_modules(ULLM_RE2 QUIET IMPORTED_TARGET re2)
if(NOT ULLM_RE2_FOUND)
  set(ullm_FOUND FALSE)
  set(ullm_NOT_FOUND_MESSAGE "ullm needs RE2 (pkg-config module re2, e.g. Debian's libre2-dev)")
  return()
endif()]=])
endif()

if(ULLM_FETCH_DEPENDENCIES)
  include(FetchContent)
  find_package(nlohmann_json 3.11 QUIET)
  if(NOT nlohmann_json_FOUND)
    FetchContent_Declare(nlohmann_json
      URL https://github.com/nlohmann/json/releases/download/v3.11.3/json.tar.xz)
    FetchContent_MakeAvailable(nlohmann_json)
  endif()
  find_package(fmt 9 QUIET)
  if(NOT fmt_FOUND)
    FetchContent_Declare(fmt GIT_REPOSITORY https://github.com/fmtlib/fmt.git GIT_TAG 10.2.1)
    FetchContent_MakeAvailable(fmt)
  endif()
else()
  find_package(nlohmann_json 3.11 REQUIRED)
  find_package(fmt 9 REQUIRED)
endif()
