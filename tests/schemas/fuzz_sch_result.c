/*
 * fuzz_sch_result.c -- libFuzzer target for the TurnResult decoder (and its
 * encoder round trip); see fuzz_sch.h for the checked properties.
 */
#include "fuzz_sch.h"

SCH_FUZZ_TARGET(result)
