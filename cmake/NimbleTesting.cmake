# nimble_add_check_test(NAME SOURCES a.c b.c LIBS x y [LABELS l] [TIMEOUT s]
#                       [ENV K=V ...] [FIXTURES f ...])
#
# Builds one Check suite and registers it with ctest. Suites print Check's
# summary line; ctest prints its own closing line.
function(nimble_add_check_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS;ENV;FIXTURES" ${ARGN})
  nimble_find_pkg(CHECK check)
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} PkgConfig::CHECK)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests/support)
  add_test(NAME ${name} COMMAND ${name})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  # CK_DEFAULT_TIMEOUT is per test case; the ctest timeout bounds the suite.
  # `nimble compile` keeps compiled kernels in NIMBLE_KERNEL_CACHE: one
  # folder per suite in the build tree, never the user's home.
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT}
    ENVIRONMENT "CK_DEFAULT_TIMEOUT=60;NIMBLE_BUILD_DIR=${CMAKE_BINARY_DIR};NIMBLE_SOURCE_DIR=${CMAKE_SOURCE_DIR};NIMBLE_KERNEL_CACHE=${CMAKE_BINARY_DIR}/test-kernel-cache/${name};${T_ENV}")
  if(T_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
  endif()
  if(T_FIXTURES)
    set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED "${T_FIXTURES}")
  endif()
  nimble_test_cost(${name})
endfunction()

# nimble_test_cost(NAME): the test's COST from the table in
# tests/CMakeLists.txt (NIMBLE_TEST_COST_<name>), so that ctest -j starts
# the long suites first. Called from the directory that added the test.
function(nimble_test_cost name)
  if(DEFINED NIMBLE_TEST_COST_${name})
    set_tests_properties(${name} PROPERTIES COST ${NIMBLE_TEST_COST_${name}})
  endif()
endfunction()
