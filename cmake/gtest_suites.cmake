# One ctest entry per GoogleTest suite rather than per test: each entry starts the test program
# once for its suite's tests. Under the sanitizers a start costs ~0.2 s of CPU (the loader, the
# shadow memory, the leak check at exit), so per test it was ~190 s of CI's CPU for 966 tests.
# gtest_discover_suites(TARGET PREFIX <name> [TEST_FILTER <gtest filter>] [PER_TEST_TIMEOUT <s>]
#                       [COST_PER_TEST <s>] [SUITES_PER_ENTRY <n>] [PROPERTIES <ctest properties>...])
# Entries are named PREFIX:Suite, or with SUITES_PER_ENTRY (for suites of quick tests, where the
# start is most of the cost) PREFIX:Suite1+Suite2+... for up to n suites in a row. After each build of TARGET its tests are listed
# (--gtest_list_tests) and the entries written, as gtest_discover_tests does. An entry runs its
# suite's tests by name, so TEST_FILTER can keep some of them for entries of their own; its
# timeout is PER_TEST_TIMEOUT for each test, at most 900 s; its COST, COST_PER_TEST (about the
# seconds a test of TARGET takes; 1 unless given) for each test, makes ctest start the longest
# entries first when it has no times of an earlier run.
# Skipped tests do not make an entry "skipped" (one skip would hide a failure beside it):
# scripts/check-skips.sh reads gtest's own lines.
set(GTEST_SUITES_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/gtest_suites_list.cmake)

function(gtest_discover_suites target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "PREFIX;TEST_FILTER;PER_TEST_TIMEOUT;COST_PER_TEST;SUITES_PER_ENTRY" "PROPERTIES")
  if(NOT arg_PER_TEST_TIMEOUT)
    set(arg_PER_TEST_TIMEOUT 60)
  endif()
  if(NOT arg_COST_PER_TEST)
    set(arg_COST_PER_TEST 1)
  endif()
  get_property(count TARGET ${target} PROPERTY GTEST_SUITES_COUNT)
  if(NOT count)
    set(count 0)
  endif()
  math(EXPR count "${count} + 1")
  set_property(TARGET ${target} PROPERTY GTEST_SUITES_COUNT ${count})
  set(ctest_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites_${count}.cmake")
  # The properties travel as one argument: ';' inside them (ENVIRONMENT lists) kept as '|'.
  string(REPLACE ";" "|" properties "${arg_PROPERTIES}")
  add_custom_command(TARGET ${target} POST_BUILD BYPRODUCTS "${ctest_file}"
    COMMAND "${CMAKE_COMMAND}"
      -D "TEST_EXECUTABLE=$<TARGET_FILE:${target}>"
      -D "TEST_FILTER=${arg_TEST_FILTER}"
      -D "PREFIX=${arg_PREFIX}"
      -D "PER_TEST_TIMEOUT=${arg_PER_TEST_TIMEOUT}"
      -D "COST_PER_TEST=${arg_COST_PER_TEST}"
      -D "SUITES_PER_ENTRY=${arg_SUITES_PER_ENTRY}"
      -D "PROPERTIES=${properties}"
      -D "CTEST_FILE=${ctest_file}"
      -P "${GTEST_SUITES_SCRIPT}"
    VERBATIM)
  # A change to the listing script relinks the program, so that its entries are written again.
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${GTEST_SUITES_SCRIPT}")
  # Before the first build there is no file yet: ctest then lists nothing of this target.
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${ctest_file}")
endfunction()
