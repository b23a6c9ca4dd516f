# Runs one libFuzzer target briefly: copies the seed corpus to a scratch
# directory, fuzzes for SECONDS, fails on any crash, leak or timeout.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
if(SEEDS AND EXISTS ${SEEDS})
  file(GLOB seeds ${SEEDS}/*)
  foreach(s ${seeds})
    if(NOT IS_DIRECTORY ${s})
      file(COPY ${s} DESTINATION ${WORK})
    endif()
  endforeach()
endif()
execute_process(COMMAND ${FUZZER} -max_total_time=${SECONDS} -timeout=10
                        -rss_limit_mb=2048 -print_final_stats=1
                        -artifact_prefix=${WORK}/ ${WORK}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fuzzer ${FUZZER} failed (rc=${rc}); artifacts in ${WORK}")
endif()
