# Runs the ptest fixture program (PROG) and checks its report: per-test
# lines in order, the failure message with file:line and values, skip lines
# and the summary line, that a failed check or a skip ended its test, a
# non-zero exit status; that a skip of a missing component is a failure
# under CI=true while a hardware skip stays a skip; that a run whose tests
# all skipped exits 77 (ctest's Skipped); and that PARLEY_SKIP_LOG gets one
# line per skip.
set(log ${CMAKE_CURRENT_BINARY_DIR}/ptest_fixture_skips.log)
file(REMOVE ${log})
execute_process(COMMAND ${CMAKE_COMMAND} -E env CI=false PARLEY_SKIP_LOG=${log} ${PROG}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(expect_out "ok    fixture_passes\nFAIL  fixture_fails_eq\nFAIL  fixture_fails_assert\n  skip: no such ISA here (hardware)\nskip  fixture_skips_hw\n  skip: no such tool installed\nskip  fixture_skips_missing\n1 passed, 2 failed, 2 skipped\n")
if(NOT out STREQUAL expect_out)
  message(FATAL_ERROR "stdout differs:\n${out}\nexpected:\n${expect_out}")
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "a program with failing tests exited 0")
endif()
if(NOT err MATCHES "ptest_fixture.c:[0-9]+: 6 \\* 7 == 41: 42 != 41")
  message(FATAL_ERROR "PT_EQ_INT failure message missing or wrong:\n${err}")
endif()
if(NOT err MATCHES "assertion failed: strlen\\(\"abc\"\\) == 4")
  message(FATAL_ERROR "PT_ASSERT failure message missing or wrong:\n${err}")
endif()
if(err MATCHES "unreachable")
  message(FATAL_ERROR "a failed check or a skip did not end its test:\n${err}")
endif()
file(READ ${log} skips)
if(NOT skips MATCHES "test_ptest_fixture fixture_skips_hw: no such ISA here \\(hardware\\)\n"
   OR NOT skips MATCHES "test_ptest_fixture fixture_skips_missing: no such tool installed\n")
  message(FATAL_ERROR "PARLEY_SKIP_LOG lacks the skips:\n${skips}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env CI=true ${PROG} skips
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT out MATCHES "skip  fixture_skips_hw\nFAIL  fixture_skips_missing\n0 passed, 1 failed, 1 skipped\n"
   OR NOT err MATCHES "would hide a missing component under CI=true: no such tool installed"
   OR rc EQUAL 0)
  message(FATAL_ERROR "under CI=true a missing component must fail (rc ${rc}):\n${out}\n${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env CI=true ${PROG} skips_hw
                RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 77 OR NOT out MATCHES "0 passed, 0 failed, 1 skipped\n")
  message(FATAL_ERROR "a run whose tests all skipped must exit 77 (rc ${rc}):\n${out}")
endif()
message(STATUS "ptest fixture: report, messages, skips and exit statuses as expected")
