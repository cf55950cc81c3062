# The in-process HTTP test server (tests/support/test_server.*), shared by the tests and the
# example programs that play scripted provider traffic.
if(NOT TARGET ullm_test_server)
  find_package(Threads REQUIRED)
  add_library(ullm_test_server STATIC "${PROJECT_SOURCE_DIR}/tests/support/test_server.cpp")
  target_include_directories(ullm_test_server PUBLIC "${PROJECT_SOURCE_DIR}/tests")
  target_compile_features(ullm_test_server PUBLIC cxx_std_20)
  target_link_libraries(ullm_test_server PUBLIC Threads::Threads)
  ullm_target_warnings(ullm_test_server)
endif()
