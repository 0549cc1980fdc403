# kevo_cc_library(NAME name SRCS ... [HDRS ...] [DEPS ...] [PRIVATE_DEPS ...])
# One folder = one library; target names are kevo_<name>.
function(kevo_cc_library)
  cmake_parse_arguments(K "" "NAME" "SRCS;HDRS;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(kevo_${K_NAME} STATIC ${K_SRCS} ${K_HDRS})
  target_include_directories(kevo_${K_NAME} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  target_link_libraries(kevo_${K_NAME} PUBLIC ${K_DEPS} PRIVATE ${K_PRIVATE_DEPS})
endfunction()

# Under ThreadSanitizer, a program's absl::Mutex operations annotated for TSan
# (tests/sanitizers/tsan_absl.cc).
function(kevo_tsan_annotate target)
  if(TARGET kevo_tsan_absl)
    target_sources(${target} PRIVATE $<TARGET_OBJECTS:kevo_tsan_absl>)
    target_link_libraries(${target} PRIVATE ${CMAKE_DL_LIBS})
  endif()
endfunction()

# kevo_cc_binary(NAME name SRCS ... DEPS ...): lands in build/bin/.
function(kevo_cc_binary)
  cmake_parse_arguments(K "" "NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${K_NAME} ${K_SRCS})
  target_include_directories(${K_NAME} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  target_link_libraries(${K_NAME} PRIVATE ${K_DEPS})
  kevo_tsan_annotate(${K_NAME})
  # scripts/bundle.sh puts programs in libexec/ and their libraries in lib/.
  # DT_RPATH (not RUNPATH) so that it also applies to the libraries' own
  # dependencies and to kernels the runners dlopen; build/lib does not exist,
  # so builds in the tree are unaffected.
  set_target_properties(${K_NAME} PROPERTIES BUILD_RPATH "\$ORIGIN/../lib")
  target_link_options(${K_NAME} PRIVATE "LINKER:--disable-new-dtags")
endfunction()

# kevo_cc_test(NAME name SRCS ... DEPS ... [LABELS ...] [TIMEOUT s]): a GoogleTest binary
# whose tests are registered one by one with ctest.
include(GoogleTest)
#
# SERIAL_FILTER: a gtest filter of tests that time threaded kernels against a
# reference and claim a speedup; ctest runs them alone (RUN_SERIAL), since on a
# small host a test beside them takes a core from their team of threads.
# ONE_PROCESS: one ctest test that runs the whole binary, for many short cases
# that share an expensive set-up (a backend) and would pay it once each.
# COSTS: "Suite.Test=seconds" entries (with ONE_PROCESS, "binary=seconds"):
# about how long a slow test runs, so that `ctest -j` starts the longest
# first where it has no timings of its own yet (a fresh clone); otherwise a
# test of minutes may start last and run on alone at the end.
function(kevo_cc_test)
  cmake_parse_arguments(K "ONE_PROCESS" "NAME;TIMEOUT;SERIAL_FILTER" "SRCS;DEPS;LABELS;COSTS" ${ARGN})
  add_executable(${K_NAME} ${K_SRCS})
  set_target_properties(${K_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  target_include_directories(${K_NAME} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  target_link_libraries(${K_NAME} PRIVATE ${K_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  kevo_tsan_annotate(${K_NAME})
  if(NOT K_TIMEOUT)
    set(K_TIMEOUT 300)
  endif()
  # ENVIRONMENT takes one value here: a second variable goes through
  # ENVIRONMENT_MODIFICATION so that no ';' splits the property list.
  set(props TIMEOUT ${K_TIMEOUT} ENVIRONMENT "KEVO_BIN_DIR=${CMAKE_BINARY_DIR}/bin"
            ENVIRONMENT_MODIFICATION "KEVO_SOURCE_DIR=set:${PROJECT_SOURCE_DIR}")
  # gtest_discover_tests splits a list in PROPERTIES into separate arguments
  # (LABELS integration fault kept "integration" only): one label goes with
  # the other properties, several are set on the discovered tests (TEST_LIST)
  # by a file ctest includes after theirs.
  list(LENGTH K_LABELS label_count)
  if(label_count EQUAL 1)
    list(APPEND props LABELS ${K_LABELS})
  endif()
  if(K_ONE_PROCESS)
    add_test(NAME ${K_NAME} COMMAND ${K_NAME} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(${K_NAME} PROPERTIES ${props})
  elseif(K_SERIAL_FILTER)
    gtest_discover_tests(${K_NAME} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} TEST_FILTER "-${K_SERIAL_FILTER}"
      PROPERTIES ${props} DISCOVERY_TIMEOUT 60 TEST_LIST ${K_NAME}_TESTS)
    gtest_discover_tests(${K_NAME} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} TEST_FILTER "${K_SERIAL_FILTER}"
      PROPERTIES ${props} RUN_SERIAL TRUE DISCOVERY_TIMEOUT 60 TEST_LIST ${K_NAME}_SERIAL_TESTS)
  else()
    gtest_discover_tests(${K_NAME} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
      PROPERTIES ${props} DISCOVERY_TIMEOUT 60 TEST_LIST ${K_NAME}_TESTS)
  endif()
  if(label_count GREATER 1)
    set(labels_file ${CMAKE_CURRENT_BINARY_DIR}/${K_NAME}_labels.cmake)
    file(WRITE ${labels_file}
      "foreach(test IN LISTS ${K_NAME}_TESTS ${K_NAME}_SERIAL_TESTS)\n"
      "  set_tests_properties(\"\${test}\" PROPERTIES LABELS \"${K_LABELS}\")\n"
      "endforeach()\n")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${labels_file})
  endif()
  if(K_COSTS AND K_ONE_PROCESS)
    string(REPLACE "=" ";" pair "${K_COSTS}")
    list(GET pair 1 seconds)
    set_tests_properties(${K_NAME} PROPERTIES COST ${seconds})
  elseif(K_COSTS)
    # Set by a file ctest includes after the discovered tests, on those of
    # them that exist (a renamed test only loses its place in the order).
    set(costs "set(tests \${${K_NAME}_TESTS} \${${K_NAME}_SERIAL_TESTS})\n")
    foreach(entry IN LISTS K_COSTS)
      string(REPLACE "=" ";" pair "${entry}")
      list(GET pair 0 test)
      list(GET pair 1 seconds)
      string(APPEND costs "list(FIND tests \"${test}\" at)\n"
        "if(at GREATER -1)\n  set_tests_properties(\"${test}\" PROPERTIES COST ${seconds})\nendif()\n")
    endforeach()
    set(costs_file ${CMAKE_CURRENT_BINARY_DIR}/${K_NAME}_costs.cmake)
    file(WRITE ${costs_file} "${costs}")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${costs_file})
  endif()
endfunction()
