# Install rules: headers, the exported target, a package config with find_dependency, a
# version file and a pkg-config file.
include(CMakePackageConfigHelpers)

set(ULLM_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/ullm")

install(TARGETS ullm EXPORT ullmTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/ullm" DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT ullmTargets NAMESPACE ullm:: DESTINATION ${ULLM_CMAKE_DIR})

# Each optional component exports its target to a file of its own, which ullmConfig.cmake
# includes when the component is asked for and was installed.
foreach(component IN ITEMS postgres redis)
  string(TOUPPER "${component}" upper)
  string(SUBSTRING "${upper}" 0 1 first)
  string(SUBSTRING "${component}" 1 -1 rest)
  if(ULLM_WITH_${upper})
    install(TARGETS ullm_${component} EXPORT ullm${first}${rest}Targets
      ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
      LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
      RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
      INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
    install(EXPORT ullm${first}${rest}Targets NAMESPACE ullm:: DESTINATION ${ULLM_CMAKE_DIR})
  endif()
endforeach()

configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/ullmConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/ullmConfig.cmake" INSTALL_DESTINATION ${ULLM_CMAKE_DIR})
write_basic_package_version_file("${PROJECT_BINARY_DIR}/ullmConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/ullmConfig.cmake" "${PROJECT_BINARY_DIR}/ullmConfigVersion.cmake"
  DESTINATION ${ULLM_CMAKE_DIR})

# Only nlohmann_json is seen by users (the public headers include it); fmt, libcurl, SQLite and
# RE2 are private to ullm. A shared libullm lists them in Requires.private. A static one (the
# default) needs them on every link line, and pkg-config adds Requires.private only with
# --static, which would also demand the static libraries of libcurl's own dependencies (not
# installed by Debian's -dev packages). So a static libullm lists them in Requires.
set(ULLM_PC_PRIVATE_DEPS "fmt >= 9, libcurl, sqlite3, re2")
get_target_property(ULLM_LIBRARY_TYPE ullm TYPE)
if(ULLM_LIBRARY_TYPE STREQUAL "STATIC_LIBRARY")
  set(ULLM_PC_REQUIRES ", ${ULLM_PC_PRIVATE_DEPS}")
  set(ULLM_PC_REQUIRES_PRIVATE "")
else()
  set(ULLM_PC_REQUIRES "")
  set(ULLM_PC_REQUIRES_PRIVATE "Requires.private: ${ULLM_PC_PRIVATE_DEPS}")
endif()
configure_file("${PROJECT_SOURCE_DIR}/cmake/ullm.pc.in" "${PROJECT_BINARY_DIR}/ullm.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/ullm.pc" DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")

install(FILES "${PROJECT_SOURCE_DIR}/src/providers/prices.json" DESTINATION "${CMAKE_INSTALL_DATADIR}/ullm")
