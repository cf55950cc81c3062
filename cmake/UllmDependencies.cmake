# Finds ullm's dependencies. On Debian 12 every one is a system package; users without them
# may opt into FetchContent with ULLM_FETCH_DEPENDENCIES=ON (needs network).
include(GNUInstallDirs)
find_package(Threads REQUIRED)
find_package(CURL 7.68 REQUIRED)
find_package(SQLite3 REQUIRED)

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
